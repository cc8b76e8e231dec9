package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
)

// This file cuts a replica's log back to the point it shares with a new
// master (see CommonPoint): the CommitLog, the ConsumeQueues, the index,
// the epoch entries, the topic-queue offset table and the checkpoint.

// ErrWritesStopped is returned by AppendBatch between StopWrites and
// ResumeWrites.
var ErrWritesStopped = errors.New("writes stopped: the store is being truncated or follows a master")

// ErrServingWrites is returned by TruncateTo on a store that accepts
// client writes (StopWrites was not called).
var ErrServingWrites = errors.New("the store is serving writes")

// StopWrites makes AppendBatch refuse (ErrWritesStopped) until
// ResumeWrites. A slave's replication stops writes before it may
// truncate; raw appends of the master's bytes (CommitLog.AppendRaw) are
// not affected.
func (s *Store) StopWrites() { s.writesStopped.Store(true) }

// ResumeWrites lets AppendBatch write again (the broker becomes a master).
func (s *Store) ResumeWrites() { s.writesStopped.Store(false) }

// WritesStopped reports whether AppendBatch refuses writes.
func (s *Store) WritesStopped() bool { return s.writesStopped.Load() }

// TruncateTo cuts everything the store holds from log offset off on: the
// CommitLog (off must be a record boundary within the log), the
// ConsumeQueue entries that point at or beyond it, the index files that
// hold such records (rebuilt from the log below off), the epoch entries
// that start beyond it (one that starts at off stays, holding no byte: a
// slave's next epoch from its master replaces it), the watermarks of deleted topics beyond it, and
// the topic-queue offset table (each queue continues at its first cut
// record's queue offset). Everything is durable when it returns nil.
//
// Caller: a slave's replication, on the log's appender (the writer), after
// StopWrites (otherwise ErrServingWrites) and while nothing else uses the
// store: no dispatch, index, flush or checkpoint job running, no reader of
// the cut range. The reput position drops to off if it was beyond; the
// broker's reput then continues from Dispatched().
//
// Crash safety: the first step is a checkpoint that claims nothing at or
// beyond off, so a crash at any later point leaves a store that recovery
// makes consistent: either with the old tail still there (cut it again) or
// without it. Epoch entries go after the log's bytes: an entry may outlive
// its bytes (recovery drops it) but bytes never outlive their entry.
func (s *Store) TruncateTo(off int64) error {
	if !s.writesStopped.Load() {
		return fmt.Errorf("storage: truncate to %d: %w (StopWrites first)", off, ErrServingWrites)
	}
	cl := s.cl
	end := cl.MaxOffset()
	switch {
	case off > end:
		return fmt.Errorf("storage: truncate to %d: beyond the log's end %d", off, end)
	case off < cl.MinOffset():
		return fmt.Errorf("storage: truncate to %d: before the log's first offset %d; wipe the store to resynchronise", off, cl.MinOffset())
	case off == end:
		return s.dropEpochsAfter(off)
	}
	table, err := s.cutQueueOffsets(off, end)
	if err != nil {
		return fmt.Errorf("storage: truncate to %d: %w", off, err)
	}
	if err := s.truncateFiles(off); err != nil {
		return fmt.Errorf("storage: truncate to %d: %w", off, err)
	}
	for k, next := range table {
		cl.queueOffsets[k] = next
	}
	if err := s.checkpoint(false); err != nil {
		return fmt.Errorf("storage: truncate to %d: checkpoint: %w", off, err)
	}
	return nil
}

