package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// ConsumeResult is a push handler's verdict on a batch of messages.
type ConsumeResult int

const (
	// ConsumeSuccess: the batch is consumed; its offsets may be committed.
	ConsumeSuccess ConsumeResult = iota
	// ConsumeRetryLater: deliver the same batch again after a pause
	// (WithRetryLaterDelay). Later messages of the queue wait, so per-queue
	// order is kept.
	ConsumeRetryLater
)

func (r ConsumeResult) String() string {
	if r == ConsumeSuccess {
		return "CONSUME_SUCCESS"
	}
	return "RECONSUME_LATER"
}

// Handler consumes a batch of messages of one queue, in queue order. Its
// context is cancelled when the consumer closes. It must not keep the
// messages after it returns. Their properties arrive encoded: read them
// with Property, Tags, Keys or UniqKey (Properties is nil until PropertyMap
// fills it).
type Handler func(ctx context.Context, msgs []*protocol.MessageExt) ConsumeResult

// PushConsumer consumes the queues of its subscribed topics and hands the
// messages to a handler.
//
// By default it is a member of its consumer group, coordinated by the
// broker (see group.go): it heartbeats every interval the broker asks for,
// consumes the queues the broker assigns it (and the group's retry topic
// %RETRY%<group>, whose messages go to the same handler under their original
// topic), and gives a revoked queue up promptly: stop pulling, wait for its
// handler calls (WithReleaseTimeout), commit its offset, heartbeat. Each
// owned queue has one long-polling pull loop. In concurrent mode (the
// default) handler calls run in parallel (WithConsumeConcurrency), even for
// one queue; ConsumeRetryLater, or a call exceeding WithAckTimeout, gives
// the messages back to the broker, which redelivers them through the retry
// topic with growing delays and after WithMaxReconsumeTimes moves them to
// the dead-letter topic %DLQ%<group>. WithConsumeOrderly consumes each queue
// one message at a time, in order. WithMessageModel(Broadcasting) gives every
// member every message.
//
// A queue starts at the committed offset or, if there is none, at its first
// or last offset (WithConsumeFrom). Offsets (the lowest offset not yet done
// per queue) are committed every WithCommitInterval, when a queue is given
// up, and on Close. Delivery is at least once: after a crash, messages since
// the last commit are delivered again.
//
// WithStaticAssignment restores the earlier mode: every queue of the topics,
// one goroutine per queue, no group membership (one consumer per group).
type PushConsumer struct {
	o     options
	r     *replicas
	group string
	g     *groupConsumer   // group mode (nil with WithStaticAssignment)
	cl    *clusterConsumer // on name-server routes (WithNameServer): the members per broker group

	mu     sync.Mutex
	state  int // stateNew, stateStarted, stateClosed
	subs   []*subscription
	queues []*queueState
	cancel context.CancelFunc
	wg     sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

const (
	stateNew = iota
	stateStarted
	stateClosed
)

type subscription struct {
	topic   string
	expr    string // canonical
	handler Handler
}

type queueState struct {
	sub       *subscription
	id        int32
	consumed  atomic.Int64 // next offset to consume: everything before it is done
	committed int64        // last offset committed (only the committer touches it)
}

// NewPushConsumer connects to the broker at addr for consumer group group.
// With WithSlaveAddrs it also reads from addr's slaves (and starts even if
// addr is unreachable, as long as a slave answers).
//
// With WithNameServer, addr is "" and the consumer spans every broker
// group hosting its topics: at Start it reads the topics' routes and
// becomes a member of its consumer group on each broker group (on the
// group's master, with the group's slaves as WithSlaveAddrs: a group
// whose master is gone is read from a slave, its offsets kept), each
// broker's coordinator assigning its own queues; groups that appear in
// the routes later are joined within WithRouteRefresh. Assignment is the
// union of the groups' assignments; BrokerGroups gives each group's
// member, for its Offsets and Generation.
func NewPushConsumer(addr, group string, opts ...Option) (*PushConsumer, error) {
	if group == "" {
		return nil, fmt.Errorf("wharf client: empty consumer group")
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	pc := &PushConsumer{o: o, group: group}
	if o.nameServers != "" {
		if pc.cl, err = newClusterConsumer(pc, addr, opts); err != nil {
			return nil, err
		}
		return pc, nil
	}
	hello := pc.heartbeat
	if !o.grp.static {
		if err := pc.o.grp.normalize(); err != nil {
			return nil, err
		}
		pc.g = newGroupConsumer(pc)
		hello = nil // the group's heartbeats are calls, sent by the group loop
	}
	pc.r = newReplicas(addr, &pc.o, hello)
	if pc.g != nil {
		pc.r.master.onRequest = pc.g.onBrokerRequest
		for _, c := range pc.r.slaves {
			c.onRequest = pc.g.onBrokerRequest
		}
	}
	if err := pc.r.connect(context.Background()); err != nil {
		pc.r.close()
		return nil, err
	}
	return pc, nil
}

// heartbeat is the connection's periodic heartbeat with
// WithStaticAssignment: the client id only, so that the consumer does not
// join its group at the broker's coordinator (which would assign it queues).
func (pc *PushConsumer) heartbeat() protocol.Request {
	return &protocol.HeartbeatRequest{ClientID: pc.o.clientID}
}

// Group returns the consumer group.
func (pc *PushConsumer) Group() string { return pc.group }

// Subscribe registers handler for the messages of topic matching tagExpr
// ("*" or "" for all, or "a || b"). Call it before Start, once per topic.
func (pc *PushConsumer) Subscribe(topic, tagExpr string, handler Handler) error {
	if err := protocol.ValidateTopic(topic); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidParameter, err)
	}
	expr, err := protocol.ParseTagExpr(tagExpr)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSubscription, err)
	}
	if handler == nil {
		return fmt.Errorf("%w: nil handler", ErrInvalidParameter)
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	switch pc.state {
	case stateClosed:
		return ErrClosed
	case stateStarted:
		return errors.New("wharf client: Subscribe after Start")
	}
	for _, s := range pc.subs {
		if s.topic == topic {
			return fmt.Errorf("wharf client: topic %q already subscribed", topic)
		}
	}
	pc.subs = append(pc.subs, &subscription{topic: topic, expr: expr.String(), handler: handler})
	return nil
}

