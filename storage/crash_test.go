package storage

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"testing"

	"github.com/wharfmq/wharf/storage/vfs"
)

var errCrashed = errors.New("crashed")

// workloadResult is what a workload knows at the moment it stopped.
type workloadResult struct {
	records []appended // everything AppendBatch reported stored
	flushed int64      // the highest offset a successful Flush reported
}

// runWorkload appends batches to several queues, flushing, dispatching and
// checkpointing now and then, until done or the first error (an injected
// crash). It returns what was stored and what was acknowledged as durable.
func runWorkload(fsys vfs.FS, cfg Config, seed int64, batches int) (res workloadResult, err error) {
	rng := rand.New(rand.NewSource(seed))
	s, _, err := Open(fsys, cfg)
	if err != nil {
		return res, err
	}
	topics := []string{"orders", "audit", "%RETRY%g1"}
	seq := 0
	var out []AppendResult
	for b := 0; b < batches; b++ {
		var msgs []*Message
		for range 1 + rng.Intn(6) {
			msgs = append(msgs, genMessage(rng, topics[rng.Intn(len(topics))], int32(rng.Intn(2)), seq))
			seq++
		}
		out, err = s.AppendBatch(msgs, 1_700_000_000_000+int64(b)*1000, out)
		for i, r := range out {
			if r.Err != nil {
				return res, fmt.Errorf("message %d illegal: %w", i, r.Err)
			}
			data, rerr := s.CommitLog().Read(r.PhyOffset, int(r.Size))
			if rerr != nil {
				return res, rerr
			}
			res.records = append(res.records, appended{off: r.PhyOffset, data: bytes.Clone(data),
				key: QueueKey{msgs[i].Topic, msgs[i].QueueID}, qo: r.QueueOffset})
		}
		if err != nil {
			return res, err
		}
		if rng.Intn(3) == 0 {
			f, ferr := s.Flush(s.CommitLog().MaxOffset())
			if ferr != nil {
				return res, ferr
			}
			res.flushed = f
		}
		if rng.Intn(4) == 0 {
			if _, err := s.Dispatch(s.CommitLog().MaxOffset(), nil); err != nil {
				return res, err
			}
		}
		if rng.Intn(8) == 0 {
			if err := s.Checkpoint(); err != nil {
				return res, err
			}
		}
		if rng.Intn(10) == 0 {
			if _, err := s.Clean(fixedNow, false); err != nil {
				return res, err
			}
		}
	}
	if err := s.Close(); err != nil {
		return res, err
	}
	res.flushed = s.CommitLog().FlushedOffset()
	return res, nil
}

// verifyRecovered opens a crashed image and checks the crash-loop
// invariants: it opens; every record flushed before the crash is present and
// byte-identical; nothing appears that was never written; queues are
// contiguous and every ConsumeQueue entry points at a valid record of its
// queue; and the store accepts writes again with the right queue offsets.
func verifyRecovered(t *testing.T, img vfs.FS, cfg Config, res workloadResult, label string) {
	t.Helper()
	s, rep, err := Open(img, cfg)
	if err != nil {
		t.Fatalf("%s: recovery failed: %v (report %v)", label, err, rep)
	}
	defer s.Close()
	want := map[int64][]byte{}
	for _, a := range res.records {
		want[a.off] = a.data
	}
	cl := s.CommitLog()
	for _, a := range res.records {
		if a.off+int64(len(a.data)) > res.flushed {
			continue
		}
		got, err := cl.Read(a.off, len(a.data))
		if err != nil || !bytes.Equal(got, a.data) {
			t.Fatalf("%s: flushed record at %d (queue %s offset %d) lost or changed after recovery (log ends at %d, err %v, report %v)",
				label, a.off, a.key, a.qo, cl.MaxOffset(), err, rep)
		}
	}
	checkStore(t, s, want)
	// New writes continue each queue without a gap or a duplicate.
	k := QueueKey{"orders", 0}
	next := cl.QueueOffset(k)
	out, err := s.AppendBatch([]*Message{{Topic: k.Topic, QueueID: k.QueueID, Body: []byte("after")}}, 1, nil)
	if err != nil || out[0].QueueOffset != next {
		t.Fatalf("%s: append after recovery: %v, offset %v want %d", label, err, out, next)
	}
}

