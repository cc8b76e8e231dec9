package client

import (
	"context"
	"fmt"
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
	Status          protocol.PullStatus // PullFound, PullNoNewMsg, PullNoMatchedMsg, PullOffsetIllegal
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
// pulls share one connection, and a long-polling pull does not delay others.
type PullConsumer struct {
	o     options
	r     *replicas
	group string
}

// NewPullConsumer connects to the broker at addr for consumer group group.
// With WithSlaveAddrs it also reads from addr's slaves (and starts even if
// addr is unreachable, as long as a slave answers).
func NewPullConsumer(addr, group string, opts ...Option) (*PullConsumer, error) {
	if group == "" {
		return nil, fmt.Errorf("wharf client: empty consumer group")
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	if o.nameServers != "" {
		// Its calls name a queue by topic and id, which repeat across
		// broker groups.
		return nil, fmt.Errorf("%w: a PullConsumer reads one broker group: give its address, not WithNameServer", ErrInvalidParameter)
	}
	pc := &PullConsumer{o: o, group: group}
	pc.r = newReplicas(addr, &pc.o, func() protocol.Request {
		return &protocol.HeartbeatRequest{ClientID: pc.o.clientID, ConsumerGroups: []protocol.ConsumerGroupInfo{{Group: group}}}
	})
	if err := pc.r.connect(context.Background()); err != nil {
		pc.r.close()
		return nil, err
	}
	return pc, nil
}

// Close fails calls in flight with ErrClosed and closes the connection.
func (pc *PullConsumer) Close() error {
	pc.r.close()
	return nil
}

// Group returns the consumer group.
func (pc *PullConsumer) Group() string { return pc.group }

// Pull reads up to maxNums messages of one queue from offset. With
// opts.Suspend > 0 and nothing new in the queue the broker holds the call
// until a message arrives or the suspend time passes (then PullNoNewMsg).
// PullNoNewMsg, PullNoMatchedMsg and PullOffsetIllegal are results, not
// errors: continue from NextBeginOffset. Other statuses are *StatusError.
func (pc *PullConsumer) Pull(ctx context.Context, topic string, queueID int32, offset int64, maxNums int32, opts PullOptions) (PullResult, error) {
	return pc.r.pull(ctx, pc.group, topic, queueID, offset, maxNums, opts)
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
// the consumer's group and waits for the broker to acknowledge it.
func (pc *PullConsumer) CommitOffset(ctx context.Context, topic string, queueID int32, offset int64) error {
	return pc.r.do(ctx, func(c *conn) error { return c.updateConsumerOffset(ctx, pc.group, topic, queueID, offset) })
}

// QueryOffset returns the group's committed offset of one queue, or an
// error wrapping ErrNotFound if the group has none.
func (pc *PullConsumer) QueryOffset(ctx context.Context, topic string, queueID int32) (int64, error) {
	var off int64
	err := pc.r.do(ctx, func(c *conn) (err error) {
		off, err = c.queryConsumerOffset(ctx, pc.group, topic, queueID)
		return err
	})
	return off, err
}

// MinOffset returns the queue's oldest stored offset.
func (pc *PullConsumer) MinOffset(ctx context.Context, topic string, queueID int32) (int64, error) {
	var off int64
	err := pc.r.do(ctx, func(c *conn) (err error) {
		off, err = c.minOffset(ctx, topic, queueID)
		return err
	})
	return off, err
}

// MaxOffset returns the queue's max offset (the offset of the next message).
func (pc *PullConsumer) MaxOffset(ctx context.Context, topic string, queueID int32) (int64, error) {
	var off int64
	err := pc.r.do(ctx, func(c *conn) (err error) {
		off, err = c.maxOffset(ctx, topic, queueID)
		return err
	})
	return off, err
}
