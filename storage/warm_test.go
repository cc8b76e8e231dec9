package storage

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/wharfmq/wharf/storage/vfs"
)

// TestWarmAheadModes: the writer gets work ahead of the log's end with
// warmMapedFileEnable (populate) and under SYNC_FLUSH (materialize: populate
// and write back), none with neither; the work is not handed out again while
// the window is still ahead; and it changes no byte the log holds, on the OS
// FS where it acts.
func TestWarmAheadModes(t *testing.T) {
	for _, c := range []struct {
		warm, syncFlush, work bool
	}{
		{false, false, false},
		{true, false, true},
		{false, true, true},
		{true, true, true},
	} {
		t.Run(fmt.Sprintf("warm=%v/sync=%v", c.warm, c.syncFlush), func(t *testing.T) {
			cfg := benchConfig(t.TempDir(), 8<<20)
			cfg.MaxMessageSize = 64 << 10
			cfg.WarmMappedFileEnable, cfg.WriteBackAhead = c.warm, c.syncFlush
			s, _ := mustOpen(t, vfs.NewOS(), cfg)
			defer s.Close()
			batch := benchMessages(8, 1024, "warm", 2)
			res, err := s.AppendBatch(batch, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			before, err := s.CommitLog().Read(0, int(s.CommitLog().MaxOffset()))
			if err != nil {
				t.Fatal(err)
			}
			before = bytes.Clone(before)
			warm := s.CommitLog().WarmAhead()
			if (warm != nil) != c.work {
				t.Fatalf("WarmAhead gave work: %v, want %v", warm != nil, c.work)
			}
			if warm == nil {
				return
			}
			warm()
			if again := s.CommitLog().WarmAhead(); again != nil {
				t.Fatal("WarmAhead gave work again with the window still ahead")
			}
			after, err := s.CommitLog().Read(0, int(s.CommitLog().MaxOffset()))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(before, after) || len(res) != len(batch) {
				t.Fatal("the warm work changed the log's bytes")
			}
		})
	}
}
