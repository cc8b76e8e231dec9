package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/rebalance"
)

// Group mode of the PushConsumer (the default): the consumer joins its
// group at the broker's RebalanceCoordinator with a heartbeat, consumes the
// queues the heartbeat response assigns to it (its topics' queues and the
// group's retry topic), and hands a queue over promptly when it is revoked:
// stop pulling, let the handler calls in flight finish (bounded), commit the
// queue's offset, then heartbeat at once without it, which lets the broker
// give it to its next owner.
//
// The rules of the member's side (the lease, applying assignments, the
// generation it echoes, when to heartbeat) are rebalance.Member's; this file
// feeds it the heartbeats' outcomes, the broker's notifications, the
// releases and the clock, and runs the queues it starts and stops.

// maxQueueInflight bounds the messages of one queue that are pulled but not
// yet done; the queue's pulls wait beyond it.
const maxQueueInflight = 512

type groupConsumer struct {
	pc          *PushConsumer
	o           *groupOptions
	offsetGroup string // the group offsets are kept under ("<group>#<clientId>" when broadcasting)

	sem     chan struct{}   // orderly mode's handler calls in flight (consume concurrency)
	jobs    chan consumeJob // concurrent mode's handler calls, to the workers (group_worker.go)
	workers sync.WaitGroup  // the workers
	kick    chan struct{}   // the member's deadline changed (cap 1)

	runCtx    context.Context // ends at Close
	runCancel context.CancelFunc
	hbCtx     context.Context // ends when heartbeats must stop
	hbCancel  context.CancelFunc
	timerDone chan struct{}
	hbs       sync.WaitGroup // the heartbeat in flight
	commitEnd chan struct{}  // closed when the commit loop ended
	wg        sync.WaitGroup // queue workers and releases

	mu       sync.Mutex
	m        *rebalance.Member
	deadline time.Time                         // when the member wants its Tick
	queues   map[protocol.QueueRef]*groupQueue // owned: consuming or being released
	unknown  map[protocol.QueueRef]bool        // assigned queues of topics we do not subscribe to (logged once)
}

// groupQueue is one owned queue.
type groupQueue struct {
	ref   protocol.QueueRef
	sub   *subscription // nil for the retry topic (handler chosen per message)
	retry bool

	ctx     context.Context // pulls; cancelled when the release starts
	cancel  context.CancelFunc
	hctx    context.Context // handler calls; cancelled when the release gives up waiting
	hcancel context.CancelFunc

	releasing  bool          // under groupConsumer.mu
	workerDone chan struct{} // closed when the pull loop ended
	handlers   sync.WaitGroup
	gate       sync.Mutex // orders a worker's startHandler with the release's wait

	tr tracker

	commitMu  sync.Mutex
	committed int64 // last committed offset; -1 if none
	final     bool  // released: no more commits
	commitErr error // of the commit at release
}

func newGroupConsumer(pc *PushConsumer) *groupConsumer {
	g := &groupConsumer{
		pc:          pc,
		o:           &pc.o.grp,
		offsetGroup: pc.group,
		kick:        make(chan struct{}, 1),
		queues:      map[protocol.QueueRef]*groupQueue{},
		unknown:     map[protocol.QueueRef]bool{},
		timerDone:   make(chan struct{}),
		commitEnd:   make(chan struct{}),
	}
	g.m = rebalance.NewMember(rebalance.MemberConfig{Group: pc.group, Interval: defaultHeartbeatInterval, Consumes: g.consumes})
	if g.o.model == Broadcasting {
		g.offsetGroup = pc.group + "#" + pc.o.clientID
	}
	g.sem = make(chan struct{}, g.o.concurrency)
	return g
}

// consumes reports whether the consumer consumes a topic's queues: its
// subscriptions' and the group's retry topic. Subscriptions are fixed once
// the consumer started.
func (g *groupConsumer) consumes(topic string) bool {
	if topic == protocol.RetryTopic(g.pc.group) {
		return true
	}
	return slices.ContainsFunc(g.pc.subs, func(s *subscription) bool { return s.topic == topic })
}

