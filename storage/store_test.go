package storage

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"net/netip"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/wharfmq/wharf/storage/vfs"
)

var fixedNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func fill(t *testing.T, s *Store, seed int64, n int) []AppendResult {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	var all []AppendResult
	for i := 0; i < n; i++ {
		m := genMessage(rng, []string{"a", "b"}[i%2], int32(i%3), i)
		out, err := s.AppendBatch([]*Message{m}, fixedNow.UnixMilli()+int64(i), nil)
		if err != nil || out[0].Err != nil {
			t.Fatalf("append %d: %v %v", i, err, out)
		}
		all = append(all, out[0])
	}
	return all
}

func TestCleanRestart(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig("/s")
	s, rep := mustOpen(t, mem, cfg)
	if rep.Abnormal {
		t.Fatalf("new store reported abnormal: %v", rep)
	}
	fill(t, s, 1, 300)
	end := s.CommitLog().MaxOffset()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A clean stop survives even a power cut right after it.
	s, rep = mustOpen(t, mem.Crash(1, vfs.CrashOptions{}), cfg)
	defer s.Close()
	if rep.Abnormal || rep.CheckpointState != "clean" || s.CommitLog().MaxOffset() != end {
		t.Fatalf("clean restart: %v, end %d want %d", rep, s.CommitLog().MaxOffset(), end)
	}
	checkStore(t, s, nil)
}

func TestAbnormalRestartCutsTornTail(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig("/s")
	s, _ := mustOpen(t, mem, cfg)
	fill(t, s, 1, 100)
	flushed, err := s.Flush(s.CommitLog().MaxOffset())
	if err != nil {
		t.Fatal(err)
	}
	fill(t, s, 2, 20) // never flushed
	img := mem.Crash(3, vfs.CrashOptions{UnsyncedKeepRatio: 0.5, TornLastPage: true})
	s2, rep := mustOpen(t, img, cfg)
	defer s2.Close()
	if !rep.Abnormal || s2.CommitLog().MaxOffset() < flushed {
		t.Fatalf("report %v, end %d < flushed %d", rep, s2.CommitLog().MaxOffset(), flushed)
	}
	checkStore(t, s2, nil)
}

// TestCorruptionMidSegment: damage below the flushed offset is reported with
// its offset, not truncated away.
func TestCorruptionMidSegment(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig("/s")
	s, _ := mustOpen(t, mem, cfg)
	res := fill(t, s, 1, 60)
	if _, err := s.Flush(s.CommitLog().MaxOffset()); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	victim := res[len(res)-3] // in the last segment, below the flushed offset
	b, _ := s.CommitLog().Read(victim.PhyOffset, int(victim.Size))
	b[90] ^= 0xff // flip a body byte
	if err := s.CommitLog().findSegment(victim.PhyOffset).f.Sync(); err != nil {
		t.Fatal(err)
	}
	img := mem.Crash(1, vfs.CrashOptions{})
	_, rep, err := Open(img, cfg)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open of a corrupt store: err %v (report %v), want ErrCorrupt", err, rep)
	}
	if want := "offset " + itoa(victim.PhyOffset); !bytes.Contains([]byte(err.Error()), []byte(want)) {
		t.Fatalf("error %q does not name %s", err, want)
	}
}

func itoa(v int64) string { return string(appendInt(nil, v)) }
func appendInt(b []byte, v int64) []byte {
	if v >= 10 {
		b = appendInt(b, v/10)
	}
	return append(b, byte('0'+v%10))
}

