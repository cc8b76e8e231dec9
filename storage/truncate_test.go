package storage

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/wharfmq/wharf/storage/vfs"
)

// replicaFixture is a store with 90 records over several segments in three
// epochs (1 from 0, 2 from record 30, 3 from record 60), some of it
// flushed, dispatched and checkpointed.
type replicaFixture struct {
	s       *Store
	recs    []appended
	epochs  []EpochEntry
	flushed int64
}

func newReplicaFixture(t testing.TB, fsys vfs.FS, cfg Config, dispatch int) *replicaFixture {
	t.Helper()
	s, _ := mustOpen(t, fsys, cfg)
	fx := &replicaFixture{s: s}
	rng := rand.New(rand.NewSource(7))
	for i := 0; i < 90; i += 3 {
		if i%30 == 0 {
			e := EpochEntry{int32(1 + i/30), s.CommitLog().MaxOffset()}
			must(t, s.StartEpoch(e.Epoch, e.StartOffset))
			fx.epochs = append(fx.epochs, e)
		}
		var msgs []*Message
		for j := i; j < i+3; j++ {
			msgs = append(msgs, genMessage(rng, []string{"orders", "audit", "%RETRY%g1"}[j%3], int32(j%2), j))
		}
		out, err := s.AppendBatch(msgs, 1_700_000_000_000+int64(i), nil)
		must(t, err)
		for k, r := range out {
			data, err := s.CommitLog().Read(r.PhyOffset, int(r.Size))
			must(t, err)
			fx.recs = append(fx.recs, appended{off: r.PhyOffset, data: bytes.Clone(data), key: QueueKey{msgs[k].Topic, msgs[k].QueueID}, qo: r.QueueOffset})
		}
		if i == 36 {
			f, err := s.Flush(s.CommitLog().MaxOffset())
			must(t, err)
			fx.flushed = f
		}
	}
	if dispatch > 0 {
		upTo := s.CommitLog().MaxOffset()
		if dispatch < len(fx.recs) {
			upTo = fx.recs[dispatch].off
		}
		_, err := s.Dispatch(upTo, nil)
		must(t, err)
	}
	must(t, s.Checkpoint())
	return fx
}

// want is every record's bytes by offset.
func (fx *replicaFixture) want() map[int64][]byte {
	m := map[int64][]byte{}
	for _, r := range fx.recs {
		m[r.off] = r.data
	}
	return m
}

// expectAfterCut is what a store cut at off must hold: the epoch entries
// that start at or below it, and each queue's next offset.
func (fx *replicaFixture) expectAfterCut(off int64) ([]EpochEntry, map[QueueKey]int64) {
	var epochs []EpochEntry
	for _, e := range fx.epochs {
		if e.StartOffset <= off {
			epochs = append(epochs, e)
		}
	}
	next := map[QueueKey]int64{}
	for _, r := range fx.recs {
		if r.off < off {
			next[r.key] = r.qo + 1
		} else if _, ok := next[r.key]; !ok {
			next[r.key] = r.qo
		}
	}
	return epochs, next
}

func (fx *replicaFixture) check(t *testing.T, off int64, label string) {
	t.Helper()
	s := fx.s
	if s.CommitLog().MaxOffset() != off {
		t.Fatalf("%s: log ends at %d, want %d", label, s.CommitLog().MaxOffset(), off)
	}
	checkStore(t, s, fx.want())
	epochs, next := fx.expectAfterCut(off)
	if !slices.Equal(s.Epochs(), epochs) {
		t.Fatalf("%s: epochs %v, want %v", label, s.Epochs(), epochs)
	}
	for k, n := range next {
		if got := s.CommitLog().QueueOffset(k); got != n {
			t.Fatalf("%s: queue %s continues at %d, want %d", label, k, got, n)
		}
	}
}

