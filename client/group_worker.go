package client

import (
	"context"
	"sync"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// Concurrent mode's handler calls run on WithConsumeConcurrency long-lived
// workers per consumer, fed by the queues' pull loops through one channel:
// a message costs no goroutine, no timer and (while a worker keeps serving
// the same queue) no context of its own. The workers bound the calls in
// flight, as a semaphore did. The channel holds up to jobsBuffer batches
// waiting for a worker, so that a pull loop hands a pull over without a
// goroutine switch per batch; a waiting batch is not in flight: a queue's
// release does not wait for it, and a worker drops it once the release has
// started (its messages, not done, are delivered again from the committed
// offset, as those of a pull not yet dispatched). Each worker has one ack
// timer (see call).

// jobsBuffer is the capacity of the workers' channel: 64 batches took the
// per-message CPU of BenchmarkPushConsume at concurrency 1 from about 350
// to 220-250 ns.
const jobsBuffer = 64

// consumeJob is one handler call's batch: messages of one queue, in queue
// order, all of one subscription.
type consumeJob struct {
	q     *groupQueue
	h     Handler
	batch []*protocol.MessageExt
	first uint64 // the tracker's sequence number of batch[0]
}

// consumeWorker runs handler calls one at a time.
type consumeWorker struct {
	g     *groupConsumer
	timer *time.Timer // the ack timeout of the call in flight (Clustering only)

	// The context of the calls: a child of the queue's handler context,
	// kept from call to call while the worker serves the same queue and it
	// is not cancelled (an ack timeout cancels it).
	ctxQ   *groupQueue
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex // the call in flight, shared with the timer's callback
	cur      consumeJob
	running  bool
	timedOut bool
	deadline time.Time          // of the call in flight
	armed    bool               // the timer is pending (or its callback is running)
	curStop  context.CancelFunc // cancels the call in flight
}

// startWorkers starts the concurrent mode's workers (none in orderly mode,
// whose calls run on the queues' pull loops).
func (g *groupConsumer) startWorkers() {
	g.jobs = make(chan consumeJob, jobsBuffer)
	if g.o.orderly {
		return
	}
	for range g.o.concurrency {
		w := &consumeWorker{g: g}
		if g.o.model == Clustering {
			w.timer = time.AfterFunc(time.Hour, w.onAckTimeout)
			w.timer.Stop()
		}
		g.workers.Add(1)
		go w.run()
	}
}

// stopWorkers ends the workers once no pull loop dispatches any more, and
// waits for them, so that Close returns after the consumer's goroutines
// ended: idle ones end at once; one still in a handler call the releases
// gave up on (WithReleaseTimeout) is waited for up to the release timeout
// once more, then left to end when its call returns.
func (g *groupConsumer) stopWorkers() {
	close(g.jobs)
	ended := make(chan struct{})
	go func() {
		g.workers.Wait()
		close(ended)
	}()
	t := time.NewTimer(g.o.releaseTimeout)
	defer t.Stop()
	select {
	case <-ended:
	case <-t.C:
		g.pc.o.logger.Warn("wharf client: a handler call still running at Close; not waiting for it", "group", g.pc.group)
	}
}

// startHandler counts a handler call of q in flight, unless q's release has
// started. The gate orders it with the release's barrier (waitHandlers):
// a call counted before the barrier is waited for, and one after it sees
// q.ctx cancelled, so that no Add races the release's Wait.
func (q *groupQueue) startHandler() bool {
	q.gate.Lock()
	defer q.gate.Unlock()
	if q.ctx.Err() != nil {
		return false
	}
	q.handlers.Add(1)
	return true
}

func (w *consumeWorker) run() {
	defer w.g.workers.Done()
	defer func() {
		if w.cancel != nil {
			w.cancel()
		}
		w.ctxQ = nil
		if w.timer != nil {
			w.timer.Stop()
		}
	}()
	for job := range w.g.jobs {
		if job.q.startHandler() {
			w.consume(job)
			job.q.handlers.Done()
		}
	}
}

// dispatch hands the messages of one pull to handler calls (concurrent
// mode): batches of WithConsumeBatchSize of the same handler, each tracked
// until done. It reports false if the queue is being released.
func (g *groupConsumer) dispatch(q *groupQueue, msgs []*protocol.MessageExt) bool {
	first := q.tr.addAll(msgs)
	for i := 0; i < len(msgs); {
		sub := g.subFor(q, msgs[i])
		j := i + 1
		for j < len(msgs) && j-i < g.pc.o.consumeBatch && g.subFor(q, msgs[j]) == sub {
			j++
		}
		job := consumeJob{q: q, h: sub.handler, batch: msgs[i:j], first: first + uint64(i)}
		i = j
		select {
		case g.jobs <- job:
		case <-q.ctx.Done():
			return false // not done: redelivered from the committed offset
		}
	}
	return true
}

// context returns the context for a call on q's messages.
func (w *consumeWorker) context(q *groupQueue) (context.Context, context.CancelFunc) {
	if w.ctxQ != q || w.ctx.Err() != nil {
		if w.cancel != nil {
			w.cancel()
		}
		w.ctx, w.cancel = context.WithCancel(q.hctx)
		w.ctxQ = q
	}
	return w.ctx, w.cancel
}

// consume runs a batch's handler call (again, for a broadcast retried
// locally) and settles its messages: done, or given back to the broker.
func (w *consumeWorker) consume(job consumeJob) {
	g, q := w.g, job.q
	for attempt := 0; ; attempt++ {
		if q.hctx.Err() != nil {
			return
		}
		res, timedOut := w.call(job)
		if timedOut {
			return // given back by the timer
		}
		if res == ConsumeSuccess {
			g.doneAll(job)
			return
		}
		if g.o.model == Broadcasting {
			// No retry topic for a broadcast: redeliver locally, then drop.
			if attempt >= g.o.maxReconsume {
				g.pc.o.logger.Warn("wharf client: broadcast message failed too often; dropped", "group", g.pc.group,
					"topic", q.ref.Topic, "queue", q.ref.QueueID, "offset", job.batch[0].QueueOffset)
				g.doneAll(job)
				return
			}
			for _, m := range job.batch {
				m.ReconsumeTimes++
			}
			if !sleep(q.hctx, g.pc.o.retryLater) {
				return
			}
			continue
		}
		g.giveBack(q, job.batch, job.first, 0)
		return
	}
}

func (g *groupConsumer) doneAll(job consumeJob) {
	for i := range job.batch {
		job.q.tr.done(job.first + uint64(i))
	}
}

// call runs one handler call racing the ack timeout (Clustering). The
// timer is not re-armed per call: a call only moves the deadline, and the
// timer, armed while none is pending, re-arms itself at its firing for a
// deadline not yet reached (at most once per ack timeout and worker).
func (w *consumeWorker) call(job consumeJob) (res ConsumeResult, timedOut bool) {
	ctx, cancel := w.context(job.q)
	w.mu.Lock()
	w.cur, w.running, w.timedOut, w.curStop = job, true, false, cancel
	if w.timer != nil {
		w.deadline = time.Now().Add(w.g.o.ackTimeout)
		if !w.armed {
			w.armed = true
			w.timer.Reset(w.g.o.ackTimeout)
		}
	}
	w.mu.Unlock()
	res = w.g.call(ctx, job.h, job.batch)
	w.mu.Lock()
	timedOut = w.timedOut
	w.cur, w.running, w.curStop = consumeJob{}, false, nil
	w.mu.Unlock()
	return res, timedOut
}

// onAckTimeout is the ack timer's callback. If the call in flight outlived
// the ack timeout, its context is cancelled and its messages are given back
// (its result will be ignored); if its deadline is still ahead (the timer
// was armed for an earlier call), the timer is re-armed for it.
func (w *consumeWorker) onAckTimeout() {
	w.mu.Lock()
	if !w.running || w.timedOut {
		w.armed = false
		w.mu.Unlock()
		return
	}
	if left := time.Until(w.deadline); left > 0 {
		w.timer.Reset(left)
		w.mu.Unlock()
		return
	}
	w.timedOut, w.armed = true, false
	job, stop := w.cur, w.curStop
	job.q.handlers.Add(1) // the call is still running: the count is not zero
	w.mu.Unlock()
	defer job.q.handlers.Done()
	stop()
	g, q := w.g, job.q
	g.pc.o.logger.Info("wharf client: ack timeout; giving the messages back", "group", g.pc.group,
		"topic", q.ref.Topic, "queue", q.ref.QueueID, "offset", job.batch[0].QueueOffset, "n", len(job.batch))
	g.giveBack(q, job.batch, job.first, 0)
}
