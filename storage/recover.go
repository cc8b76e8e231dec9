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
	Undispatched     int64      // bytes of log left undispatched (DispatchConfirmedOnly): not known confirmed
	DroppedSegment   string     // an unfinished last CommitLog segment (short, all zeros) removed, if any
}

func (r *RecoveryReport) String() string {
	dropped := ""
	if r.DroppedSegment != "" {
		dropped = " dropped_unfinished_segment=" + r.DroppedSegment
	}
	return fmt.Sprintf("abnormal=%v checkpoint=%s scanned_from=%d end=%d torn_bytes=%d redispatched=%d rebuilt_queues=%d index_rebuilt_from=%d requested_cut=%d undispatched=%d%s",
		r.Abnormal, r.CheckpointState, r.ScannedFrom, r.TruncatedAt, r.TornBytes, r.Redispatched, len(r.RebuiltQueues), r.IndexRebuiltFrom, r.RequestedCut, r.Undispatched, dropped)
}

// recovery is one run of recover: what the phases learn and hand on.
type recovery struct {
	s       *Store
	rep     *RecoveryReport
	cp      *checkpoint // nil: missing or damaged
	del     Deleted
	minOff  int64 // the log's first offset
	logEnd  int64 // where the last segment's bytes end
	end     int64 // where valid data ends: the log's end after recovery
	upTo    int64 // how far records are dispatched: end, or less (DispatchConfirmedOnly)
	scan    int64 // the first offset re-dispatched to every queue
	trusted bool  // a clean stop whose checkpoint is exact
	rebuild map[QueueKey]bool
	idxFrom int64 // the first offset re-indexed
}

// recover brings the store to a consistent state; see Open. Its phases, in
// order: read the abort file and the checkpoint, open the ConsumeQueues and
// the index, find where valid data ends and cut the log there, cut or
// rebuild the queues and the index to match, re-dispatch, persist.
func (s *Store) recover() (*RecoveryReport, error) {
	r := &recovery{s: s, rep: &RecoveryReport{IndexRebuiltFrom: -1, RequestedCut: -1, DroppedSegment: s.cl.dropped}}
	if err := r.readState(); err != nil {
		return r.rep, err
	}
	segs := s.cl.segments()
	if len(segs) == 0 {
		return r.rep, r.emptyLog()
	}
	r.minOff, r.logEnd = segs[0].start, segs[len(segs)-1].end()
	for _, phase := range []func() error{r.findEnd, r.holdBack, r.cutQueues, r.cutIndex, r.markReindex, r.redispatch, r.persist} {
		if err := phase(); err != nil {
			return r.rep, err
		}
	}
	return r.rep, nil
}

func (r *recovery) clamp(v int64) int64 { return max(r.minOff, min(v, r.logEnd)) }

// readState reads the abort file and the checkpoint and opens the
// ConsumeQueues and the index.
func (r *recovery) readState() error {
	s, rep := r.s, r.rep
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
	r.cp = cp
	if cp != nil && cp.ConsumeQueueSize != 0 && cp.ConsumeQueueSize != int64(s.cfg.MappedFileSizeConsumeQueue) {
		return fmt.Errorf("mappedFileSizeConsumeQueue is %d entries but the store was written with %d; changing it is not supported",
			s.cfg.MappedFileSizeConsumeQueue, cp.ConsumeQueueSize)
	}
	if err := s.openConsumeQueues(); err != nil {
		return err
	}
	if err := s.dropDeletedQueues(rep); err != nil {
		return err
	}
	r.del = s.cl.Deleted()
	return r.openIndex()
}

// openIndex opens the IndexFile, dropping a damaged one.
func (r *recovery) openIndex() error {
	s := r.s
	if !s.cfg.MessageIndexEnable {
		return nil
	}
	opts := index.Options{SlotNum: s.cfg.MaxHashSlotNum, IndexNum: s.cfg.MaxIndexNum}
	idx, err := index.Open(s.fs, s.indexDir(), opts)
	if errors.Is(err, index.ErrCorrupt) {
		// The index is derived data: a damaged one (a crash can tear an
		// unflushed header) is dropped and rebuilt from the log.
		r.rep.IndexDiscarded = err.Error()
		if err = s.fs.RemoveAll(s.indexDir()); err == nil {
			idx, err = index.Open(s.fs, s.indexDir(), opts)
		}
	}
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	s.idx = idx
	return nil
}