// truncateFiles is TruncateTo's part on disk, in its crash-safe order.
func (s *Store) truncateFiles(off int64) error {
	dispatched := s.dispatched.Load()
	cutIndex := s.idx != nil && dispatched > off
	rebuildFrom := int64(-1)
	if cutIndex {
		// The index drops whole files; what they held below off is put
		// again below.
		rebuildFrom = s.idx.TruncatePoint(off)
	}
	indexed := off
	if rebuildFrom >= 0 {
		indexed = rebuildFrom
	}
	// The checkpoint that says the index is good only below indexed is
	// durable before any index file goes: a process killed between the
	// removal and a later checkpoint left the old one claiming entries
	// whose files were gone, and recovery re-indexed too little.
	if err := s.checkpointBelow(false, off, indexed); err != nil {
		return fmt.Errorf("checkpoint before truncating: %w", err)
	}
	if cutIndex {
		from, err := s.idx.TruncateAfter(off)
		if err != nil {
			return fmt.Errorf("index: %w", err)
		}
		if from != rebuildFrom { // nothing ran on the index in between
			panic(fmt.Sprintf("storage: truncate: the index's re-index point moved from %d to %d", rebuildFrom, from))
		}
	}
	if err := s.cl.cutTail(off); err != nil {
		return err
	}
	if err := s.dropEpochsAfter(off); err != nil {
		return err
	}
	if err := s.cutQueues(off); err != nil {
		return err
	}
	s.dispatched.Store(min(dispatched, off))
	if err := s.clampDeleted(); err != nil {
		return err
	}
	if rebuildFrom >= 0 {
		return s.reindex(max(rebuildFrom, s.cl.MinOffset()), s.dispatched.Load())
	}
	return nil
}

// cutQueues removes, durably, every ConsumeQueue entry at or beyond log
// offset off.
func (s *Store) cutQueues(off int64) error {
	for _, k := range s.Queues() {
		q, err := s.ConsumeQueue(k, false)
		if err != nil || q == nil {
			return fmt.Errorf("consume queue %s: %v", k, err)
		}
		if err := q.TruncateByPhy(off); err != nil {
			return fmt.Errorf("consume queue %s: %w", k, err)
		}
		if err := q.Flush(); err != nil {
			return fmt.Errorf("consume queue %s: %w", k, err)
		}
	}
	return nil
}

