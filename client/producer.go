package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// SendResult is the outcome of one send.
type SendResult struct {
	MsgID       string          // offset message id of the stored record (empty if not stored)
	UniqKey     string          // the message's UNIQ_KEY (client id), set before sending
	Topic       string          //
	QueueID     int32           // queue the broker stored it in
	QueueOffset int64           // its queue offset
	Status      protocol.Status // the broker's status; see protocol.Status.Stored
}

// BatchResult is the outcome of one SendBatch: message i of the batch has
// queue offset QueueOffset+i, MsgIDs[i] and UniqKeys[i].
type BatchResult struct {
	Topic       string
	QueueID     int32
	QueueOffset int64 // of the first message
	MsgIDs      []string
	UniqKeys    []string
	Status      protocol.Status
}

// SendOption adjusts one send.
type SendOption func(*sendOptions)

type sendOptions struct {
	queue int32
	edits []func(*protocol.Message) error // property edits (WithDelayLevel, WithDeliverAt)
}

// ToQueue sends to this queue of the topic instead of the producer's choice.
func ToQueue(q int32) SendOption { return func(s *sendOptions) { s.queue = q } }

// Producer sends messages to one broker. It is safe for concurrent use.
//
// Queue selection: a message goes to the queue given by ToQueue or
// WithQueue, else round robin over the topic's write queues (read from the
// broker and cached for WithRouteTTL). If the broker does not list the topic
// the producer lets the broker pick (queueId -1), which lets a broker with
// autoCreateTopicEnable create it.
type Producer struct {
	o   options
	c   *conn
	ids *protocol.UniqIDGenerator

	mu     sync.Mutex
	closed bool
	routes map[string]*route

	wg   sync.WaitGroup // SendAsync goroutines
	done chan struct{}  // closed by Close
}

type route struct {
	queues  int32 // write queue count; 0: unknown topic, let the broker pick
	fetched time.Time
	next    atomic.Uint32
}

// NewProducer connects to the broker at addr ("host:port"). It fails with
// ErrBrokerUnavailable if the broker cannot be reached; afterwards a lost
// connection is re-established on the next send.
func NewProducer(addr string, opts ...Option) (*Producer, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	p := &Producer{o: o, ids: newUniqIDGenerator(), routes: map[string]*route{}, done: make(chan struct{})}
	p.c = newConn(addr, &p.o, func() protocol.Request {
		return &protocol.HeartbeatRequest{ClientID: p.o.clientID, ProducerGroups: []string{p.o.producerGroup}}
	})
	if err := p.c.connect(context.Background()); err != nil {
		p.c.close()
		return nil, err
	}
	return p, nil
}

// Close fails sends in flight with ErrClosed, waits for the callbacks of
// SendAsync calls to have run, and closes the connection. It is idempotent.
func (p *Producer) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return nil
	}
	p.closed = true
	close(p.done)
	p.mu.Unlock()
	p.c.close()
	p.wg.Wait()
	return nil
}

// prepare validates msg and sets its UNIQ_KEY (unless already set).
func (p *Producer) prepare(msg *protocol.Message) error { return p.prepareAt(msg, time.Now()) }

// prepareAt is prepare with the time already read (time.Now is not free:
// a send reads it once).
func (p *Producer) prepareAt(msg *protocol.Message, now time.Time) error {
	if msg == nil {
		return fmt.Errorf("%w: nil message", ErrMessageIllegal)
	}
	if msg.UniqKey() == "" {
		msg.SetUniqKey(p.ids.Next(now.UnixMilli()))
	}
	if err := msg.Validate(p.o.limits); err != nil {
		return fmt.Errorf("%w: %w", ErrMessageIllegal, err)
	}
	return nil
}

func (p *Producer) sendOpts(opts []SendOption) sendOptions {
	so := sendOptions{queue: p.o.queue}
	for _, o := range opts {
		o(&so)
	}
	return so
}

