package storage

import (
	"errors"
	"fmt"
	"slices"

	"github.com/wharfmq/wharf/storage/cq"
)

// ErrInconsistent is wrapped by every error of Check.
var ErrInconsistent = errors.New("store inconsistent")

// Check verifies the structure of a store at rest: just opened (recovery
// done), or after Dispatch and Checkpoint by its only owner, with no append,
// dispatch or checkpoint running. It is the one store checker of the storage
// tests and the simulator, and it checks that:
//
//   - the positions are ordered: the log's min <= the reput position <= its
//     max, the flushed offset <= max, and the index holds nothing at or
//     beyond the reput position;
//   - every record from the log's min to its max decodes, both CRCs
//     included, at the physical offset it names;
//   - per queue, the records' queue offsets are contiguous from the queue's
//     first record in the log (from 0 if the log starts at 0), and the
//     topic-queue offset table continues them;
//   - every record below the reput position has its ConsumeQueue entry (the
//     same offset, size and tags code that dispatching it makes) and, if it
//     has a unique key, an index entry;
//   - every ConsumeQueue entry that the log still covers points at a record
//     of its topic and queue with the entry's queue offset, size and tags
//     code; entries are in log order, filler entries only lead; no queue
//     runs past the offset table;
//   - the durable checkpoint claims no more than the store holds;
//   - epoch entries have increasing epochs and start offsets, none beyond
//     the log's end;
//   - records of a deleted topic below its watermark (Deleted) count for
//     nothing: no ConsumeQueue entry points at them and the offset table
//     does not count them, and a queue of the topic re-created at the
//     watermark starts again at queue offset 0.
//
// It returns the first inconsistency found, wrapping ErrInconsistent (and,
// for a damaged record, its decoding error).
func Check(s *Store) error {
	if err := checkPositions(s); err != nil {
		return err
	}
	next, err := checkLog(s)
	if err != nil {
		return err
	}
	for _, k := range s.Queues() {
		if err := checkQueue(s, k, next); err != nil {
			return err
		}
	}
	return checkCheckpoint(s)
}

func inconsistent(format string, args ...any) error {
	return fmt.Errorf("storage: check: %w: %s", ErrInconsistent, fmt.Sprintf(format, args...))
}

// checkPositions orders the log's bounds, the flushed offset, the reput
// position and the index's extent.
func checkPositions(s *Store) error {
	cl := s.cl
	minOff, maxOff, dispatched := cl.MinOffset(), cl.MaxOffset(), s.Dispatched()
	if cl.FlushedOffset() > maxOff {
		return inconsistent("flushed offset %d beyond the log's end %d", cl.FlushedOffset(), maxOff)
	}
	if dispatched < minOff || dispatched > maxOff {
		return inconsistent("reput position %d outside the log [%d, %d)", dispatched, minOff, maxOff)
	}
	epochs := s.epochList()
	for i, e := range epochs {
		if e.Epoch <= 0 || e.StartOffset > maxOff || (i > 0 && (e.Epoch <= epochs[i-1].Epoch || e.StartOffset < epochs[i-1].StartOffset)) {
			return inconsistent("epoch entry %d-%d out of place (entries %v, log end %d)", e.Epoch, e.StartOffset, epochs, maxOff)
		}
	}
	if s.idx != nil {
		if m := s.idx.MaxPhyOffset(); m > 0 && m >= dispatched {
			return inconsistent("the index holds a record at %d, the reput position is %d", m, dispatched)
		}
	}
	return nil
}

// logQueue is what the walk of the log found of one queue.
type logQueue struct {
	next       int64 // queue offset after its last record in the log
	dispatched int64 // queue offset after its last record below the reput position
	seen       bool  // it has a record below the reput position
}

