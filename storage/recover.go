package storage

import (
	"errors"
	"fmt"
	"path"
	"strconv"

	"github.com/wharfmq/wharf/storage/cq"
	"github.com/wharfmq/wharf/storage/index"
	"github.com/wharfmq/wharf/storage/vfs"
)

// RecoveryReport says what Open found and did.
type RecoveryReport struct {
	Abnormal         bool   // the abort file was present: the last stop was not clean
	CheckpointState  string // "clean", "running", "missing" or "damaged: ..."
	ScannedFrom      int64  // first log offset validated
	TruncatedAt      int64  // the log's end after recovery
	TornBytes        int64  // bytes cut from the tail (0 after a clean stop)
	Redispatched     int    // records whose ConsumeQueue entries were checked or rebuilt
	RebuiltQueues    []QueueKey
	DeletedQueues    []QueueKey // queues of deleted topics left by a crash, removed
	IndexRebuiltFrom int64      // -1 if the index needed no rebuild
	IndexDiscarded   string     // why a damaged index was dropped, if it was
	RequestedCut     int64      // where a cut RequestTruncate asked for was made, -1 if none
}

func (r *RecoveryReport) String() string {
	return fmt.Sprintf("abnormal=%v checkpoint=%s scanned_from=%d end=%d torn_bytes=%d redispatched=%d rebuilt_queues=%d index_rebuilt_from=%d requested_cut=%d",
		r.Abnormal, r.CheckpointState, r.ScannedFrom, r.TruncatedAt, r.TornBytes, r.Redispatched, len(r.RebuiltQueues), r.IndexRebuiltFrom, r.RequestedCut)
}