// cutQueueOffsets walks the records in [off, end), which TruncateTo cuts,
// checking that off is a record boundary, and returns the next queue
// offset of every queue they hold: its first cut record's. Nothing is
// changed yet.
func (s *Store) cutQueueOffsets(off, end int64) (map[QueueKey]int64, error) {
	seg := s.cl.findSegment(off)
	if seg == nil {
		return nil, fmt.Errorf("offset %d is in no segment", off)
	}
	if next, err := s.ForEachRecord(seg.start, off, false, func(int64, *Record) error { return nil }); err != nil || next != off {
		return nil, fmt.Errorf("offset %d is not a record boundary (the record before it ends at %d): %v", off, next, err)
	}
	del := s.cl.Deleted()
	table := map[QueueKey]int64{}
	_, err := s.ForEachRecord(off, end, false, func(at int64, r *Record) error {
		if del.Covers(r.Topic, at) {
			return nil // counted for nothing
		}
		k := QueueKey{string(r.Topic), r.QueueID}
		if _, ok := table[k]; !ok {
			table[k] = r.QueueOffset
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("the records to cut: %w", err)
	}
	return table, nil
}

// reindex puts the keys of the records in [from, to) into the index again
// and flushes it.
func (s *Store) reindex(from, to int64) error {
	del := s.cl.Deleted()
	var hashes []int32 // each request is applied before the next is built
	_, err := s.ForEachDispatch(from, to, func(at int64, r *DispatchRecord) error {
		if del.Covers(r.Topic, at) {
			return nil
		}
		hashes = hashes[:0]
		d := NewDispatchRequest(at, r, "", &hashes)
		return s.applyIndex(&d)
	})
	if err != nil {
		return fmt.Errorf("re-index [%d, %d): %w", from, to, err)
	}
	if err := s.idx.Flush(); err != nil {
		return fmt.Errorf("index: %w", err)
	}
	return nil
}

// cutTail cuts the log at off while it is open: the rest of off's segment
// is zeroed and synced, later segments are removed (their mappings wait in
// the graveyard for the next retention pass, as retention's do, for a
// reader that took a slice of them), and so is a segment prepared for an
// end that no longer is. It holds the flush lock, so a flush never syncs a
// removed segment. Bytes below off keep their durability.
func (c *CommitLog) cutTail(off int64) error {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	segs := c.segments()
	var keep, gone []*segment
	for i, s := range segs {
		switch {
		case s.end() <= off:
			keep = append(keep, s)
		case s.start < off || i == 0:
			pos := off - s.start
			clear(s.data[pos:])
			if err := s.f.SyncRange(pos, int64(len(s.data))-pos); err != nil {
				return c.fail(fmt.Errorf("commitlog: cut %s at %d: %w", segmentName(s.start), pos, err))
			}
			keep = append(keep, s)
		default:
			gone = append(gone, s)
		}
	}
	c.segs.Store(&keep)
	c.maxOffset.Store(off)
	c.flushed.Store(min(c.flushed.Load(), off))
	if n := c.next; n != nil && n.start != c.nextSegmentStart() {
		c.next = nil
		gone = append(gone, n)
	}
	// The last segment goes first: a process killed in between leaves the
	// log a run of segments without a gap, which recovery takes as it is
	// (a gap it refuses as a missing segment).
	for _, s := range slices.Backward(gone) {
		c.graveyard = append(c.graveyard, s)
		if err := c.fs.Remove(path.Join(c.dir, segmentName(s.start))); err != nil {
			return c.fail(fmt.Errorf("commitlog: cut: remove segment %s: %w", segmentName(s.start), err))
		}
	}
	if err := c.fs.SyncDir(c.dir); err != nil {
		return c.fail(fmt.Errorf("commitlog: cut at %d: sync dir: %w", off, err))
	}
	return nil
}

// A cut that cannot run while the broker runs (TruncateTo needs the store
// to itself) is requested instead, durably, and done by the next Open
// before anything else uses the store.

const cutRequestName = "truncateRequest"

// cutRequest is the content of the request file: the offset, and the
// newest epoch entry when it was requested (the zero entry if none).
type cutRequest struct {
	Offset     int64 `json:"offset"`
	Epoch      int32 `json:"epoch"`
	EpochStart int64 `json:"epochStartOffset"`
}

func (s *Store) cutRequestPath() string { return path.Join(s.cfg.StorePathRootDir, cutRequestName) }

// RequestTruncate records, durably, that the next Open cuts the store to
// off (TruncateTo, after recovery), as a slave whose log must be cut to
// the point it shares with its master does. The request lapses if an
// epoch starts before that Open (the broker took another role: its log is
// no longer the one the cut was computed for). A later request replaces
// it.
func (s *Store) RequestTruncate(off int64) error {
	last, _ := s.LastEpoch()
	b, err := json.Marshal(cutRequest{Offset: off, Epoch: last.Epoch, EpochStart: last.StartOffset})
	if err != nil {
		return fmt.Errorf("storage: request a cut to %d: %w", off, err)
	}
	if err := writeFileAtomic(s.fs, s.cutRequestPath(), b); err != nil {
		return fmt.Errorf("storage: request a cut to %d: %w", off, err)
	}
	return nil
}

// cutAsRequested does at Open the cut RequestTruncate recorded, if its
// epoch is still the newest, then removes the request. A crash before the
// removal does it again at the next Open (a cut at the log's end changes
// nothing). It reports the cut in rep.RequestedCut.
func (s *Store) cutAsRequested(rep *RecoveryReport) error {
	b, ok, err := readFile(s.fs, s.cutRequestPath(), 1<<10)
	if err != nil || !ok {
		return err
	}
	var req cutRequest
	last, _ := s.LastEpoch()
	if json.Unmarshal(b, &req) == nil && req.Epoch == last.Epoch && req.EpochStart == last.StartOffset {
		off := min(req.Offset, s.cl.MaxOffset())
		s.writesStopped.Store(true)
		err := s.TruncateTo(off)
		s.writesStopped.Store(false)
		if err != nil {
			return fmt.Errorf("the requested cut to %d: %w", off, err)
		}
		rep.RequestedCut = off
	}
	if err := s.fs.Remove(s.cutRequestPath()); err != nil {
		return fmt.Errorf("remove the cut request: %w", err)
	}
	if err := s.fs.SyncDir(s.cfg.StorePathRootDir); err != nil {
		return fmt.Errorf("sync root after the cut: %w", err)
	}
	return nil
}
