package dispatch

import (
	"errors"
	"fmt"
	"testing"

	"github.com/wharfmq/wharf/storage"
)

// fakeLog is a log of fixed-size records of the given queues.
type fakeLog struct {
	keys    []storage.QueueKey // record i's queue
	size    int64
	badFrom int64 // records at or after this offset do not decode; 0: none
	reads   [][2]int64
	deleted storage.Deleted
}

func (l *fakeLog) Deleted() storage.Deleted { return l.deleted }

func (l *fakeLog) ForEachDispatch(from, to int64, fn func(int64, *storage.DispatchRecord) error) (int64, error) {
	l.reads = append(l.reads, [2]int64{from, to})
	off := from
	for ; off < to; off += l.size {
		if l.badFrom > 0 && off >= l.badFrom {
			return off, errors.New("bad magic")
		}
		k := l.keys[off/l.size]
		r := &storage.DispatchRecord{Topic: []byte(k.Topic), QueueID: k.QueueID, TotalSize: int32(l.size), StoreTimestamp: 1000 + off}
		if err := fn(off, r); err != nil {
			return off, err
		}
	}
	return off, nil
}

func describe(b Batch) string {
	s := ""
	for _, qb := range b.Queues {
		s += fmt.Sprintf("%s:%d ", qb.Key, len(qb.Reqs))
	}
	return s + fmt.Sprintf("all:%d", len(b.All))
}

func TestReputVisibility(t *testing.T) {
	a0, a1, b0 := storage.QueueKey{Topic: "a", QueueID: 0}, storage.QueueKey{Topic: "a", QueueID: 1}, storage.QueueKey{Topic: "b", QueueID: 0}
	log := &fakeLog{size: 10, keys: []storage.QueueKey{b0, a1, a0, b0, a1, a0, b0, b0}}
	tests := []struct {
		name      string
		sync      bool
		flushed   int64
		step      func(r *Reput)
		want      string // the batch, in (topic, queue) order
		wantPos   int64
		wantLast  int64
		wantReads int
	}{
		{"async sees the log end", false, 0, nil, "a-0:2 a-1:2 b-0:4 all:8", 80, 1070, 1},
		{"sync sees what is flushed", true, 30, nil, "a-0:1 a-1:1 b-0:1 all:3", 30, 1020, 1},
		{"sync ignores appends", true, 30, func(r *Reput) { r.Appended(80) }, "a-0:1 a-1:1 b-0:1 all:3", 30, 1020, 1},
		{"sync follows flushes", true, 30, func(r *Reput) { r.Flushed(60) }, "a-0:2 a-1:2 b-0:2 all:6", 60, 1050, 1},
		{"flushes never move back", true, 30, func(r *Reput) { r.Flushed(60); r.Flushed(20) }, "a-0:2 a-1:2 b-0:2 all:6", 60, 1050, 1},
		{"nothing visible, nothing read", true, 0, nil, "all:0", 0, 0, 0},
		{"a log starting later is read from its start", false, 0, func(r *Reput) { r.LogStart(50) }, "a-0:1 b-0:2 all:3", 80, 1070, 1},
		{"a log start below the position changes nothing", false, 0, func(r *Reput) { r.Dispatch(log); r.LogStart(40) }, "all:0", 80, 1070, 1},
		// Controller mode: nothing past the limit (the confirm offset).
		{"a limit holds back the log end", false, 0, func(r *Reput) { r.Limit(40) }, "a-0:1 a-1:1 b-0:2 all:4", 40, 1030, 1},
		{"a limit below the flush holds it back", true, 60, func(r *Reput) { r.Limit(20) }, "a-1:1 b-0:1 all:2", 20, 1010, 1},
		{"the flush below the limit holds it back", true, 30, func(r *Reput) { r.Limit(70) }, "a-0:1 a-1:1 b-0:1 all:3", 30, 1020, 1},
		{"a limit of nothing dispatches nothing", false, 0, func(r *Reput) { r.Limit(0) }, "all:0", 0, 0, 0},
		{"a limit never moves back", false, 0, func(r *Reput) { r.Limit(50); r.Limit(10) }, "a-0:1 a-1:2 b-0:2 all:5", 50, 1040, 1},
		{"the limit moves: what it frees is dispatched", false, 0, func(r *Reput) { r.Limit(20); r.Dispatch(log); r.Limit(60) },
			"a-0:2 a-1:1 b-0:1 all:4", 60, 1050, 2},
		{"an append past the limit is held", false, 0, func(r *Reput) { r.Limit(30); r.Appended(80) }, "a-0:1 a-1:1 b-0:1 all:3", 30, 1020, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log.reads = nil
			r := NewReput(tt.sync, 0, 80, tt.flushed)
			if tt.step != nil {
				tt.step(r)
			}
			b, err := r.Dispatch(log)
			if err != nil {
				t.Fatal(err)
			}
			pos, last := r.Position()
			if describe(b) != tt.want || pos != tt.wantPos || last != tt.wantLast || len(log.reads) != tt.wantReads {
				t.Fatalf("batch %q at %d (last ts %d, %d reads); want %q at %d (last ts %d, %d reads)",
					describe(b), pos, last, len(log.reads), tt.want, tt.wantPos, tt.wantLast, tt.wantReads)
			}
			if r.Pending() {
				t.Fatal("pending after a dispatch of everything visible")
			}
			if b2, _ := r.Dispatch(log); len(b2.All) != 0 || len(log.reads) != tt.wantReads {
				t.Fatal("a second dispatch read again")
			}
		})
	}
	// A log that stops decoding: the position stops where it does.
	bad := &fakeLog{size: 10, keys: log.keys, badFrom: 40}
	r := NewReput(false, 20, 80, 0)
	b, err := r.Dispatch(bad)
	if pos, _ := r.Position(); err == nil || pos != 40 || len(b.All) != 2 {
		t.Fatalf("bad log: %v at %d with %d records", err, pos, len(b.All))
	}
}

