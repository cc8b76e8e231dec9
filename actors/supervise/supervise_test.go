package supervise

import (
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/internal/invariant"
)

// fakeClock is a settable clock shared by the test and the actors'
// goroutines.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// fatalCall is one call of the Fatal hook.
type fatalCall struct {
	child  *actor.PID
	reason any
}

// panicMsg makes the child panic with reason.
type panicMsg struct{ reason any }

// flaky reports its lifecycle on channels and panics on panicMsg.
type flaky struct {
	started chan<- struct{}
	stopped chan<- struct{}
}

func (f *flaky) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		f.started <- struct{}{}
	case *actor.Stopped:
		f.stopped <- struct{}{}
	case *panicMsg:
		panic(m.reason)
	}
}

// harness is a real actor system with one flaky actor spawned under the
// strategy as its guardian, the way the broker spawns its actors.
type harness struct {
	t       *testing.T
	clock   *fakeClock
	system  *actor.ActorSystem
	pid     *actor.PID
	started chan struct{}
	stopped chan struct{}
	fatals  chan fatalCall
}

func newHarness(t *testing.T, maxRestarts int, window time.Duration) *harness {
	h := &harness{t: t, clock: &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)},
		system: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
			return slog.New(slog.DiscardHandler)
		})),
		started: make(chan struct{}, 16), stopped: make(chan struct{}, 16), fatals: make(chan fatalCall, 16)}
	strategy := New(Config{Clock: h.clock, MaxRestarts: maxRestarts, Window: window,
		Fatal: func(child *actor.PID, reason any) { h.fatals <- fatalCall{child, reason} }})
	props := actor.PropsFromProducer(func() actor.Actor { return &flaky{started: h.started, stopped: h.stopped} },
		actor.WithGuardian(strategy))
	h.pid = h.system.Root.Spawn(props)
	t.Cleanup(func() { h.system.Shutdown() })
	h.wait(h.started, "first start")
	return h
}

// wait receives from ch or fails the test after a bound long enough for a
// loaded machine (the actors run on goroutines; nothing here sleeps).
func (h *harness) wait(ch chan struct{}, what string) {
	h.t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		h.t.Fatalf("timed out waiting for %s", what)
	}
}

// next waits for the child's next restart or the next Fatal call,
// whichever comes first, so a wrong decision fails at once rather than at
// the bound.
func (h *harness) next(what string) (restarted bool, f fatalCall) {
	h.t.Helper()
	select {
	case <-h.started:
		return true, fatalCall{}
	case f := <-h.fatals:
		return false, f
	case <-time.After(10 * time.Second):
		h.t.Fatalf("timed out waiting for the decision on %s", what)
		return false, fatalCall{}
	}
}

// restarted panics the child and requires a restart (a restarted actor
// gets Started again).
func (h *harness) restarted(reason any) {
	h.t.Helper()
	h.system.Root.Send(h.pid, &panicMsg{reason})
	if ok, f := h.next(fmt.Sprint(reason)); !ok {
		h.t.Fatalf("panic %v: Fatal (%v), want a restart", reason, f.reason)
	}
}

// fatal panics the child and requires Fatal, then the child's stop.
func (h *harness) fatal(reason any) fatalCall {
	h.t.Helper()
	h.system.Root.Send(h.pid, &panicMsg{reason})
	ok, f := h.next(fmt.Sprint(reason))
	if ok {
		h.t.Fatalf("panic %v: restarted, want Fatal", reason)
	}
	h.wait(h.stopped, "the stop after Fatal")
	if f.child.String() != h.pid.String() {
		h.t.Fatalf("Fatal for %v, want the child %v", f.child, h.pid)
	}
	return f
}

// quiet checks that no restart or Fatal happened that the test did not wait
// for. Every event is sent before the one the test waited on, so by then it
// would be in its buffered channel.
func (h *harness) quiet() {
	h.t.Helper()
	select {
	case <-h.started:
		h.t.Fatal("an unexpected restart")
	case f := <-h.fatals:
		h.t.Fatalf("an unexpected Fatal: %v", f.reason)
	default:
	}
}

// TestRestartsWithinBudgetThenFatal: a child panicking MaxRestarts times in
// the window is restarted each time; the next panic calls Fatal with its
// reason and stops the child, and it is not restarted.
func TestRestartsWithinBudgetThenFatal(t *testing.T) {
	h := newHarness(t, 3, 10*time.Second)
	for i := range 3 {
		h.restarted(fmt.Sprintf("boom %d", i))
		h.clock.advance(time.Second)
	}
	f := h.fatal("boom 3")
	if f.reason != "boom 3" {
		t.Fatalf("Fatal reason %v, want the last panic's", f.reason)
	}
	h.quiet()
}