// TestRebuildDeletedConsumeQueue: a ConsumeQueue directory deleted by hand is
// rebuilt from the log, byte for byte.
func TestRebuildDeletedConsumeQueue(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig("/s")
	s, _ := mustOpen(t, mem, cfg)
	fill(t, s, 1, 400)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	dir := path.Join("/s/consumequeue", "a", "0")
	before := snapshotDir(t, mem, dir)
	if len(before) < 2 {
		t.Fatalf("want several ConsumeQueue files to rebuild, have %d", len(before))
	}
	if err := mem.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	s, rep := mustOpen(t, mem, cfg)
	if len(rep.RebuiltQueues) != 1 || rep.RebuiltQueues[0] != (QueueKey{"a", 0}) {
		t.Fatalf("report %v: want queue a-0 rebuilt", rep)
	}
	checkStore(t, s, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	after := snapshotDir(t, mem, dir)
	if len(after) != len(before) {
		t.Fatalf("rebuilt %d files, had %d", len(after), len(before))
	}
	for name, b := range before {
		if !bytes.Equal(after[name], b) {
			t.Fatalf("rebuilt file %s differs from the original", name)
		}
	}
	// The whole consumequeue tree gone: rebuilt too.
	if err := mem.RemoveAll("/s/consumequeue"); err != nil {
		t.Fatal(err)
	}
	s, rep = mustOpen(t, mem, cfg)
	defer s.Close()
	if len(rep.RebuiltQueues) != 6 {
		t.Fatalf("report %v: want all 6 queues rebuilt", rep)
	}
	checkStore(t, s, nil)
}

func snapshotDir(t *testing.T, fsys vfs.FS, dir string) map[string][]byte {
	t.Helper()
	names, err := fsys.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, n := range names {
		b, ok, err := readFile(fsys, path.Join(dir, n), 1<<30)
		if err != nil || !ok {
			t.Fatal(err)
		}
		out[n] = b
	}
	return out
}

// TestFailedFsyncIsSticky: after a failed sync no later flush claims
// durability, and the log refuses writes.
func TestFailedFsyncIsSticky(t *testing.T) {
	mem := vfs.NewMem()
	fail := true
	inj := vfs.InjectorFunc(func(op vfs.Op) error {
		if fail && op.Kind == vfs.OpSyncRange && path.Dir(op.Path) == "/s/commitlog" {
			return errors.New("EIO")
		}
		return nil
	})
	cfg := testConfig("/s")
	s, _, err := Open(vfs.NewFaulty(mem, inj), cfg)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, s, 1, 5)
	before := s.CommitLog().FlushedOffset()
	if _, err := s.Flush(s.CommitLog().MaxOffset()); !errors.Is(err, ErrFlushFailed) {
		t.Fatalf("flush: %v, want ErrFlushFailed", err)
	}
	fail = false // the device recovers; the lost pages do not
	got, err := s.Flush(s.CommitLog().MaxOffset())
	if !errors.Is(err, ErrFlushFailed) || got != before || s.CommitLog().FlushedOffset() != before {
		t.Fatalf("second flush: %d %v; flushed offset moved from %d", got, err, before)
	}
	if _, err := s.AppendBatch([]*Message{{Topic: "a", Body: []byte("x")}}, 1, nil); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("append after failed sync: %v, want ErrReadOnly", err)
	}
}

func TestNoSpaceOnSegmentCreation(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig("/s")
	s, _, err := Open(vfs.NewFaulty(mem, vfs.When(vfs.Kinds(vfs.OpCreate), vfs.InjectorFunc(func(op vfs.Op) error {
		if path.Dir(op.Path) == "/s/commitlog" {
			return vfs.ErrNoSpace
		}
		return nil
	}))), cfg)
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.AppendBatch([]*Message{{Topic: "a", Body: []byte("x")}}, 1, nil)
	if !errors.Is(err, vfs.ErrNoSpace) || len(out) != 0 {
		t.Fatalf("append with a full disk: %v %v, want ErrNoSpace and nothing stored", out, err)
	}
	if _, err := s.AppendBatch([]*Message{{Topic: "a", Body: []byte("x")}}, 1, nil); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("append after ENOSPC: %v, want ErrReadOnly", err)
	}
}