// onBrokerRequest gets the broker's own requests from the connection reader.
func (g *groupConsumer) onBrokerRequest(f *protocol.Frame) {
	if f.Code == protocol.CodeNotifyConsumerIDsChanged {
		g.pc.o.logger.Debug("wharf client: group changed, heartbeating now", "group", g.pc.group)
		g.step(g.m.Notified)
	}
}

func (g *groupConsumer) start() {
	g.mu.Lock() // a notification may come in on another goroutine
	g.runCtx, g.runCancel = context.WithCancel(context.Background())
	g.hbCtx, g.hbCancel = context.WithCancel(g.runCtx)
	g.mu.Unlock()
	g.startWorkers()
	go g.timerLoop()
	go g.commitLoop()
	g.step(g.m.Tick) // the joining heartbeat
}

// ---- the member core's inputs and outputs ----

// step feeds one input to the member core at the current time and carries
// out its Ready. Every input goes through here, under g.mu, so the core
// sees them one at a time and their outputs are carried out in order.
func (g *groupConsumer) step(input func(now time.Time) rebalance.MemberReady) {
	g.mu.Lock()
	r := input(time.Now())
	assigned, revoked := g.carryOut(r)
	g.mu.Unlock()
	g.report(r, assigned, revoked)
}

// carryOut starts and stops the queues a Ready names and sends the
// heartbeat it asks for. Called with g.mu held.
func (g *groupConsumer) carryOut(r rebalance.MemberReady) (assigned, revoked []protocol.QueueRef) {
	for _, ref := range slices.Concat(r.Drop, r.Stop) {
		if q := g.queues[ref]; q != nil && !q.releasing {
			q.releasing = true
			revoked = append(revoked, ref)
			g.wg.Add(1)
			go g.release(q)
		}
	}
	for _, ref := range r.Start {
		q := g.newQueue(ref)
		g.queues[ref] = q
		assigned = append(assigned, ref)
		g.wg.Add(1)
		go g.runQueue(q)
	}
	for _, ref := range r.Ignored {
		if !g.unknown[ref] {
			g.unknown[ref] = true
			g.pc.o.logger.Warn("wharf client: assigned a queue of a topic not subscribed; ignoring it", "group", g.pc.group, "topic", ref.Topic, "queue", ref.QueueID)
		}
	}
	if r.Heartbeat && g.hbCtx != nil && g.hbCtx.Err() == nil { // nil: not started yet
		req := g.heartbeatRequest(r.Owned, r.Generation)
		sent := time.Now()
		r = g.m.HeartbeatSent(sent)
		g.hbs.Add(1)
		go g.heartbeatOnce(req, sent)
	}
	if !r.Deadline.Equal(g.deadline) {
		g.deadline = r.Deadline
		select {
		case g.kick <- struct{}{}:
		default:
		}
	}
	sortRefs(revoked)
	return assigned, revoked
}

// report logs an assignment change and tells the rebalance listener.
func (g *groupConsumer) report(r rebalance.MemberReady, assigned, revoked []protocol.QueueRef) {
	if len(r.Drop) > 0 {
		g.pc.o.logger.Warn("wharf client: no acknowledged heartbeat for 2 intervals; releasing every queue", "group", g.pc.group)
	}
	if len(assigned) == 0 && len(revoked) == 0 {
		return
	}
	g.pc.o.logger.Info("wharf client: assignment changed", "group", g.pc.group, "generation", r.Generation, "assigned", assigned, "revoked", revoked)
	if f := g.o.listener; f != nil {
		f(assigned, revoked)
	}
}

// timerLoop calls the member's Tick at the deadline it asks for: the next
// regular heartbeat, or the end of the lease.
func (g *groupConsumer) timerLoop() {
	defer close(g.timerDone)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		g.mu.Lock()
		d := g.deadline
		g.mu.Unlock()
		if d.IsZero() {
			t.Stop()
		} else {
			t.Reset(time.Until(d))
		}
		select {
		case <-g.hbCtx.Done():
			return
		case <-g.kick:
		case <-t.C:
			g.step(g.m.Tick)
		}
	}
}