// emptyLog: no log at all, so nothing can be indexed.
func (r *recovery) emptyLog() error {
	s := r.s
	for k, q := range s.cqs {
		q.Close()
		delete(s.cqs, k)
	}
	if err := s.fs.RemoveAll(s.consumeQueueDir()); err != nil {
		return fmt.Errorf("remove consume queues of an empty log: %w", err)
	}
	if r.cp != nil {
		// The log was emptied by retention; continue where it ended.
		s.cl.maxOffset.Store(r.cp.CLMax)
		s.cl.flushed.Store(r.cp.CLMax)
	}
	s.dispatched.Store(s.cl.MaxOffset())
	r.rep.TruncatedAt = s.dispatched.Load()
	return nil
}

// findEnd finds where valid data must end and from where to scan, and cuts
// the log there.
func (r *recovery) findEnd() error {
	s, rep, cp := r.s, r.rep, r.cp
	var durable int64
	if !rep.Abnormal && cp != nil && cp.Clean && cp.CLMax >= r.minOff && cp.CLMax <= r.logEnd {
		// Clean stop: the checkpoint is exact. Check that nothing that looks
		// like a record follows it, which would mean the checkpoint is stale.
		r.end = cp.CLMax
		r.trusted = !s.recordStartsAt(r.end)
		durable = r.end
		r.scan = r.clamp(cp.Dispatched)
	}
	if !r.trusted {
		rep.Abnormal = true
		durable, r.scan = r.minOff, r.minOff
		if cp != nil {
			durable = r.clamp(cp.CLFlushed)
			r.scan = r.clamp(min(cp.Dispatched, cp.CLFlushed))
		}
		// Validate from the start of the segment holding the scan's start:
		// the part of the log not yet known durable is where a tear can
		// be. When that is the log's end and that is a segment's end (a
		// slave that copied the master's blank filler creates the next
		// segment only when the next bytes come), no segment holds it:
		// the last one is validated.
		seg := s.cl.findSegment(r.scan)
		if seg == nil {
			segs := s.cl.segments()
			seg = segs[len(segs)-1]
		}
		r.scan = seg.start
		end, err := s.scanValid(r.scan, r.logEnd, durable)
		if err != nil {
			return err
		}
		r.end = end
		rep.TornBytes = s.tornBytes(end)
	}
	rep.ScannedFrom, rep.TruncatedAt = r.scan, r.end
	return s.cl.truncate(r.end)
}

// holdBack sets how far records are dispatched: to the log's end, or,
// under DispatchConfirmedOnly, only as far as the checkpoint says they
// were (the broker dispatched nothing past a confirm offset, so that much
// was confirmed; a checkpoint written later than some dispatch only says
// less). No checkpoint: nothing is known confirmed.
func (r *recovery) holdBack() error {
	r.upTo = r.end
	if r.s.cfg.DispatchConfirmedOnly {
		r.upTo = r.minOff
		if r.cp != nil {
			r.upTo = min(r.end, r.clamp(r.cp.Dispatched))
		}
	}
	r.rep.Undispatched = r.end - r.upTo
	return nil
}

// cutQueues cuts the ConsumeQueues' entries past the dispatch limit (the
// cut tail's: their pages were written back, the log's were not; or those
// not known confirmed) and drops, for a rebuild, those
// whose durable extent (per the checkpoint) is gone although their records
// are still in the log: damaged or deleted by hand. (A mark of a deleted
// topic's queue describes records that are gone.)
func (r *recovery) cutQueues() error {
	s := r.s
	for k, q := range s.cqs {
		if err := q.TruncateByPhy(r.upTo); err != nil {
			return fmt.Errorf("consume queue %s: %w", k, err)
		}
	}
	r.rebuild = map[QueueKey]bool{}
	if r.cp != nil {
		for _, m := range r.cp.Queues {
			q := s.cqs[m.Key]
			if m.LastPhy >= 0 && m.LastPhy < r.upTo && m.LastPhy >= r.minOff && (q == nil || q.MaxOffset() < m.Max) &&
				!r.del.Covers([]byte(m.Key.Topic), m.LastPhy) {
				r.rebuild[m.Key] = true
			}
		}
	}
	for k := range r.rebuild {
		if q := s.cqs[k]; q != nil {
			q.Close()
			delete(s.cqs, k)
		}
		if err := s.fs.RemoveAll(s.cqDir(k)); err != nil {
			return fmt.Errorf("consume queue %s: remove for rebuild: %w", k, err)
		}
		r.rep.RebuiltQueues = append(r.rep.RebuiltQueues, k)
	}
	return nil
}

