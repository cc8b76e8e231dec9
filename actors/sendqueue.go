package actors

import "sync"

// sendQueue carries bursts of sends from the transport's goroutines (the
// event loops, in Deliver) to the writer, which appends every burst queued
// when it runs as one batch: one write into the log, one hand-over to the
// durability actor and one pass of answers for all of them.
//
// Why not one mailbox message per burst: with many connections of one
// sync send each (SYNC_FLUSH with 64 publishers), every burst is one
// message, and the writer made a pwrite, a durability message and a
// mailbox wake-up for each: 47 k pwrites a second for 47 k messages, the
// pwrites a quarter of the broker's CPU (docs/BENCHMARKS.md, issue 17).
// A mailbox cannot be drained in one go, so the bursts wait here and the
// mailbox carries one sendsQueued per run of the writer.
//
// The lock guards only the queue: push runs on the transport's
// goroutines, take on the writer's.
type sendQueue struct {
	mu     sync.Mutex
	q      []*writeBatch
	kicked bool // a sendsQueued is on its way to the writer
}

// sendsQueued tells the writer that bursts wait in its sendQueue.
type sendsQueued struct{}

// push queues wb and reports whether the writer must be told (a
// sendsQueued sent): only when none is on its way already.
func (q *sendQueue) push(wb *writeBatch) (kick bool) {
	q.mu.Lock()
	q.q = append(q.q, wb)
	kick = !q.kicked
	q.kicked = true
	q.mu.Unlock()
	return kick
}

// take moves every queued burst into into (reused by the caller) and
// returns it. A push after take kicks the writer again.
func (q *sendQueue) take(into []*writeBatch) []*writeBatch {
	q.mu.Lock()
	into = append(into, q.q...)
	clear(q.q)
	q.q = q.q[:0]
	q.kicked = false
	q.mu.Unlock()
	return into
}

// len is how many bursts wait (for the mailbox-depth metric).
func (q *sendQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.q)
}