func (g *groupConsumer) heartbeatRequest(owned []protocol.QueueRef, gen int64) *protocol.HeartbeatRequest {
	pc := g.pc
	info := protocol.ConsumerGroupInfo{
		Group:            pc.group,
		ConsumeFromWhere: pc.o.consumeFrom.String(),
		MessageModel:     g.o.model.String(),
		ConsumeOrderly:   g.o.orderly,
		AllocateStrategy: string(g.o.strategy),
		Owned:            owned,
		Generation:       gen,
	}
	for _, s := range pc.subs { // fixed since Start
		info.Subscriptions = append(info.Subscriptions, protocol.Subscription{Topic: s.topic, Expression: s.expr})
	}
	return &protocol.HeartbeatRequest{ClientID: pc.o.clientID, ConsumerGroups: []protocol.ConsumerGroupInfo{info}}
}

func sortRefs(refs []protocol.QueueRef) {
	slices.SortFunc(refs, func(a, b protocol.QueueRef) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.QueueID) - int(b.QueueID)
	})
}

// heartbeatOnce sends one heartbeat (the member core allows one at a time)
// and feeds its outcome back.
func (g *groupConsumer) heartbeatOnce(req *protocol.HeartbeatRequest, sent time.Time) {
	defer g.hbs.Done()
	pc := g.pc
	var resp protocol.HeartbeatResponse
	// To the master; while it is unreachable, to a slave of WithSlaveAddrs
	// (whose coordinator then assigns the queues read from the slaves).
	err := pc.r.do(g.hbCtx, func(c *conn) error {
		resp = protocol.HeartbeatResponse{}
		_, err := c.do(g.hbCtx, req, &resp, pc.o.timeout)
		return err
	})
	if g.hbCtx.Err() != nil {
		return // closing: the member acts on nothing any more
	}
	if err != nil {
		pc.o.logger.Warn("wharf client: heartbeat failed", "group", pc.group, "err", err)
		if pc.o.pullErr != nil {
			// Without queues there are no pulls to fail: report the
			// heartbeat, so that a broker gone away is noticed.
			pc.o.pullErr("", -1, err)
		}
		g.step(g.m.HeartbeatFailed) // the lease stops the queues if this goes on
		return
	}
	g.step(func(now time.Time) rebalance.MemberReady { return g.m.HeartbeatAnswered(now, sent, resp) })
}

// newQueue builds the state of a newly assigned queue (the member core
// starts only queues of topics the consumer consumes). Called with g.mu
// held.
func (g *groupConsumer) newQueue(ref protocol.QueueRef) *groupQueue {
	q := &groupQueue{ref: ref, committed: -1, workerDone: make(chan struct{})}
	if ref.Topic == protocol.RetryTopic(g.pc.group) {
		q.retry = true
	} else {
		for _, s := range g.pc.subs {
			if s.topic == ref.Topic {
				q.sub = s
			}
		}
	}
	q.ctx, q.cancel = context.WithCancel(g.runCtx)
	q.hctx, q.hcancel = context.WithCancel(context.Background())
	return q
}

// release gives a queue up (revoked, lease lost, or Close): stop its pulls,
// wait (bounded) for its handler calls, commit its offset, forget it, and
// tell the member core, which heartbeats at once after a revocation so that
// the broker learns the queue is free.
func (g *groupConsumer) release(q *groupQueue) {
	defer g.wg.Done()
	q.cancel()
	g.waitHandlers(q)
	ctx, cancel := context.WithTimeout(context.Background(), g.pc.o.timeout)
	if err := g.commitQueue(ctx, q, true); err != nil {
		q.commitErr = fmt.Errorf("%s[%d]: %w", q.ref.Topic, q.ref.QueueID, err)
		g.pc.o.logger.Warn("wharf client: commit at release", "group", g.pc.group, "topic", q.ref.Topic, "queue", q.ref.QueueID, "err", err)
	}
	cancel()
	g.pc.o.logger.Debug("wharf client: released", "group", g.pc.group, "topic", q.ref.Topic, "queue", q.ref.QueueID)
	g.step(func(now time.Time) rebalance.MemberReady {
		if g.queues[q.ref] == q {
			delete(g.queues, q.ref)
		}
		return g.m.Released(now, q.ref)
	})
}

