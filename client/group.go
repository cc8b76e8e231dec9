package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// Group mode of the PushConsumer (the default): the consumer joins its
// group at the broker's RebalanceCoordinator with a heartbeat, consumes the
// queues the heartbeat response assigns to it (its topics' queues and the
// group's retry topic), and hands a queue over promptly when it is revoked:
// stop pulling, let the handler calls in flight finish (bounded), commit the
// queue's offset, then heartbeat at once without it, which lets the broker
// give it to its next owner.

// maxQueueInflight bounds the messages of one queue that are pulled but not
// yet done; the queue's pulls wait beyond it.
const maxQueueInflight = 512

type groupConsumer struct {
	pc          *PushConsumer
	o           *groupOptions
	offsetGroup string // the group offsets are kept under ("<group>#<clientId>" when broadcasting)

	sem  chan struct{} // handler calls in flight (consume concurrency)
	kick chan struct{} // heartbeat now (cap 1)

	runCtx    context.Context // ends at Close
	runCancel context.CancelFunc
	hbCtx     context.Context // ends when the heartbeat loop must stop
	hbCancel  context.CancelFunc
	hbDone    chan struct{}
	leaseDone chan struct{}
	commitEnd chan struct{}  // closed when the commit loop ended
	wg        sync.WaitGroup // queue workers and releases

	mu         sync.Mutex
	queues     map[protocol.QueueRef]*groupQueue // owned: consuming or being released
	generation int64
	interval   time.Duration
	lastOK     time.Time // last successful heartbeat
	closing    bool
	unknown    map[protocol.QueueRef]bool // assigned queues of topics we do not subscribe to (logged once)
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
		interval:    defaultHeartbeatInterval,
		hbDone:      make(chan struct{}),
		leaseDone:   make(chan struct{}),
		commitEnd:   make(chan struct{}),
	}
	if g.o.model == Broadcasting {
		g.offsetGroup = pc.group + "#" + pc.o.clientID
	}
	g.sem = make(chan struct{}, g.o.concurrency)
	return g
}

// onBrokerRequest gets the broker's own requests from the connection reader.
func (g *groupConsumer) onBrokerRequest(f *protocol.Frame) {
	if f.Code == protocol.CodeNotifyConsumerIDsChanged {
		g.pc.o.logger.Debug("wharf client: group changed, heartbeating now", "group", g.pc.group)
		g.heartbeatNow()
	}
}

func (g *groupConsumer) heartbeatNow() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

func (g *groupConsumer) start() {
	g.runCtx, g.runCancel = context.WithCancel(context.Background())
	g.hbCtx, g.hbCancel = context.WithCancel(g.runCtx)
	go g.heartbeatLoop()
	go g.commitLoop()
	go g.leaseLoop()
}

// ---- heartbeats and assignments ----

func (g *groupConsumer) heartbeatRequest() *protocol.HeartbeatRequest {
	pc := g.pc
	info := protocol.ConsumerGroupInfo{
		Group:            pc.group,
		ConsumeFromWhere: pc.o.consumeFrom.String(),
		MessageModel:     g.o.model.String(),
		ConsumeOrderly:   g.o.orderly,
		AllocateStrategy: string(g.o.strategy),
	}
	pc.mu.Lock()
	for _, s := range pc.subs {
		info.Subscriptions = append(info.Subscriptions, protocol.Subscription{Topic: s.topic, Expression: s.expr})
	}
	pc.mu.Unlock()
	g.mu.Lock()
	for ref := range g.queues {
		info.Owned = append(info.Owned, ref)
	}
	// Echo the last generation applied: with Owned, it tells the broker
	// which revocations this member has completed.
	info.Generation = g.generation
	g.mu.Unlock()
	sortRefs(info.Owned)
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

func (g *groupConsumer) heartbeatLoop() {
	defer close(g.hbDone)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-g.hbCtx.Done():
			return
		case <-t.C:
		case <-g.kick:
		}
		g.heartbeatOnce()
		g.mu.Lock()
		d := g.interval
		g.mu.Unlock()
		t.Reset(d)
	}
}

// leaseIntervals: a member consumes its queues only while its last
// acknowledged heartbeat (counted from when it was sent) is at most this
// many heartbeat intervals old. The broker waits as long before it gives the
// queues of a silent member (or, after a restart, any unreported queue) to
// another.
const leaseIntervals = 2