// cachedQueue picks the queue for the next attempt if that needs no
// request to the broker.
func (p *Producer) cachedQueue(topic string, so sendOptions, now time.Time) (int32, bool) {
	if so.queue >= 0 {
		return so.queue, true
	}
	r := p.cachedRoute(topic, now)
	if r == nil {
		return 0, false
	}
	return r.pick(), true
}

// cachedRoute returns topic's route if it is known and fresh.
func (p *Producer) cachedRoute(topic string, now time.Time) *route {
	p.mu.Lock()
	r := p.routes[topic]
	p.mu.Unlock()
	if r == nil || now.Sub(r.fetched) > p.o.routeTTL {
		return nil
	}
	return r
}

// pick is the next queue in round robin, or -1 (the broker picks) for a
// topic the broker did not know.
func (r *route) pick() int32 {
	if r.queues <= 0 {
		return -1
	}
	return int32(r.next.Add(1)-1) % r.queues
}

// queueFor picks the queue for the next attempt.
func (p *Producer) queueFor(ctx context.Context, topic string, so sendOptions) (int32, error) {
	if so.queue >= 0 {
		return so.queue, nil
	}
	p.mu.Lock()
	r := p.routes[topic]
	p.mu.Unlock()
	if r == nil || time.Since(r.fetched) > p.o.routeTTL {
		r = &route{fetched: time.Now()}
		tc, err := p.c.topicConfig(ctx, topic)
		switch {
		case err == nil:
			r.queues = tc.WriteQueueNums
		case errors.Is(err, ErrTopicNotExist):
			// let the broker pick (and maybe auto-create)
		default:
			return 0, err
		}
		p.mu.Lock()
		if old := p.routes[topic]; old != nil {
			r.next.Store(old.next.Load())
		}
		p.routes[topic] = r
		p.mu.Unlock()
	}
	return r.pick(), nil
}

func (p *Producer) forgetRoute(topic string) {
	p.mu.Lock()
	delete(p.routes, topic)
	p.mu.Unlock()
}

// retry runs attempt until it succeeds, fails for good, or the retries are
// spent. attempt reports whether the broker stored the message.
func (p *Producer) retry(ctx context.Context, topic string, attempt func() (stored bool, err error)) error {
	return p.retryFrom(ctx, topic, 0, nil, attempt)
}

// retryFrom is retry after n attempts, the last of which failed with
// lastErr (n = 0: none yet).
func (p *Producer) retryFrom(ctx context.Context, topic string, n int, lastErr error, attempt func() (stored bool, err error)) error {
	backoff := p.o.retryBackoff
	for range n - 1 {
		backoff *= 2
	}
	for ; ; n++ {
		if n > 0 {
			if n > p.o.retries || !retryable(lastErr) || ctx.Err() != nil {
				return lastErr
			}
			p.o.logger.Debug("wharf client: send failed, retrying", "topic", topic, "attempt", n, "err", lastErr)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return lastErr
			case <-p.done:
				t.Stop()
				return ErrClosed
			}
			backoff *= 2
		}
		stored, err := attempt()
		if err == nil || stored {
			return err // stored: never resend (it would duplicate)
		}
		if errors.Is(err, ErrTopicNotExist) {
			p.forgetRoute(topic)
		}
		lastErr = err
	}
}

// Send sends msg and waits for the broker's answer. It sets msg's UNIQ_KEY
// property if empty. Failures with a retryable status or a connection error
// are retried (WithRetries), each attempt bounded by WithTimeout.
//
// If the broker stored the message but could not confirm its flush or
// replication (FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE),
// Send returns the full result with that Status and a *StatusError: the
// message is not resent.
func (p *Producer) Send(ctx context.Context, msg *protocol.Message, opts ...SendOption) (SendResult, error) {
	so := p.sendOpts(opts)
	if err := so.apply(msg); err != nil {
		return SendResult{}, err
	}
	if err := p.prepare(msg); err != nil {
		return SendResult{}, err
	}
	return p.send(ctx, msg, so)
}