// waitHandlers waits for the queue's pull loop and handler calls: up to the
// release timeout, then (their context cancelled) up to as long again.
func (g *groupConsumer) waitHandlers(q *groupQueue) {
	all := make(chan struct{})
	go func() {
		<-q.workerDone
		q.gate.Lock() // q.ctx is cancelled: from here on no worker starts a call of q
		q.gate.Unlock()
		q.handlers.Wait()
		close(all)
	}()
	t := time.NewTimer(g.o.releaseTimeout)
	defer t.Stop()
	select {
	case <-all:
		q.hcancel()
		return
	case <-t.C:
	}
	q.hcancel()
	g.pc.o.logger.Warn("wharf client: handler calls still running at release; cancelled", "group", g.pc.group,
		"topic", q.ref.Topic, "queue", q.ref.QueueID)
	t.Reset(g.o.releaseTimeout)
	select {
	case <-all:
	case <-t.C:
	}
}

// ---- offsets ----

// commitQueue commits the queue's offset if it moved forward. final marks
// the queue released: nothing is committed for it afterwards (another
// member may own it by then).
func (g *groupConsumer) commitQueue(ctx context.Context, q *groupQueue, final bool) error {
	q.commitMu.Lock()
	defer q.commitMu.Unlock()
	if q.final {
		return nil
	}
	if final {
		q.final = true
	}
	off, ok := q.tr.consumed()
	if !ok || off <= q.committed {
		return nil
	}
	err := g.pc.r.do(ctx, func(c *conn) error {
		return c.updateConsumerOffset(ctx, g.offsetGroup, q.ref.Topic, q.ref.QueueID, off)
	})
	if err != nil {
		return err
	}
	q.committed = off
	return nil
}

func (g *groupConsumer) commitLoop() {
	defer close(g.commitEnd)
	t := time.NewTicker(g.pc.o.commitInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-g.runCtx.Done():
			return
		}
		g.mu.Lock()
		var qs []*groupQueue
		for _, q := range g.queues {
			if !q.releasing {
				qs = append(qs, q)
			}
		}
		g.mu.Unlock()
		for _, q := range qs {
			if err := g.commitQueue(g.runCtx, q, false); err != nil && g.runCtx.Err() == nil {
				g.pc.o.logger.Warn("wharf client: commit offset", "group", g.pc.group, "topic", q.ref.Topic, "queue", q.ref.QueueID, "err", err)
				if errors.Is(err, ErrBrokerUnavailable) {
					break
				}
			}
		}
	}
}

// startOffset returns where a newly assigned queue starts: the committed
// offset, else its first or last offset. The retry topic always starts at
// its first offset.
func (g *groupConsumer) startOffset(ctx context.Context, q *groupQueue) (off int64, committed bool, err error) {
	err = g.pc.r.do(ctx, func(c *conn) error {
		var err error
		off, err = c.queryConsumerOffset(ctx, g.offsetGroup, q.ref.Topic, q.ref.QueueID)
		if err == nil && off >= 0 {
			committed = true
			return nil
		}
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		if q.retry || g.pc.o.consumeFrom == ConsumeFromFirst {
			off, err = c.minOffset(ctx, q.ref.Topic, q.ref.QueueID)
		} else {
			off, err = c.maxOffset(ctx, q.ref.Topic, q.ref.QueueID)
		}
		return err
	})
	return off, committed, err
}

// ---- consuming a queue ----

