package supervise

import (
	"time"

	"github.com/wharfmq/wharf/internal/invariant"
)

// maxTrackedChildren bounds the failure history: beyond it the children
// whose failures are all outside the window are forgotten first, then the
// one that failed least recently.
const maxTrackedChildren = 1024

// childKey identifies a child across restarts (a restart keeps its PID).
type childKey struct{ address, id string }

// verdict is what the budget decides for one failure.
type verdict int

const (
	restart verdict = iota // within the budget: restart the child
	fatal                  // beyond the budget, or a broken invariant
)

func (v verdict) String() string {
	if v == restart {
		return "restart"
	}
	return "fatal"
}

// budget is the plain core of the strategy: per child, the times of its
// failures within the window, and the decision for each new failure. It
// reads no clock: the time of each failure is an input.
type budget struct {
	maxRestarts int
	window      time.Duration
	limit       int                      // children tracked at most
	failures    map[childKey][]time.Time // oldest first, each within window of the last failure
}

func newBudget(maxRestarts int, window time.Duration, limit int) *budget {
	invariant.Check1(maxRestarts >= 0, "supervise: MaxRestarts %d is negative", maxRestarts)
	invariant.Check1(window > 0, "supervise: Window %v must be positive", window)
	invariant.Check1(limit > 0, "supervise: child limit %d must be positive", limit)
	return &budget{maxRestarts: maxRestarts, window: window, limit: limit, failures: map[childKey][]time.Time{}}
}

// fail records a failure of child k at now and decides it. broken says the
// failure is a broken invariant, which is fatal at once. A fatal verdict
// forgets the child: it is stopped, and a later child with the same PID
// starts with a full budget.
func (b *budget) fail(k childKey, now time.Time, broken bool) verdict {
	if broken {
		delete(b.failures, k)
		return fatal
	}
	times, known := b.failures[k]
	if !known {
		b.makeRoom(now)
		times = make([]time.Time, 0, b.maxRestarts)
	}
	times = b.recent(times, now)
	if len(times) == b.maxRestarts {
		delete(b.failures, k)
		return fatal
	}
	times = append(times, now)
	invariant.Check2(len(times) <= b.maxRestarts, "supervise: %d failures kept, budget %d", len(times), b.maxRestarts)
	b.failures[k] = times
	return restart
}

// recent drops the failures that are no longer within the window at now,
// in place. A failure exactly one window old has left it.
func (b *budget) recent(times []time.Time, now time.Time) []time.Time {
	i := 0
	for i < len(times) && now.Sub(times[i]) >= b.window {
		i++
	}
	n := copy(times, times[i:])
	return times[:n]
}

// makeRoom keeps the history within limit before a new child is added:
// first the children with no failure left in the window go, then, if none
// did, the one whose latest failure is the oldest (ties by key, so the
// choice does not depend on map order).
func (b *budget) makeRoom(now time.Time) {
	if len(b.failures) < b.limit {
		return
	}
	for k, times := range b.failures {
		if kept := b.recent(times, now); len(kept) > 0 {
			b.failures[k] = kept
		} else {
			delete(b.failures, k)
		}
	}
	if len(b.failures) < b.limit {
		return
	}
	var victim childKey
	var victimLast time.Time
	first := true
	for k, times := range b.failures {
		last := times[len(times)-1]
		if first || last.Before(victimLast) || (last.Equal(victimLast) && keyLess(k, victim)) {
			victim, victimLast, first = k, last, false
		}
	}
	delete(b.failures, victim)
	invariant.Check2(len(b.failures) < b.limit, "supervise: %d children tracked, limit %d", len(b.failures), b.limit)
}

func keyLess(a, b childKey) bool {
	if a.address != b.address {
		return a.address < b.address
	}
	return a.id < b.id
}
