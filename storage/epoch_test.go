package storage

import (
	"bytes"
	"errors"
	"math/rand"
	"os"
	"slices"
	"testing"

	"github.com/wharfmq/wharf/storage/vfs"
)

var goldenEpochs = []EpochEntry{{1, 0}, {2, 1024}, {5, 1 << 20}}

// TestEpochFileGolden pins the epoch file's bytes to RocketMQ's
// CheckpointFile text (the golden's CRC was computed apart from this
// code: zlib.crc32(lines) & 0x7fffffff).
func TestEpochFileGolden(t *testing.T) {
	const golden = "testdata/epochFileCheckpoint.golden"
	got := encodeEpochs(goldenEpochs)
	if *update {
		os.WriteFile(golden, got, 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("golden file: %v (run with -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("epoch file differs from %s:\ngot:\n%s\nwant:\n%s", golden, got, want)
	}
	back, err := decodeEpochs(want)
	if err != nil || !slices.Equal(back, goldenEpochs) {
		t.Fatalf("decode golden: %v, %v", back, err)
	}
	if got := encodeEpochs(nil); string(got) != "0\n0\n" {
		t.Fatalf("empty epoch file is %q", got)
	}
}

func TestDecodeEpochsRefuses(t *testing.T) {
	good := string(encodeEpochs(goldenEpochs))
	for name, text := range map[string]string{
		"empty":           "",
		"no crc line":     "3\n",
		"bad count":       "x\n0\n",
		"count too high":  "4" + good[1:],
		"crc mismatch":    "3\n1\n1-0\n2-1024\n5-1048576\n",
		"flipped digit":   good[:len(good)-3] + "7\n",
		"epoch 0":         string(encodeEpochs([]EpochEntry{{0, 0}})),
		"epochs decrease": string(encodeEpochs([]EpochEntry{{2, 0}, {1, 10}})),
		"starts decrease": string(encodeEpochs([]EpochEntry{{1, 10}, {2, 0}})),
		"no dash":         "1\n" + "0\n" + "10\n",
		"truncated":       good[:len(good)-1],
	} {
		if _, err := decodeEpochs([]byte(text)); err == nil {
			t.Errorf("%s: %q decoded", name, text)
		}
	}
}

// FuzzDecodeEpochs: the decoder never panics, and what it accepts is a
// valid entry list that encodes back to the same bytes.
func FuzzDecodeEpochs(f *testing.F) {
	f.Add(encodeEpochs(goldenEpochs))
	f.Add(encodeEpochs(nil))
	f.Add([]byte("1\n0\n1-0\n"))
	f.Add(encodeEpochs([]EpochEntry{{3, 7}, {4, 7}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeEpochs(b)
		if err != nil {
			return
		}
		for i := range e {
			if e[i].Epoch <= 0 || e[i].StartOffset < 0 || (i > 0 && (e[i].Epoch <= e[i-1].Epoch || e[i].StartOffset < e[i-1].StartOffset)) {
				t.Fatalf("accepted an invalid list %v from %q", e, b)
			}
		}
		again, err := decodeEpochs(encodeEpochs(e))
		if err != nil || !slices.Equal(again, e) {
			t.Fatalf("%v does not round-trip: %v %v", e, again, err)
		}
	})
}

func TestCommonPoint(t *testing.T) {
	type ee = []EpochEntry
	for _, tc := range []struct {
		name                string
		local, remote       ee
		localEnd, remoteEnd int64
		want                int64 // -1: ErrNoCommonEpoch
	}{
		{"same log", ee{{1, 0}, {2, 100}}, ee{{1, 0}, {2, 100}}, 150, 150, 150},
		{"the local log behind", ee{{1, 0}, {2, 100}}, ee{{1, 0}, {2, 100}}, 120, 150, 120},
		{"the remote behind in the same epoch", ee{{1, 0}, {2, 100}}, ee{{1, 0}, {2, 100}}, 150, 120, 120},
		{"the remote moved on to a new epoch", ee{{1, 0}}, ee{{1, 0}, {3, 100}}, 90, 200, 90},
		{"diverged tail in the same epoch: the remote's next epoch starts first", ee{{1, 0}, {2, 100}}, ee{{1, 0}, {2, 100}, {3, 130}}, 180, 300, 130},
		{"diverged tail: an old master's epoch the new one never saw", ee{{1, 0}, {2, 100}}, ee{{1, 0}, {3, 100}}, 180, 300, 100},
		{"diverged: the local log went on in an epoch the remote ended", ee{{1, 0}}, ee{{1, 0}, {2, 100}}, 180, 300, 100},
		{"the newest common epoch wins over older ones", ee{{1, 0}, {2, 50}, {4, 120}}, ee{{1, 0}, {2, 50}, {3, 140}}, 200, 300, 120},
		{"same epoch, other start: not common", ee{{1, 0}, {2, 100}}, ee{{1, 0}, {2, 110}}, 150, 150, 100},
		{"an empty epoch on the local side", ee{{1, 0}, {2, 100}, {3, 100}}, ee{{1, 0}, {3, 100}}, 140, 160, 140},
		{"an empty epoch the remote never saw (#9689)", ee{{1, 0}, {2, 100}}, ee{{1, 0}, {3, 100}}, 100, 160, 100},
		{"the remote's last epoch is empty", ee{{1, 0}, {2, 100}}, ee{{1, 0}, {2, 100}}, 140, 100, 100},
		{"starting mid-log after retention", ee{{4, 4096}}, ee{{1, 0}, {4, 4096}}, 5000, 6000, 5000},
		{"no common epoch", ee{{1, 0}, {2, 100}}, ee{{3, 0}, {4, 100}}, 150, 150, -1},
		{"a master deposed before it wrote, its epoch unseen by the new one", ee{{1, 0}}, ee{{2, 0}}, 0, 300, 0},
		{"the same after older data both hold", ee{{1, 0}, {3, 200}}, ee{{1, 0}, {4, 200}}, 200, 300, 200},
		{"empty local epochs after bytes the remote's epoch may not hold", ee{{1, 50}}, ee{{2, 0}}, 50, 300, -1},
		{"a deposed master that wrote in its epoch the new one never saw", ee{{1, 0}}, ee{{2, 0}}, 80, 300, -1},
		{"the remote has none", ee{{1, 0}}, nil, 150, 150, -1},
		{"the local store has none", nil, ee{{1, 0}}, 150, 150, -1},
		{"neither has any", nil, nil, 0, 0, -1},
	} {
		got, err := CommonPoint(tc.local, tc.remote, tc.localEnd, tc.remoteEnd)
		switch {
		case tc.want < 0 && !errors.Is(err, ErrNoCommonEpoch):
			t.Errorf("%s: got %d, %v; want ErrNoCommonEpoch", tc.name, got, err)
		case tc.want >= 0 && (err != nil || got != tc.want):
			t.Errorf("%s: got %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}
}

// appendN appends n messages over a few queues and returns them.
func appendN(t testing.TB, s *Store, rng *rand.Rand, seq, n int) []AppendResult {
	t.Helper()
	var msgs []*Message
	for i := range n {
		msgs = append(msgs, genMessage(rng, []string{"orders", "audit"}[i%2], int32(i%3), seq+i))
	}
	out, err := s.AppendBatch(msgs, 1_700_000_000_000+int64(seq), nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestStartEpoch(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig("/store")
	s, _ := mustOpen(t, mem, cfg)
	rng := rand.New(rand.NewSource(1))
	if _, ok := s.LastEpoch(); ok || len(s.Epochs()) != 0 {
		t.Fatalf("a new store has epochs %v", s.Epochs())
	}
	step := func(epoch int32, at int64, ok bool, want ...EpochEntry) {
		t.Helper()
		err := s.StartEpoch(epoch, at)
		if (err == nil) != ok {
			t.Fatalf("StartEpoch(%d, %d): %v, want ok=%v", epoch, at, err, ok)
		}
		if !slices.Equal(s.Epochs(), want) {
			t.Fatalf("StartEpoch(%d, %d): epochs %v, want %v", epoch, at, s.Epochs(), want)
		}
	}
	step(0, 0, false)
	step(1, 0, true, EpochEntry{1, 0})
	step(1, 0, true, EpochEntry{1, 0}) // again: no change
	end := appendN(t, s, rng, 0, 5)[4]
	e1 := end.PhyOffset + int64(end.Size)
	step(2, e1-1, false, EpochEntry{1, 0}) // claims bytes of epoch 1
	step(2, e1+1, false, EpochEntry{1, 0}) // beyond the end
	step(2, e1, true, EpochEntry{1, 0}, EpochEntry{2, e1})
	step(1, e1, false, EpochEntry{1, 0}, EpochEntry{2, e1}) // stale
	if err := s.StartEpoch(1, e1); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("stale epoch: %v", err)
	}
	// Epoch 2 had no write when epoch 3 started: 3 replaces it (#9689).
	step(3, e1, true, EpochEntry{1, 0}, EpochEntry{3, e1})
	appendN(t, s, rng, 5, 3)
	checkStore(t, s, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, _ = mustOpen(t, mem, cfg)
	defer s.Close()
	if want := []EpochEntry{{1, 0}, {3, e1}}; !slices.Equal(s.Epochs(), want) {
		t.Fatalf("after reopen: %v, want %v", s.Epochs(), want)
	}
	if last, _ := s.LastEpoch(); last != (EpochEntry{3, e1}) {
		t.Fatalf("last epoch %v", last)
	}
}

// TestStartEpochEmptySlave: an empty log that starts at its master's
// offset mid-epoch records the epoch's start below its own.
func TestStartEpochEmptySlave(t *testing.T) {
	cfg := testConfig("/store")
	s, _ := mustOpen(t, vfs.NewMem(), cfg)
	defer s.Close()
	seg := cfg.MappedFileSizeCommitLog
	if err := s.StartAt(2 * seg); err != nil {
		t.Fatal(err)
	}
	if err := s.StartEpoch(4, seg+100); err != nil {
		t.Fatalf("empty log, epoch started before its start: %v", err)
	}
}

// TestEpochFileBackup: a damaged epoch file is replaced by its .bak (the
// previous content); both damaged stops Open.
func TestEpochFileBackup(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig("/store")
	s, _ := mustOpen(t, mem, cfg)
	must(t, s.StartEpoch(1, 0))
	must(t, s.StartEpoch(2, 0))
	must(t, s.Close())
	writeRaw(t, mem, "/store/epochFileCheckpoint", []byte("2\n12\n1-0\n"))
	s, _ = mustOpen(t, mem, cfg)
	if want := []EpochEntry{{1, 0}}; !slices.Equal(s.Epochs(), want) {
		t.Fatalf("from the backup: %v, want %v", s.Epochs(), want)
	}
	must(t, s.Close())
	writeRaw(t, mem, "/store/epochFileCheckpoint.bak", []byte("junk"))
	if _, _, err := Open(mem, cfg); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("both damaged: %v, want ErrCorrupt", err)
	}
}

// TestRecoveryDropsEpochsBeyondTheLog: an epoch started at an end that a
// crash then cut (its bytes were not flushed) names bytes the log does not
// hold; recovery drops it, and keeps one that starts at the end.
func TestRecoveryDropsEpochsBeyondTheLog(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig("/store")
	s, _ := mustOpen(t, mem, cfg)
	rng := rand.New(rand.NewSource(2))
	must(t, s.StartEpoch(1, 0))
	appendN(t, s, rng, 0, 4)
	flushed, err := s.Flush(s.CommitLog().MaxOffset())
	must(t, err)
	must(t, s.StartEpoch(2, flushed))
	appendN(t, s, rng, 4, 4)
	must(t, s.StartEpoch(3, s.CommitLog().MaxOffset()))
	img := mem.Crash(1, vfs.CrashOptions{}) // only synced bytes survive
	s.closeFiles()
	s, _ = mustOpen(t, img, cfg)
	defer s.Close()
	if got, want := s.Epochs(), []EpochEntry{{1, 0}, {2, flushed}}; s.CommitLog().MaxOffset() != flushed || !slices.Equal(got, want) {
		t.Fatalf("after the crash: log end %d epochs %v, want end %d epochs %v", s.CommitLog().MaxOffset(), got, flushed, want)
	}
	checkStore(t, s, nil)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func writeRaw(t testing.TB, fsys vfs.FS, name string, b []byte) {
	t.Helper()
	_ = fsys.Remove(name)
	f, err := fsys.Create(name, 0)
	must(t, err)
	_, err = f.WriteAt(b, 0)
	must(t, err)
	must(t, f.Sync())
	must(t, f.Close())
}
