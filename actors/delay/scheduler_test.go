package delay

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/wharfmq/wharf/storage/cq"
)

// world is what a shell and the rest of the broker do around a Scheduler:
// schedule queues holding entries, a log the re-stored copies are appended
// to (each message one byte, identified by its entry's Offset), and a
// flushed offset the test moves.
type world struct {
	t        *testing.T
	s        *Scheduler
	queues   map[int32][]cq.Entry
	qmin     map[int32]int64 // first queue offset retention kept
	end      int64           // log end
	flushed  int64
	failNext bool    // the next re-store is refused
	hold     bool    // scans are not answered (left in scans)
	scans    []Scan  // scans asked for and not answered
	written  []int64 // ids re-stored, in order
	saved    []map[int32]int64
	saveErr  error
}

const levels = 2 // queues 0, 1: levels; queue 2: absolute times

func newWorld(t *testing.T, p Progress) *world {
	w := &world{t: t, s: New(levels), queues: map[int32][]cq.Entry{}, qmin: map[int32]int64{}}
	w.s.Load(p)
	return w
}

func at(ms int64) time.Time { return time.UnixMilli(ms) }

// put appends messages due at the given times (Unix ms) to a schedule queue.
func (w *world) put(q int32, id int64, due ...int64) {
	for i, d := range due {
		w.queues[q] = append(w.queues[q], cq.Entry{Offset: id + int64(i), Size: 1, TagsCode: d})
	}
}

func (w *world) tick(nowMs int64) {
	w.s.Tick(at(nowMs), w.flushed, func(q int32) int64 { return int64(len(w.queues[q])) })
	w.drain(nowMs)
}

// drain runs Ready the way the actor shell does, answering scans at once.
func (w *world) drain(nowMs int64) {
	for i := 0; ; i++ {
		if i > 100 {
			w.t.Fatal("Ready never settles")
		}
		rd := w.s.Ready()
		if rd.Save == nil && len(rd.Scans) == 0 && len(rd.Restores) == 0 {
			return
		}
		if rd.Save != nil {
			if w.saveErr == nil {
				w.saved = append(w.saved, maps.Clone(rd.Save.Offsets))
			}
			w.s.Persisted(w.saveErr)
		}
		w.scans = append(w.scans, rd.Scans...)
		if !w.hold {
			w.answer(nowMs)
		}
		for _, r := range rd.Restores {
			w.restore(r)
		}
	}
}

func (w *world) answer(nowMs int64) {
	scans := w.scans
	w.scans = nil
	for _, sc := range scans {
		entries := w.queues[sc.Queue]
		from := max(sc.From, w.qmin[sc.Queue])
		to := min(int64(len(entries)), from+int64(sc.Max))
		w.s.Entries(at(nowMs), sc.Queue, from, slices.Clone(entries[from:to]))
	}
}

func (w *world) restore(r Restore) {
	if w.failNext {
		w.failNext = false
		w.s.Stored(r.Batch, 0, errors.New("disk full"))
		return
	}
	for _, e := range r.Entries {
		w.written = append(w.written, e.Offset)
	}
	w.end += int64(len(r.Entries))
	w.s.Stored(r.Batch, w.end, nil)
}

func (w *world) lastSaved() map[int32]int64 {
	if len(w.saved) == 0 {
		return nil
	}
	return w.saved[len(w.saved)-1]
}

func (w *world) wantWritten(ids ...int64) {
	w.t.Helper()
	if !slices.Equal(w.written, ids) && !(len(ids) == 0 && len(w.written) == 0) {
		w.t.Fatalf("re-stored %v, want %v", w.written, ids)
	}
}

func (w *world) wantSaved(p map[int32]int64) {
	w.t.Helper()
	if got := w.lastSaved(); !maps.Equal(got, p) {
		w.t.Fatalf("progress written %v (of %d writes), want %v", got, len(w.saved), p)
	}
}

func TestLevelQueueInOrder(t *testing.T) {
	w := newWorld(t, Progress{})
	w.put(0, 10, 1000, 2000, 3000)
	w.tick(999)
	w.wantWritten()
	w.tick(2500)
	w.wantWritten(10, 11)
	// The third is looked at again on every tick and goes at its time.
	w.tick(2600)
	w.wantWritten(10, 11)
	w.tick(3000)
	w.wantWritten(10, 11, 12)
}

func TestLevelQueueStopsAtFirstNotDue(t *testing.T) {
	// A level queue is in delivery order: an entry behind one not yet due
	// waits, even if its own time has come.
	w := newWorld(t, Progress{})
	w.put(1, 20, 1000, 5000, 2000)
	w.tick(3000)
	w.wantWritten(20)
	w.tick(5000)
	w.wantWritten(20, 21, 22)
}

// TestAbsoluteTimesInDeliveryOrder: the absolute-time queue is in any
// order; messages go by their time, one tick after the scan that found
// them, and progress moves only over a contiguous durable prefix.
func TestAbsoluteTimesInDeliveryOrder(t *testing.T) {
	w := newWorld(t, Progress{})
	w.put(levels, 30, 3000, 1000, 2000, 1500)
	w.tick(0) // scan: nothing due yet
	w.wantWritten()
	w.tick(2500)
	w.wantWritten(31, 33, 32)
	w.flushed = w.end
	w.tick(2600)
	// Queue offset 0 (id 30) is not re-stored: progress stays at 0.
	if p := w.lastSaved(); p != nil && p[levels] != 0 {
		t.Fatalf("absolute-time progress %d past an undelivered message", p[levels])
	}
	w.tick(3000)
	w.wantWritten(31, 33, 32, 30)
	w.flushed = w.end
	w.tick(3100)
	w.wantSaved(map[int32]int64{levels: 4})
}