func (p *Producer) send(ctx context.Context, msg *protocol.Message, so sendOptions) (SendResult, error) {
	res := SendResult{Topic: msg.Topic, UniqKey: msg.UniqKey(), QueueID: -1, QueueOffset: -1}
	born := nowMs()
	err := p.retry(ctx, msg.Topic, p.sendAttempt(ctx, msg, so, born, &res))
	return res, err
}

// sendAttempt returns one blocking attempt to send msg, for retry.
func (p *Producer) sendAttempt(ctx context.Context, msg *protocol.Message, so sendOptions, born int64, res *SendResult) func() (bool, error) {
	return func() (bool, error) {
		q, err := p.queueFor(ctx, msg.Topic, so)
		if err != nil {
			return false, err
		}
		f, err := p.c.call(ctx, p.sendRequest(msg, q, born), p.o.timeout)
		return p.sendOutcome(f, err, res)
	}
}

func (p *Producer) sendRequest(msg *protocol.Message, q int32, born int64) *protocol.SendRequest {
	return &protocol.SendRequest{
		ProducerGroup: p.o.producerGroup,
		Topic:         msg.Topic,
		QueueID:       q,
		Flag:          msg.Flag,
		BornTimestamp: born,
		Properties:    msg.Properties,
		RawProperties: msg.RawProperties,
		Body:          msg.Body,
	}
}

// sendOutcome reads the answer to a SEND into res and reports whether the
// broker stored the message.
func (p *Producer) sendOutcome(f *protocol.Frame, err error, res *SendResult) (bool, error) {
	if err != nil {
		return false, err
	}
	var resp protocol.SendResponse
	var derr error
	if f.Status.Stored() {
		derr = p.c.decode(f, &resp)
	}
	return outcome(f, nil, &resp, derr, res)
}

// outcome reads into res the answer f to a request that carried one
// message (f is nil after the transport error err); resp is the message's
// part of a stored answer, derr the failure to decode it. It reports
// whether the broker stored the message.
func outcome(f *protocol.Frame, err error, resp *protocol.SendResponse, derr error, res *SendResult) (bool, error) {
	if f == nil {
		return false, err
	}
	res.Status = f.Status
	if !f.Status.Stored() {
		return false, statusError(f)
	}
	if derr != nil {
		return true, derr // stored all the same: do not resend
	}
	res.MsgID, res.QueueID, res.QueueOffset = resp.MsgID, resp.QueueID, resp.QueueOffset
	if f.Status != protocol.StatusOK {
		return true, statusError(f)
	}
	return true, nil
}

