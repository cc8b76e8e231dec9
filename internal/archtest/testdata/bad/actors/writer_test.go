package actors

import (
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/wharfmq/wharf/sim" // want imports: imports github.com/wharfmq/wharf/sim: not in the allowlist of actors/
)

// Tests may sleep, start goroutines and touch the OS: no seam findings.
func TestWrite(t *testing.T) {
	go time.Sleep(time.Since(time.Now()))
	_, _, _ = os.Getpid(), cmp.Diff, sim.Run
}