func TestAbsoluteTimesSkipFillers(t *testing.T) {
	w := newWorld(t, Progress{})
	w.queues[levels] = []cq.Entry{cq.Dummy, {Offset: 40, Size: 1, TagsCode: 100}}
	w.tick(200) // scans
	w.tick(300) // delivers
	w.wantWritten(40)
}

func TestProgressOnlyAfterFlush(t *testing.T) {
	w := newWorld(t, Progress{})
	w.put(0, 10, 1000, 1000)
	w.flushed = 0
	w.tick(1000)
	w.wantWritten(10, 11)
	w.flushed = w.end - 1
	w.tick(1100)
	w.tick(1200)
	if len(w.saved) != 0 {
		t.Fatalf("progress written before the copies were flushed: %v", w.saved)
	}
	w.flushed = w.end
	w.tick(1300)
	w.wantSaved(map[int32]int64{0: 2})
	// Nothing moved since: no further write.
	n := len(w.saved)
	w.tick(1400)
	w.s.Stop()
	w.drain(1400)
	if len(w.saved) != n {
		t.Fatalf("progress written again without a change: %v", w.saved)
	}
}

func TestRestartResumes(t *testing.T) {
	// Progress says queue 0 is done up to 2 and queue 1 up to 1; the
	// unflushed third message of queue 0 was lost in the crash, so it is
	// delivered again (at least once).
	w := newWorld(t, Progress{Offsets: map[int32]int64{0: 2, 1: 1}})
	w.put(0, 10, 1000, 1000, 1000, 1000)
	w.put(1, 20, 1000, 1000)
	w.tick(5000)
	w.wantWritten(12, 13, 21)
	w.flushed = w.end
	w.tick(5100)
	w.wantSaved(map[int32]int64{0: 4, 1: 2})
}

func TestRetentionMovedTheQueue(t *testing.T) {
	w := newWorld(t, Progress{})
	w.put(0, 10, 1000, 1000, 1000)
	w.qmin[0] = 2 // the first two entries are gone
	w.tick(2000)
	w.wantWritten(12)
	w.flushed = w.end
	w.tick(2100)
	w.wantSaved(map[int32]int64{0: 3})
}

func TestStaleScanAnswerIgnored(t *testing.T) {
	w := newWorld(t, Progress{})
	w.put(0, 10, 1000, 1000)
	w.tick(2000)
	w.wantWritten(10, 11)
	// A late answer for an offset already looked at changes nothing.
	w.s.Entries(at(2000), 0, 0, slices.Clone(w.queues[0]))
	w.drain(2000)
	w.wantWritten(10, 11)
}

func TestRefusedWriteIsRetried(t *testing.T) {
	for _, q := range []int32{0, levels} {
		w := newWorld(t, Progress{})
		w.put(q, 10, 1000, 1000)
		w.tick(500) // scans; nothing due
		w.failNext = true
		w.tick(2000)
		w.wantWritten()
		w.tick(2100) // looks again from the durable progress
		w.tick(2150) // (absolute times: delivers what the rescan found)
		w.wantWritten(10, 11)
		w.flushed = w.end
		w.tick(2200)
		w.wantSaved(map[int32]int64{q: 2})
	}
}

func TestOneBatchAtATime(t *testing.T) {
	w := newWorld(t, Progress{})
	w.put(0, 10, 1000)
	w.put(levels, 20, 1000)
	w.hold = true
	w.tick(2000)
	if len(w.scans) != 2 { // queue 1 is empty
		t.Fatalf("scans %+v", w.scans)
	}
	// Asked and not answered: not asked again.
	w.tick(2050)
	if len(w.scans) != 2 {
		t.Fatalf("scans asked twice: %+v", w.scans)
	}
	// Queue 0 answers; its batch stays out (not reported): no scan while it
	// is, not even of a queue that got a message since.
	w.scans = nil
	w.s.Entries(at(2100), 0, 0, slices.Clone(w.queues[0]))
	out := w.s.Ready().Restores
	if len(out) != 1 {
		t.Fatalf("restores %+v", out)
	}
	w.put(1, 30, 1000)
	w.tick(2200)
	if len(w.scans) != 0 {
		t.Fatalf("scanned with a batch out: %+v", w.scans)
	}
	w.restore(out[0])
	w.hold = false
	w.tick(2300) // queue 1 now; queue 2 was asked and never answered, so not again
	w.wantWritten(10, 30)
}

func TestProgressWriteFailureRetried(t *testing.T) {
	w := newWorld(t, Progress{})
	w.put(0, 10, 1000)
	w.tick(2000)
	w.flushed = w.end
	w.saveErr = errors.New("disk on fire")
	w.tick(2100)
	w.saveErr = nil
	w.tick(2200)
	w.wantSaved(map[int32]int64{0: 1})
}

func TestAbsoluteBatchBounded(t *testing.T) {
	w := newWorld(t, Progress{})
	due := make([]int64, ScanBatch+10)
	for i := range due {
		due[i] = 1000
	}
	w.put(levels, 0, due...)
	w.tick(0)    // scans the first ScanBatch entries
	w.tick(0)    // scans the rest
	w.tick(2000) // delivers at most one batch
	if len(w.written) != ScanBatch {
		t.Fatalf("one batch of %d, want %d", len(w.written), ScanBatch)
	}
	w.tick(2100)
	if len(w.written) != len(due) {
		t.Fatalf("%d re-stored, want %d", len(w.written), len(due))
	}
}