// SendAsync sends msg in the background (as Send, with the same retries)
// and calls callback with the outcome, on another goroutine. msg must not be
// modified until then. If the producer is closed, callback is called with
// ErrClosed before SendAsync returns. The caller bounds the number of sends
// in flight.
//
// Callbacks run one at a time, in the order the answers arrive, on a
// goroutine of the producer's: a callback may call the producer (even Send),
// but a slow callback delays the ones after it. ctx's deadline (if earlier
// than WithTimeout) bounds the wait for the answer; cancelling ctx after
// SendAsync returned stops retries but does not withdraw a request already
// written.
func (p *Producer) SendAsync(ctx context.Context, msg *protocol.Message, callback func(SendResult, error), opts ...SendOption) {
	so := p.sendOpts(opts)
	if err := so.apply(msg); err != nil {
		callback(SendResult{}, err)
		return
	}
	now := time.Now()
	if err := p.prepareAt(msg, now); err != nil {
		callback(SendResult{}, err)
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		callback(SendResult{Topic: msg.Topic, UniqKey: msg.UniqKey()}, ErrClosed)
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	finish := func(res SendResult, err error) {
		defer p.wg.Done()
		callback(res, err)
	}
	if p.o.coalesce && so.queue < 0 && !delayed(msg) {
		if r := p.cachedRoute(msg.Topic, now); r != nil {
			p.sendCoalesced(ctx, msg, so, r, now, finish)
			return
		}
	}
	q, ok := p.cachedQueue(msg.Topic, so, now)
	if !ok {
		// The topic's route must be fetched first: do the whole send on a
		// goroutine of its own rather than block the caller.
		go func() { finish(p.send(ctx, msg, so)) }()
		return
	}
	// The first attempt goes out from here and completes on the
	// connection's callback goroutine: no goroutine and no timer per send.
	// Only a failed attempt that may be retried moves to a goroutine.
	res := SendResult{Topic: msg.Topic, UniqKey: msg.UniqKey(), QueueID: -1, QueueOffset: -1}
	born := now.UnixMilli()
	p.c.callAsync(ctx, p.sendRequest(msg, q, born), now, p.o.timeout, func(f *protocol.Frame, err error) {
		stored, err := p.sendOutcome(f, err, &res)
		if err == nil || stored || ctx.Err() != nil {
			finish(res, err)
			return
		}
		p.retryAsync(ctx, msg, so, born, &res, err, finish)
	})
}

// retryAsync goes on with an async send whose first attempt failed with
// err without storing the message: it retries on a goroutine of its own, if
// retries are on and err allows them, and calls finish with the outcome.
func (p *Producer) retryAsync(ctx context.Context, msg *protocol.Message, so sendOptions, born int64, res *SendResult, err error, finish func(SendResult, error)) {
	if p.o.retries == 0 || !retryable(err) {
		finish(*res, err)
		return
	}
	if errors.Is(err, ErrTopicNotExist) {
		p.forgetRoute(msg.Topic)
	}
	go func() {
		err := p.retryFrom(ctx, msg.Topic, 1, err, p.sendAttempt(ctx, msg, so, born, res))
		finish(*res, err)
	}()
}

// delayed reports whether msg asks for delayed delivery: the broker moves
// such a message to its schedule topic, so it is not coalesced with others.
func delayed(msg *protocol.Message) bool {
	return msg.Property(protocol.PropertyDelay) != "" || msg.Property(protocol.PropertyTimerDeliverMs) != ""
}

// sendCoalesced is SendAsync's path for a message that may share a
// SEND_BATCH with others (see coalesce.go). A refusal of a batch of several
// messages may be because of another message, so the message is then sent
// again on its own, as by Send, with Send's retries.
func (p *Producer) sendCoalesced(ctx context.Context, msg *protocol.Message, so sendOptions, r *route, now time.Time, finish func(SendResult, error)) {
	born := now.UnixMilli()
	p.c.sendCoalesced(ctx, p.o.producerGroup, msg, r.pick, born, now, p.o.timeout, func(sp sendPart) {
		res := SendResult{Topic: msg.Topic, UniqKey: msg.UniqKey(), QueueID: -1, QueueOffset: -1}
		stored, err := p.partOutcome(sp, &res)
		if err == nil || stored || ctx.Err() != nil {
			finish(res, err)
			return
		}
		if sp.batched {
			go func() { finish(p.send(ctx, msg, so)) }()
			return
		}
		p.retryAsync(ctx, msg, so, born, &res, err, finish)
	})
}

// partOutcome is sendOutcome for a coalesced message.
func (p *Producer) partOutcome(sp sendPart, res *SendResult) (bool, error) {
	return outcome(sp.f, sp.err, &sp.resp, sp.err, res)
}

// SendOneway sends msg without waiting for (or getting) an answer: it
// returns once the frame is queued on the connection. Nothing is retried.
func (p *Producer) SendOneway(ctx context.Context, msg *protocol.Message, opts ...SendOption) error {
	so := p.sendOpts(opts)
	if err := so.apply(msg); err != nil {
		return err
	}
	if err := p.prepare(msg); err != nil {
		return err
	}
	q, err := p.queueFor(ctx, msg.Topic, so)
	if err != nil {
		return err
	}
	return p.c.oneway(ctx, &protocol.SendRequest{
		ProducerGroup: p.o.producerGroup,
		Topic:         msg.Topic,
		QueueID:       q,
		Flag:          msg.Flag,
		BornTimestamp: nowMs(),
		Properties:    msg.Properties,
		Body:          msg.Body,
	})
}

// SendBatch sends msgs, all of one topic, in one request: the broker
// stores them together in one queue at consecutive offsets, with one status
// for the batch. Retries and statuses are as for Send.
func (p *Producer) SendBatch(ctx context.Context, msgs []*protocol.Message, opts ...SendOption) (BatchResult, error) {
	if len(msgs) == 0 {
		return BatchResult{}, fmt.Errorf("%w: empty batch", ErrMessageIllegal)
	}
	lim := p.o.limits
	if len(msgs) > lim.MaxBatchMessages {
		return BatchResult{}, fmt.Errorf("%w: batch of %d messages, limit %d", ErrMessageIllegal, len(msgs), lim.MaxBatchMessages)
	}
	topic := ""
	batch := make([]protocol.Message, len(msgs))
	res := BatchResult{QueueID: -1, QueueOffset: -1, UniqKeys: make([]string, len(msgs))}
	so := p.sendOpts(opts)
	for i, m := range msgs {
		if err := so.apply(m); err != nil {
			return BatchResult{}, fmt.Errorf("message %d: %w", i, err)
		}
		if err := p.prepare(m); err != nil {
			return BatchResult{}, fmt.Errorf("message %d: %w", i, err)
		}
		if i == 0 {
			topic = m.Topic
		} else if m.Topic != topic {
			return BatchResult{}, fmt.Errorf("%w: message %d has topic %q in a batch for %q", ErrMessageIllegal, i, m.Topic, topic)
		}
		batch[i] = *m
		res.UniqKeys[i] = m.UniqKey()
	}
	res.Topic = topic
	born := nowMs()
	err := p.retry(ctx, topic, func() (bool, error) {
		q, err := p.queueFor(ctx, topic, so)
		if err != nil {
			return false, err
		}
		f, err := p.c.call(ctx, &protocol.SendBatchRequest{
			ProducerGroup: p.o.producerGroup,
			Topic:         topic,
			QueueID:       q,
			BornTimestamp: born,
			Messages:      batch,
		}, p.o.timeout)
		if err != nil {
			return false, err
		}
		res.Status = f.Status
		if !f.Status.Stored() {
			return false, statusError(f)
		}
		var resp protocol.SendBatchResponse
		if err := p.c.decode(f, &resp); err != nil {
			return true, err // stored all the same: do not resend
		}
		res.QueueID, res.QueueOffset, res.MsgIDs = resp.QueueID, resp.QueueOffset, resp.MsgIDs
		if f.Status != protocol.StatusOK {
			return true, statusError(f)
		}
		return true, nil
	})
	return res, err
}

// newUniqIDGenerator builds the UNIQ_KEY generator: this host's IPv4
// address, the pid, a random salt, milliseconds since the start of the month.
func newUniqIDGenerator() *protocol.UniqIDGenerator {
	ip := netip.AddrFrom4([4]byte{127, 0, 0, 1})
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if pn, ok := a.(*net.IPNet); ok && !pn.IP.IsLoopback() && pn.IP.To4() != nil {
				if x, ok := netip.AddrFromSlice(pn.IP.To4()); ok {
					ip = x
					break
				}
			}
		}
	}
	now := time.Now()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, now.Location())
	return &protocol.UniqIDGenerator{
		Prefix: protocol.MakeUniqIDPrefix(ip, os.Getpid(), rand.Uint32()),
		BaseMs: month.UnixMilli(),
	}
}
