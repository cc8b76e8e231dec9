package storage

import (
	"testing"

	"github.com/wharfmq/wharf/storage/vfs"
)

// A slave copies the master's log up to the end of a segment (its last
// record and the blank filler) and creates the next segment only when the
// next bytes come. If it crashes then, flushed and checkpointed, its log
// ends exactly where a segment ends, and recovery began its scan at that
// end, which no segment holds: it dereferenced the missing segment. Found
// by the simulator (seed 2139 of `wharf sim --seeds 3000`, a slave crash
// with log_end = flushed = 14 MiB).
func TestRecoverLogEndingAtSegmentEnd(t *testing.T) {
	master, _ := mustOpen(t, vfs.NewMem(), testConfig("/m"))
	defer master.Close()
	fill(t, master, 1, 60)
	seg := master.CommitLog().SegmentSize()
	if master.CommitLog().MaxOffset() <= seg {
		t.Fatalf("the master's log (%d bytes) does not reach a second segment", master.CommitLog().MaxOffset())
	}
	mem := vfs.NewMem()
	cfg := testConfig("/s")
	slave, _ := mustOpen(t, mem, cfg)
	chunk, err := master.CommitLog().Read(0, int(seg))
	if err != nil {
		t.Fatal(err)
	}
	if err := slave.CommitLog().AppendRaw(0, chunk); err != nil {
		t.Fatalf("append raw: %v", err)
	}
	if _, err := slave.Dispatch(slave.CommitLog().MaxOffset(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := slave.Flush(slave.CommitLog().MaxOffset()); err != nil {
		t.Fatal(err)
	}
	if err := slave.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if got := slave.CommitLog().MaxOffset(); got != seg {
		t.Fatalf("the slave's log ends at %d, want the segment's end %d", got, seg)
	}
	for i, opts := range []vfs.CrashOptions{{}, {UnsyncedKeepRatio: 1}} {
		img := mem.Crash(int64(i), opts)
		s2, rep, err := Open(img, cfg)
		if err != nil {
			t.Fatalf("crash %+v: recover: %v (report %+v)", opts, err, rep)
		}
		if got := s2.CommitLog().MaxOffset(); got != seg {
			t.Fatalf("crash %+v: recovered log ends at %d, want %d", opts, got, seg)
		}
		checkStore(t, s2, nil)
		// Replication goes on in a new segment.
		rest, err := master.CommitLog().ReadRecords(seg, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if err := s2.CommitLog().AppendRaw(seg, rest); err != nil {
			t.Fatalf("crash %+v: append raw after recovery: %v", opts, err)
		}
		s2.Close()
	}
	slave.Close()
}