func (g *groupConsumer) runQueue(q *groupQueue) {
	defer g.wg.Done()
	defer close(q.workerDone)
	pc := g.pc
	log := pc.o.logger.With("group", pc.group, "topic", q.ref.Topic, "queue", q.ref.QueueID)
	offset, ok := g.awaitStartOffset(q, log)
	if !ok {
		return
	}
	q.tr.init(offset)
	log.Debug("wharf client: consuming", "from", offset, "orderly", g.o.orderly)

	expr := "*"
	if q.sub != nil {
		expr = q.sub.expr
	}
	errDelay := time.Duration(0)
	for q.ctx.Err() == nil {
		if !q.tr.waitSpace(q.ctx, maxQueueInflight) {
			return
		}
		res, err := pc.r.pull(q.ctx, pc.group, q.ref.Topic, q.ref.QueueID, offset, pc.o.pullBatch,
			PullOptions{Subscription: expr, Suspend: pc.o.pullSuspend})
		if err != nil {
			if q.ctx.Err() != nil {
				return
			}
			if pc.o.pullErr != nil {
				pc.o.pullErr(q.ref.Topic, q.ref.QueueID, err)
			}
			errDelay = min(max(2*errDelay, 100*time.Millisecond), 3*time.Second)
			log.Warn("wharf client: pull failed", "offset", offset, "err", err, "retry_in", errDelay)
			if !sleep(q.ctx, errDelay) {
				return
			}
			continue
		}
		errDelay = 0
		switch res.Status {
		case protocol.PullFound:
			if !g.deliver(q, res.Messages) {
				return
			}
		case protocol.PullOffsetIllegal:
			log.Warn("wharf client: offset out of range, skipping", "offset", offset, "next", res.NextBeginOffset,
				"min", res.MinOffset, "max", res.MaxOffset)
		case protocol.PullNoNewMsg:
			if pc.o.pullSuspend <= 0 && !sleep(q.ctx, 100*time.Millisecond) {
				return
			}
		}
		offset = res.NextBeginOffset
		q.tr.setNext(offset)
	}
}

// awaitStartOffset asks for q's start offset until it gets one, backing off
// between tries, and records it as committed when the broker had one; it is
// apart so that runQueue's pull loop starts from a settled offset. ok is
// false when q is stopped first.
func (g *groupConsumer) awaitStartOffset(q *groupQueue, log *slog.Logger) (offset int64, ok bool) {
	for delay := time.Duration(0); ; {
		off, committed, err := g.startOffset(q.ctx, q)
		if err == nil {
			q.commitMu.Lock()
			if committed {
				q.committed = off
			}
			q.commitMu.Unlock()
			return off, true
		}
		if q.ctx.Err() != nil {
			return 0, false
		}
		delay = min(max(2*delay, 100*time.Millisecond), 3*time.Second)
		log.Warn("wharf client: start offset", "err", err, "retry_in", delay)
		if !sleep(q.ctx, delay) {
			return 0, false
		}
	}
}

// deliver hands one pulled batch to the orderly or concurrent consumer,
// with retry topics restored first; it is apart so that runQueue reads as
// pull, deliver, advance. It returns false when q is stopped.
func (g *groupConsumer) deliver(q *groupQueue, found []protocol.MessageExt) bool {
	msgs := make([]*protocol.MessageExt, len(found))
	for i := range found {
		msgs[i] = &found[i]
		if q.retry {
			restoreRetryTopic(msgs[i])
		}
	}
	if g.o.orderly {
		return g.consumeOrderly(q, msgs)
	}
	return g.dispatch(q, msgs)
}

// restoreRetryTopic shows a retried message under its original topic, as
// RocketMQ does (the retry topic stays in the RETRY_TOPIC property's absence
// only if the broker did not set it).
func restoreRetryTopic(m *protocol.MessageExt) {
	if t := m.Property(protocol.PropertyRetryTopic); t != "" {
		m.Topic = t
	}
}

// subFor picks the subscription (handler) of a message of queue q: the
// queue's, or for the retry topic the one of the message's original topic.
func (g *groupConsumer) subFor(q *groupQueue, m *protocol.MessageExt) *subscription {
	if q.sub != nil {
		return q.sub
	}
	subs := g.pc.subs
	for _, s := range subs {
		if s.topic == m.Topic {
			return s
		}
	}
	return subs[0]
}

// call runs a handler, turning a panic into RetryLater.
func (g *groupConsumer) call(ctx context.Context, h Handler, msgs []*protocol.MessageExt) (res ConsumeResult) {
	defer func() {
		if r := recover(); r != nil {
			g.pc.o.logger.Error("wharf client: handler panicked", "group", g.pc.group, "panic", fmt.Sprint(r))
			res = ConsumeRetryLater
		}
	}()
	return h(ctx, msgs)
}