// Start finds the queues of the subscribed topics and their start offsets
// (ctx bounds this), then consumes them in the background until Close.
// It fails with ErrTopicNotExist if a subscribed topic does not exist.
func (pc *PushConsumer) Start(ctx context.Context) error {
	pc.mu.Lock()
	switch pc.state {
	case stateClosed:
		pc.mu.Unlock()
		return ErrClosed
	case stateStarted:
		pc.mu.Unlock()
		return errors.New("wharf client: PushConsumer already started")
	}
	subs := pc.subs
	pc.mu.Unlock()
	if len(subs) == 0 {
		return errors.New("wharf client: Start without a subscription")
	}
	if pc.cl != nil {
		return pc.startCluster(ctx, subs)
	}
	if pc.g != nil {
		return pc.startGroup(ctx, subs)
	}

	var queues []*queueState
	for _, s := range subs {
		var tc protocol.TopicConfig
		err := pc.r.do(ctx, func(c *conn) (err error) {
			tc, err = c.topicConfig(ctx, s.topic)
			return err
		})
		if err != nil {
			return fmt.Errorf("wharf client: consumer %s: %w", pc.group, err)
		}
		for q := int32(0); q < tc.ReadQueueNums; q++ {
			off, committed, err := pc.startOffset(ctx, s.topic, q)
			if err != nil {
				return fmt.Errorf("wharf client: consumer %s: start offset of %s[%d]: %w", pc.group, s.topic, q, err)
			}
			// A start offset the broker did not give us is committed
			// at the first chance, so that a restart resumes there.
			qs := &queueState{sub: s, id: q, committed: -1}
			if committed {
				qs.committed = off
			}
			qs.consumed.Store(off)
			queues = append(queues, qs)
			pc.o.logger.Debug("wharf client: consuming", "group", pc.group, "topic", s.topic, "queue", q, "from", off)
		}
	}

	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.state != stateNew {
		return ErrClosed
	}
	runCtx, cancel := context.WithCancel(context.Background())
	pc.state, pc.queues, pc.cancel = stateStarted, queues, cancel
	pc.wg.Add(len(queues) + 1)
	for _, q := range queues {
		go pc.consumeQueue(runCtx, q)
	}
	go pc.commitLoop(runCtx)
	return nil
}

// startOffset returns where to start a queue, and whether that is the
// group's committed offset.
func (pc *PushConsumer) startOffset(ctx context.Context, topic string, q int32) (int64, bool, error) {
	var off int64
	var committed bool
	err := pc.r.do(ctx, func(c *conn) error {
		var err error
		off, err = c.queryConsumerOffset(ctx, pc.group, topic, q)
		if err == nil && off >= 0 {
			committed = true
			return nil
		}
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		if pc.o.consumeFrom == ConsumeFromFirst {
			off, err = c.minOffset(ctx, topic, q)
		} else {
			off, err = c.maxOffset(ctx, topic, q)
		}
		return err
	})
	return off, committed, err
}