// recover brings the store to a consistent state; see Open.
func (s *Store) recover() (*RecoveryReport, error) {
	rep := &RecoveryReport{IndexRebuiltFrom: -1, RequestedCut: -1}
	_, err := s.fs.Stat(s.abortPath())
	rep.Abnormal = err == nil
	cp, err := loadCheckpoint(s.fs, s.cfg.StorePathRootDir)
	switch {
	case err != nil:
		rep.CheckpointState = "damaged: " + err.Error()
		cp = nil
	case cp == nil:
		rep.CheckpointState = "missing"
	case cp.Clean:
		rep.CheckpointState = "clean"
	default:
		rep.CheckpointState = "running"
	}
	if cp != nil && cp.ConsumeQueueSize != 0 && cp.ConsumeQueueSize != int64(s.cfg.MappedFileSizeConsumeQueue) {
		return rep, fmt.Errorf("mappedFileSizeConsumeQueue is %d entries but the store was written with %d; changing it is not supported",
			s.cfg.MappedFileSizeConsumeQueue, cp.ConsumeQueueSize)
	}
	if err := s.openConsumeQueues(); err != nil {
		return rep, err
	}
	if err := s.dropDeletedQueues(rep); err != nil {
		return rep, err
	}
	del := s.cl.Deleted()
	if s.cfg.MessageIndexEnable {
		opts := index.Options{SlotNum: s.cfg.MaxHashSlotNum, IndexNum: s.cfg.MaxIndexNum}
		idx, err := index.Open(s.fs, s.indexDir(), opts)
		if errors.Is(err, index.ErrCorrupt) {
			// The index is derived data: a damaged one (a crash can tear an
			// unflushed header) is dropped and rebuilt from the log.
			rep.IndexDiscarded = err.Error()
			if err = s.fs.RemoveAll(s.indexDir()); err == nil {
				idx, err = index.Open(s.fs, s.indexDir(), opts)
			}
		}
		if err != nil {
			return rep, fmt.Errorf("index: %w", err)
		}
		s.idx = idx
	}

	segs := s.cl.segments()
	if len(segs) == 0 {
		// No log at all: nothing can be indexed.
		for k, q := range s.cqs {
			q.Close()
			delete(s.cqs, k)
		}
		if err := s.fs.RemoveAll(s.consumeQueueDir()); err != nil {
			return rep, fmt.Errorf("remove consume queues of an empty log: %w", err)
		}
		if cp != nil {
			// The log was emptied by retention; continue where it ended.
			s.cl.maxOffset.Store(cp.CLMax)
			s.cl.flushed.Store(cp.CLMax)
		}
		s.dispatched.Store(s.cl.MaxOffset())
		rep.TruncatedAt = s.dispatched.Load()
		return rep, nil
	}
	minOff, logEnd := segs[0].start, segs[len(segs)-1].end()
	clamp := func(v int64) int64 { return max(minOff, min(v, logEnd)) }

	// Where valid data must end, and from where to scan.
	var end, durable, scanFrom int64
	trusted := false
	if !rep.Abnormal && cp != nil && cp.Clean && cp.CLMax >= minOff && cp.CLMax <= logEnd {
		// Clean stop: the checkpoint is exact. Check that nothing that looks
		// like a record follows it, which would mean the checkpoint is stale.
		end = cp.CLMax
		trusted = !s.recordStartsAt(end)
		durable = end
		scanFrom = clamp(cp.Dispatched)
	}
	if !trusted {
		rep.Abnormal = true
		durable, scanFrom = minOff, minOff
		if cp != nil {
			durable = clamp(cp.CLFlushed)
			scanFrom = clamp(min(cp.Dispatched, cp.CLFlushed))
		}
		// Validate from the start of the segment holding scanFrom: the part
		// of the log not yet known durable is where a tear can be. When
		// scanFrom is the log's end and that is a segment's end (a slave
		// that copied the master's blank filler creates the next segment
		// only when the next bytes come), no segment holds it: the last
		// one is validated.
		seg := s.cl.findSegment(scanFrom)
		if seg == nil {
			seg = segs[len(segs)-1]
		}
		scanFrom = seg.start
		end, err = s.scanValid(scanFrom, logEnd, durable)
		if err != nil {
			return rep, err
		}
		rep.TornBytes = s.tornBytes(end)
	}
	rep.ScannedFrom, rep.TruncatedAt = scanFrom, end
	if err := s.cl.truncate(end); err != nil {
		return rep, err
	}

	// ConsumeQueues may hold entries of the cut tail (their pages were written
	// back, the log's were not); cut them.
	for k, q := range s.cqs {
		if err := q.TruncateByPhy(end); err != nil {
			return rep, fmt.Errorf("consume queue %s: %w", k, err)
		}
	}
	// A queue whose durable extent (per the checkpoint) is gone although its
	// records are still in the log was damaged or deleted by hand: rebuild it.
	// (A mark of a deleted topic's queue describes records that are gone.)
	rebuild := map[QueueKey]bool{}
	if cp != nil {
		for _, m := range cp.Queues {
			q := s.cqs[m.Key]
			if m.LastPhy >= 0 && m.LastPhy < end && m.LastPhy >= minOff && (q == nil || q.MaxOffset() < m.Max) &&
				!del.Covers([]byte(m.Key.Topic), m.LastPhy) {
				rebuild[m.Key] = true
			}
		}
	}
	for k := range rebuild {
		if q := s.cqs[k]; q != nil {
			q.Close()
			delete(s.cqs, k)
		}
		if err := s.fs.RemoveAll(s.cqDir(k)); err != nil {
			return rep, fmt.Errorf("consume queue %s: remove for rebuild: %w", k, err)
		}
		rep.RebuiltQueues = append(rep.RebuiltQueues, k)
	}
	idxFrom := end
	if s.idx != nil {
		// The index may hold entries of the cut tail, and after an unclean
		// stop the file written since the last checkpoint may have torn
		// slots: drop what is not known good and re-index from there.
		safe := end
		if rep.Abnormal {
			safe = minOff // no checkpoint: nothing of the index is known good
			if cp != nil {
				safe = min(end, clamp(cp.Indexed))
			}
		}
		if !trusted || s.idx.MaxPhyOffset() >= end {
			from, err := s.idx.TruncateAfter(safe)
			if err != nil {
				return rep, fmt.Errorf("index: %w", err)
			}
			if from >= 0 {
				idxFrom = min(clamp(from), end)
				rep.IndexRebuiltFrom = idxFrom
			}
		}
		if m := s.idx.MaxPhyOffset(); m < idxFrom && !trusted {
			idxFrom = max(m, minOff) // an empty index starts at the log's start
			rep.IndexRebuiltFrom = idxFrom
		}
	}

	// Re-indexing writes index files that are not flushed until recovery
	// ends. Record, before it starts, that the index is only good below
	// idxFrom, so a crash during it makes the next recovery drop those files.
	if s.idx != nil && idxFrom < end {
		mid := &checkpoint{CLFlushed: minOff, CLMax: end, Dispatched: minOff, ConsumeQueueSize: int64(s.cfg.MappedFileSizeConsumeQueue)}
		if cp != nil {
			c := *cp
			mid = &c
			mid.Clean = false
		}
		mid.Indexed = idxFrom
		if err := writeFileAtomic(s.fs, s.checkpointPath(), mid.encode()); err != nil {
			return rep, fmt.Errorf("checkpoint before re-indexing: %w", err)
		}
	}

	// Re-dispatch: every record from scanFrom for all queues, from the log's
	// start for rebuilt queues, and from idxFrom for the index.
	from := min(scanFrom, idxFrom)
	if len(rebuild) > 0 {
		from = minOff
	}
	_, err = s.ForEachRecord(from, end, false, func(off int64, r *Record) error {
		if del.Covers(r.Topic, off) {
			return nil // a deleted topic's record: never dispatched again
		}
		d := NewDispatchRequest(off, r)
		if off >= scanFrom || rebuild[d.Key] {
			rep.Redispatched++
			if err := s.applyCQ(&d); err != nil {
				return err
			}
		}
		if off >= idxFrom {
			if err := s.applyIndex(&d); err != nil {
				return err
			}
		}
		s.lastStoreTs = d.StoreTimestamp
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("re-dispatch: %w", err)
	}
	s.dispatched.Store(end)

	// The topic-queue offset table follows from the ConsumeQueues, which now
	// match the log exactly (a deleted topic's queues are gone with its
	// records, so its re-created queues count from 0).
	for k, q := range s.cqs {
		s.cl.queueOffsets[k] = q.MaxOffset()
	}
	// Persist the recovered state before accepting writes, so a crash right
	// after recovery starts from here.
	if _, err := s.cl.Flush(end); err != nil {
		return rep, err
	}
	if err := s.checkpoint(false); err != nil {
		return rep, err
	}
	return rep, nil
}

// recordStartsAt reports whether bytes that look like a record header start
// at off (used to catch a stale clean checkpoint).
func (s *Store) recordStartsAt(off int64) bool {
	seg := s.cl.findSegment(off)
	if seg == nil {
		return false
	}
	_, magic, ok := PeekHeader(seg.data[off-seg.start:])
	return ok && (magic == MagicV1 || magic == MagicV2 || magic == MagicBlank)
}

// scanValid walks the log from from, checking every record (with CRC if
// configured), and returns where valid data ends. A bad record below durable,
// the offset known to have been flushed, is corruption, not a torn tail, and
// is reported as such.
func (s *Store) scanValid(from, to, durable int64) (int64, error) {
	next, err := s.ForEachRecord(from, to, s.cfg.CheckCRCOnRecover && !s.cfg.Faults.SkipCRCCheck, func(int64, *Record) error { return nil })
	if err == nil {
		return next, nil
	}
	if next < durable {
		return next, fmt.Errorf("%w: invalid record at commitlog offset %d, below the flushed offset %d (segment %s, position %d): %w",
			ErrCorrupt, next, durable, segmentName(next-next%s.cl.segSize), next%s.cl.segSize, err)
	}
	return next, nil
}

// tornBytes counts the non-zero bytes after end in its segment and later
// ones, for the report.
func (s *Store) tornBytes(end int64) int64 {
	var n int64
	for _, seg := range s.cl.segments() {
		if seg.end() <= end {
			continue
		}
		from := max(end, seg.start) - seg.start
		for _, c := range seg.data[from:] {
			if c != 0 {
				n++
			}
		}
	}
	return n
}

// openConsumeQueues opens every ConsumeQueue found on disk.
func (s *Store) openConsumeQueues() error {
	topics, err := s.fs.List(s.consumeQueueDir())
	if err != nil {
		if errors.Is(err, vfs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("list consume queues: %w", err)
	}
	for _, topic := range topics {
		if ValidateTopic(topic) != nil {
			continue
		}
		ids, err := s.fs.List(path.Join(s.consumeQueueDir(), topic))
		if err != nil {
			return fmt.Errorf("list consume queues of %s: %w", topic, err)
		}
		for _, id := range ids {
			qid, err := strconv.ParseInt(id, 10, 32)
			if err != nil || qid < 0 {
				continue
			}
			k := QueueKey{topic, int32(qid)}
			q, err := cq.Open(s.fs, s.cqDir(k), s.cfg.MappedFileSizeConsumeQueue)
			if err != nil {
				return fmt.Errorf("consume queue %s: %w", k, err)
			}
			s.cqs[k] = q
		}
	}
	return nil
}
