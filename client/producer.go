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
	"time"

	"github.com/wharfmq/wharf/client/sendpath"
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

// Producer sends messages to one broker, or with WithNameServer to every
// broker group of a cluster (see WithNameServer). It is safe for
// concurrent use.
//
// Queue selection: a message goes to the queue given by ToQueue or
// WithQueue, else round robin over the topic's write queues (read from the
// broker and cached for WithRouteTTL). If the broker does not list the topic
// the producer lets the broker pick (queueId -1), which lets a broker with
// autoCreateTopicEnable create it.
//
// The decisions (queue choice, what an answer means, whether and when to
// retry) are the plain core of package client/sendpath; the Producer runs
// its attempts over the connection and waits out its pauses.
type Producer struct {
	o   options
	c   *conn // the broker of NewProducer(addr); nil on name-server routes
	ids *protocol.UniqIDGenerator

	// On name-server routes (WithNameServer): the name servers, and a
	// connection per broker the routes name, made when first used.
	ns      *nameServers
	bmu     sync.Mutex
	brokers map[string]*conn
	kick    chan struct{} // cap 1: refresh the routes now
	policy  sendpath.Config

	mu       sync.Mutex // guards closed, and the send core: table and every Send
	closed   bool
	table    *sendpath.Table
	routeSeq int64                  // numbers the route fetches: the routes' versions
	book     routeBook              // orders the name servers' routes
	fetching map[string]*routeFetch // first attempts' route fetches in flight, by topic
	joined   int                    // sends waiting for another's fetch (tests)

	wg   sync.WaitGroup // SendAsync goroutines
	done chan struct{}  // closed by Close
}

// The send policy beyond the options.
const (
	// maxRetryBackoff bounds the doubling of WithRetryBackoff (unless the
	// first pause is longer), so many retries do not wait for hours.
	maxRetryBackoff = 10 * time.Second
	// avoidFailedBroker is how long a broker that failed an attempt is
	// skipped while another broker has writable queues. A producer talks
	// to one broker today, so this only matters once routes span several.
	avoidFailedBroker = time.Second
)

// SendPolicy is the send policy (routes' TTL, retries, backoff, fault
// avoidance) of a Producer built with opts: what its send path decides by.
// The simulator's producers run the producer's send path (client/sendpath)
// under this policy, so a change to the client's defaults is simulated too.
func SendPolicy(opts ...Option) (sendpath.Config, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return sendpath.Config{}, err
	}
	return sendPolicy(&o), nil
}

func sendPolicy(o *options) sendpath.Config {
	c := sendpath.Config{
		RouteTTL:   o.routeTTL,
		Retries:    o.retries,
		Backoff:    o.retryBackoff,
		MaxBackoff: max(o.retryBackoff, maxRetryBackoff),
		AvoidFor:   avoidFailedBroker,
		Latency:    sendpath.DefaultLatency,
	}
	if o.nameServers != "" {
		// A broker that failed stays avoided until a refresh had the
		// time to drop it from the routes, if it is gone for good.
		c.AvoidFor = max(c.AvoidFor, o.routeRefresh+avoidFailedBroker)
	}
	return c
}

// NewProducer connects to the broker at addr ("host:port"). It fails with
// ErrBrokerUnavailable if the broker cannot be reached; afterwards a lost
// connection is re-established on the next send.
//
// With WithNameServer, addr is "" and the producer sends to every broker
// group the name servers' routes name (see WithNameServer); it fails if no
// name server can be reached.
func NewProducer(addr string, opts ...Option) (*Producer, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	p := &Producer{o: o, ids: newUniqIDGenerator(), done: make(chan struct{})}
	p.policy = sendPolicy(&o)
	p.table = sendpath.NewTable(p.policy)
	if o.nameServers != "" || addr == "" {
		if err := p.startNameServers(addr); err != nil {
			return nil, err
		}
		return p, nil
	}
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
	p.closeConns()
	p.wg.Wait()
	return nil
}

// prepare validates msg and sets its UNIQ_KEY (unless already set).
func (p *Producer) prepare(msg *protocol.Message) error {
	_, err := p.prepareAt(msg, time.Now())
	return err
}