var crashOpts = []vfs.CrashOptions{
	{}, // only synced bytes survive
	{UnsyncedKeepRatio: 0.5, TornLastPage: true}, // some written-back pages, a torn one
	{UnsyncedKeepRatio: 1},                       // everything written survived
	vfs.ProcessCrash,                             // the process died: directory entries too
}

// TestCrashLoop crashes the workload after its k-th file-system operation,
// for every k, under three write-back models, and checks recovery.
func TestCrashLoop(t *testing.T) {
	cfg := testConfig("/store")
	const batches = 60
	counter := &vfs.Counter{}
	mem := vfs.NewMem()
	if _, err := runWorkload(vfs.NewFaulty(mem, counter), cfg, 1, batches); err != nil {
		t.Fatalf("clean run: %v", err)
	}
	total := counter.Count()
	if total < 50 {
		t.Fatalf("workload did only %d file-system operations; the loop would test little", total)
	}
	step := 1
	if testing.Short() {
		step = 7
	}
	for k := 0; k < total; k += step {
		for oi, opts := range crashOpts {
			mem := vfs.NewMem()
			var img *vfs.Mem
			inj := vfs.OnOp(func(n int, op vfs.Op) error {
				if n == k {
					img = mem.Crash(int64(k*31+oi), opts)
				}
				if n >= k {
					return errCrashed
				}
				return nil
			})
			res, err := runWorkload(vfs.NewFaulty(mem, inj), cfg, 1, batches)
			if !errors.Is(err, errCrashed) {
				t.Fatalf("k=%d: workload ended with %v, want the injected crash", k, err)
			}
			verifyRecovered(t, img, cfg, res, fmt.Sprintf("k=%d/%d opts=%+v", k, total, opts))
		}
	}
	t.Logf("crashed at each of %d operations under %d write-back models", total, len(crashOpts))
}

// TestCrashDuringRecovery crashes the recovery of a crashed store at each of
// its operations, then recovers again.
func TestCrashDuringRecovery(t *testing.T) {
	cfg := testConfig("/store")
	mem := vfs.NewMem()
	var img *vfs.Mem
	inj := vfs.OnOp(func(n int, op vfs.Op) error {
		if n == 400 {
			img = mem.Crash(5, vfs.CrashOptions{UnsyncedKeepRatio: 0.5, TornLastPage: true})
		}
		if n >= 400 {
			return errCrashed
		}
		return nil
	})
	res, err := runWorkload(vfs.NewFaulty(mem, inj), cfg, 2, 200)
	if !errors.Is(err, errCrashed) {
		t.Fatalf("workload: %v", err)
	}
	counter := &vfs.Counter{}
	s, _, err := Open(vfs.NewFaulty(img.Crash(0, vfs.CrashOptions{UnsyncedKeepRatio: 1}), counter), cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.closeFiles()
	for k := 0; k < counter.Count(); k++ {
		base := img.Crash(0, vfs.CrashOptions{UnsyncedKeepRatio: 1})
		var again *vfs.Mem
		inj := vfs.OnOp(func(n int, op vfs.Op) error {
			if n == k {
				again = base.Crash(int64(k), vfs.CrashOptions{UnsyncedKeepRatio: 0.5, TornLastPage: true})
			}
			if n >= k {
				return errCrashed
			}
			return nil
		})
		if s, _, err := Open(vfs.NewFaulty(base, inj), cfg); err == nil {
			s.closeFiles()
		}
		verifyRecovered(t, again, cfg, res, fmt.Sprintf("recovery crashed at op %d", k))
	}
}