// leaseLoop releases every queue when the lease runs out (heartbeats fail
// or hang), so that the member stops consuming before the broker gives its
// queues to others.
func (g *groupConsumer) leaseLoop() {
	defer close(g.leaseDone)
	t := time.NewTicker(25 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-g.hbCtx.Done():
			return
		case <-t.C:
		}
		g.mu.Lock()
		expired := !g.lastOK.IsZero() && time.Since(g.lastOK) > leaseIntervals*g.interval
		busy := false
		for _, q := range g.queues {
			if !q.releasing {
				busy = true
			}
		}
		g.mu.Unlock()
		if expired && busy {
			g.pc.o.logger.Warn("wharf client: no acknowledged heartbeat for 2 intervals; releasing every queue", "group", g.pc.group)
			g.apply(nil, true)
		}
	}
}

func (g *groupConsumer) heartbeatOnce() {
	pc := g.pc
	sent := time.Now()
	var resp protocol.HeartbeatResponse
	// To the master; while it is unreachable, to a slave of WithSlaveAddrs
	// (whose coordinator then assigns the queues read from the slaves).
	req := g.heartbeatRequest()
	err := pc.r.do(g.hbCtx, func(c *conn) error {
		resp = protocol.HeartbeatResponse{}
		_, err := c.do(g.hbCtx, req, &resp, pc.o.timeout)
		return err
	})
	if err != nil {
		if g.hbCtx.Err() != nil {
			return
		}
		pc.o.logger.Warn("wharf client: heartbeat failed", "group", pc.group, "err", err)
		if pc.o.pullErr != nil {
			// Without queues there are no pulls to fail: report the
			// heartbeat, so that a broker gone away is noticed.
			pc.o.pullErr("", -1, err)
		}
		return // leaseLoop stops the queues if this goes on
	}
	g.mu.Lock()
	g.lastOK = sent
	if resp.HeartbeatIntervalMillis > 0 {
		g.interval = time.Duration(resp.HeartbeatIntervalMillis) * time.Millisecond
	}
	// One heartbeat is in flight at a time, so responses come in order.
	var queues []protocol.QueueRef
	for _, a := range resp.Assignments {
		if a.Group == pc.group {
			g.generation = a.Generation
			queues = a.Queues
		}
	}
	g.mu.Unlock()
	g.apply(queues, false)
}

// apply makes the owned queues follow the assignment: queues no longer
// assigned are released (in the background; a heartbeat follows each
// release), newly assigned ones start.
func (g *groupConsumer) apply(target []protocol.QueueRef, lost bool) {
	want := make(map[protocol.QueueRef]bool, len(target))
	for _, r := range target {
		want[r] = true
	}
	var assigned, revoked []protocol.QueueRef
	g.mu.Lock()
	if g.closing {
		g.mu.Unlock()
		return
	}
	for ref, q := range g.queues {
		if !want[ref] && !q.releasing {
			q.releasing = true
			revoked = append(revoked, ref)
			g.wg.Add(1)
			go g.release(q, !lost)
		}
	}
	for _, ref := range target {
		if g.queues[ref] != nil {
			continue // owned already, or still being released (it comes back after)
		}
		q := g.newQueue(ref)
		if q == nil {
			continue
		}
		g.queues[ref] = q
		assigned = append(assigned, ref)
		g.wg.Add(1)
		go g.runQueue(q)
	}
	g.mu.Unlock()
	if len(assigned) == 0 && len(revoked) == 0 {
		return
	}
	sortRefs(assigned)
	sortRefs(revoked)
	g.pc.o.logger.Info("wharf client: assignment changed", "group", g.pc.group, "assigned", assigned, "revoked", revoked)
	if f := g.o.listener; f != nil {
		f(assigned, revoked)
	}
}

// newQueue builds the state of a newly assigned queue; nil for a topic the
// consumer does not subscribe to. Called with g.mu held.
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
		if q.sub == nil {
			if !g.unknown[ref] {
				g.unknown[ref] = true
				g.pc.o.logger.Warn("wharf client: assigned a queue of a topic not subscribed; ignoring it", "group", g.pc.group, "topic", ref.Topic, "queue", ref.QueueID)
			}
			return nil
		}
	}
	q.ctx, q.cancel = context.WithCancel(g.runCtx)
	q.hctx, q.hcancel = context.WithCancel(context.Background())
	return q
}