// giveBack sends messages back for a later delivery (delayLevel 0: the
// broker picks 3 + reconsumeTimes; -1: the dead-letter topic) and marks each
// done once the broker has stored it. A failed send-back is retried every
// WithRetryLaterDelay until it succeeds or the queue is released (then the
// message stays not done and is delivered again from the committed offset).
func (g *groupConsumer) giveBack(q *groupQueue, batch []*protocol.MessageExt, first uint64, delayLevel int32) {
	for i, m := range batch {
		for {
			err := g.sendBack(q.hctx, m, delayLevel)
			if err == nil {
				q.tr.done(first + uint64(i))
				break
			}
			if q.hctx.Err() != nil {
				return
			}
			g.pc.o.logger.Warn("wharf client: send back failed", "group", g.pc.group, "topic", q.ref.Topic,
				"queue", q.ref.QueueID, "offset", m.QueueOffset, "err", err)
			if !sleep(q.hctx, g.pc.o.retryLater) {
				return
			}
		}
	}
}

func (g *groupConsumer) sendBack(ctx context.Context, m *protocol.MessageExt, delayLevel int32) error {
	req := &protocol.ConsumerSendMsgBackRequest{
		Group:             g.pc.group,
		CommitLogOffset:   m.CommitLogOffset,
		DelayLevel:        delayLevel,
		MaxReconsumeTimes: int32(g.o.maxReconsume),
	}
	_, err := g.pc.r.master.do(ctx, req, nil, g.pc.o.timeout)
	return err
}

// consumeOrderly consumes messages one at a time, in order; a RetryLater
// blocks the queue. It reports false if the queue is being released.
func (g *groupConsumer) consumeOrderly(q *groupQueue, msgs []*protocol.MessageExt) bool {
	for _, m := range msgs {
		e := q.tr.add(m.QueueOffset)
		h := g.subFor(q, m).handler
		for attempt := 0; ; attempt++ {
			if q.ctx.Err() != nil {
				return false
			}
			select {
			case g.sem <- struct{}{}:
			case <-q.ctx.Done():
				return false
			}
			q.handlers.Add(1)
			res := g.call(q.hctx, h, []*protocol.MessageExt{m})
			<-g.sem
			q.handlers.Done()
			if res == ConsumeSuccess {
				q.tr.done(e)
				break
			}
			if attempt >= g.o.maxReconsume {
				if g.o.model == Broadcasting {
					g.pc.o.logger.Warn("wharf client: broadcast message failed too often; dropped", "group", g.pc.group,
						"topic", q.ref.Topic, "queue", q.ref.QueueID, "offset", m.QueueOffset)
					q.tr.done(e)
					break
				}
				g.pc.o.logger.Warn("wharf client: message failed too often; sending it to the dead-letter topic", "group", g.pc.group,
					"topic", q.ref.Topic, "queue", q.ref.QueueID, "offset", m.QueueOffset)
				g.giveBack(q, []*protocol.MessageExt{m}, e, -1)
				if q.hctx.Err() != nil || q.ctx.Err() != nil {
					return false
				}
				break
			}
			m.ReconsumeTimes++
			if !sleep(q.ctx, g.pc.o.retryLater) {
				return false
			}
		}
	}
	return true
}

// ---- Close ----