func TestTruncateTo(t *testing.T) {
	cfg := testConfig("/store")
	probe := newReplicaFixture(t, vfs.NewMem(), cfg, 0)
	segStart := -1 // the first record of the second segment
	for i, r := range probe.recs {
		if r.off >= cfg.MappedFileSizeCommitLog {
			segStart = i
			break
		}
	}
	if segStart < 0 || probe.s.CommitLog().MaxOffset() < 2*cfg.MappedFileSizeCommitLog {
		t.Fatalf("the fixture spans too few segments (%d bytes)", probe.s.CommitLog().MaxOffset())
	}
	probe.s.Close()
	for _, tc := range []struct {
		name     string
		cut      int // record index; -1: the log's end
		dispatch int // records dispatched before the cut
	}{
		{"everything", 0, 90},
		{"mid first segment, nothing dispatched", 7, 0},
		{"mid first segment, all dispatched", 7, 90},
		{"at an epoch start", 30, 45},
		{"at a segment start", segStart, 90},
		{"just after a segment start", segStart + 1, segStart + 1},
		{"the last record", 89, 90},
		{"nothing to cut", -1, 90},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			fx := newReplicaFixture(t, mem, cfg, tc.dispatch)
			off := fx.s.CommitLog().MaxOffset()
			if tc.cut >= 0 {
				off = fx.recs[tc.cut].off
			}
			must(t, fx.s.cl.Prepare()) // a segment prepared for the old end
			fx.s.StopWrites()
			if err := fx.s.TruncateTo(off); err != nil {
				t.Fatal(err)
			}
			fx.check(t, off, "after the cut")
			if fx.s.Dispatched() > off {
				t.Fatalf("reput position %d beyond the cut %d", fx.s.Dispatched(), off)
			}
			// The store takes writes again and keeps every queue contiguous.
			fx.recs = slices.DeleteFunc(fx.recs, func(a appended) bool { return a.off >= off })
			fx.s.ResumeWrites()
			rng := rand.New(rand.NewSource(9))
			for _, r := range appendN(t, fx.s, rng, 100, 6) {
				data, _ := fx.s.CommitLog().Read(r.PhyOffset, int(r.Size))
				fx.recs = append(fx.recs, appended{off: r.PhyOffset, data: bytes.Clone(data)})
			}
			_, err := fx.s.Dispatch(fx.s.CommitLog().MaxOffset(), nil)
			must(t, err)
			checkStore(t, fx.s, fx.want())
			must(t, fx.s.Close())
			s, _ := mustOpen(t, mem, cfg)
			defer s.Close()
			checkStore(t, s, fx.want())
		})
	}
}

func TestTruncateToRefuses(t *testing.T) {
	cfg := testConfig("/store")
	fx := newReplicaFixture(t, vfs.NewMem(), cfg, 45)
	defer fx.s.Close()
	s := fx.s
	end := s.CommitLog().MaxOffset()
	if err := s.TruncateTo(fx.recs[10].off); !errors.Is(err, ErrServingWrites) {
		t.Fatalf("truncate while serving writes: %v", err)
	}
	s.StopWrites()
	if _, err := s.AppendBatch([]*Message{{Topic: "orders", Body: []byte("x")}}, 1, nil); !errors.Is(err, ErrWritesStopped) {
		t.Fatalf("append after StopWrites: %v", err)
	}
	for name, off := range map[string]int64{
		"inside a record": fx.recs[10].off + 5,
		"beyond the end":  end + 1,
		"negative":        -1,
	} {
		if err := s.TruncateTo(off); err == nil {
			t.Errorf("%s: truncate to %d succeeded", name, off)
		}
	}
	fx.check(t, end, "after the refusals")
}

// TestTruncateCrashLoop crashes a truncation after each of its file-system
// operations, under three write-back models, and checks that recovery
// gives a consistent store that either still holds the old tail or does
// not, never less below the cut than was flushed, and that truncating
// again then succeeds.
func TestTruncateCrashLoop(t *testing.T) {
	cfg := testConfig("/store")
	cutAt := 13 // record index: in the first segment, below the flushed offset
	run := func(k int, opts vfs.CrashOptions, seed int64) (img *vfs.Mem, fx *replicaFixture, off int64, done bool) {
		mem := vfs.NewMem()
		armed, n := false, 0
		inj := vfs.InjectorFunc(func(op vfs.Op) error {
			if !armed {
				return nil
			}
			if n == k {
				img = mem.Crash(seed, opts)
			}
			n++
			if img != nil {
				return errCrashed
			}
			return nil
		})
		fx = newReplicaFixture(t, vfs.NewFaulty(mem, inj), cfg, 60)
		off = fx.recs[cutAt].off
		fx.s.StopWrites()
		armed = true
		err := fx.s.TruncateTo(off)
		if img == nil {
			if err != nil {
				t.Fatalf("k=%d: truncate without a crash: %v", k, err)
			}
			img = mem.Crash(seed, opts)
			done = true
		}
		fx.s.closeFiles()
		return img, fx, off, done
	}
	total := 0
	for k := 0; ; k++ {
		for oi, opts := range crashOpts {
			label := fmt.Sprintf("k=%d opts=%+v", k, opts)
			img, fx, off, done := run(k, opts, int64(k*7+oi))
			s, rep, err := Open(img, cfg)
			if err != nil {
				t.Fatalf("%s: recovery: %v (%v)", label, err, rep)
			}
			fx.s = s
			checkStore(t, s, fx.want())
			end := s.CommitLog().MaxOffset()
			if done && end > off {
				t.Fatalf("%s: the truncation returned, yet the log ends at %d beyond the cut %d", label, end, off)
			}
			if end < min(off, fx.flushed) {
				t.Fatalf("%s: the log ends at %d, below the cut %d and the flushed %d", label, end, off, fx.flushed)
			}
			s.StopWrites()
			if end >= off {
				must(t, s.TruncateTo(off))
				fx.check(t, off, label+", truncated again")
			}
			must(t, s.Close())
			if done {
				total = k
			}
		}
		if total > 0 {
			break
		}
	}
	if total < 10 {
		t.Fatalf("the truncation did only %d file-system operations; the loop tests little", total)
	}
	t.Logf("crashed at each of %d operations of a truncation under %d write-back models", total, len(crashOpts))
}