// prepareAt is prepare with the time already read (time.Now is not free:
// a send reads it once); it returns the message's UNIQ_KEY, so that the
// async path need not read it back from the properties.
func (p *Producer) prepareAt(msg *protocol.Message, now time.Time) (string, error) {
	if msg == nil {
		return "", fmt.Errorf("%w: nil message", ErrMessageIllegal)
	}
	key := msg.UniqKey()
	if key == "" {
		key = p.ids.Next(now.UnixMilli())
		msg.SetUniqKey(key)
	}
	if err := msg.Validate(p.o.limits); err != nil {
		return key, fmt.Errorf("%w: %w", ErrMessageIllegal, err)
	}
	return key, nil
}

func (p *Producer) sendOpts(opts []SendOption) sendOptions {
	so := sendOptions{queue: p.o.queue}
	if len(opts) > 0 {
		so = applySendOptions(so, opts)
	}
	return so
}

// applySendOptions is sendOpts' loop, apart: the options get a pointer to
// the options they change, which moves them to the heap, and a send
// without options should not pay for that.
func applySendOptions(so sendOptions, opts []SendOption) sendOptions {
	for _, o := range opts {
		o(&so)
	}
	return so
}

// begin starts the core's plan of one send to topic; ctx's deadline ends
// its retries. (Table.Begin touches no shared state: no lock.)
func (p *Producer) begin(ctx context.Context, topic string, so sendOptions) *sendpath.Send {
	s := p.plan(ctx, topic, so)
	return &s
}

// plan is begin's Send as a value (see sendpath.Table.Plan).
func (p *Producer) plan(ctx context.Context, topic string, so sendOptions) sendpath.Send {
	to := sendpath.AnyQueue
	if so.queue >= 0 {
		to = sendpath.QueueRef{QueueID: so.queue}
	}
	deadline, _ := ctx.Deadline()
	return p.table.Plan(topic, to, deadline)
}

// next is the core's next step for s at now, under the lock.
func (p *Producer) next(s *sendpath.Send, now time.Time) sendpath.Step {
	p.mu.Lock()
	defer p.mu.Unlock()
	return s.Next(now)
}

// target is where s's next attempt goes, the topic's route fetched from
// the broker first if the core asks for it. A failed fetch is the
// attempt's failure.
func (p *Producer) target(ctx context.Context, s *sendpath.Send) (sendpath.QueueRef, error) {
	for {
		st := p.next(s, time.Now())
		if !st.Fetch {
			return st.To, nil
		}
		r, err := p.routeFor(ctx, s)
		if err != nil {
			return sendpath.QueueRef{Broker: p.defaultBroker(), QueueID: -1}, err
		}
		p.mu.Lock()
		s.Routed(r) // the next Next uses it: no second fetch
		p.mu.Unlock()
	}
}

// defaultBroker is the broker of NewProducer(addr) ("" on name-server
// routes).
func (p *Producer) defaultBroker() string {
	if p.c == nil {
		return ""
	}
	return p.c.addr
}

// routeFetch is one route fetch that first attempts share (routeFor).
type routeFetch struct {
	done chan struct{} // closed when r and err are set
	r    sendpath.Route
	err  error
}

// routeFor fetches the route s's attempt needs. First attempts of a topic
// share one fetch: a producer with many sends in flight when it starts, or
// when the route passes its TTL, asked the broker for its whole topic list
// once per send (a few hundred GET_ALL_TOPIC_CONFIG in async-256's first
// millisecond). A retry fetches on its own, after the failure that made
// it: a fetch started before that failure may not reflect it. The shared
// fetch runs on a goroutine of its own, bounded by WithTimeout, so that a
// send whose ctx ends stops waiting without failing the others.
func (p *Producer) routeFor(ctx context.Context, s *sendpath.Send) (sendpath.Route, error) {
	topic := s.Topic()
	if s.Failures() > 0 {
		return p.fetchRoute(ctx, topic)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return sendpath.Route{}, ErrClosed
	}
	f := p.fetching[topic]
	if f == nil {
		f = &routeFetch{done: make(chan struct{})}
		if p.fetching == nil {
			p.fetching = map[string]*routeFetch{}
		}
		p.fetching[topic] = f
		p.wg.Add(1)
		go p.sharedFetch(topic, f)
	} else {
		p.joined++
	}
	p.mu.Unlock()
	select {
	case <-f.done:
		return f.r, f.err
	case <-ctx.Done():
		return sendpath.Route{}, ctx.Err()
	case <-p.done:
		return sendpath.Route{}, ErrClosed
	}
}