// checkLog walks every record of the log and returns, per queue, where its
// records end.
func checkLog(s *Store) (map[QueueKey]*logQueue, error) {
	cl := s.cl
	fromZero := cl.MinOffset() == 0
	dispatched := s.Dispatched()
	del := cl.Deleted()
	queues := map[QueueKey]*logQueue{}
	topic := ""
	var hashes []int32
	_, err := s.ForEachRecord(cl.MinOffset(), cl.MaxOffset(), true, func(off int64, r *Record) error {
		if del.Covers(r.Topic, off) {
			return nil // a deleted topic's record
		}
		dr := r.DispatchRecord()
		hashes = hashes[:0]
		d := NewDispatchRequest(off, &dr, topic, &hashes)
		topic = d.Key.Topic
		lq := queues[d.Key]
		w, recreated := del[d.Key.Topic]
		switch {
		case lq != nil && r.QueueOffset != lq.next:
			return inconsistent("record at %d: queue %s offset %d, want %d (not contiguous)", off, d.Key, r.QueueOffset, lq.next)
		case lq == nil && fromZero && r.QueueOffset != 0:
			return inconsistent("record at %d: first of queue %s in a log that starts at 0 has offset %d", off, d.Key, r.QueueOffset)
		case lq == nil && recreated && w >= cl.MinOffset() && r.QueueOffset != 0:
			return inconsistent("record at %d: first of queue %s after its topic's deletion at %d has offset %d, want 0", off, d.Key, w, r.QueueOffset)
		case lq == nil:
			lq = &logQueue{}
			queues[d.Key] = lq
		}
		lq.next = r.QueueOffset + 1
		if off >= dispatched {
			return nil
		}
		lq.dispatched, lq.seen = lq.next, true
		return checkDispatched(s, &d, lastProperty(r.Properties, PropUniqKey))
	})
	if errors.Is(err, ErrInconsistent) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("storage: check: %w: log: %w", ErrInconsistent, err)
	}
	for k, lq := range queues {
		if got := cl.QueueOffset(k); got != lq.next {
			return nil, inconsistent("queue %s: the offset table says next %d, the log's records end at %d", k, got, lq.next)
		}
	}
	for k, next := range cl.queueOffsets {
		// The log holds everything since the deletion: a queue of the
		// topic without a record since then has nothing to count.
		if w, ok := del[k.Topic]; ok && w >= cl.MinOffset() && queues[k] == nil && next != 0 {
			return nil, inconsistent("queue %s: the offset table says next %d, its topic was deleted at %d and has no record since", k, next, w)
		}
	}
	return queues, nil
}

// checkDispatched checks that a record below the reput position has its
// ConsumeQueue entry and its unique key's (uniq's) index entry.
func checkDispatched(s *Store, d *DispatchRequest, uniq string) error {
	q, err := s.ConsumeQueue(d.Key, false)
	if err != nil || q == nil {
		return inconsistent("record at %d of queue %s is dispatched but the queue does not exist (%v)", d.Entry.Offset, d.Key, err)
	}
	e, err := q.Get(d.QueueOffset)
	if err != nil {
		return inconsistent("record at %d: queue %s has no entry at %d: %v", d.Entry.Offset, d.Key, d.QueueOffset, err)
	}
	if e != d.Entry {
		return inconsistent("record at %d: queue %s entry %d is %v, dispatching the record gives %v", d.Entry.Offset, d.Key, d.QueueOffset, e, d.Entry)
	}
	if s.idx == nil || uniq == "" {
		return nil
	}
	recs, err := s.QueryByKey(d.Key.Topic, uniq, 0, 1<<62, 32)
	if err != nil || !slices.ContainsFunc(recs, func(r Record) bool { return r.PhysicalOffset == d.Entry.Offset }) {
		return inconsistent("record at %d: the index does not find it by its unique key %q (%d others, %v)", d.Entry.Offset, uniq, len(recs), err)
	}
	return nil
}

// lastProperty is the value of the last key property of props (the one a
// dispatch indexes), "" if none.
func lastProperty(props []byte, key string) string {
	var last []byte
	EachProperty(props, func(k, v []byte) {
		if string(k) == key {
			last = v
		}
	})
	return string(last)
}

