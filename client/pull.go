package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// PullOptions tunes one Pull.
type PullOptions struct {
	// Subscription is a tag expression: "*" or "" for every message, or
	// "a || b". Messages are filtered by the broker and re-checked here.
	Subscription string
	// Suspend > 0 lets the broker hold the pull up to this long when the
	// queue has nothing new (long polling). The call's deadline is Suspend
	// plus WithTimeout; a deadline of ctx shorter than Suspend ends the call
	// with ErrTimeout first, so give ctx a deadline that exceeds Suspend (or
	// none).
	Suspend time.Duration
	// MaxBytes > 0 caps the payload bytes returned (at least one message is
	// returned if any).
	MaxBytes int32
	// CommitOffset, if not nil, commits this offset for the consumer's
	// group before the pull (saves an UPDATE_CONSUMER_OFFSET round trip).
	CommitOffset *int64
}

// PullResult is the outcome of a Pull. For every Status but PullFound,
// Messages is empty; in every case the next pull should start at
// NextBeginOffset.
type PullResult struct {
	Status protocol.PullStatus // PullFound, PullNoNewMsg, PullNoMatchedMsg, PullOffsetIllegal
	// Messages' bodies and properties point into the answer's own buffer,
	// which the client never reuses: nothing is copied per message. Their
	// properties stay encoded until asked for: read them with Property,
	// Tags, Keys or UniqKey (PropertyMap fills Properties).
	Messages        []protocol.MessageExt
	NextBeginOffset int64
	MinOffset       int64
	MaxOffset       int64
	// SuggestWhichBrokerID > 0 is the master's advice to read this queue
	// from a slave (the consumer is far behind); with WithSlaveAddrs the
	// consumer follows it by itself.
	SuggestWhichBrokerID int64
	// BrokerAddr is the address of the broker that answered: the master's,
	// or a slave's (see WithSlaveAddrs).
	BrokerAddr string
}

// PullConsumer reads queues explicitly: the caller chooses topic, queue and
// offset and keeps track of them. It is safe for concurrent use; concurrent
// pulls share one connection per broker, and a long-polling pull does not
// delay others.
//
// On one broker group (NewPullConsumer(addr)) a queue is a topic and a
// queue id. On name-server routes (WithNameServer) a topic's queues are
// spread over broker groups, each numbering its own from 0: Queues lists
// them as MessageQueues (group, topic, id), and PullQueue,
// CommitQueueOffset, QueryQueueOffset and QueueOffsets take one. The
// methods that take a topic and a queue id work there too while one group
// hosts the topic.
type PullConsumer struct {
	o     options
	r     *replicas   // one broker group (NewPullConsumer(addr))
	cl    *pullGroups // name-server routes (WithNameServer)
	group string
	// leaving is set by Close before it leaves the group: from then on
	// the heartbeats name no group, so one sent between the leave and the
	// connection's close does not make the consumer a member again.
	leaving atomic.Bool
}