// cutIndex finds from where to re-index: the index may hold entries of
// the cut tail, and after an unclean stop the file written since the last
// checkpoint may have torn slots, so what is not known good is dropped.
func (r *recovery) cutIndex() error {
	s, rep := r.s, r.rep
	r.idxFrom = r.upTo
	if s.idx == nil {
		return nil
	}
	safe := r.upTo
	if rep.Abnormal {
		safe = r.minOff // no checkpoint: nothing of the index is known good
		if r.cp != nil {
			safe = min(r.upTo, r.clamp(r.cp.Indexed))
		}
	}
	if !r.trusted || s.idx.MaxPhyOffset() >= r.upTo {
		from, err := s.idx.TruncateAfter(safe)
		if err != nil {
			return fmt.Errorf("index: %w", err)
		}
		if from >= 0 {
			r.idxFrom = min(r.clamp(from), r.upTo)
			rep.IndexRebuiltFrom = r.idxFrom
		}
	}
	if m := s.idx.MaxPhyOffset(); m < r.idxFrom && !r.trusted {
		r.idxFrom = max(m, r.minOff) // an empty index starts at the log's start
		rep.IndexRebuiltFrom = r.idxFrom
	}
	return nil
}

// markReindex: re-indexing writes index files that are not flushed until
// recovery ends. Record, before it starts, that the index is only good
// below idxFrom, so a crash during it makes the next recovery drop those
// files.
func (r *recovery) markReindex() error {
	s := r.s
	if s.idx == nil || r.idxFrom >= r.upTo {
		return nil
	}
	mid := &checkpoint{CLFlushed: r.minOff, CLMax: r.end, Dispatched: r.minOff, ConsumeQueueSize: int64(s.cfg.MappedFileSizeConsumeQueue)}
	if r.cp != nil {
		c := *r.cp
		mid = &c
		mid.Clean = false
	}
	mid.Indexed = r.idxFrom
	if err := writeFileAtomic(s.fs, s.checkpointPath(), mid.encode()); err != nil {
		return fmt.Errorf("checkpoint before re-indexing: %w", err)
	}
	return nil
}

// redispatch applies every record from the scan's start to all queues,
// from the log's start to rebuilt queues, and from idxFrom to the index,
// up to the dispatch limit.
func (r *recovery) redispatch() error {
	s := r.s
	from := min(r.scan, r.idxFrom)
	if len(r.rebuild) > 0 {
		from = r.minOff
	}
	var hashes []int32 // each request is applied before the next is built
	_, err := s.ForEachDispatch(from, r.upTo, func(off int64, rec *DispatchRecord) error {
		if r.del.Covers(rec.Topic, off) {
			return nil // a deleted topic's record: never dispatched again
		}
		hashes = hashes[:0]
		d := NewDispatchRequest(off, rec, "", &hashes)
		if off >= r.scan || r.rebuild[d.Key] {
			r.rep.Redispatched++
			if err := s.applyCQ(&d); err != nil {
				return err
			}
		}
		if off >= r.idxFrom {
			if err := s.applyIndex(&d); err != nil {
				return err
			}
		}
		s.lastStoreTs = d.StoreTimestamp
		return nil
	})
	if err != nil {
		return fmt.Errorf("re-dispatch: %w", err)
	}
	s.dispatched.Store(r.upTo)
	return nil
}

// persist derives the topic-queue offset table from the ConsumeQueues,
// which now match the log exactly up to the dispatch limit (a deleted
// topic's queues are gone with its records, so its re-created queues count
// from 0), and from the records past it, and persists the recovered state
// before accepting writes, so a crash right after recovery starts from
// here.
func (r *recovery) persist() error {
	s := r.s
	for k, q := range s.cqs {
		s.cl.queueOffsets[k] = q.MaxOffset()
	}
	if r.upTo < r.end {
		// Appends continue the queues past the records held back.
		_, err := s.ForEachRecord(r.upTo, r.end, false, func(off int64, rec *Record) error {
			if !r.del.Covers(rec.Topic, off) {
				s.cl.queueOffsets[QueueKey{string(rec.Topic), rec.QueueID}] = rec.QueueOffset + 1
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("queue offsets past the dispatch limit: %w", err)
		}
	}
	if _, err := s.cl.Flush(r.end); err != nil {
		return err
	}
	return s.checkpoint(false)
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