// TestRequestedCut: a cut requested by a running store is done by the
// next Open, once; a request lapses when an epoch starts after it.
func TestRequestedCut(t *testing.T) {
	cfg := testConfig("/store")
	mem := vfs.NewMem()
	fx := newReplicaFixture(t, mem, cfg, 60)
	off := fx.recs[40].off
	must(t, fx.s.RequestTruncate(off))
	if fx.s.CommitLog().MaxOffset() == off {
		t.Fatal("the request cut the running store")
	}
	must(t, fx.s.Close())
	s, rep := mustOpen(t, mem, cfg)
	fx.s = s
	if rep.RequestedCut != off {
		t.Fatalf("report %v: want the requested cut at %d", rep, off)
	}
	fx.check(t, off, "after the requested cut")
	fx.recs = slices.DeleteFunc(fx.recs, func(a appended) bool { return a.off >= off })
	must(t, s.Close())
	s, rep = mustOpen(t, mem, cfg)
	if rep.RequestedCut != -1 {
		t.Fatalf("the cut was done again: %v", rep)
	}
	// A request, then an epoch (this store became a master): no cut.
	end := s.CommitLog().MaxOffset()
	must(t, s.RequestTruncate(fx.recs[10].off))
	must(t, s.StartEpoch(9, end))
	must(t, s.Close())
	s, rep = mustOpen(t, mem, cfg)
	defer s.Close()
	if rep.RequestedCut != -1 || s.CommitLog().MaxOffset() != end {
		t.Fatalf("a lapsed request cut the log: %v, end %d want %d", rep, s.CommitLog().MaxOffset(), end)
	}
	if _, err := mem.Stat("/store/" + cutRequestName); err == nil {
		t.Fatal("the lapsed request is still there")
	}
}

// TestRequestedCutCrashLoop crashes the Open that does a requested cut
// at each of its operations; the Open after it finishes the cut.
func TestRequestedCutCrashLoop(t *testing.T) {
	cfg := testConfig("/store")
	base := vfs.NewMem()
	fx := newReplicaFixture(t, base, cfg, 60)
	off := fx.recs[50].off
	must(t, fx.s.RequestTruncate(off))
	fx.s.closeFiles() // an unclean stop: recovery runs first
	for k := 0; ; k++ {
		img := base.Crash(0, vfs.CrashOptions{UnsyncedKeepRatio: 1})
		var crashed *vfs.Mem
		inj := vfs.OnOp(func(n int, op vfs.Op) error {
			if n == k {
				crashed = img.Crash(int64(k), vfs.CrashOptions{UnsyncedKeepRatio: 0.5, TornLastPage: true})
			}
			if n >= k {
				return errCrashed
			}
			return nil
		})
		s, _, err := Open(vfs.NewFaulty(img, inj), cfg)
		if crashed == nil {
			must(t, err)
			s.closeFiles()
			if k < 10 {
				t.Fatalf("the cutting Open did only %d operations", k)
			}
			t.Logf("crashed the cutting Open at each of its %d operations", k)
			return
		}
		if err == nil {
			s.closeFiles()
		}
		s, rep, err := Open(crashed, cfg)
		if err != nil {
			t.Fatalf("k=%d: open after the crash: %v (%v)", k, err, rep)
		}
		fx.s = s
		fx.check(t, off, fmt.Sprintf("k=%d", k))
		must(t, s.Close())
	}
}