// release gives a queue up: stop its pulls, wait (bounded) for its handler
// calls, commit its offset, forget it, and heartbeat so that the broker
// learns it is free.
func (g *groupConsumer) release(q *groupQueue, notify bool) {
	defer g.wg.Done()
	q.cancel()
	g.waitHandlers(q)
	ctx, cancel := context.WithTimeout(context.Background(), g.pc.o.timeout)
	if err := g.commitQueue(ctx, q, true); err != nil {
		q.commitErr = fmt.Errorf("%s[%d]: %w", q.ref.Topic, q.ref.QueueID, err)
		g.pc.o.logger.Warn("wharf client: commit at release", "group", g.pc.group, "topic", q.ref.Topic, "queue", q.ref.QueueID, "err", err)
	}
	cancel()
	g.mu.Lock()
	if g.queues[q.ref] == q {
		delete(g.queues, q.ref)
	}
	g.mu.Unlock()
	g.pc.o.logger.Debug("wharf client: released", "group", g.pc.group, "topic", q.ref.Topic, "queue", q.ref.QueueID)
	if notify {
		g.heartbeatNow()
	}
}

// waitHandlers waits for the queue's pull loop and handler calls: up to the
// release timeout, then (their context cancelled) up to as long again.
func (g *groupConsumer) waitHandlers(q *groupQueue) {
	all := make(chan struct{})
	go func() {
		<-q.workerDone
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
	var offset int64
	for delay := time.Duration(0); ; {
		off, committed, err := g.startOffset(q.ctx, q)
		if err == nil {
			offset = off
			q.commitMu.Lock()
			if committed {
				q.committed = off
			}
			q.commitMu.Unlock()
			break
		}
		if q.ctx.Err() != nil {
			return
		}
		delay = min(max(2*delay, 100*time.Millisecond), 3*time.Second)
		log.Warn("wharf client: start offset", "err", err, "retry_in", delay)
		if !sleep(q.ctx, delay) {
			return
		}
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
			msgs := make([]*protocol.MessageExt, len(res.Messages))
			for i := range res.Messages {
				msgs[i] = &res.Messages[i]
				if q.retry {
					restoreRetryTopic(msgs[i])
				}
			}
			if g.o.orderly {
				if !g.consumeOrderly(q, msgs) {
					return
				}
			} else if !g.dispatch(q, msgs) {
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

// dispatch hands the messages of one pull to handler calls (concurrent
// mode): batches of WithConsumeBatchSize of the same handler, each tracked
// until done. It reports false if the queue is being released.
func (g *groupConsumer) dispatch(q *groupQueue, msgs []*protocol.MessageExt) bool {
	for i := 0; i < len(msgs); {
		sub := g.subFor(q, msgs[i])
		h := sub.handler
		j := i + 1
		for j < len(msgs) && j-i < g.pc.o.consumeBatch && g.subFor(q, msgs[j]) == sub {
			j++
		}
		batch := msgs[i:j]
		i = j
		entries := make([]*trackEntry, len(batch))
		for k, m := range batch {
			entries[k] = q.tr.add(m.QueueOffset)
		}
		select {
		case g.sem <- struct{}{}:
		case <-q.ctx.Done():
			return false // not done: redelivered from the committed offset
		}
		q.handlers.Add(1)
		go func() {
			defer q.handlers.Done()
			defer func() { <-g.sem }()
			g.consumeConcurrently(q, h, batch, entries)
		}()
	}
	return true
}

// batchCall is one handler call racing its ack timeout.
type batchCall struct {
	mu       sync.Mutex
	finished bool
	timedOut bool
}

func (g *groupConsumer) consumeConcurrently(q *groupQueue, h Handler, batch []*protocol.MessageExt, entries []*trackEntry) {
	for attempt := 0; ; attempt++ {
		if q.hctx.Err() != nil {
			return
		}
		ctx, cancel := context.WithCancel(q.hctx)
		bc := &batchCall{}
		var timer *time.Timer
		if g.o.model == Clustering {
			timer = time.AfterFunc(g.o.ackTimeout, func() {
				bc.mu.Lock()
				if bc.finished {
					bc.mu.Unlock()
					return
				}
				bc.timedOut = true
				q.handlers.Add(1) // the call is still running: the count is not zero
				bc.mu.Unlock()
				defer q.handlers.Done()
				cancel()
				g.pc.o.logger.Info("wharf client: ack timeout; giving the messages back", "group", g.pc.group,
					"topic", q.ref.Topic, "queue", q.ref.QueueID, "offset", batch[0].QueueOffset, "n", len(batch))
				g.giveBack(q, batch, entries, 0)
			})
		}
		res := g.call(ctx, h, batch)
		bc.mu.Lock()
		bc.finished = true
		timedOut := bc.timedOut
		bc.mu.Unlock()
		if timer != nil {
			timer.Stop()
		}
		cancel()
		if timedOut {
			return // given back by the timer
		}
		if res == ConsumeSuccess {
			for _, e := range entries {
				q.tr.done(e)
			}
			return
		}
		if g.o.model == Broadcasting {
			// No retry topic for a broadcast: redeliver locally, then drop.
			if attempt >= g.o.maxReconsume {
				g.pc.o.logger.Warn("wharf client: broadcast message failed too often; dropped", "group", g.pc.group,
					"topic", q.ref.Topic, "queue", q.ref.QueueID, "offset", batch[0].QueueOffset)
				for _, e := range entries {
					q.tr.done(e)
				}
				return
			}
			for _, m := range batch {
				m.ReconsumeTimes++
			}
			if !sleep(q.hctx, g.pc.o.retryLater) {
				return
			}
			continue
		}
		g.giveBack(q, batch, entries, 0)
		return
	}
}

// giveBack sends messages back for a later delivery (delayLevel 0: the
// broker picks 3 + reconsumeTimes; -1: the dead-letter topic) and marks each
// done once the broker has stored it. A failed send-back is retried every
// WithRetryLaterDelay until it succeeds or the queue is released (then the
// message stays not done and is delivered again from the committed offset).
func (g *groupConsumer) giveBack(q *groupQueue, batch []*protocol.MessageExt, entries []*trackEntry, delayLevel int32) {
	for i, m := range batch {
		for {
			err := g.sendBack(q.hctx, m, delayLevel)
			if err == nil {
				q.tr.done(entries[i])
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
				g.giveBack(q, []*protocol.MessageExt{m}, []*trackEntry{e}, -1)
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
	g.mu.Lock()
	g.closing = true
	g.mu.Unlock()
	g.hbCancel()
	<-g.hbDone
	<-g.leaseDone

	g.mu.Lock()
	var qs []*groupQueue
	for _, q := range g.queues {
		if !q.releasing {
			q.releasing = true
			qs = append(qs, q)
		}
	}
	g.mu.Unlock()
	for _, q := range qs {
		g.wg.Add(1)
		go g.release(q, false)
	}
	g.wg.Wait() // every release and queue worker
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

// ---- per-queue progress ----

// tracker follows a queue's messages from pull to done. The queue's
// consumed offset (what a commit stores) is the lowest offset pulled but
// not done, or the next offset to pull if every pulled message is done.
type tracker struct {
	mu      sync.Mutex
	ok      bool // init was called
	next    int64
	entries []*trackEntry // ascending offsets; done ones at the front are trimmed
	space   chan struct{} // signalled when entries are trimmed
}

type trackEntry struct {
	off  int64
	done bool
}

func (t *tracker) init(off int64) {
	t.mu.Lock()
	t.ok, t.next = true, off
	t.space = make(chan struct{}, 1)
	t.mu.Unlock()
}

func (t *tracker) add(off int64) *trackEntry {
	e := &trackEntry{off: off}
	t.mu.Lock()
	t.entries = append(t.entries, e)
	t.mu.Unlock()
	return e
}

func (t *tracker) done(e *trackEntry) {
	t.mu.Lock()
	e.done = true
	n := 0
	for n < len(t.entries) && t.entries[n].done {
		n++
	}
	if n > 0 {
		clear(t.entries[:n])
		t.entries = t.entries[n:]
		select {
		case t.space <- struct{}{}:
		default:
		}
	}
	t.mu.Unlock()
}

func (t *tracker) setNext(off int64) {
	t.mu.Lock()
	if off > t.next {
		t.next = off
	}
	t.mu.Unlock()
}

// consumed returns the offset to commit, and false before init.
func (t *tracker) consumed() (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.ok {
		return 0, false
	}
	if len(t.entries) > 0 {
		return t.entries[0].off, true
	}
	return t.next, true
}

// waitSpace waits until fewer than limit messages are in flight.
func (t *tracker) waitSpace(ctx context.Context, limit int) bool {
	for {
		t.mu.Lock()
		n := len(t.entries)
		t.mu.Unlock()
		if n < limit {
			return true
		}
		select {
		case <-t.space:
		case <-ctx.Done():
			return false
		}
	}
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
// every queue of the subscribed topics.
func (pc *PushConsumer) Assignment() []protocol.QueueRef {
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

// Generation returns the generation of the group's last assignment (0
// before the first, or without group mode).
func (pc *PushConsumer) Generation() int64 {
	if pc.g == nil {
		return 0
	}
	pc.g.mu.Lock()
	defer pc.g.mu.Unlock()
	return pc.g.generation
}
