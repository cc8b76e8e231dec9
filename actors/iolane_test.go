package actors

import (
	"slices"
	"testing"
)

// TestIOLaneOneAtATime drives the lane with a RunIO that only records what
// it was handed: a step runs the oldest handed-in run. Whatever the order
// of submits and steps, at most one job is ever handed to RunIO and not
// finished, and jobs run in submit order.
func TestIOLaneOneAtATime(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  string // 's': submit the next job, 'r': run the oldest pending RunIO
		want int    // jobs run at the end
	}{
		{"one", "sr", 1},
		{"three queued", "sssrrr", 3},
		{"interleaved", "srssrsrr", 4},
		{"submit while idle after a drain", "srsr", 2},
		{"queued jobs wait", "sss", 0},
		{"surplus steps", "srrr", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var handed []func()
			l := newIOLane(func(fn func()) { handed = append(handed, fn) })
			var ran []int
			next := 0
			for _, op := range tc.ops {
				switch op {
				case 's':
					n := next
					next++
					l.submit(func() { ran = append(ran, n) })
				case 'r':
					if len(handed) == 0 {
						continue
					}
					fn := handed[0]
					handed = handed[1:]
					fn()
				}
				if len(handed) > 1 {
					t.Fatalf("after %q: %d runs handed to RunIO at once", op, len(handed))
				}
			}
			if len(ran) != tc.want {
				t.Fatalf("ran %v, want %d jobs", ran, tc.want)
			}
			if !slices.IsSorted(ran) {
				t.Fatalf("ran %v: not in submit order", ran)
			}
			if idle := len(handed) == 0 && len(l.q) == 0; idle == l.busy {
				t.Fatalf("busy=%v with %d handed and %d queued", l.busy, len(handed), len(l.q))
			}
		})
	}
}

// TestIOLaneKitFallback: a kit without a lane (name server, controller)
// runs background jobs as io does.
func TestIOLaneKitFallback(t *testing.T) {
	var handed int
	k := &kit{runIO: func(func()) { handed++ }}
	k.background(nil, func() any { return nil })
	if handed != 1 {
		t.Fatalf("handed %d jobs to RunIO, want 1", handed)
	}
}
