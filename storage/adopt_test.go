package storage

import (
	"math/rand"
	"testing"

	"github.com/wharfmq/wharf/storage/vfs"
)

// syncCountFS counts directory syncs.
type syncCountFS struct {
	vfs.FS
	dirSyncs *int
}

func (f syncCountFS) SyncDir(dir string) error {
	*f.dirSyncs++
	return f.FS.SyncDir(dir)
}

// TestAdoptedSegmentDirSync: adopting a prepared segment syncs no
// directory (the writer's appends never wait for that fsync); the entry
// is durable before a record goes into the segment, either because the
// writer's background SyncDir came back first (NextDirSynced) or because
// the roll into it synced the directory itself. A power cut right after
// the roll keeps the segment, with the flushed record in it.
func TestAdoptedSegmentDirSync(t *testing.T) {
	for _, reported := range []bool{true, false} {
		mem := vfs.NewMem()
		syncs := 0
		cfg := testConfig("/store")
		s, _ := mustOpen(t, syncCountFS{FS: mem, dirSyncs: &syncs}, cfg)
		rng := rand.New(rand.NewSource(1))
		cl := s.CommitLog()
		seq := 0
		appendOne := func() AppendResult {
			t.Helper()
			seq++
			out, err := s.AppendBatch([]*Message{genMessage(rng, "t", 0, seq)}, fixedNow.UnixMilli(), nil)
			if err != nil || out[0].Err != nil {
				t.Fatalf("append %d: %v %v", seq, err, out)
			}
			return out[0]
		}
		appendOne()
		start, need := cl.NextSegmentStart()
		if !need {
			t.Fatal("no next segment to prepare")
		}
		p, err := cl.CreateSegment(start)
		if err != nil {
			t.Fatal(err)
		}
		before := syncs
		if err := cl.AdoptSegment(p); err != nil {
			t.Fatal(err)
		}
		if syncs != before {
			t.Fatalf("AdoptSegment synced the directory %d times: every append waits for that fsync", syncs-before)
		}
		if reported {
			if err := cl.SyncDir(); err != nil { // the writer's background job
				t.Fatal(err)
			}
			cl.NextDirSynced(start)
		}
		before = syncs
		var last AppendResult
		for last.PhyOffset < start {
			last = appendOne()
		}
		want := 1 // the roll syncs the directory itself
		if reported {
			want = 0
		}
		if got := syncs - before; got != want {
			t.Fatalf("reported %v: the roll into the adopted segment synced the directory %d times, want %d", reported, got, want)
		}
		if _, err := cl.Flush(cl.MaxOffset()); err != nil {
			t.Fatal(err)
		}
		img := mem.Crash(3, vfs.CrashOptions{})
		s2, rep := mustOpen(t, img, cfg)
		if end := s2.CommitLog().MaxOffset(); end < last.PhyOffset+int64(last.Size) {
			t.Fatalf("reported %v: the log ends at %d after a power cut, want the flushed record at %d in the adopted segment (report %v)", reported, end, last.PhyOffset, rep)
		}
		if err := Check(s2); err != nil {
			t.Fatalf("reported %v: check after the power cut: %v", reported, err)
		}
		s2.Close()
		s.Close()
	}
}