// checkQueue checks every entry of queue k against the log and the queue's
// extent against what the walk of the log found.
func checkQueue(s *Store, k QueueKey, log map[QueueKey]*logQueue) error {
	q, err := s.ConsumeQueue(k, false)
	if err != nil || q == nil {
		return inconsistent("queue %s listed but not open (%v)", k, err)
	}
	if e, ok := q.LastEntry(); ok && s.cl.Deleted().Covers([]byte(k.Topic), e.Offset) {
		return inconsistent("queue %s: its last entry %v points at a record of the topic deleted at %d", k, e, s.cl.Deleted()[k.Topic])
	}
	if table := s.cl.QueueOffset(k); q.MaxOffset() > table {
		return inconsistent("queue %s: consume queue ends at %d, beyond the offset table's %d", k, q.MaxOffset(), table)
	}
	if lq := log[k]; lq != nil && lq.seen && q.MaxOffset() != lq.dispatched {
		return inconsistent("queue %s: consume queue ends at %d, its records below the reput position at %d", k, q.MaxOffset(), lq.dispatched)
	}
	minPhy, dispatched := s.cl.MinOffset(), s.Dispatched()
	del := s.cl.Deleted()
	var prev cq.Entry
	real := false
	for qo := q.MinOffset(); qo < q.MaxOffset(); qo++ {
		e, err := q.Get(qo)
		if err != nil {
			return inconsistent("queue %s offset %d: %v", k, qo, err)
		}
		if e == cq.Dummy && !real {
			continue
		}
		if !e.Valid() || (real && e.Offset < prev.End()) {
			return inconsistent("queue %s offset %d: entry %v out of place after %v", k, qo, e, prev)
		}
		prev, real = e, true
		if e.Offset < minPhy {
			continue // its record was deleted by retention
		}
		if del.Covers([]byte(k.Topic), e.Offset) {
			return inconsistent("queue %s offset %d: entry %v points at a record of the topic deleted at %d", k, qo, e, del[k.Topic])
		}
		if e.Offset >= dispatched {
			return inconsistent("queue %s offset %d: entry %v at or beyond the reput position %d", k, qo, e, dispatched)
		}
		if err := checkEntry(s, k, qo, e); err != nil {
			return err
		}
	}
	return nil
}

// checkEntry checks that entry e at queue offset qo of queue k points at a
// record that dispatches to exactly e.
func checkEntry(s *Store, k QueueKey, qo int64, e cq.Entry) error {
	r, err := s.cl.ReadRecord(e.Offset, e.Size, true)
	if err != nil {
		return inconsistent("queue %s offset %d: entry %v: %v", k, qo, e, err)
	}
	dr := r.DispatchRecord()
	var hashes []int32
	d := NewDispatchRequest(e.Offset, &dr, k.Topic, &hashes)
	if d.Key != k || d.QueueOffset != qo || d.Entry != e {
		return inconsistent("queue %s offset %d: entry %v points at a record of queue %s offset %d (entry %v)", k, qo, e, d.Key, d.QueueOffset, d.Entry)
	}
	return nil
}

// checkCheckpoint checks that the durable checkpoint, if there is one,
// claims no more than the store holds.
func checkCheckpoint(s *Store) error {
	cp, err := loadCheckpoint(s.fs, s.cfg.StorePathRootDir)
	if err != nil {
		return inconsistent("checkpoint unreadable: %v", err)
	}
	if cp == nil {
		return nil
	}
	cl := s.cl
	switch {
	case cp.CLFlushed > cp.CLMax || cp.Dispatched > cp.CLMax:
		return inconsistent("checkpoint: flushed %d or dispatched %d beyond its log end %d", cp.CLFlushed, cp.Dispatched, cp.CLMax)
	case cp.CLFlushed > cl.FlushedOffset():
		return inconsistent("checkpoint: flushed %d, the log is flushed to %d", cp.CLFlushed, cl.FlushedOffset())
	case cp.CLMax > cl.MaxOffset():
		return inconsistent("checkpoint: log end %d, the log ends at %d", cp.CLMax, cl.MaxOffset())
	case cp.Dispatched > s.Dispatched():
		return inconsistent("checkpoint: dispatched %d, the reput position is %d", cp.Dispatched, s.Dispatched())
	}
	del := cl.Deleted()
	for _, m := range cp.Queues {
		if del.Covers([]byte(m.Key.Topic), m.LastPhy) {
			continue // the mark of a deleted topic's queue
		}
		if q, _ := s.ConsumeQueue(m.Key, false); q != nil && q.MaxOffset() < m.Max {
			return inconsistent("checkpoint: queue %s durable to %d, the queue ends at %d", m.Key, m.Max, q.MaxOffset())
		}
	}
	return nil
}
