package vtime

import (
	"container/heap"
	"time"
)

// None is the owner type of a Loop whose work is never dropped.
type None struct{}

// Options are a Loop's policies; the zero value is FIFO with every owner
// alive.
type Options[O any] struct {
	// Pick chooses which of n ready tasks runs next (an index in [0, n));
	// nil runs them in the order they were scheduled.
	Pick func(n int) int
	// Alive reports whether work of own may still run; nil: always.
	Alive func(own O) bool
}

type task[O any] struct {
	own O
	fn  func()
}

type timer[O any] struct {
	at       time.Time
	seq      uint64
	own      O
	fn       func()
	canceled bool
	index    int
}

type timerHeap[O any] []*timer[O]

func (h timerHeap[O]) Len() int { return len(h) }
func (h timerHeap[O]) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap[O]) Swap(i, j int) { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }
func (h *timerHeap[O]) Push(x any) {
	t := x.(*timer[O])
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap[O]) Pop() any { old := *h; t := old[len(old)-1]; *h = old[:len(old)-1]; return t }

// Loop is one virtual-time runtime.
type Loop[O any] struct {
	opts   Options[O]
	now    time.Time
	ready  []task[O]
	timers timerHeap[O]
	seq    uint64
	steps  int64
}

// New makes a Loop whose clock starts at start.
func New[O any](start time.Time, opts Options[O]) *Loop[O] {
	return &Loop[O]{opts: opts, now: start}
}

// NewFIFO makes a Loop that runs ready work in order and never drops any.
func NewFIFO(start time.Time) *Loop[None] { return New(start, Options[None]{}) }

// Now is the virtual time.
func (l *Loop[O]) Now() time.Time { return l.now }

// Steps is how many units of work have run.
func (l *Loop[O]) Steps() int64 { return l.steps }

// Schedule makes fn ready to run at the current virtual time.
func (l *Loop[O]) Schedule(own O, fn func()) { l.ready = append(l.ready, task[O]{own, fn}) }

// At runs fn at t (or now, if t is past). The returned func cancels it and
// reports whether it was still pending.
func (l *Loop[O]) At(t time.Time, own O, fn func()) (cancel func() bool) {
	if t.Before(l.now) {
		t = l.now
	}
	l.seq++
	tm := &timer[O]{at: t, seq: l.seq, own: own, fn: fn}
	heap.Push(&l.timers, tm)
	return func() bool {
		if tm.canceled || tm.index < 0 {
			return false
		}
		tm.canceled = true
		return true
	}
}

func (l *Loop[O]) alive(own O) bool { return l.opts.Alive == nil || l.opts.Alive(own) }

// Step runs one unit of work: a ready task, or, if none is ready, the next
// timer due no later than until (moving the clock to it). It returns false
// when nothing is left to do before until.
func (l *Loop[O]) Step(until time.Time) bool {
	if len(l.ready) > 0 {
		l.runReady()
		return true
	}
	for l.timers.Len() > 0 {
		tm := l.timers[0]
		if tm.at.After(until) {
			return false
		}
		heap.Pop(&l.timers)
		tm.index = -1
		if tm.canceled || !l.alive(tm.own) {
			continue
		}
		l.now = tm.at
		l.steps++
		tm.fn()
		return true
	}
	return false
}

func (l *Loop[O]) runReady() {
	var t task[O]
	if l.opts.Pick == nil {
		t = l.ready[0]
		l.ready[0] = task[O]{}
		l.ready = l.ready[1:]
	} else {
		i := l.opts.Pick(len(l.ready))
		t = l.ready[i]
		last := len(l.ready) - 1
		l.ready[i] = l.ready[last]
		l.ready[last] = task[O]{}
		l.ready = l.ready[:last]
	}
	if l.alive(t.own) {
		l.steps++
		t.fn()
	}
}

// Run runs the loop until virtual time t (or until it has nothing to do),
// calling check (if not nil) after every step; the clock ends at t.
func (l *Loop[O]) Run(t time.Time, check func()) {
	for l.Step(t) {
		if check != nil {
			check()
		}
	}
	if l.now.Before(t) {
		l.now = t
	}
}

// Advance runs the loop for d of virtual time.
func (l *Loop[O]) Advance(d time.Duration) { l.Run(l.now.Add(d), nil) }

// maxSteps bounds one RunUntil, so that work rescheduling itself forever
// at one instant fails a test instead of hanging it.
const maxSteps = 1 << 20

// RunUntil steps the loop until cond holds, for at most limit of virtual
// time. It reports whether cond held; if not, the clock ends at the limit
// (or where the work ran out of steps).
func (l *Loop[O]) RunUntil(cond func() bool, limit time.Duration) bool {
	until := l.now.Add(limit)
	for n := 0; !cond(); n++ {
		if n >= maxSteps {
			return false
		}
		if !l.Step(until) {
			l.now = until
			return cond()
		}
	}
	return true
}

// RunIO runs fn at the current virtual time, after the work already ready:
// an Env.RunIO whose blocking jobs take no virtual time.
func (l *Loop[O]) RunIO(fn func()) {
	var zero O
	l.At(l.now, zero, fn)
}
