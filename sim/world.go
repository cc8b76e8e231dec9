package sim

import (
	"container/heap"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"math/rand"
	"time"
)

// Epoch is virtual time zero.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// owner tags work with the incarnation of the node that created it, so a
// crash drops everything the dead incarnation had scheduled.
type owner struct {
	node  *Node // nil: the world itself (clients, the network, faults)
	epoch int
}

func (o owner) alive() bool { return o.node == nil || o.node.epoch == o.epoch }

type task struct {
	own owner
	fn  func()
}

type timer struct {
	at       time.Time
	seq      uint64
	own      owner
	fn       func()
	canceled bool
	index    int
}

type timerHeap []*timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int)   { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }
func (h *timerHeap) Push(x any)     { t := x.(*timer); t.index = len(*h); *h = append(*h, t) }
func (h *timerHeap) Pop() any       { old := *h; t := old[len(old)-1]; *h = old[:len(old)-1]; return t }
func (h timerHeap) peek() *timer    { return h[0] }
func (h *timerHeap) popMin() *timer { return heap.Pop(h).(*timer) }

// World is one simulation: a virtual clock, a run queue drained on one
// goroutine in an order chosen by the seed, and timers. Nothing in it reads
// wall time; everything random comes from its rng.
type World struct {
	rng    *rand.Rand
	now    time.Time
	ready  []task
	timers timerHeap
	seq    uint64
	steps  int64

	trace     hash.Hash
	traceOut  io.Writer
	traceN    int64
	violation []string
}

// NewWorld makes a world for seed.
func NewWorld(seed int64, traceOut io.Writer) *World {
	return &World{rng: rand.New(rand.NewSource(seed)), now: Epoch, trace: sha256.New(), traceOut: traceOut}
}

// Now is the virtual time.
func (w *World) Now() time.Time { return w.now }

// Rand is the world's seeded source.
func (w *World) Rand() *rand.Rand { return w.rng }

func (w *World) schedule(own owner, fn func()) { w.ready = append(w.ready, task{own, fn}) }

// at runs fn at t (or now, if t is past). The returned func cancels it.
func (w *World) at(t time.Time, own owner, fn func()) func() bool {
	if t.Before(w.now) {
		t = w.now
	}
	w.seq++
	tm := &timer{at: t, seq: w.seq, own: own, fn: fn}
	heap.Push(&w.timers, tm)
	return func() bool {
		if tm.canceled || tm.index < 0 {
			return false
		}
		tm.canceled = true
		return true
	}
}

// step runs one unit of work: a ready task picked by the seed, or, if none
// is ready, the next timer (advancing the clock). It returns false when
// nothing is left before until.
func (w *World) step(until time.Time) bool {
	if len(w.ready) > 0 {
		i := w.rng.Intn(len(w.ready))
		t := w.ready[i]
		last := len(w.ready) - 1
		w.ready[i] = w.ready[last]
		w.ready[last] = task{}
		w.ready = w.ready[:last]
		if t.own.alive() {
			w.steps++
			t.fn()
		}
		return true
	}
	for w.timers.Len() > 0 {
		tm := w.timers.peek()
		if tm.at.After(until) {
			return false
		}
		w.timers.popMin()
		tm.index = -1
		if tm.canceled || !tm.own.alive() {
			continue
		}
		w.now = tm.at
		w.steps++
		tm.fn()
		return true
	}
	return false
}

// RunUntil runs the world until virtual time t (or until it has nothing to
// do), checking invariants with check after every step.
func (w *World) RunUntil(t time.Time, check func()) {
	for w.step(t) {
		if check != nil {
			check()
		}
	}
	if w.now.Before(t) {
		w.now = t
	}
}

// Tracef records an event in the trace (and prints it if tracing).
func (w *World) Tracef(format string, args ...any) {
	line := fmt.Sprintf("%12.6f ", w.now.Sub(Epoch).Seconds()) + fmt.Sprintf(format, args...) + "\n"
	w.trace.Write([]byte(line))
	w.traceN++
	if w.traceOut != nil {
		io.WriteString(w.traceOut, line)
	}
}

// Violationf records a broken invariant.
func (w *World) Violationf(format string, args ...any) {
	msg := fmt.Sprintf("t=%.6fs: ", w.now.Sub(Epoch).Seconds()) + fmt.Sprintf(format, args...)
	w.Tracef("VIOLATION %s", msg)
	if len(w.violation) < 20 {
		w.violation = append(w.violation, msg)
	}
}

// TraceHash is the hash of every event so far: the same seed gives the same
// hash, byte for byte.
func (w *World) TraceHash() string { return hex.EncodeToString(w.trace.Sum(nil))[:16] }

// dispatcher is a protoactor Dispatcher that puts mailbox work on the
// world's run queue.
type dispatcher struct {
	w   *World
	own owner // fixed per incarnation: a dead one's work is dropped
}

func (d *dispatcher) Schedule(fn func()) { d.w.schedule(d.own, fn) }
func (d *dispatcher) Throughput() int    { return 300 }

// clock is a node's Clock seam in virtual time.
type clock struct {
	w   *World
	own owner
}

func (c *clock) Now() time.Time { return c.w.now }
func (c *clock) AfterFunc(d time.Duration, f func()) func() bool {
	return c.w.at(c.w.now.Add(d), c.own, f)
}
