package brokertest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wharfmq/wharf/internal/testwait"
)

// TestClockAdvance: Advance fires exactly the timers due by the new time,
// once each, and never a stopped one; the others wait on. The timers are
// hours long, so the wall clock never fires one during the test.
func TestClockAdvance(t *testing.T) {
	tests := []struct {
		name     string
		timers   []time.Duration // armed in this order, named by index
		stop     []int           // stopped before advancing
		advances []time.Duration
		want     []int // indexes fired, sorted
	}{
		{"nothing due", []time.Duration{time.Hour}, nil, []time.Duration{time.Minute}, nil},
		{"one due", []time.Duration{time.Hour, 2 * time.Hour}, nil, []time.Duration{time.Hour}, []int{0}},
		{"both by steps", []time.Duration{time.Hour, 2 * time.Hour}, nil, []time.Duration{90 * time.Minute, 30 * time.Minute}, []int{0, 1}},
		{"stopped never fires", []time.Duration{time.Hour, time.Hour}, []int{1}, []time.Duration{3 * time.Hour}, []int{0}},
		{"advancing again fires nothing twice", []time.Duration{time.Hour}, nil, []time.Duration{2 * time.Hour, 2 * time.Hour}, []int{0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			var mu sync.Mutex
			var fired []int
			stops := make([]func() bool, len(tc.timers))
			for i, d := range tc.timers {
				stops[i] = c.AfterFunc(d, func() { mu.Lock(); fired = append(fired, i); mu.Unlock() })
			}
			for _, i := range tc.stop {
				if !stops[i]() {
					t.Fatalf("timer %d: stop found it gone", i)
				}
			}
			start := c.Now()
			var total time.Duration
			for _, d := range tc.advances {
				c.Advance(d)
				total += d
			}
			if moved := c.Now().Sub(start); moved < total {
				t.Errorf("clock moved %v, want at least %v", moved, total)
			}
			// The timers not wanted are still pending: stopping one finds
			// it there (Advance takes a due timer out before it returns).
			for i := range tc.timers {
				if !slices.Contains(tc.want, i) && !slices.Contains(tc.stop, i) && !stops[i]() {
					t.Errorf("timer %d fired or vanished", i)
				}
			}
			// The due ones run on goroutines of their own.
			testwait.For(t, testwait.Wall, 5*time.Second, "the due timers", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(fired) >= len(tc.want)
			})
			mu.Lock()
			got := slices.Sorted(slices.Values(fired))
			mu.Unlock()
			if !slices.Equal(got, tc.want) {
				t.Errorf("fired %v, want %v", got, tc.want)
			}
		})
	}
}

// TestClockWallTimers: without Advance a timer fires on the wall clock;
// Advance re-arms a pending one for what is left of its wait.
func TestClockWallTimers(t *testing.T) {
	c := newClock()
	soon := make(chan struct{})
	c.AfterFunc(time.Millisecond, func() { close(soon) })
	if !testwait.Chan(soon, 5*time.Second) {
		t.Fatal("a 1 ms timer did not fire on the wall clock")
	}
	later := make(chan struct{})
	c.AfterFunc(time.Hour, func() { close(later) })
	c.Advance(time.Hour - 10*time.Millisecond)
	if !testwait.Chan(later, 5*time.Second) {
		t.Fatal("an hour timer advanced to 10 ms before its time did not fire")
	}
}