// TestWindowSlidesOnTheClock: failures leave the window as the fake clock
// moves (and only then): the same number of panics spread over more than
// a window never becomes fatal, and a burst within one does.
func TestWindowSlidesOnTheClock(t *testing.T) {
	h := newHarness(t, 2, 10*time.Second)
	h.restarted("t=0")
	h.clock.advance(4 * time.Second)
	h.restarted("t=4")
	h.clock.advance(6 * time.Second) // t=10: the first failure has left the window
	h.restarted("t=10")
	h.clock.advance(5 * time.Second) // t=15: the failure at 4 has left it too
	h.restarted("t=15")
	h.clock.advance(4 * time.Second) // t=19: 10 and 15 are within it
	h.fatal("t=19")
	h.quiet()
}

// TestViolationIsFatalAtOnce: a panic with an *invariant.Violation calls
// Fatal at the first occurrence, although the budget has restarts left.
func TestViolationIsFatalAtOnce(t *testing.T) {
	h := newHarness(t, 10, time.Minute)
	var violation *invariant.Violation
	func() {
		defer func() { violation, _ = recover().(*invariant.Violation) }()
		invariant.Check(false, "queue offsets contiguous")
	}()
	if violation == nil {
		t.Fatal("invariant.Check did not panic with a *Violation")
	}
	f := h.fatal(violation)
	if f.reason != violation {
		t.Fatalf("Fatal reason %v, want the violation", f.reason)
	}
	h.quiet()
}

// TestWrappedViolationIsFatal: an error wrapping a violation counts too.
func TestWrappedViolationIsFatal(t *testing.T) {
	h := newHarness(t, 10, time.Minute)
	h.fatal(fmt.Errorf("writer: %w", &invariant.Violation{Msg: "broken", Caller: "writer.go:1"}))
}

// TestNewRejectsMissingHooks: a strategy without a clock or a Fatal hook is
// refused when it is built.
func TestNewRejectsMissingHooks(t *testing.T) {
	good := Config{Clock: &fakeClock{}, MaxRestarts: 1, Window: time.Second, Fatal: func(*actor.PID, any) {}}
	for name, mutate := range map[string]func(*Config){
		"no clock":  func(c *Config) { c.Clock = nil },
		"no fatal":  func(c *Config) { c.Fatal = nil },
		"no window": func(c *Config) { c.Window = 0 },
	} {
		cfg := good
		mutate(&cfg)
		func() {
			defer func() {
				if _, ok := recover().(*invariant.Violation); !ok {
					t.Errorf("%s: New did not panic with a violation", name)
				}
			}()
			New(cfg)
		}()
	}
	New(good)
}

// parent spawns one flaky child on start and reports its PID.
type parent struct {
	child    *actor.Props
	childPID chan<- *actor.PID
}

func (p *parent) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*actor.Started); ok {
		p.childPID <- ctx.Spawn(p.child)
	}
}

// TestAsSupervisorOfChildren: the same strategy given to a parent
// (actor.WithSupervisor), as for the actors other actors spawn, restarts a
// child within the budget and escalates beyond it; the parent lives on.
func TestAsSupervisorOfChildren(t *testing.T) {
	h := &harness{t: t, clock: &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)},
		system: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
			return slog.New(slog.DiscardHandler)
		})),
		started: make(chan struct{}, 16), stopped: make(chan struct{}, 16), fatals: make(chan fatalCall, 16)}
	t.Cleanup(func() { h.system.Shutdown() })
	strategy := New(Config{Clock: h.clock, MaxRestarts: 1, Window: time.Minute,
		Fatal: func(child *actor.PID, reason any) { h.fatals <- fatalCall{child, reason} }})
	childPID := make(chan *actor.PID, 1)
	child := actor.PropsFromProducer(func() actor.Actor { return &flaky{started: h.started, stopped: h.stopped} })
	parentPID := h.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &parent{child: child, childPID: childPID}
	}, actor.WithSupervisor(strategy)))
	select {
	case h.pid = <-childPID:
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for the child's PID")
	}
	h.wait(h.started, "the child's first start")
	h.restarted("once")
	h.fatal("twice")
	h.quiet()
	if _, err := h.system.Root.StopFuture(parentPID).Result(); err != nil {
		t.Fatalf("the parent did not live on: %v", err)
	}
}