func TestReputCheckpointBarrier(t *testing.T) {
	mark := func(topic string, max int64) storage.QueueMark {
		return storage.QueueMark{Key: storage.QueueKey{Topic: topic}, Max: max}
	}
	r := NewReput(false, 500, 500, 500)
	id, ok := r.StartCheckpoint(2)
	if !ok || id == 0 {
		t.Fatal("first checkpoint not started")
	}
	if _, ok := r.StartCheckpoint(2); ok {
		t.Fatal("a second checkpoint started while one is under way")
	}
	steps := []struct {
		ack   Ack
		write bool
	}{
		{Ack{ID: id + 7, Mark: mark("stale", 1)}, false}, // another barrier's: ignored
		{Ack{ID: id, Mark: mark("a", 3)}, false},
		{Ack{ID: id, Mark: mark("", 0)}, false}, // a queue with nothing to flush
		{Ack{ID: id, Indexed: 400, IsIndex: true}, true},
	}
	var cp Checkpoint
	for i, st := range steps {
		got, write := r.Ack(st.ack)
		if write != st.write {
			t.Fatalf("ack %d: write %v", i, write)
		}
		cp = got
	}
	if cp.Pos != 500 || cp.Indexed != 400 || len(cp.Marks) != 1 || cp.Marks[0] != mark("a", 3) {
		t.Fatalf("checkpoint %+v", cp)
	}
	if _, ok := r.StartCheckpoint(0); ok {
		t.Fatal("a checkpoint started before the last one was written")
	}
	r.Written()
	// A failed flush ends the barrier without a checkpoint, and the next
	// one can start at once.
	id, ok = r.StartCheckpoint(1)
	if !ok {
		t.Fatal("no checkpoint after Written")
	}
	if _, write := r.Ack(Ack{ID: id, Err: errors.New("EIO")}); write {
		t.Fatal("wrote after one ack of two")
	}
	if _, write := r.Ack(Ack{ID: id, IsIndex: true, Indexed: 450}); write {
		t.Fatal("a checkpoint written after a failed flush")
	}
	if _, ok := r.StartCheckpoint(1); !ok {
		t.Fatal("no checkpoint after a failed one")
	}
}

