package storage

import (
	"bytes"
	"errors"
	"math/rand"
	"strings"
	"testing"

	"github.com/wharfmq/wharf/storage/vfs"
)

// checkedStore is a dispatched and checkpointed store with records in six
// queues over several segments, the state Check is made for.
func checkedStore(t *testing.T, index bool) *Store {
	t.Helper()
	cfg := testConfig("/c")
	cfg.MessageIndexEnable = index
	s, _ := mustOpen(t, vfs.NewMem(), cfg)
	t.Cleanup(func() { s.closeFiles() })
	fill(t, s, 7, 120)
	if _, err := s.Dispatch(s.CommitLog().MaxOffset(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Flush(s.CommitLog().MaxOffset()); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	return s
}

// rewriteLast replaces the last entry of queue k with what edit makes of it.
func rewriteLast(t *testing.T, s *Store, k QueueKey, edit func(d *DispatchRequest)) {
	t.Helper()
	q, _ := s.ConsumeQueue(k, false)
	qo := q.MaxOffset() - 1
	e, err := q.Get(qo)
	if err != nil {
		t.Fatal(err)
	}
	d := DispatchRequest{Key: k, QueueOffset: qo, Entry: e}
	edit(&d)
	if err := q.TruncateTo(qo); err != nil {
		t.Fatal(err)
	}
	if err := q.Append(qo, d.Entry); err != nil {
		t.Fatal(err)
	}
}

// TestCheckFindsDamage damages a consistent store in one way at a time and
// requires Check to report it, naming what is wrong; the undamaged store
// passes.
func TestCheckFindsDamage(t *testing.T) {
	qa := QueueKey{"a", 0}
	tests := []struct {
		name    string
		noIndex bool
		damage  func(t *testing.T, s *Store)
		want    string // in the error; "" means no error
	}{
		{"consistent", false, func(*testing.T, *Store) {}, ""},
		{"a flipped body byte", false, func(t *testing.T, s *Store) {
			seg := s.cl.segments()[1]
			r, err := s.cl.ReadRecord(seg.start, 0, false)
			if err != nil {
				t.Fatal(err)
			}
			at := bytes.Index(seg.data[:r.TotalSize], r.Body)
			if at < 0 || len(r.Body) == 0 {
				t.Fatal("body not found in its record")
			}
			seg.data[at] ^= 0x40
		}, "crc"},
		{"a gap in a queue's offsets", false, func(t *testing.T, s *Store) {
			s.cl.faults.SkipQueueOffset = true
			fill(t, s, 8, 40) // six queues at offset 20: each skips 23
		}, "not contiguous"},
		{"an offset table ahead of the log", false, func(_ *testing.T, s *Store) { s.cl.queueOffsets[qa]++ }, "offset table"},
		{"an entry with the wrong tags code", false, func(t *testing.T, s *Store) {
			rewriteLast(t, s, qa, func(d *DispatchRequest) { d.Entry.TagsCode++ })
		}, "dispatching the record gives"},
		{"an entry with the wrong size", false, func(t *testing.T, s *Store) {
			rewriteLast(t, s, qa, func(d *DispatchRequest) { d.Entry.Size-- })
		}, "dispatching the record gives"},
		{"an entry pointing at another queue's record", false, func(t *testing.T, s *Store) {
			other, _ := s.QueueEntry(qa, 0)
			z := QueueKey{"z", 0}
			q, err := s.ConsumeQueue(z, true)
			if err != nil {
				t.Fatal(err)
			}
			if err := q.Append(0, other); err != nil {
				t.Fatal(err)
			}
			s.cl.queueOffsets[z] = 1
		}, "points at a record of queue a-0"},
		{"an offset table behind the log", false, func(t *testing.T, s *Store) {
			s.cl.queueOffsets[qa]--
		}, "offset table says next"},
		{"a lost entry", false, func(t *testing.T, s *Store) {
			q, _ := s.ConsumeQueue(qa, false)
			q.TruncateTo(q.MaxOffset() - 1)
		}, "has no entry"},
		{"a reput position beyond the log", false, func(_ *testing.T, s *Store) {
			s.dispatched.Store(s.cl.MaxOffset() + 1)
		}, "reput position"},
		{"an index ahead of the reput position", false, func(_ *testing.T, s *Store) {
			s.dispatched.Store(s.cl.MinOffset())
		}, "index holds a record"},
		{"entries beyond the reput position", true, func(_ *testing.T, s *Store) {
			s.dispatched.Store(s.cl.MinOffset())
		}, "beyond the reput position"},
		{"a record missing from the index", false, func(t *testing.T, s *Store) {
			m := genMessage(rand.New(rand.NewSource(1)), "a", 0, 1000)
			m.Properties, _ = EncodeProperties(PropUniqKey, "UNINDEXED")
			if _, err := s.AppendBatch([]*Message{m}, fixedNow.UnixMilli(), nil); err != nil {
				t.Fatal(err)
			}
			var hashes []int32
			_, err := s.ForEachDispatch(s.Dispatched(), s.cl.MaxOffset(), func(off int64, r *DispatchRecord) error {
				d := NewDispatchRequest(off, r, "", &hashes)
				return s.ApplyConsumeQueue(&d) // and not the index
			})
			if err != nil {
				t.Fatal(err)
			}
			s.SetDispatched(s.cl.MaxOffset(), 0)
		}, `unique key "UNINDEXED"`},
		{"a checkpoint claiming more than the store holds", false, func(t *testing.T, s *Store) {
			if err := s.WriteCheckpointAt(s.cl.MaxOffset()+100, 0, 0, nil); err != nil {
				t.Fatal(err)
			}
		}, "checkpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := checkedStore(t, !tt.noIndex)
			tt.damage(t, s)
			err := Check(s)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("consistent store: %v", err)
			case tt.want == "":
			case err == nil:
				t.Fatalf("damage not found (want an error with %q)", tt.want)
			case !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(tt.want)):
				t.Fatalf("error %q does not name the damage %q", err, tt.want)
			case !errors.Is(err, ErrInconsistent):
				t.Fatalf("error %v does not wrap ErrInconsistent", err)
			}
		})
	}
}
