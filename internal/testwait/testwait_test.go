package testwait

import (
	"testing"
	"time"
)

// fake is a virtual clock that counts its advances.
type fake struct {
	now      time.Time
	advances int
}

func (f *fake) Now() time.Time          { return f.now }
func (f *fake) Advance(d time.Duration) { f.now = f.now.Add(d); f.advances++ }

func TestUntil(t *testing.T) {
	tests := []struct {
		name      string
		holdsAt   time.Duration // cond holds from this much virtual time on; <0 never
		within    time.Duration
		want      bool
		wantPolls int
	}{
		{"at once", 0, time.Second, true, 1},
		{"after three steps", 3 * Interval, time.Second, true, 4},
		{"never", -1, 55 * time.Millisecond, false, 7}, // 0,10,...,50, then the bound at 55
		{"exactly at the bound", 55 * time.Millisecond, 55 * time.Millisecond, true, 7},
		{"zero bound", -1, 0, false, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Unix(1000, 0)
			c := &fake{now: start}
			polls := 0
			got := Until(c, tc.within, func() bool {
				polls++
				return tc.holdsAt >= 0 && c.now.Sub(start) >= tc.holdsAt
			})
			if got != tc.want || polls != tc.wantPolls {
				t.Fatalf("Until = %v after %d polls, want %v after %d", got, polls, tc.want, tc.wantPolls)
			}
			if c.now.Sub(start) > tc.within {
				t.Fatalf("advanced %v, past the bound %v", c.now.Sub(start), tc.within)
			}
		})
	}
}

func TestChan(t *testing.T) {
	done := make(chan struct{})
	close(done)
	if !Chan(done, time.Second) {
		t.Fatal("a closed channel did not count as done")
	}
	if Chan(make(chan struct{}), time.Millisecond) {
		t.Fatal("an open channel counted as done")
	}
}
