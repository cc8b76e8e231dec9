package testwait

import (
	"testing"
	"time"
)

// Clock is what a wait polls on: the time, and a way to let it pass.
type Clock interface {
	Now() time.Time
	// Advance lets d pass: sleeps on the wall clock, runs the virtual
	// loop for d on a virtual one.
	Advance(d time.Duration)
}

// Wall is the wall clock.
var Wall Clock = wall{}

type wall struct{}

func (wall) Now() time.Time { return time.Now() }

// Advance sleeps: the wall-clock poll of tests that drive real sockets or
// processes, whose progress happens on other goroutines or in other
// processes and cannot be stepped.
func (wall) Advance(d time.Duration) { time.Sleep(d) }

// Interval is the pause between polls on the wall clock; a virtual clock
// is advanced by the same step.
const Interval = 10 * time.Millisecond

// Until polls cond on c every Interval until it holds (true) or within has
// passed on c (false). cond is always tried at least once, and once more
// at the bound.
func Until(c Clock, within time.Duration, cond func() bool) bool {
	deadline := c.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if !c.Now().Before(deadline) {
			return false
		}
		c.Advance(min(Interval, deadline.Sub(c.Now())))
	}
}

// For is Until that fails t, naming what it waited for, when the bound
// passes.
func For(t testing.TB, c Clock, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Until(c, within, cond) {
		t.Fatalf("timed out after %v waiting for %s", within, what)
	}
}

// Chan waits on the wall clock for ch to be closed or to deliver, up to
// within; false if it did not. It is the wait for a goroutine's end (a
// closed done channel) without polling.
func Chan[T any](ch <-chan T, within time.Duration) bool {
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}