// NewPullConsumer connects to the broker at addr for consumer group group.
// With WithSlaveAddrs it also reads from addr's slaves (and starts even if
// addr is unreachable, as long as a slave answers). With WithNameServer and
// an empty addr it reads every broker group of the routes instead: each
// group's master, or its slaves (as the routes name them) while the
// master is gone; WithSlaveAddrs is ignored then.
func NewPullConsumer(addr, group string, opts ...Option) (*PullConsumer, error) {
	if group == "" {
		return nil, fmt.Errorf("wharf client: empty consumer group")
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	pc := &PullConsumer{o: o, group: group}
	hello := func() protocol.Request {
		if pc.leaving.Load() {
			return &protocol.HeartbeatRequest{ClientID: pc.o.clientID}
		}
		return &protocol.HeartbeatRequest{ClientID: pc.o.clientID, ConsumerGroups: []protocol.ConsumerGroupInfo{{Group: group}}}
	}
	if o.nameServers != "" {
		if addr != "" {
			return nil, fmt.Errorf("%w: a broker address (%s) and WithNameServer: give one of them", ErrInvalidParameter, addr)
		}
		if pc.cl, err = newPullGroups(&pc.o, hello); err != nil {
			return nil, err
		}
		return pc, nil
	}
	pc.r = newReplicas(addr, &pc.o, hello)
	if err := pc.r.connect(context.Background()); err != nil {
		pc.r.close()
		return nil, err
	}
	return pc, nil
}

// Close leaves the group on every broker the consumer is connected to, so
// that the group's other members get its queues now rather than after the
// broker's member timeout, then fails calls in flight with ErrClosed and
// closes the connections. Closing again does nothing.
func (pc *PullConsumer) Close() error {
	pc.leaving.Store(true)
	if pc.cl != nil {
		pc.cl.close(pc.leave)
		return nil
	}
	pc.leave(pc.r)
	pc.r.close()
	return nil
}

// leave sends UNREGISTER_CLIENT for the group to each of r's brokers with a
// live connection: a broker never dialled (or lost) has no membership to
// end, and dialling it would make Close wait for a broker that is gone.
// A failure is logged: the broker's member timeout still ends the
// membership.
func (pc *PullConsumer) leave(r *replicas) {
	req := &protocol.UnregisterClientRequest{ClientID: pc.o.clientID, Group: pc.group}
	ctx, cancel := context.WithTimeout(context.Background(), pc.o.timeout)
	defer cancel()
	for _, c := range append([]*conn{r.master}, r.slaves...) {
		if !liveConn(c) {
			continue
		}
		c.helloBarrier() // leaving is set: later heartbeats name no group
		if _, err := c.do(ctx, req, nil, pc.o.timeout); err != nil {
			pc.o.logger.Warn("wharf client: unregister", "group", pc.group, "broker", c.addr, "err", err)
		}
	}
}

// liveConn reports whether c is open and has a session that has not ended.
func liveConn(c *conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.closed && c.s != nil && !c.s.isDone()
}

// Group returns the consumer group.
func (pc *PullConsumer) Group() string { return pc.group }

// Pull reads up to maxNums messages of one queue from offset. With
// opts.Suspend > 0 and nothing new in the queue the broker holds the call
// until a message arrives or the suspend time passes (then PullNoNewMsg).
// PullNoNewMsg, PullNoMatchedMsg and PullOffsetIllegal are results, not
// errors: continue from NextBeginOffset. Other statuses are *StatusError.
// It is PullQueue of the queue without a broker group.
func (pc *PullConsumer) Pull(ctx context.Context, topic string, queueID int32, offset int64, maxNums int32, opts PullOptions) (PullResult, error) {
	return pc.PullQueue(ctx, MessageQueue{Topic: topic, QueueID: queueID}, offset, maxNums, opts)
}

// PullQueue is Pull of the queue mq.
func (pc *PullConsumer) PullQueue(ctx context.Context, mq MessageQueue, offset int64, maxNums int32, opts PullOptions) (PullResult, error) {
	var res PullResult
	err := pc.on(ctx, mq, func(r *replicas) (err error) {
		res, err = r.pull(ctx, pc.group, mq.Topic, mq.QueueID, offset, maxNums, opts)
		return err
	})
	return res, err
}

// Queues lists topic's readable queues: on name-server routes those of
// every broker group hosting it (as the routes have them now), by group
// and queue id; on one broker group its read queues, without a group name.
func (pc *PullConsumer) Queues(ctx context.Context, topic string) ([]MessageQueue, error) {
	if pc.cl != nil {
		tq, err := pc.cl.queues(ctx, topic, true)
		if err != nil {
			return nil, err
		}
		return slices.Clone(tq.queues), nil
	}
	var tc protocol.TopicConfig
	err := pc.r.do(ctx, func(c *conn) (err error) {
		tc, err = c.topicConfig(ctx, topic)
		return err
	})
	if err != nil {
		return nil, err
	}
	qs := make([]MessageQueue, tc.ReadQueueNums)
	for i := range qs {
		qs[i] = MessageQueue{Topic: topic, QueueID: int32(i)}
	}
	return qs, nil
}

// on runs call on the replicas of mq's broker group. A group that could
// not be reached has the topic's route read again at the next call (its
// brokers may have moved).
func (pc *PullConsumer) on(ctx context.Context, mq MessageQueue, call func(*replicas) error) error {
	if pc.cl == nil {
		return call(pc.r)
	}
	r, err := pc.cl.resolve(ctx, mq)
	if err != nil {
		return err
	}
	err = call(r)
	if errors.Is(err, ErrBrokerUnavailable) {
		pc.cl.stale(mq.Topic)
	}
	return err
}

func pull(ctx context.Context, c *conn, group, topic string, queueID int32, offset int64, maxNums int32, opts PullOptions) (PullResult, error) {
	expr, err := protocol.ParseTagExpr(opts.Subscription)
	if err != nil {
		return PullResult{}, fmt.Errorf("%w: %w", ErrSubscription, err)
	}
	if maxNums <= 0 {
		return PullResult{}, fmt.Errorf("%w: maxNums must be positive, got %d", ErrInvalidParameter, maxNums)
	}
	req := &protocol.PullRequest{
		ConsumerGroup: group,
		Topic:         topic,
		QueueID:       queueID,
		QueueOffset:   offset,
		MaxMsgNums:    maxNums,
		CommitOffset:  opts.CommitOffset,
		MaxMsgBytes:   opts.MaxBytes,
	}
	if !expr.All {
		req.Subscription = expr.String()
	}
	if opts.Suspend > 0 {
		req.SuspendTimeoutMillis = max(1, opts.Suspend.Milliseconds())
	}
	f, err := c.call(ctx, req, opts.Suspend+c.o.timeout)
	if err != nil {
		return PullResult{}, err
	}
	ps := protocol.PullStatusOf(f.Status)
	if ps == protocol.PullError {
		return PullResult{}, statusError(f)
	}
	var resp protocol.PullResponse
	if err := c.decode(f, &resp); err != nil {
		return PullResult{}, err
	}
	res := PullResult{
		Status:          ps,
		NextBeginOffset: resp.NextBeginOffset,
		MinOffset:       resp.MinOffset,
		MaxOffset:       resp.MaxOffset,

		SuggestWhichBrokerID: resp.SuggestWhichBrokerID,
		BrokerAddr:           c.addr,
	}
	if ps != protocol.PullFound {
		return res, nil
	}
	// The broker filters by tag hash code; hash codes collide, so check
	// the tags themselves.
	msgs := resp.Messages
	if !expr.All {
		kept := msgs[:0]
		for _, m := range msgs {
			if expr.Matches(m.Tags()) {
				kept = append(kept, m)
			}
		}
		msgs = kept
	}
	if len(msgs) == 0 {
		res.Status = protocol.PullNoMatchedMsg
	}
	res.Messages = msgs
	return res, nil
}

// CommitOffset commits offset (the next offset to consume) of one queue for
// the consumer's group and waits for the broker to acknowledge it. It is
// CommitQueueOffset of the queue without a broker group.
func (pc *PullConsumer) CommitOffset(ctx context.Context, topic string, queueID int32, offset int64) error {
	return pc.CommitQueueOffset(ctx, MessageQueue{Topic: topic, QueueID: queueID}, offset)
}

// CommitQueueOffset commits offset of the queue mq on its group's master,
// or on a slave while the master cannot be reached (the slave hands it on
// to the master through replication); commits go to the master again once
// it answers.
func (pc *PullConsumer) CommitQueueOffset(ctx context.Context, mq MessageQueue, offset int64) error {
	return pc.on(ctx, mq, func(r *replicas) error {
		return r.do(ctx, func(c *conn) error { return c.updateConsumerOffset(ctx, pc.group, mq.Topic, mq.QueueID, offset) })
	})
}

// QueryOffset returns the group's committed offset of one queue, or an
// error wrapping ErrNotFound if the group has none. It is
// QueryQueueOffset of the queue without a broker group.
func (pc *PullConsumer) QueryOffset(ctx context.Context, topic string, queueID int32) (int64, error) {
	return pc.QueryQueueOffset(ctx, MessageQueue{Topic: topic, QueueID: queueID})
}

// QueryQueueOffset returns the group's committed offset of the queue mq.
func (pc *PullConsumer) QueryQueueOffset(ctx context.Context, mq MessageQueue) (int64, error) {
	var off int64
	err := pc.on(ctx, mq, func(r *replicas) error {
		return r.do(ctx, func(c *conn) (err error) {
			off, err = c.queryConsumerOffset(ctx, pc.group, mq.Topic, mq.QueueID)
			return err
		})
	})
	return off, err
}

// MinOffset returns the queue's oldest stored offset.
func (pc *PullConsumer) MinOffset(ctx context.Context, topic string, queueID int32) (int64, error) {
	lo, _, err := pc.offsets(ctx, MessageQueue{Topic: topic, QueueID: queueID}, true, false)
	return lo, err
}

// MaxOffset returns the queue's max offset (the offset of the next message).
func (pc *PullConsumer) MaxOffset(ctx context.Context, topic string, queueID int32) (int64, error) {
	_, hi, err := pc.offsets(ctx, MessageQueue{Topic: topic, QueueID: queueID}, false, true)
	return hi, err
}

// QueueOffsets returns the queue mq's oldest stored offset and its max
// offset (the offset of the next message).
func (pc *PullConsumer) QueueOffsets(ctx context.Context, mq MessageQueue) (minOffset, maxOffset int64, err error) {
	return pc.offsets(ctx, mq, true, true)
}

func (pc *PullConsumer) offsets(ctx context.Context, mq MessageQueue, lo, hi bool) (minOff, maxOff int64, err error) {
	err = pc.on(ctx, mq, func(r *replicas) error {
		return r.do(ctx, func(c *conn) (err error) {
			if lo {
				if minOff, err = c.minOffset(ctx, mq.Topic, mq.QueueID); err != nil {
					return err
				}
			}
			if hi {
				maxOff, err = c.maxOffset(ctx, mq.Topic, mq.QueueID)
			}
			return err
		})
	})
	return minOff, maxOff, err
}
