//go:build linux

package benchrun

import (
	"os"
	"testing"
)

func TestBenchParseProcStat(t *testing.T) {
	for _, tc := range []struct {
		stat string
		want float64
	}{
		// utime 250 and stime 50 ticks; the command name holds spaces and a ')'
		{"4242 (wharf (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 1 2 3", 3},
		{"1 (init) S 0 1 1 0 -1 0 0 0 0 0 7 3", 0.1},
		{"1 (init) S 0 1 1", -1},
		{"no parenthesis", -1},
		{"1 (init) S 0 1 1 0 -1 0 0 0 0 0 x 3", -1},
	} {
		if got := parseProcStat(tc.stat); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.stat, got, tc.want)
		}
	}
	if got := procCPU(os.Getpid()); got < 0 {
		t.Fatalf("procCPU of this process: %v", got)
	}
}