// close releases every queue (stop pulls, wait for handlers, commit), then
// leaves the group and closes the connections.
func (g *groupConsumer) close() error {
	// The member core first: from Close on it acts on no answer, so a
	// heartbeat answered meanwhile starts nothing.
	g.mu.Lock()
	r := g.m.Close(time.Now())
	var qs []*groupQueue
	for _, ref := range r.Stop {
		if q := g.queues[ref]; q != nil && !q.releasing {
			qs = append(qs, q)
		}
	}
	g.carryOut(r)
	g.mu.Unlock()
	g.hbCancel()
	<-g.timerDone
	g.hbs.Wait()
	g.wg.Wait() // every release and queue worker
	g.stopWorkers()
	g.runCancel()
	<-g.commitEnd

	var errs []error
	for _, q := range qs {
		if q.commitErr != nil {
			errs = append(errs, q.commitErr)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.pc.o.timeout)
	defer cancel()
	if _, err := g.pc.r.master.do(ctx, &protocol.UnregisterClientRequest{ClientID: g.pc.o.clientID, Group: g.pc.group}, nil, g.pc.o.timeout); err != nil {
		g.pc.o.logger.Warn("wharf client: unregister", "group", g.pc.group, "err", err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("wharf client: consumer %s: final offset commit: %w", g.pc.group, errors.Join(errs...))
	}
	return nil
}

// offsets returns the owned queues' next offsets to commit.
func (g *groupConsumer) offsets() map[string]map[int32]int64 {
	out := map[string]map[int32]int64{}
	g.mu.Lock()
	defer g.mu.Unlock()
	for ref, q := range g.queues {
		off, ok := q.tr.consumed()
		if !ok {
			continue
		}
		if out[ref.Topic] == nil {
			out[ref.Topic] = map[int32]int64{}
		}
		out[ref.Topic][ref.QueueID] = off
	}
	return out
}

// assignment returns the queues owned now (consuming or being released).
func (g *groupConsumer) assignment() []protocol.QueueRef {
	g.mu.Lock()
	out := make([]protocol.QueueRef, 0, len(g.queues))
	for ref := range g.queues {
		out = append(out, ref)
	}
	g.mu.Unlock()
	sortRefs(out)
	return out
}

// ---- PushConsumer entry points ----

// startGroup checks that the subscribed topics exist (ctx bounds this) and
// starts the heartbeat and commit loops; queues come with the assignments.
func (pc *PushConsumer) startGroup(ctx context.Context, subs []*subscription) error {
	for _, s := range subs {
		err := pc.r.do(ctx, func(c *conn) error {
			_, err := c.topicConfig(ctx, s.topic)
			return err
		})
		if err != nil {
			return fmt.Errorf("wharf client: consumer %s: %w", pc.group, err)
		}
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.state != stateNew {
		return ErrClosed
	}
	pc.state = stateStarted
	pc.g.start()
	return nil
}

// Assignment returns the queues the consumer owns now: those it consumes
// and those it is giving up. Without group mode (WithStaticAssignment) it is
// every queue of the subscribed topics. On name-server routes it is the
// union over the broker groups, in which one QueueRef may stand for a
// queue of each of several groups (see BrokerGroups).
func (pc *PushConsumer) Assignment() []protocol.QueueRef {
	if pc.cl != nil {
		var out []protocol.QueueRef
		for _, part := range pc.cl.byGroup() {
			out = append(out, part.Assignment()...)
		}
		return out
	}
	if pc.g != nil {
		return pc.g.assignment()
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	out := make([]protocol.QueueRef, 0, len(pc.queues))
	for _, q := range pc.queues {
		out = append(out, protocol.QueueRef{Topic: q.sub.topic, QueueID: q.id})
	}
	return out
}

// ClientID returns the id the consumer heartbeats with.
func (pc *PushConsumer) ClientID() string { return pc.o.clientID }

// BrokerGroups returns, on name-server routes, the consumer's member on
// each broker group it consumes (by brokerName), for that group's
// Assignment, Offsets and Generation; nil otherwise. The members belong to
// the consumer: Close closes them.
func (pc *PushConsumer) BrokerGroups() map[string]*PushConsumer {
	if pc.cl == nil {
		return nil
	}
	return pc.cl.byGroup()
}

// startCluster starts the members per broker group (push_cluster.go).
func (pc *PushConsumer) startCluster(ctx context.Context, subs []*subscription) error {
	pc.mu.Lock()
	if pc.state != stateNew {
		pc.mu.Unlock()
		return ErrClosed
	}
	pc.state = stateStarted
	pc.mu.Unlock()
	return pc.cl.start(ctx, subs)
}

// Generation returns the generation of the group's last assignment (0
// before the first, or without group mode, or on name-server routes: see
// BrokerGroups).
func (pc *PushConsumer) Generation() int64 {
	if pc.g == nil {
		return 0
	}
	pc.g.mu.Lock()
	defer pc.g.mu.Unlock()
	return pc.g.m.Generation()
}
