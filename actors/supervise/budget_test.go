package supervise

import (
	"testing"
	"time"
)

// TestBudget drives the plain core with sequences of failures (child, time
// since start, broken invariant or not) and checks each verdict: restarts
// within the budget, fatal beyond it, the window sliding, broken invariants
// fatal at once, and the history bounded in children.
func TestBudget(t *testing.T) {
	type step struct {
		child  string
		at     time.Duration
		broken bool
		want   verdict
	}
	s := time.Second
	tests := []struct {
		name        string
		maxRestarts int
		limit       int
		steps       []step
	}{
		{"within budget, then fatal", 2, 8, []step{
			{"a", 0, false, restart}, {"a", 1 * s, false, restart}, {"a", 2 * s, false, fatal}}},
		{"window slides: a failure exactly one window old has left it", 2, 8, []step{
			{"a", 0, false, restart}, {"a", 1 * s, false, restart}, {"a", 10 * s, false, restart},
			{"a", 10*s + 500*time.Millisecond, false, fatal}}},
		{"spread out failures never add up", 1, 8, []step{
			{"a", 0, false, restart}, {"a", 10 * s, false, restart}, {"a", 20 * s, false, restart},
			{"a", 30 * s, false, restart}}},
		{"a fatal child is forgotten: its successor starts with a full budget", 1, 8, []step{
			{"a", 0, false, restart}, {"a", 1 * s, false, fatal}, {"a", 2 * s, false, restart}}},
		{"children have separate budgets", 1, 8, []step{
			{"a", 0, false, restart}, {"b", 1 * s, false, restart}, {"a", 2 * s, false, fatal},
			{"b", 3 * s, false, fatal}}},
		{"a broken invariant is fatal at once", 5, 8, []step{
			{"a", 0, true, fatal}, {"b", 0, false, restart}, {"b", 1 * s, true, fatal}}},
		{"no restarts allowed", 0, 8, []step{{"a", 0, false, fatal}, {"a", 20 * s, false, fatal}}},
		{"a full history forgets an expired child, not one within its window", 1, 2, []step{
			{"a", 0, false, restart}, {"b", 9 * s, false, restart},
			{"c", 12 * s, false, restart}, // a expired and goes; b stays
			{"b", 13 * s, false, fatal}}},
		{"full history forgets the least recent failure", 1, 2, []step{
			{"a", 0, false, restart}, {"b", 1 * s, false, restart},
			{"c", 2 * s, false, restart}, // a goes
			{"a", 3 * s, false, restart}, // forgotten, so a fresh budget; b goes
			{"c", 4 * s, false, fatal}}},
	}
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBudget(tt.maxRestarts, 10*s, tt.limit)
			for i, st := range tt.steps {
				k := childKey{"nonhost", st.child}
				if got := b.fail(k, start.Add(st.at), st.broken); got != st.want {
					t.Fatalf("step %d (%s at %v, broken %v): %v, want %v", i, st.child, st.at, st.broken, got, st.want)
				}
				if len(b.failures) > tt.limit {
					t.Fatalf("step %d: %d children tracked, limit %d", i, len(b.failures), tt.limit)
				}
				for k, times := range b.failures {
					if len(times) == 0 || len(times) > tt.maxRestarts {
						t.Fatalf("step %d: child %v keeps %d failures, budget %d", i, k, len(times), tt.maxRestarts)
					}
				}
			}
		})
	}
}

// TestBudgetRejectsBadConfig: a budget that cannot work is refused when it
// is built, not discovered at the first panic.
func TestBudgetRejectsBadConfig(t *testing.T) {
	for _, c := range []struct {
		max    int
		window time.Duration
		limit  int
	}{{-1, time.Second, 1}, {1, 0, 1}, {1, -time.Second, 1}, {1, time.Second, 0}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("newBudget(%d, %v, %d) accepted", c.max, c.window, c.limit)
				}
			}()
			newBudget(c.max, c.window, c.limit)
		}()
	}
}
