package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"math/rand"
	"time"

	"github.com/wharfmq/wharf/internal/vtime"
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

// World is one simulation: a virtual-time loop (internal/vtime) whose run
// queue is drained on one goroutine in an order chosen by the seed, and
// the trace. Nothing in it reads wall time; everything random comes from
// its rng.
type World struct {
	rng  *rand.Rand
	loop *vtime.Loop[owner]

	trace     hash.Hash
	traceOut  io.Writer
	traceN    int64
	violation []string
	metrics   *metricsLog // Options.Metrics: every broker reports here
}

// NewWorld makes a world for seed.
func NewWorld(seed int64, traceOut io.Writer) *World {
	rng := rand.New(rand.NewSource(seed))
	loop := vtime.New(Epoch, vtime.Options[owner]{Pick: rng.Intn, Alive: owner.alive})
	return &World{rng: rng, loop: loop, trace: sha256.New(), traceOut: traceOut}
}

// Now is the virtual time.
func (w *World) Now() time.Time { return w.loop.Now() }

// Rand is the world's seeded source.
func (w *World) Rand() *rand.Rand { return w.rng }

// at runs fn at t (or now, if t is past). The returned func cancels it.
func (w *World) at(t time.Time, own owner, fn func()) func() bool { return w.loop.At(t, own, fn) }

// RunUntil runs the world until virtual time t (or until it has nothing to
// do), checking invariants with check after every step.
func (w *World) RunUntil(t time.Time, check func()) { w.loop.Run(t, check) }

// Tracef records an event in the trace (and prints it if tracing).
func (w *World) Tracef(format string, args ...any) {
	line := fmt.Sprintf("%12.6f ", w.Now().Sub(Epoch).Seconds()) + fmt.Sprintf(format, args...) + "\n"
	w.trace.Write([]byte(line))
	w.traceN++
	if w.traceOut != nil {
		io.WriteString(w.traceOut, line)
	}
}

// Violationf records a broken invariant.
func (w *World) Violationf(format string, args ...any) {
	msg := fmt.Sprintf("t=%.6fs: ", w.Now().Sub(Epoch).Seconds()) + fmt.Sprintf(format, args...)
	w.Tracef("VIOLATION %s", msg)
	if len(w.violation) < 20 {
		w.violation = append(w.violation, msg)
	}
}

// TraceHash is the hash of every event so far: the same seed gives the same
// hash, byte for byte.
func (w *World) TraceHash() string { return hex.EncodeToString(w.trace.Sum(nil))[:16] }

// dispatcher is a node incarnation's protoactor Dispatcher: mailbox work
// goes on the world's run queue, dropped once the incarnation is dead.
func (w *World) dispatcher(own owner) *vtime.Dispatcher[owner] {
	return &vtime.Dispatcher[owner]{L: w.loop, Own: own}
}

// clock is a node incarnation's Clock seam in virtual time.
func (w *World) clock(own owner) *vtime.Clock[owner] { return &vtime.Clock[owner]{L: w.loop, Own: own} }

// driftClock is a node's Clock seam with its clock drift: Now reads
// virtual time plus a fixed offset; timers stay on the shared timeline (a
// duration is the same on every node).
type driftClock struct {
	*vtime.Clock[owner]
	off time.Duration
}

func (c driftClock) Now() time.Time { return c.Clock.Now().Add(c.off) }