// sleep waits d or until ctx ends; it reports whether ctx is still alive.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (pc *PushConsumer) consumeQueue(ctx context.Context, q *queueState) {
	defer pc.wg.Done()
	log := pc.o.logger.With("group", pc.group, "topic", q.sub.topic, "queue", q.id)
	offset := q.consumed.Load()
	errDelay := time.Duration(0)
	for ctx.Err() == nil {
		res, err := pc.r.pull(ctx, pc.group, q.sub.topic, q.id, offset, pc.o.pullBatch,
			PullOptions{Subscription: q.sub.expr, Suspend: pc.o.pullSuspend})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if pc.o.pullErr != nil {
				pc.o.pullErr(q.sub.topic, q.id, err)
			}
			errDelay = min(max(2*errDelay, 100*time.Millisecond), 3*time.Second)
			log.Warn("wharf client: pull failed", "offset", offset, "err", err, "retry_in", errDelay)
			if !sleep(ctx, errDelay) {
				return
			}
			continue
		}
		errDelay = 0
		switch res.Status {
		case protocol.PullFound:
			for i := 0; i < len(res.Messages); i += pc.o.consumeBatch {
				chunk := res.Messages[i:min(i+pc.o.consumeBatch, len(res.Messages))]
				batch := make([]*protocol.MessageExt, len(chunk))
				for j := range chunk {
					batch[j] = &chunk[j]
				}
				for q.sub.handler(ctx, batch) != ConsumeSuccess {
					if !sleep(ctx, pc.o.retryLater) {
						return // not consumed: redelivered from the committed offset
					}
				}
				q.consumed.Store(batch[len(batch)-1].QueueOffset + 1)
			}
		case protocol.PullOffsetIllegal:
			log.Warn("wharf client: offset out of range, skipping", "offset", offset, "next", res.NextBeginOffset,
				"min", res.MinOffset, "max", res.MaxOffset)
		case protocol.PullNoNewMsg:
			if pc.o.pullSuspend <= 0 && !sleep(ctx, 100*time.Millisecond) {
				return
			}
		}
		offset = res.NextBeginOffset
		q.consumed.Store(offset)
	}
}

func (pc *PushConsumer) commitLoop(ctx context.Context) {
	defer pc.wg.Done()
	t := time.NewTicker(pc.o.commitInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if err := pc.commit(ctx); err != nil && ctx.Err() == nil {
				pc.o.logger.Warn("wharf client: commit offsets", "group", pc.group, "err", err)
			}
		case <-ctx.Done():
			return
		}
	}
}

// commit sends the consumed offset of every queue that moved since its
// last commit. Only commitLoop and Close (after commitLoop ended) call it.
func (pc *PushConsumer) commit(ctx context.Context) error {
	var errs []error
	for _, q := range pc.queues {
		off := q.consumed.Load()
		if off == q.committed {
			continue
		}
		err := pc.r.do(ctx, func(c *conn) error { return c.updateConsumerOffset(ctx, pc.group, q.sub.topic, q.id, off) })
		if err != nil {
			errs = append(errs, fmt.Errorf("%s[%d]: %w", q.sub.topic, q.id, err))
			if errors.Is(err, ErrBrokerUnavailable) || errors.Is(err, ErrClosed) || ctx.Err() != nil {
				break // the rest would fail the same way
			}
			continue
		}
		q.committed = off
	}
	return errors.Join(errs...)
}

// Offsets returns, per topic and queue, the next offset to consume (what
// the next commit will store). On name-server routes it is nil: ask each
// of BrokerGroups.
func (pc *PushConsumer) Offsets() map[string]map[int32]int64 {
	if pc.cl != nil {
		return nil // queue ids repeat across broker groups: see BrokerGroups
	}
	if pc.g != nil {
		return pc.g.offsets()
	}
	pc.mu.Lock()
	queues := pc.queues
	pc.mu.Unlock()
	out := map[string]map[int32]int64{}
	for _, q := range queues {
		if out[q.sub.topic] == nil {
			out[q.sub.topic] = map[int32]int64{}
		}
		out[q.sub.topic][q.id] = q.consumed.Load()
	}
	return out
}

// Close stops consuming (cancelling the handlers' context and waiting for
// them to return), commits the offsets reached, and closes the connection.
// It returns the commit's error, if any. It is idempotent.
func (pc *PushConsumer) Close() error {
	pc.closeOnce.Do(func() { pc.closeErr = pc.close() })
	return pc.closeErr
}

func (pc *PushConsumer) close() error {
	pc.mu.Lock()
	prev := pc.state
	pc.state = stateClosed
	cancel := pc.cancel
	pc.mu.Unlock()
	if pc.cl != nil {
		return pc.cl.close()
	}
	if prev != stateStarted {
		pc.r.close()
		return nil
	}
	if pc.g != nil {
		err := pc.g.close()
		pc.r.close()
		return err
	}
	cancel()
	pc.wg.Wait()
	ctx, done := context.WithTimeout(context.Background(), pc.o.timeout)
	err := pc.commit(ctx)
	done()
	pc.r.close()
	if err != nil {
		return fmt.Errorf("wharf client: consumer %s: final offset commit: %w", pc.group, err)
	}
	return nil
}