// sharedFetch runs f, a fetch of topic's route that first attempts wait for.
func (p *Producer) sharedFetch(topic string, f *routeFetch) {
	defer p.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), p.o.timeout)
	go func() { // Close ends the fetch too
		select {
		case <-p.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	f.r, f.err = p.fetchRoute(ctx, topic)
	cancel()
	p.mu.Lock()
	delete(p.fetching, topic)
	p.mu.Unlock()
	close(f.done)
}

// fetchRoute reads topic's write queues from the broker. A topic the
// broker does not know is a route without queues: sends let the broker
// pick (and maybe auto-create it).
func (p *Producer) fetchRoute(ctx context.Context, topic string) (sendpath.Route, error) {
	if p.ns != nil {
		return p.fetchNSRoute(ctx, topic)
	}
	p.mu.Lock()
	p.routeSeq++
	r := sendpath.Route{Topic: topic, Version: p.routeSeq, Fetched: time.Now()}
	p.mu.Unlock()
	tc, err := p.c.topicConfig(ctx, topic)
	switch {
	case err == nil:
		r.Queues = sendpath.Queues(p.c.addr, tc.WriteQueueNums)
	case errors.Is(err, ErrTopicNotExist):
	default:
		return r, fmt.Errorf("route of topic %s: %w", topic, err)
	}
	return r, nil
}

// decide feeds the outcome of s's attempt to to into the core. A stored
// outcome changes nothing but s (sendpath's contract), so the answers of a
// busy producer take neither the lock nor the clock.
func (p *Producer) decide(s *sendpath.Send, to sendpath.QueueRef, out sendpath.Outcome) sendpath.Decision {
	if sendpath.Classify(out) == sendpath.Stored {
		return s.Outcome(time.Time{}, to, out)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return s.Outcome(time.Now(), to, out)
}

// attemptFunc makes one blocking attempt to the queue to and returns its
// outcome and error (nil: stored and confirmed).
type attemptFunc func(to sendpath.QueueRef) (sendpath.Outcome, error)

// run makes s's attempts until the core says done or fail, pausing before
// each retry, and returns the last attempt's error.
func (p *Producer) run(ctx context.Context, s *sendpath.Send, attempt attemptFunc) error {
	for {
		to, err := p.target(ctx, s)
		var out sendpath.Outcome
		if err != nil {
			out = outcomeOf(err)
		} else {
			out, err = attempt(to)
		}
		d := p.decide(s, to, out)
		if d.Verdict != sendpath.Retry || ctx.Err() != nil {
			return err // stored (never resend), failed for good, or abandoned
		}
		if werr := p.pause(ctx, s, d, err); werr != nil {
			return werr
		}
	}
}

// pause waits until the retry the core decided (d) after the failure err,
// and returns nil, or err if ctx ends first, or ErrClosed.
func (p *Producer) pause(ctx context.Context, s *sendpath.Send, d sendpath.Decision, err error) error {
	p.o.logger.Debug("wharf client: send failed, retrying", "topic", s.Topic(), "attempt", s.Failures(), "err", err)
	t := time.NewTimer(time.Until(d.At))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return err
	case <-p.done:
		return ErrClosed
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
	return p.send(ctx, msg, p.begin(ctx, msg.Topic, so))
}

// send runs s, the plan of a send of msg, from its first attempt.
func (p *Producer) send(ctx context.Context, msg *protocol.Message, s *sendpath.Send) (SendResult, error) {
	res := SendResult{Topic: msg.Topic, UniqKey: msg.UniqKey(), QueueID: -1, QueueOffset: -1}
	err := p.run(ctx, s, p.sendAttempt(ctx, msg, nowMs(), &res))
	return res, err
}

// sendAttempt returns one blocking attempt to send msg, for run.
func (p *Producer) sendAttempt(ctx context.Context, msg *protocol.Message, born int64, res *SendResult) attemptFunc {
	return func(to sendpath.QueueRef) (sendpath.Outcome, error) {
		c, err := p.connFor(to)
		if err != nil {
			return outcomeOf(err), err
		}
		start := time.Now()
		f, err := c.call(ctx, p.sendRequest(msg, to.QueueID, born), p.o.timeout)
		p.observe(to, start, f)
		return p.sendOutcome(c, f, err, res)
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

// sendOutcome reads the answer to a SEND into res and returns the
// attempt's outcome and error.
func (p *Producer) sendOutcome(c *conn, f *protocol.Frame, err error, res *SendResult) (sendpath.Outcome, error) {
	if err != nil {
		return outcomeOf(err), err
	}
	var resp protocol.SendResponse
	var derr error
	if f.Status.Stored() {
		derr = c.decodeSend(f, &resp)
	}
	return outcome(f, nil, &resp, derr, res)
}

// outcome reads into res the answer f to a request that carried one
// message (f is nil after the transport error err); resp is the message's
// part of a stored answer, derr the failure to decode it. It returns the
// attempt's outcome and error: a stored message's outcome says so even
// when its answer could not be decoded, so it is never resent.
func outcome(f *protocol.Frame, err error, resp *protocol.SendResponse, derr error, res *SendResult) (sendpath.Outcome, error) {
	if f == nil {
		return outcomeOf(err), err
	}
	res.Status = f.Status
	out := sendpath.Outcome{Failure: sendpath.Answered, Status: f.Status}
	if !f.Status.Stored() {
		return out, statusError(f)
	}
	if derr != nil {
		return out, derr
	}
	res.MsgID, res.QueueID, res.QueueOffset = resp.MsgID, resp.QueueID, resp.QueueOffset
	if f.Status != protocol.StatusOK {
		return out, statusError(f)
	}
	return out, nil
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
	key, err := p.prepareAt(msg, now)
	if err != nil {
		callback(SendResult{}, err)
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		callback(SendResult{Topic: msg.Topic, UniqKey: key}, ErrClosed)
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	base := asyncSend{p: p, ctx: ctx, msg: msg, now: now, callback: callback,
		res: SendResult{Topic: msg.Topic, UniqKey: key, QueueID: -1, QueueOffset: -1}}
	base.send = p.plan(ctx, msg.Topic, so)
	if p.o.coalesce && so.queue < 0 && !delayed(msg) && p.fresh(msg.Topic, now) {
		a := new(asyncSend)
		*a = base
		p.sendCoalesced(a)
		return
	}
	a := &asyncAttempt{asyncSend: base}
	st := p.next(&a.send, now)
	if st.Fetch {
		// The topic's route must be fetched first: do the whole send on a
		// goroutine of its own rather than block the caller.
		go func() { a.finish(p.send(ctx, msg, &a.send)) }()
		return
	}
	// The first attempt goes out from here and completes on the
	// connection's callback goroutine: no goroutine and no timer per send.
	// Only a failed attempt that may be retried moves to a goroutine.
	c, err := p.connFor(st.To)
	if err != nil { // no writable queue: Send's path retries after a refresh
		go func() { a.finish(p.send(ctx, msg, &a.send)) }()
		return
	}
	a.to, a.c = st.To, c
	a.req = *p.sendRequest(msg, st.To.QueueID, now.UnixMilli())
	a.pc = pendingCall{done: a, start: now}
	c.callAsync(ctx, &a.req, &a.pc, p.o.timeout)
}

// asyncSend is the state of one SendAsync: its plan and its result, in
// one allocation with what its first attempt needs (a busy producer makes
// hundreds of thousands a second). Coalesced, it is the partHandler of
// its message and the queuePicker of the batch it may open.
type asyncSend struct {
	p        *Producer
	ctx      context.Context
	msg      *protocol.Message
	send     sendpath.Send
	now      time.Time // the send's start; its born timestamp
	callback func(SendResult, error)
	res      SendResult
	c        *conn              // of the first attempt
	picked   *sendpath.QueueRef // coalesced on name-server routes: the queue picked with the broker
}

// asyncAttempt is an asyncSend whose first attempt is a SEND of its own:
// the answerer of that attempt, with its request and pending call.
type asyncAttempt struct {
	asyncSend
	to  sendpath.QueueRef
	req protocol.SendRequest
	pc  pendingCall
}

// finish reports the outcome to the caller.
func (a *asyncSend) finish(res SendResult, err error) {
	defer a.p.wg.Done()
	a.callback(res, err)
}

// answered is the outcome of the first attempt of a send not coalesced.
func (a *asyncAttempt) answered(f *protocol.Frame, at time.Time, err error) {
	p := a.p
	if f != nil {
		p.observeAt(a.to, a.now, at, f)
	}
	out, err := p.sendOutcome(a.c, f, err, &a.res)
	d := p.decide(&a.send, a.to, out)
	a.retry(d, err)
}

// retry goes on after an attempt that ended with err and got decision d:
// see retryAsync. The common case (no retry) makes no func value.
func (a *asyncSend) retry(d sendpath.Decision, err error) {
	if d.Verdict != sendpath.Retry || a.ctx.Err() != nil {
		a.finish(a.res, err)
		return
	}
	a.p.retryAsync(a.ctx, &a.send, d, err, a.msg, a.now.UnixMilli(), &a.res, a.finish)
}

// fresh reports whether topic's route is known and fresh at now.
func (p *Producer) fresh(topic string, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.table.Fresh(topic, now)
}

// retryAsync goes on with the async send s of msg after an attempt that
// ended with err and got decision d: a retry runs on a goroutine of its
// own, anything else calls finish with the outcome at once.
func (p *Producer) retryAsync(ctx context.Context, s *sendpath.Send, d sendpath.Decision, err error, msg *protocol.Message, born int64, res *SendResult, finish func(SendResult, error)) {
	if d.Verdict != sendpath.Retry || ctx.Err() != nil {
		finish(*res, err)
		return
	}
	go func() {
		if werr := p.pause(ctx, s, d, err); werr != nil {
			finish(*res, werr)
			return
		}
		finish(*res, p.run(ctx, s, p.sendAttempt(ctx, msg, born, res)))
	}()
}

// delayed reports whether msg asks for delayed delivery: the broker moves
// such a message to its schedule topic, so it is not coalesced with others.
func delayed(msg *protocol.Message) bool {
	return msg.Property(protocol.PropertyDelay) != "" || msg.Property(protocol.PropertyTimerDeliverMs) != ""
}

// sendCoalesced is SendAsync's path for a message that may share a
// SEND_BATCH with others (see coalesce.go); a.send is its plan. A refusal
// of a batch of several messages may be because of another message, so
// the message is then sent again on its own, as by Send, with Send's
// retries.
func (p *Producer) sendCoalesced(a *asyncSend) {
	c := p.c
	if p.ns != nil {
		// The broker first: the message joins that broker's open batch,
		// or opens one on the queue picked.
		p.mu.Lock()
		q := p.table.Pick(a.msg.Topic, a.now, "")
		p.mu.Unlock()
		var err error
		if c, err = p.connFor(q); err != nil {
			go func() { a.finish(p.send(a.ctx, a.msg, &a.send)) }()
			return
		}
		a.picked = &q
	}
	a.c = c
	c.sendCoalesced(a.ctx, p.o.producerGroup, a.msg, a, a.now.UnixMilli(), a.now, p.o.timeout, a)
}

// pick is the queue of a batch the message opens: the queue picked with
// its broker on name-server routes, else the topic's next queue.
func (a *asyncSend) pick() int32 {
	if a.picked != nil {
		return a.picked.QueueID
	}
	p := a.p
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.table.Pick(a.msg.Topic, a.now, "").QueueID
}

// part is the outcome of a coalesced message.
func (a *asyncSend) part(sp sendPart) {
	p, ctx, msg := a.p, a.ctx, a.msg
	out, err := outcome(sp.f, sp.err, &sp.resp, sp.err, &a.res)
	to := sendpath.QueueRef{Broker: a.c.addr, QueueID: a.res.QueueID}
	if sp.f != nil {
		p.observeAt(to, a.now, sp.at, sp.f)
	}
	d := p.decide(&a.send, to, out)
	if d.Verdict != sendpath.Done && sp.batched && ctx.Err() == nil {
		// (coalesced: no queue of the caller's, nor WithQueue)
		go func() { a.finish(p.send(ctx, msg, p.begin(ctx, msg.Topic, sendOptions{queue: -1}))) }()
		return
	}
	a.retry(d, err)
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
	to, err := p.target(ctx, p.begin(ctx, msg.Topic, so))
	if err != nil {
		return err
	}
	c, err := p.connFor(to)
	if err != nil {
		return err
	}
	return c.oneway(ctx, p.sendRequest(msg, to.QueueID, nowMs()))
}

// SendBatch sends msgs, all of one topic, in one request: the broker
// stores them together in one queue at consecutive offsets, with one status
// for the batch. Retries and statuses are as for Send.
func (p *Producer) SendBatch(ctx context.Context, msgs []*protocol.Message, opts ...SendOption) (BatchResult, error) {
	so := p.sendOpts(opts)
	req, res, err := p.prepareBatch(msgs, so)
	if err != nil {
		return BatchResult{}, err
	}
	err = p.run(ctx, p.begin(ctx, req.Topic, so), func(to sendpath.QueueRef) (sendpath.Outcome, error) {
		req.QueueID = to.QueueID
		c, err := p.connFor(to)
		if err != nil {
			return outcomeOf(err), err
		}
		start := time.Now()
		f, err := c.call(ctx, req, p.o.timeout)
		p.observe(to, start, f)
		if err != nil {
			return outcomeOf(err), err
		}
		res.Status = f.Status
		out := sendpath.Outcome{Failure: sendpath.Answered, Status: f.Status}
		if !f.Status.Stored() {
			return out, statusError(f)
		}
		var resp protocol.SendBatchResponse
		if err := c.decodeSendBatch(f, &resp); err != nil {
			return out, err // stored all the same: never resent
		}
		res.QueueID, res.QueueOffset, res.MsgIDs = resp.QueueID, resp.QueueOffset, resp.MsgIDs
		if f.Status != protocol.StatusOK {
			return out, statusError(f)
		}
		return out, nil
	})
	return *res, err
}

// prepareBatch validates msgs for SendBatch, applies so's edits, sets their
// UNIQ_KEYs and builds the request (its queue set per attempt) and the
// result to fill.
func (p *Producer) prepareBatch(msgs []*protocol.Message, so sendOptions) (*protocol.SendBatchRequest, *BatchResult, error) {
	if len(msgs) == 0 {
		return nil, nil, fmt.Errorf("%w: empty batch", ErrMessageIllegal)
	}
	if lim := p.o.limits; len(msgs) > lim.MaxBatchMessages {
		return nil, nil, fmt.Errorf("%w: batch of %d messages, limit %d", ErrMessageIllegal, len(msgs), lim.MaxBatchMessages)
	}
	topic := ""
	req := &protocol.SendBatchRequest{ProducerGroup: p.o.producerGroup, Messages: make([]protocol.Message, len(msgs))}
	res := &BatchResult{QueueID: -1, QueueOffset: -1, UniqKeys: make([]string, len(msgs))}
	for i, m := range msgs {
		if err := so.apply(m); err != nil {
			return nil, nil, fmt.Errorf("message %d: %w", i, err)
		}
		if err := p.prepare(m); err != nil {
			return nil, nil, fmt.Errorf("message %d: %w", i, err)
		}
		if i == 0 {
			topic = m.Topic
		} else if m.Topic != topic {
			return nil, nil, fmt.Errorf("%w: message %d has topic %q in a batch for %q", ErrMessageIllegal, i, m.Topic, topic)
		}
		req.Messages[i] = *m
		res.UniqKeys[i] = m.UniqKey()
	}
	req.Topic, res.Topic = topic, topic
	req.BornTimestamp = nowMs()
	return req, res, nil
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