func TestSortedKeys(t *testing.T) {
	m := map[storage.QueueKey]int{{Topic: "b", QueueID: 0}: 0, {Topic: "a", QueueID: 10}: 0, {Topic: "a", QueueID: 2}: 0, {Topic: "", QueueID: 5}: 0}
	got := fmt.Sprint(SortedKeys(m))
	if want := "[-5 a-2 a-10 b-0]"; got != want {
		t.Fatalf("%s, want %s", got, want)
	}
}

// TestReputConfirmed: records handed to their owners are confirmed only by
// a checkpoint barrier every owner answered; a failed one confirms nothing.
func TestReputConfirmed(t *testing.T) {
	a0 := storage.QueueKey{Topic: "a", QueueID: 0}
	log := &fakeLog{size: 10, keys: []storage.QueueKey{a0, a0, a0, a0, a0, a0}}
	r := NewReput(false, 0, 30, 30)
	if _, err := r.Dispatch(log); err != nil {
		t.Fatal(err)
	}
	if pos, _ := r.Position(); pos != 30 {
		t.Fatalf("position %d", pos)
	}
	if c, _ := r.Confirmed(); c != 0 {
		t.Fatalf("confirmed %d before any barrier, want 0", c)
	}
	id, _ := r.StartCheckpoint(1)
	r.Appended(60)
	if _, err := r.Dispatch(log); err != nil { // handed during the barrier
		t.Fatal(err)
	}
	r.Ack(Ack{ID: id, Mark: storage.QueueMark{Key: a0, Max: 3}})
	if c, _ := r.Confirmed(); c != 0 {
		t.Fatalf("confirmed %d with the index's answer missing", c)
	}
	r.Ack(Ack{ID: id, IsIndex: true, Indexed: 20})
	if c, ts := r.Confirmed(); c != 30 || ts != 1020 {
		t.Fatalf("confirmed %d (ts %d), want the barrier's start 30 (1020)", c, ts)
	}
	r.Written()
	id, _ = r.StartCheckpoint(1)
	r.Ack(Ack{ID: id, Err: errors.New("EIO")})
	r.Ack(Ack{ID: id, IsIndex: true, Indexed: 50})
	if c, _ := r.Confirmed(); c != 30 {
		t.Fatalf("a failed barrier confirmed %d", c)
	}
	r.LogStart(100)
	if c, _ := r.Confirmed(); c != 100 {
		t.Fatalf("confirmed %d below the log's start 100", c)
	}
}

// TestReputSizesBatches: a batch is made for the records visible, at the
// last dispatch's bytes per record and key hashes per record, so that it
// does not grow while it is filled; the first has nothing to go by, and a
// backlog is sized for maxExpect records only.
func TestReputSizesBatches(t *testing.T) {
	keys := make([]storage.QueueKey, 40000)
	for i := range keys {
		keys[i] = storage.QueueKey{Topic: "t", QueueID: int32(i % 3)}
	}
	log := &fakeLog{size: 10, keys: keys}
	r := NewReput(false, 0, 0, 0)
	for _, tt := range []struct {
		upTo    int64
		wantCap int
	}{
		{80, 8},              // nothing to go by: append's growth
		{240, 16 + 16/8 + 1}, // 16 records of 10 bytes, an eighth spare
		{250, 1 + 1/8 + 1},   // one
	} {
		r.Appended(tt.upTo)
		b, err := r.Dispatch(log)
		if err != nil || cap(b.All) != tt.wantCap {
			t.Fatalf("up to %d: %d records in room for %d, want room for %d (%v)", tt.upTo, len(b.All), cap(b.All), tt.wantCap, err)
		}
	}
	if reqs, _ := r.expect(1 << 40); reqs != maxExpect+maxExpect/8+1 {
		t.Fatalf("a backlog of 1 TiB: room for %d", reqs)
	}
}
