package actors

import (
	"runtime"
	"sync"
)

// ioLane runs background disk jobs (the ASYNC_FLUSH msync of the
// CommitLog, the ConsumeQueue and index flushes, checkpoint writes) one at
// a time, in the order they were handed in, each through Env.RunIO.
//
// Why: a goroutine blocked in msync or fsync keeps its P (GOMAXPROCS) for
// the whole call. On two cores the CommitLog's interval msync and a
// checkpoint's ConsumeQueue msyncs, started in the same instant every
// 500 ms, held both Ps for 5-7 ms; every runnable goroutine (the actors'
// mailbox runs, the connections' event loop) waited for them, which was
// e2e-10k's p999 (docs/BENCHMARKS.md, "Issue 17: the end-to-end tail"). One
// lane leaves the other P to the actors. Jobs an answer waits for
// (SYNC_FLUSH's fsync, a slave's link) do not queue here.
//
// The lock guards only the queue: submit runs on actors, the end of a job
// on the RunIO goroutine that ran it.
type ioLane struct {
	run  func(func()) // Env.RunIO
	mu   sync.Mutex
	busy bool
	q    []func()
}

func newIOLane(run func(func())) *ioLane { return &ioLane{run: run} }

// submit runs job after every job submitted before it has finished.
func (l *ioLane) submit(job func()) {
	l.mu.Lock()
	if l.busy {
		l.q = append(l.q, job)
		l.mu.Unlock()
		return
	}
	l.busy = true
	l.mu.Unlock()
	l.run(func() { l.finish(job) })
}

// finish runs job, then hands the next queued one to RunIO (a RunIO per
// job, so the simulator's disk model times each).
//
// It yields first: RunIO's goroutine was started by an actor's mailbox
// run, so it is next on that P, ahead of the mailbox runs already waiting;
// a chain of chunked flushes handed its P from actor to job and back and
// kept those runs waiting 5-9 ms while the other P sat in the event loop's
// epoll_wait.
func (l *ioLane) finish(job func()) {
	runtime.Gosched()
	job()
	l.mu.Lock()
	if len(l.q) == 0 {
		l.busy = false
		l.mu.Unlock()
		return
	}
	next := l.q[0]
	l.q[0] = nil
	l.q = l.q[1:]
	l.mu.Unlock()
	l.run(func() { l.finish(next) })
}
