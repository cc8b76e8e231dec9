package benchrun

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestClientTraceAndAllocs: --trace writes a runtime/trace of this
// process that stops by itself after its duration (or when stopped
// sooner), none for 0; the clients' allocation profile is written.
func TestClientTraceAndAllocs(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name  string
		d     time.Duration
		early bool // stopped before d
	}{{"none", 0, false}, {"stops by itself", 20 * time.Millisecond, false}, {"stopped early", time.Hour, true}} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.name+".trace")
			stop := startClientTrace(path, tt.d)
			if !tt.early {
				time.Sleep(2 * tt.d)
			}
			stop()
			b, err := os.ReadFile(path)
			if tt.d == 0 {
				if err == nil {
					t.Fatal("a trace was written for a duration of 0")
				}
				return
			}
			if err != nil || !bytes.HasPrefix(b, []byte("go 1.")) {
				t.Fatalf("trace file: %d bytes, %v", len(b), err)
			}
			// A trace stopped by itself: another can start at once.
			stop2 := startClientTrace(path+"2", time.Hour)
			stop2()
			if b, err := os.ReadFile(path + "2"); err != nil || len(b) == 0 {
				t.Fatalf("second trace: %d bytes, %v", len(b), err)
			}
		})
	}
	path := filepath.Join(dir, "allocs.pprof")
	writeClientAllocs(path)
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		t.Fatalf("allocation profile: %v, %v", st, err)
	}
}
