package storage

import (
	"testing"

	"github.com/wharfmq/wharf/storage/vfs"
)

// TestMayLackAckedMarker: an open after an unclean stop marks the store,
// the mark survives clean restarts until it is cleared, and clearing is
// durable.
func TestMayLackAckedMarker(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig("/s")
	check := func(s *Store, step string, want bool) {
		t.Helper()
		if got := s.MayLackAcked(); got != want {
			t.Fatalf("%s: MayLackAcked %v, want %v", step, got, want)
		}
	}
	crash := func(seed int64) *vfs.Mem { mem = mem.Crash(seed, vfs.CrashOptions{}); return mem }
	s, _ := mustOpen(t, mem, cfg)
	check(s, "new store", false)
	fill(t, s, 1, 50)
	s, _ = mustOpen(t, crash(1), cfg) // a power cut: s never closed
	check(s, "after a power cut", true)
	fill(t, s, 2, 50)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, _ = mustOpen(t, mem, cfg)
	check(s, "clean restart", true)
	if err := s.ClearMayLackAcked(); err != nil {
		t.Fatal(err)
	}
	check(s, "cleared", false)
	if err := s.ClearMayLackAcked(); err != nil {
		t.Fatalf("clearing twice: %v", err)
	}
	fill(t, s, 3, 50)
	s, _ = mustOpen(t, crash(2), cfg)
	check(s, "a power cut after the clear", true)
	if err := s.ClearMayLackAcked(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The clear was durable: a power cut after the clean stop keeps it.
	s, _ = mustOpen(t, crash(3), cfg)
	defer s.Close()
	check(s, "cleared, stopped cleanly, then a power cut", false)
}