func TestRetention(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig("/s")
	cfg.Retention.FileReservedTime = time.Hour
	s, _ := mustOpen(t, mem, cfg)
	defer s.Close()
	old := fill(t, s, 1, 200) // stored at fixedNow
	if _, err := s.Dispatch(s.CommitLog().MaxOffset(), nil); err != nil {
		t.Fatal(err)
	}
	segsBefore := len(s.CommitLog().segments())
	// Not yet expired, not the hour, disk not full: nothing goes.
	rep, err := s.Clean(fixedNow.Add(30*time.Minute), false)
	if err != nil || rep.DeletedSegments != 0 {
		t.Fatalf("early clean: %+v %v", rep, err)
	}
	later := fixedNow.Add(3 * time.Hour)
	rng := rand.New(rand.NewSource(9))
	for i := 0; i < 5; i++ {
		m := genMessage(rng, "a", 0, 1000+i)
		if _, err := s.AppendBatch([]*Message{m}, later.UnixMilli(), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Dispatch(s.CommitLog().MaxOffset(), nil); err != nil {
		t.Fatal(err)
	}
	rep, err = s.Clean(later, true)
	if err != nil || rep.DeletedSegments != segsBefore-1 {
		t.Fatalf("clean: %+v %v, want %d segments deleted", rep, err, segsBefore-1)
	}
	minOff := s.CommitLog().MinOffset()
	// ConsumeQueues no longer hand out deleted records.
	for _, k := range s.Queues() {
		q, _ := s.ConsumeQueue(k, false)
		res, err := s.GetMessages(k, 0, GetLimits{Msgs: 1000}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, qo := range res.QueueOffsets {
			e, _ := q.Get(qo)
			if e.Offset < minOff {
				t.Fatalf("queue %s returns a deleted record at %d < %d", k, e.Offset, minOff)
			}
		}
	}
	_ = old
	rep, err = s.Clean(later.Add(time.Second), false)
	if err != nil {
		t.Fatal(err)
	}
}

// TestDiskFullRefusesWrites: above diskSpaceCleanForciblyRatio the oldest
// segments go whatever their age; when that cannot bring usage below the
// warning level (another process filled the disk), writes are refused with
// ErrDiskFull, and resume once usage falls below the level minus the
// hysteresis.
func TestDiskFullRefusesWrites(t *testing.T) {
	cfg := testConfig("/s")
	mem := vfs.NewMem(vfs.WithCapacity(1 << 20))
	s, _ := mustOpen(t, mem, cfg)
	defer s.Close()
	fill(t, s, 1, 200)
	if _, err := s.Dispatch(s.CommitLog().MaxOffset(), nil); err != nil {
		t.Fatal(err)
	}
	segs := len(s.CommitLog().segments())
	u, _ := mem.Usage("/s")
	hog, err := mem.Create("/other-process", int64(float64(u.Free)-0.02*float64(u.Total)))
	if err != nil {
		t.Fatal(err)
	}
	hog.Close()
	rep, err := s.Clean(fixedNow, false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.DeletedSegments == 0 || rep.DeletedSegments != segs-1 {
		t.Fatalf("forced clean deleted %d of %d segments, want all but the last: %+v", rep.DeletedSegments, segs, rep)
	}
	if !rep.DiskFull || !s.DiskFull() {
		t.Fatalf("disk at %.2f not reported full: %+v", rep.UsedRatio, rep)
	}
	if _, err := s.AppendBatch([]*Message{{Topic: "a", Body: []byte("x")}}, 1, nil); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("append on a full disk: %v, want ErrDiskFull", err)
	}
	if err := mem.Remove("/other-process"); err != nil {
		t.Fatal(err)
	}
	if rep, err = s.Clean(fixedNow, false); err != nil || rep.DiskFull {
		t.Fatalf("after freeing space: %+v %v", rep, err)
	}
	if _, err := s.AppendBatch([]*Message{{Topic: "a", Body: []byte("x")}}, 1, nil); err != nil {
		t.Fatalf("append after space was freed: %v", err)
	}
}

func TestGetMessagesAndQuery(t *testing.T) {
	mem := vfs.NewMem()
	s, _ := mustOpen(t, mem, testConfig("/s"))
	defer s.Close()
	fill(t, s, 1, 90)
	if _, err := s.Dispatch(s.CommitLog().MaxOffset(), nil); err != nil {
		t.Fatal(err)
	}
	k := QueueKey{"a", 0} // messages 0, 6, 12, ... (i%2==0 && i%3==0)
	res, err := s.GetMessages(k, 0, GetLimits{Msgs: 100}, nil)
	if err != nil || res.Status != GetFound || len(res.Records) != 15 {
		t.Fatalf("get: %v %v %d", err, res.Status, len(res.Records))
	}
	tag0 := TagsHashCode("tag0") // i%5 == 0: 0, 30, 60
	res, err = s.GetMessages(k, 0, GetLimits{Msgs: 100}, func(c int64) bool { return c == tag0 })
	if err != nil || len(res.Records) != 3 || res.NextBeginOffset != 15 {
		t.Fatalf("filtered get: %v %d next %d", err, len(res.Records), res.NextBeginOffset)
	}
	for _, tc := range []struct {
		from int64
		want GetStatus
	}{{15, GetOffsetOverflowOne}, {20, GetOffsetOverflowBadly}} {
		if r, _ := s.GetMessages(k, tc.from, GetLimits{Msgs: 10}, nil); r.Status != tc.want {
			t.Errorf("from %d: %v want %v", tc.from, r.Status, tc.want)
		}
	}
	if r, _ := s.GetMessages(QueueKey{"zz", 0}, 0, GetLimits{Msgs: 10}, nil); r.Status != GetNoMatchedLogicQueue {
		t.Errorf("missing queue: %v", r.Status)
	}
	recs, err := s.QueryByKey("a", "k12", 0, fixedNow.UnixMilli()+1e6, 10)
	if err != nil || len(recs) != 1 || recs[0].Flag != 12 {
		t.Fatalf("query by key: %v %d", err, len(recs))
	}
	recs, err = s.QueryByKey("a", "U00000012", 0, fixedNow.UnixMilli()+1e6, 10)
	if err != nil || len(recs) != 1 {
		t.Fatalf("query by unique key: %v %d", err, len(recs))
	}
	if recs, _ = s.QueryByKey("b", "k12", 0, fixedNow.UnixMilli()+1e6, 10); len(recs) != 0 {
		t.Fatalf("key of topic a found in topic b")
	}
}

func TestConfigStoreAtomic(t *testing.T) {
	mem := vfs.NewMem()
	name := ConfigPath("/s", TopicsFile)
	v1 := TopicTable{Topics: map[string]TopicConfig{"a": {TopicName: "a", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6}}}
	if err := SaveJSON(mem, name, v1); err != nil {
		t.Fatal(err)
	}
	v2 := v1
	v2.Topics = map[string]TopicConfig{"b": {TopicName: "b", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}}
	// Crash at every operation of the second save: either version, intact.
	counter := &vfs.Counter{}
	probe := mem.Crash(0, vfs.CrashOptions{})
	if err := SaveJSON(vfs.NewFaulty(probe, counter), name, v2); err != nil {
		t.Fatal(err)
	}
	for k := 0; k <= counter.Count(); k++ {
		base := mem.Crash(0, vfs.CrashOptions{})
		var img *vfs.Mem
		inj := vfs.OnOp(func(n int, op vfs.Op) error {
			if n == k {
				img = base.Crash(int64(k), vfs.CrashOptions{UnsyncedKeepRatio: 0.5, TornLastPage: true})
			}
			if n >= k {
				return errCrashed
			}
			return nil
		})
		err := SaveJSON(vfs.NewFaulty(base, inj), name, v2)
		if img == nil {
			img = base.Crash(int64(k), vfs.CrashOptions{})
			if err != nil {
				t.Fatalf("save: %v", err)
			}
		}
		var got TopicTable
		ok, err := LoadJSON(img, name, &got)
		if err != nil || !ok {
			t.Fatalf("crash at op %d: load: %v %v", k, ok, err)
		}
		if _, a := got.Topics["a"]; !a {
			if _, b := got.Topics["b"]; !b {
				t.Fatalf("crash at op %d: got neither version: %+v", k, got)
			}
		}
	}
	var missing TopicTable
	if ok, err := LoadJSON(mem, "/s/config/none.json", &missing); ok || err != nil {
		t.Fatalf("missing file: %v %v", ok, err)
	}
}

// TestFailedAppendWriteStoresNothing: appends go to the segment file with
// one write per segment a batch touches. When the write into the next
// segment fails, the messages before it are stored (and reported), the rest
// are not: their results are cut, their queue offsets handed out again
// after a restart, and the log refuses later appends.
func TestFailedAppendWriteStoresNothing(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig("/s")
	first := path.Join("/s/commitlog", segmentName(0))
	armed := false
	inj := vfs.InjectorFunc(func(op vfs.Op) error {
		if armed && op.Kind == vfs.OpWriteAt && path.Dir(op.Path) == "/s/commitlog" && op.Path != first {
			return errors.New("EIO")
		}
		return nil
	})
	s, _, err := Open(vfs.NewFaulty(mem, inj), cfg)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, s, 1, 20) // part of the first 16 KiB segment
	q0 := s.CommitLog().QueueOffset(QueueKey{"a", 0})
	before := s.CommitLog().MaxOffset()
	batch := make([]*Message, 40) // crosses into the second segment
	for i := range batch {
		batch[i] = &Message{Topic: "a", QueueID: 0, Body: bytes.Repeat([]byte{byte(i)}, 600)}
	}
	armed = true
	out, err := s.AppendBatch(batch, 1, nil)
	if err == nil {
		t.Fatal("append into a failing segment succeeded")
	}
	if len(out) == 0 || len(out) >= len(batch) {
		t.Fatalf("%d results, want the messages of the first segment only", len(out))
	}
	for i, r := range out {
		if r.Err != nil || r.QueueOffset != q0+int64(i) || r.PhyOffset >= cfg.MappedFileSizeCommitLog {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
	if got, want := s.CommitLog().QueueOffset(QueueKey{"a", 0}), q0+int64(len(out)); got != want {
		t.Fatalf("queue offset after the failure %d, want %d (the failed run's restored)", got, want)
	}
	if s.CommitLog().MaxOffset() != cfg.MappedFileSizeCommitLog {
		t.Fatalf("log end %d, want the first segment's end %d (its records and the blank filler)", s.CommitLog().MaxOffset(), cfg.MappedFileSizeCommitLog)
	}
	if before >= s.CommitLog().MaxOffset() {
		t.Fatalf("log did not grow: %d", before)
	}
	if _, err := s.AppendBatch(batch[:1], 1, nil); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("append after a failed write: %v, want ErrReadOnly", err)
	}
	for _, r := range out {
		if _, err := s.CommitLog().ReadRecord(r.PhyOffset, r.Size, true); err != nil {
			t.Fatalf("stored record at %d: %v", r.PhyOffset, err)
		}
	}
	s.Close()
	armed = false
	s2, _ := mustOpen(t, mem, cfg)
	defer s2.Close()
	checkStore(t, s2, nil)
	if got, want := s2.CommitLog().QueueOffset(QueueKey{"a", 0}), q0+int64(len(out)); got != want {
		t.Fatalf("queue offset after restart %d, want %d", got, want)
	}
}

// TestSegmentEndFillerIsZeros: the blank record that fills a segment's end
// has only its 8-byte header written; the rest must stay zeros, as in a
// fresh segment, even though the writer's encoding buffer is reused and
// held other records' bytes. (A slave's copy of a segment must equal the
// master's byte for byte; the simulator caught fillers carrying leftovers.)
func TestSegmentEndFillerIsZeros(t *testing.T) {
	s, cfg := memStore(t)
	body := bytes.Repeat([]byte{0xff}, 700)
	for s.CommitLog().MaxOffset() <= cfg.MappedFileSizeCommitLog {
		mustAppend(t, s, &Message{Topic: "a", Body: body}, &Message{Topic: "a", Body: body})
	}
	// Find the blank record: the first record boundary after which the
	// next record starts in the second segment.
	var blankAt int64 = -1
	for off := int64(0); off < cfg.MappedFileSizeCommitLog; {
		hdr, err := s.CommitLog().Read(off, 8)
		if err != nil {
			t.Fatal(err)
		}
		size, magic, ok := PeekHeader(hdr)
		if !ok {
			t.Fatalf("no record header at %d", off)
		}
		if magic == MagicBlank {
			blankAt = off
			break
		}
		off += int64(size)
	}
	if blankAt < 0 {
		t.Fatal("no blank filler in the first segment")
	}
	rest, err := s.CommitLog().Read(blankAt+BlankRecordSize, int(cfg.MappedFileSizeCommitLog-blankAt-BlankRecordSize))
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range rest {
		if c != 0 {
			t.Fatalf("the filler at %d has byte %#x at +%d", blankAt, c, BlankRecordSize+i)
		}
	}
}

// TestGetMessagesLimits: BodyBytes counts payload bytes and RecordBytes
// whole records; neither is ever exceeded but by the first message, which
// comes whatever its size; the message that did not fit starts the next read.
func TestGetMessagesLimits(t *testing.T) {
	mem := vfs.NewMem()
	s, _ := mustOpen(t, mem, testConfig("/s"))
	defer s.Close()
	bodies := []int{100, 100, 100, 500, 10}
	for i, n := range bodies {
		m := &Message{Topic: "t", Body: make([]byte, n), BornTimestamp: 1, BornHost: netip.MustParseAddrPort("10.0.0.9:4242")}
		if out, err := s.AppendBatch([]*Message{m}, fixedNow.UnixMilli()+int64(i), nil); err != nil || out[0].Err != nil {
			t.Fatalf("append %d: %v %v", i, err, out)
		}
	}
	if _, err := s.Dispatch(s.CommitLog().MaxOffset(), nil); err != nil {
		t.Fatal(err)
	}
	k := QueueKey{"t", 0}
	first, err := s.GetMessages(k, 0, GetLimits{Msgs: 1}, nil)
	if err != nil || len(first.Records) != 1 {
		t.Fatalf("one record: %v %v", first, err)
	}
	rec := len(first.Records[0]) // records of a 100-byte body; the others differ by their body
	overhead := rec - 100
	tests := []struct {
		name     string
		from     int64
		lim      GetLimits
		wantN    int
		wantNext int64
	}{
		{"no byte caps", 0, GetLimits{Msgs: 10}, 5, 5},
		{"msgs cap", 0, GetLimits{Msgs: 2}, 2, 2},
		{"body cap exact", 0, GetLimits{Msgs: 10, BodyBytes: 300}, 3, 3},
		{"body cap one short", 0, GetLimits{Msgs: 10, BodyBytes: 299}, 2, 2},
		{"body cap ignores headers", 0, GetLimits{Msgs: 10, BodyBytes: 200, RecordBytes: 1 << 20}, 2, 2},
		{"first always, even if larger", 3, GetLimits{Msgs: 10, BodyBytes: 1}, 1, 4},
		{"first always, record cap", 3, GetLimits{Msgs: 10, RecordBytes: 1}, 1, 4},
		{"record cap exact", 0, GetLimits{Msgs: 10, RecordBytes: 2 * rec}, 2, 2},
		{"record cap one short", 0, GetLimits{Msgs: 10, RecordBytes: 2*rec - 1}, 1, 1},
		{"both caps, record binds", 0, GetLimits{Msgs: 10, BodyBytes: 1000, RecordBytes: 3*rec + 500 + overhead - 1}, 3, 3},
		{"both caps, body binds", 0, GetLimits{Msgs: 10, BodyBytes: 800, RecordBytes: 1 << 20}, 4, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := s.GetMessages(k, tt.from, tt.lim, nil)
			if err != nil || res.Status != GetFound {
				t.Fatalf("%v %v", res.Status, err)
			}
			if len(res.Records) != tt.wantN || res.NextBeginOffset != tt.wantNext {
				t.Fatalf("%d records, next %d; want %d, next %d", len(res.Records), res.NextBeginOffset, tt.wantN, tt.wantNext)
			}
			for i, qo := range res.QueueOffsets {
				if qo != tt.from+int64(i) {
					t.Fatalf("record %d at queue offset %d", i, qo)
				}
			}
		})
	}
}

// TestUnfinishedLastSegment: a last CommitLog segment that is shorter than a
// segment and all zeros is a creation a crash cut short (its name appeared
// before its blocks); it holds no record, so the store drops it and opens.
// Any other wrong size is refused as corruption.
func TestUnfinishedLastSegment(t *testing.T) {
	cfg := testConfig("/s")
	seg := cfg.MappedFileSizeCommitLog
	page := func(b byte) []byte { p := make([]byte, 4096); p[100] = b; return p }
	cases := []struct {
		name  string
		files [][]byte // planted after the last segment, in order
		ok    bool
	}{
		{"an empty last segment", [][]byte{{}}, true},
		{"a zero-filled short last segment", [][]byte{page(0)}, true},
		{"a short last segment with data", [][]byte{page(7)}, false},
		{"an empty segment before a full one", [][]byte{{}, make([]byte, seg)}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			s, _ := mustOpen(t, mem, cfg)
			all := fill(t, s, 1, 60)
			end := s.CommitLog().MaxOffset()
			last := s.CommitLog().segments()
			next := last[len(last)-1].end()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			dir := path.Join(cfg.StorePathRootDir, "commitlog")
			for i, data := range tc.files {
				name := path.Join(dir, fmt.Sprintf("%020d", next+int64(i)*seg))
				f, err := mem.Create(name, int64(len(data)))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteAt(data, 0); err != nil && len(data) > 0 {
					t.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					t.Fatal(err)
				}
				f.Close()
			}
			s, rep, err := Open(mem, cfg)
			if !tc.ok {
				if !errors.Is(err, ErrCorrupt) {
					s.Close()
					t.Fatalf("open: %v, want ErrCorrupt", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("open: %v (report %v)", err, rep)
			}
			defer s.Close()
			if got := s.CommitLog().MaxOffset(); got != end {
				t.Fatalf("MaxOffset %d, want %d", got, end)
			}
			if want := fmt.Sprintf("%020d", next); rep.DroppedSegment != want || !strings.Contains(rep.String(), "dropped_unfinished_segment="+want) {
				t.Fatalf("report %v names dropped segment %q, want %q", rep, rep.DroppedSegment, want)
			}
			if _, err := mem.Stat(path.Join(dir, fmt.Sprintf("%020d", next))); !errors.Is(err, vfs.ErrNotExist) {
				t.Fatalf("unfinished segment still there: %v", err)
			}
			checkStore(t, s, nil)
			more := fill(t, s, 2, 60) // the writer creates the segment again
			if more[len(more)-1].PhyOffset < next || all[0].PhyOffset != 0 {
				t.Fatalf("appends after reopening end at %d, below %d", more[len(more)-1].PhyOffset, next)
			}
			checkStore(t, s, nil)
		})
	}
}

// TestRecordsFromAReusedBuffer: the append buffer is reused without being
// cleared, so every record must be written whole by its encoder: each one
// read back equals its encoding into a zeroed buffer, after a batch of
// larger records and with the buffer's spare capacity poisoned.
func TestRecordsFromAReusedBuffer(t *testing.T) {
	s, cfg := memStore(t)
	big := bytes.Repeat([]byte{0xff}, 3000)
	mustAppend(t, s, &Message{Topic: "big", Body: big}, &Message{Topic: "big", Body: big})
	cl := s.CommitLog()
	poison := cl.wbuf[:cap(cl.wbuf)]
	for i := range poison {
		poison[i] = 0xaa
	}
	rng := rand.New(rand.NewSource(7))
	var msgs []*Message
	for i := range 6 {
		msgs = append(msgs, genMessage(rng, "t", int32(i%2), i))
	}
	res, err := s.AppendBatch(msgs, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		got, err := cl.Read(r.PhyOffset, int(r.Size))
		if err != nil {
			t.Fatal(err)
		}
		want := make([]byte, r.Size)
		EncodeRecord(want, msgs[i], r.QueueOffset, r.PhyOffset, r.StoreTimestamp, cfg.StoreHost)
		if !bytes.Equal(got, want) {
			t.Fatalf("record %d at %d differs from its encoding into a zeroed buffer", i, r.PhyOffset)
		}
	}
}
