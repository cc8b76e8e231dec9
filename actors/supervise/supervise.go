package supervise

import (
	"errors"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/internal/invariant"
)

// Clock is the time seam the strategy reads; actors.Clock satisfies it.
type Clock interface {
	Now() time.Time
}

// Config configures a Strategy. Every field is required.
type Config struct {
	Clock Clock
	// MaxRestarts is how many failures of one child within Window are
	// answered with a restart; the next one is fatal. 0 makes every panic
	// fatal.
	MaxRestarts int
	// Window is how far back failures count. It must be positive: a
	// lifetime count would make a rare, recovered panic add up to a stop.
	Window time.Duration
	// Fatal is called when a child failed beyond its budget or broke an
	// invariant, before the child is stopped. It may be called from any
	// goroutine.
	Fatal func(child *actor.PID, reason any)
}

// Strategy is a protoactor SupervisorStrategy on the Clock seam; see the
// package documentation.
type Strategy struct {
	clock Clock
	fatal func(child *actor.PID, reason any)

	mu     sync.Mutex
	budget *budget
}

var _ actor.SupervisorStrategy = (*Strategy)(nil)

// New returns the strategy of cfg. It panics (with an *invariant.Violation)
// on a configuration that cannot work: a nil Clock or Fatal, a negative
// MaxRestarts or a Window that is not positive.
func New(cfg Config) *Strategy {
	invariant.Check(cfg.Clock != nil, "supervise: Config.Clock is nil")
	invariant.Check(cfg.Fatal != nil, "supervise: Config.Fatal is nil")
	return &Strategy{
		clock:  cfg.Clock,
		fatal:  cfg.Fatal,
		budget: newBudget(cfg.MaxRestarts, cfg.Window, maxTrackedChildren),
	}
}

// HandleFailure decides a child's failure. It ignores rs, which counts on
// the wall clock.
func (s *Strategy) HandleFailure(system *actor.ActorSystem, supervisor actor.Supervisor, child *actor.PID,
	_ *actor.RestartStatistics, reason any, _ any) {
	now := s.clock.Now()
	s.mu.Lock()
	v := s.budget.fail(childKey{child.GetAddress(), child.GetId()}, now, isViolation(reason))
	s.mu.Unlock()
	switch v {
	case restart:
		publish(system, child, reason, actor.RestartDirective)
		supervisor.RestartChildren(child)
	case fatal:
		publish(system, child, reason, actor.StopDirective)
		s.fatal(child, reason)
		supervisor.StopChildren(child)
	default:
		invariant.Unreachable("supervise: verdict %v", v)
	}
}

// publish puts the decision on the event stream, as protoactor's own
// strategies do, for whoever subscribes to supervision events.
func publish(system *actor.ActorSystem, child *actor.PID, reason any, d actor.Directive) {
	if system == nil || system.EventStream == nil {
		return
	}
	system.EventStream.Publish(&actor.SupervisorEvent{Child: child, Reason: reason, Directive: d})
}

// isViolation reports whether a panic's reason is a broken invariant,
// directly or wrapped in an error.
func isViolation(reason any) bool {
	if _, ok := reason.(*invariant.Violation); ok {
		return true
	}
	err, ok := reason.(error)
	if !ok {
		return false
	}
	var v *invariant.Violation
	return errors.As(err, &v)
}
