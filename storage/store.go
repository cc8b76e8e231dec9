package storage

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"path"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/wharfmq/wharf/storage/cq"
	"github.com/wharfmq/wharf/storage/index"
	"github.com/wharfmq/wharf/storage/vfs"
)

// Config configures a Store. Field names follow RocketMQ's broker.conf keys.
type Config struct {
	StorePathRootDir           string
	MappedFileSizeCommitLog    int64 // bytes per CommitLog segment
	MappedFileSizeConsumeQueue int   // entries per ConsumeQueue file (RocketMQ counts bytes; Wharf counts entries)
	MaxMessageSize             int   // largest encoded record
	MessageIndexEnable         bool
	MaxHashSlotNum             int
	MaxIndexNum                int
	CheckCRCOnRecover          bool
	StoreHost                  netip.AddrPort
	WarmMappedFileEnable       bool // keep a window ahead of the log's end populated (see CommitLog.WarmAhead)
	// WriteBackAhead keeps the window ahead of the log's end populated
	// and written back (zeros), so group commits fsync written extents (see
	// CommitLog.WarmAhead): SYNC_FLUSH with syncFlushPrezeroEnable.
	WriteBackAhead bool

	Retention RetentionPolicy

	// DispatchConfirmedOnly is controller mode's promise to consumers:
	// nothing is dispatched (into ConsumeQueues and the index, where
	// consumers find messages) past an offset the broker knows confirmed.
	// The broker's Reput actor keeps to its confirm offset while it runs;
	// with this set the store keeps to it across a restart too: recovery
	// dispatches only as far as the checkpoint says was dispatched, and
	// Close dispatches nothing more. What lies past waits for the broker to
	// learn its role (a former master's tail past its confirm offset is cut
	// when it rejoins; consumers must not have read it meanwhile).
	DispatchConfirmedOnly bool

	// Faults plants bugs for the simulator's self-test; zero in production.
	Faults Faults
}

// DefaultConfig returns RocketMQ's defaults with the root at root.
func DefaultConfig(root string) Config {
	return Config{
		StorePathRootDir:           root,
		MappedFileSizeCommitLog:    1 << 30,
		MappedFileSizeConsumeQueue: 300_000,
		MaxMessageSize:             4 << 20,
		MessageIndexEnable:         true,
		MaxHashSlotNum:             5_000_000,
		MaxIndexNum:                20_000_000,
		CheckCRCOnRecover:          true,
		Retention:                  DefaultRetention(),
	}
}

// Store is the broker's message store: the CommitLog, its ConsumeQueues and
// its IndexFile, with the checkpoint and abort files that make recovery
// possible.
//
// Ownership: one writer calls AppendBatch; one flusher calls Flush; one
// dispatcher calls Dispatch (and owns the ConsumeQueues' and index's writes).
// Readers (GetMessages, Query) may run on other goroutines.
type Store struct {
	fs  vfs.FS
	cfg Config
	cl  *CommitLog

	mu  sync.RWMutex // guards the cqs map (not the queues' contents)
	cqs map[QueueKey]*cq.Queue

	idx *index.Index

	dispatched  atomic.Int64 // reput position: records below are in ConsumeQueues and index
	lastStoreTs int64        // store timestamp of the last dispatched record

	diskFull bool
	closed   bool

	epochs        atomic.Pointer[[]EpochEntry] // the epoch file's entries: replaced whole by the writer, read anywhere
	writesStopped atomic.Bool                  // StopWrites: AppendBatch refuses, TruncateTo may run
	mayLackAcked  atomic.Bool                  // MayLackAckedFile is present

	// cpMu orders checkpoint writes from other goroutines (the broker
	// writes them off its actors) with Close: once cpClosed, the clean
	// checkpoint of Close is the last one written.
	cpMu     sync.Mutex
	cpClosed bool
}

// Paths of the store's files under the root.
func (s *Store) commitLogDir() string    { return path.Join(s.cfg.StorePathRootDir, "commitlog") }
func (s *Store) consumeQueueDir() string { return path.Join(s.cfg.StorePathRootDir, "consumequeue") }
func (s *Store) indexDir() string        { return path.Join(s.cfg.StorePathRootDir, "index") }
func (s *Store) abortPath() string       { return path.Join(s.cfg.StorePathRootDir, "abort") }
func (s *Store) checkpointPath() string  { return path.Join(s.cfg.StorePathRootDir, checkpointName) }
func (s *Store) cqDir(k QueueKey) string {
	return path.Join(s.consumeQueueDir(), k.Topic, strconv.Itoa(int(k.QueueID)))
}

// Open opens (creating if needed) the store at cfg.StorePathRootDir and
// recovers it: after a clean stop it trusts the checkpoint; after an unclean
// one (the abort file is present) it validates the log's tail, cuts a torn
// tail and brings ConsumeQueues and the index back in line. It then writes the
// abort file, which only Close removes.
func Open(fsys vfs.FS, cfg Config) (*Store, *RecoveryReport, error) {
	if cfg.StorePathRootDir == "" {
		return nil, nil, errors.New("storage: storePathRootDir is empty")
	}
	if cfg.MappedFileSizeConsumeQueue <= 0 {
		return nil, nil, fmt.Errorf("storage: mappedFileSizeConsumeQueue %d must be positive", cfg.MappedFileSizeConsumeQueue)
	}
	s := &Store{fs: fsys, cfg: cfg, cqs: map[QueueKey]*cq.Queue{}}
	if err := fsys.MkdirAll(cfg.StorePathRootDir); err != nil {
		return nil, nil, fmt.Errorf("storage: %w", err)
	}
	cl, err := openCommitLog(fsys, s.commitLogDir(), CommitLogOptions{
		SegmentSize:    cfg.MappedFileSizeCommitLog,
		MaxMessageSize: cfg.MaxMessageSize,
		StoreHost:      cfg.StoreHost,
		Prefault:       cfg.WarmMappedFileEnable,
		Materialize:    cfg.WriteBackAhead,
		Faults:         cfg.Faults,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("storage: %w", err)
	}
	s.cl = cl
	if err := s.loadDeleted(); err != nil {
		s.closeFiles()
		return nil, nil, err
	}
	if err := s.loadEpochs(); err != nil {
		s.closeFiles()
		return nil, nil, err
	}
	rep, err := s.recover()
	if err == nil {
		err = s.dropEpochsAfter(s.cl.MaxOffset())
	}
	if err != nil {
		s.closeFiles()
		return nil, rep, fmt.Errorf("storage: recovery of %s: %w", cfg.StorePathRootDir, err)
	}
	if err := s.markAfterRecovery(rep.Abnormal); err != nil {
		s.closeFiles()
		return nil, rep, err
	}
	if err := s.createAbort(); err != nil {
		s.closeFiles()
		return nil, rep, err
	}
	if err := s.cutAsRequested(rep); err != nil {
		s.closeFiles()
		return nil, rep, fmt.Errorf("storage: open %s: %w", cfg.StorePathRootDir, err)
	}
	return s, rep, nil
}

func (s *Store) createAbort() error {
	_ = s.fs.Remove(s.abortPath())
	f, err := s.fs.Create(s.abortPath(), 0)
	if err != nil {
		return fmt.Errorf("storage: create abort file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("storage: create abort file: %w", err)
	}
	if err := s.fs.SyncDir(s.cfg.StorePathRootDir); err != nil {
		return fmt.Errorf("storage: sync root after abort file: %w", err)
	}
	return nil
}

// CommitLog returns the store's log.
func (s *Store) CommitLog() *CommitLog { return s.cl }

// ConsumeQueue returns the queue of k, creating it if create is set. It
// returns nil if the queue does not exist and create is false.
func (s *Store) ConsumeQueue(k QueueKey, create bool) (*cq.Queue, error) {
	s.mu.RLock()
	q := s.cqs[k]
	s.mu.RUnlock()
	if q != nil || !create {
		return q, nil
	}
	if err := ValidateTopic(k.Topic); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if q = s.cqs[k]; q != nil {
		return q, nil
	}
	q, err := cq.Open(s.fs, s.cqDir(k), s.cfg.MappedFileSizeConsumeQueue)
	if err != nil {
		return nil, fmt.Errorf("storage: consume queue %s: %w", k, err)
	}
	s.cqs[k] = q
	return q, nil
}

// Queues lists every queue that has a ConsumeQueue, in (topic, queue id)
// order.
func (s *Store) Queues() []QueueKey {
	s.mu.RLock()
	keys := make([]QueueKey, 0, len(s.cqs))
	for k := range s.cqs {
		keys = append(keys, k)
	}
	s.mu.RUnlock()
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Topic != keys[j].Topic {
			return keys[i].Topic < keys[j].Topic
		}
		return keys[i].QueueID < keys[j].QueueID
	})
	return keys
}

// ErrDiskFull is returned by appends while the disk is above
// diskSpaceWarningLevelRatio.
var ErrDiskFull = errors.New("disk full")

// AppendBatch stores msgs; see CommitLog.AppendBatch. It refuses writes while
// the disk is full. The broker's own appends go through it (a slave's copies
// through CommitLog.AppendRaw), so it is where watermarks of deleted topics
// beyond the log's end are lowered to it first (see clampDeleted).
func (s *Store) AppendBatch(msgs []*Message, storeTimestamp int64, out []AppendResult) ([]AppendResult, error) {
	if s.writesStopped.Load() {
		return out[:0], fmt.Errorf("storage: %w", ErrWritesStopped)
	}
	if s.diskFull {
		return out[:0], fmt.Errorf("storage: %w: usage above diskSpaceWarningLevelRatio %.0f%%; writes resume below %.0f%%",
			ErrDiskFull, s.cfg.Retention.DiskSpaceWarningLevelRatio*100, (s.cfg.Retention.DiskSpaceWarningLevelRatio-diskFullHysteresis)*100)
	}
	if err := s.clampDeleted(); err != nil {
		return out[:0], err
	}
	return s.cl.AppendBatch(msgs, storeTimestamp, out)
}

// Flush makes the log durable up to upTo; see CommitLog.Flush.
func (s *Store) Flush(upTo int64) (int64, error) { return s.cl.Flush(upTo) }

// ForEachRecord decodes the records in [from, to) in order and calls fn with
// each record's offset; blank fillers are skipped. It stops at the first
// record that does not decode and returns its offset with the error, so the
// caller can tell where valid data ends. next is where it stopped. fn must
// not keep r: the same Record is reused for every call (one allocation per
// walk, not per record).
func (s *Store) ForEachRecord(from, to int64, checkCRC bool, fn func(off int64, r *Record) error) (next int64, err error) {
	var r Record
	return s.walkLog(from, to, func(off int64, b []byte) (int32, error) {
		if r, err = DecodeRecord(b, checkCRC); err != nil {
			return 0, err
		}
		if r.PhysicalOffset != off {
			return 0, fmt.Errorf("%w: record at %d says it is at %d", ErrBadLength, off, r.PhysicalOffset)
		}
		return r.TotalSize, fn(off, &r)
	})
}

// walkLog calls step with the log's bytes from each record's offset in
// [from, to) to the end of to or of the record's segment, whichever comes
// first, skipping blank fillers; step returns the record's size. It stops
// at the first error, returning the offset of the record that caused it.
func (s *Store) walkLog(from, to int64, step func(off int64, b []byte) (int32, error)) (next int64, err error) {
	off := from
	for off < to {
		seg := s.cl.findSegment(off)
		if seg == nil {
			return off, fmt.Errorf("storage: offset %d is not in the log [%d, %d)", off, s.cl.MinOffset(), s.cl.MaxOffset())
		}
		pos := off - seg.start
		limit := min(to, seg.end()) - seg.start
		b := seg.data[pos:limit]
		size, magic, ok := PeekHeader(b)
		if ok && magic == MagicBlank {
			if int64(size) != seg.end()-off {
				return off, fmt.Errorf("%w: blank record at %d claims %d bytes, segment has %d left", ErrBadLength, off, size, seg.end()-off)
			}
			off = seg.end()
			continue
		}
		n, err := step(off, b)
		if err != nil {
			return off, err
		}
		off += int64(n)
	}
	return off, nil
}

// applyCQ adds the entry of d to its ConsumeQueue. Re-dispatching an entry
// already there is a no-op; an entry that disagrees with the log (left by a
// crash) is cut away and rewritten, because the log is the truth.
func (s *Store) applyCQ(d *DispatchRequest) error {
	q, err := s.ConsumeQueue(d.Key, true)
	if err != nil {
		return err
	}
	return applyTo(q, d)
}

// applyTo is applyCQ to q, d's ConsumeQueue.
func applyTo(q *cq.Queue, d *DispatchRequest) error {
	if d.QueueOffset < q.MaxOffset() {
		if e, err := q.Get(d.QueueOffset); err == nil && e == d.Entry {
			return nil
		}
		if err := q.TruncateTo(d.QueueOffset); err != nil {
			return fmt.Errorf("storage: consume queue %s: %w", d.Key, err)
		}
	}
	if err := q.Append(d.QueueOffset, d.Entry); err != nil {
		return fmt.Errorf("storage: consume queue %s: %w", d.Key, err)
	}
	return nil
}

// applyIndex adds the keys of d to the index.
func (s *Store) applyIndex(d *DispatchRequest) error {
	if s.idx == nil {
		return nil
	}
	for _, h := range d.KeyHashes {
		if err := s.idx.PutHash(h, d.Entry.Offset, d.StoreTimestamp); err != nil {
			return fmt.Errorf("storage: index: %w", err)
		}
	}
	return nil
}

// Dispatch builds ConsumeQueue entries and index keys for the records in
// [Dispatched(), upTo), except those of deleted topics (Deleted), and calls fn (if not nil) for each, after its entry is
// in place (the broker wakes long polls there; fn must not keep d: its
// KeyHashes are reused). It returns the new reput position.
func (s *Store) Dispatch(upTo int64, fn func(*DispatchRequest)) (int64, error) {
	upTo = min(upTo, s.cl.MaxOffset())
	del := s.cl.Deleted()
	var hashes []int32 // each request is applied before the next is built
	next, err := s.ForEachDispatch(s.dispatched.Load(), upTo, func(off int64, r *DispatchRecord) error {
		if del.Covers(r.Topic, off) {
			return nil // a deleted topic's record
		}
		hashes = hashes[:0]
		d := NewDispatchRequest(off, r, "", &hashes)
		if err := s.applyCQ(&d); err != nil {
			return err
		}
		if err := s.applyIndex(&d); err != nil {
			return err
		}
		s.lastStoreTs = d.StoreTimestamp
		if fn != nil {
			fn(&d)
		}
		return nil
	})
	s.dispatched.Store(next)
	if err != nil {
		return next, fmt.Errorf("storage: dispatch at %d: %w", next, err)
	}
	return next, nil
}

// Dispatched is the reput position.
func (s *Store) Dispatched() int64 { return s.dispatched.Load() }

// DispatchConfirmedOnly reports Config.DispatchConfirmedOnly.
func (s *Store) DispatchConfirmedOnly() bool { return s.cfg.DispatchConfirmedOnly }

// Checkpoint flushes the ConsumeQueues and the index and records, durably,
// how far the log, the queues and the index are safe. The broker calls it on
// an interval; recovery after a crash starts from the last one.
func (s *Store) Checkpoint() error { return s.checkpoint(false) }

func (s *Store) checkpoint(clean bool) error {
	return s.checkpointBelow(clean, math.MaxInt64, math.MaxInt64)
}

// checkpointBelow is checkpoint claiming nothing of the log at or beyond
// limit and nothing of the index beyond indexed (TruncateTo's first step).
func (s *Store) checkpointBelow(clean bool, limit, indexed int64) error {
	cp := &checkpoint{Clean: clean, CLFlushed: min(s.cl.FlushedOffset(), limit), CLMax: min(s.cl.MaxOffset(), limit),
		Dispatched: min(s.dispatched.Load(), limit), LogicsMsgTime: s.lastStoreTs,
		ConsumeQueueSize: int64(s.cfg.MappedFileSizeConsumeQueue)}
	s.mu.RLock()
	queues := make([]*cq.Queue, 0, len(s.cqs))
	keys := make([]QueueKey, 0, len(s.cqs))
	for k, q := range s.cqs {
		keys = append(keys, k)
		queues = append(queues, q)
	}
	s.mu.RUnlock()
	for i, q := range queues {
		if err := q.Flush(); err != nil {
			return fmt.Errorf("storage: flush consume queue %s: %w", keys[i], err)
		}
		m := queueMark{Key: keys[i], Max: q.MaxOffset(), LastPhy: -1}
		if e, ok := q.LastEntry(); ok {
			m.LastPhy = e.Offset
		}
		cp.Queues = append(cp.Queues, m)
	}
	sortQueueMarks(cp.Queues)
	if s.idx != nil {
		if err := s.idx.Flush(); err != nil {
			return fmt.Errorf("storage: flush index: %w", err)
		}
		// Unflushed puts after this point may overwrite slots of flushed
		// entries, so after a crash the index file holding this offset is
		// rebuilt (index.TruncateAfter drops it).
		cp.Indexed = min(s.idx.MaxPhyOffset(), indexed)
	}
	if err := writeFileAtomic(s.fs, s.checkpointPath(), cp.encode()); err != nil {
		return fmt.Errorf("storage: checkpoint: %w", err)
	}
	return nil
}

// Close flushes everything, writes a clean checkpoint and removes the abort
// file, so the next Open trusts the checkpoint. If the log cannot be fully
// flushed or dispatched, the abort file stays and the next Open recovers.
func (s *Store) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	if !s.cfg.DispatchConfirmedOnly {
		if _, err := s.Dispatch(s.cl.MaxOffset(), nil); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := s.cl.Flush(s.cl.MaxOffset()); err != nil {
		errs = append(errs, err)
	}
	// Under DispatchConfirmedOnly a clean checkpoint may say less is
	// dispatched than the log holds: the next Open dispatches no more.
	clean := len(errs) == 0 && s.cl.FlushedOffset() == s.cl.MaxOffset() &&
		(s.dispatched.Load() == s.cl.MaxOffset() || s.cfg.DispatchConfirmedOnly)
	s.cpMu.Lock()
	s.cpClosed = true
	s.cpMu.Unlock()
	if err := s.checkpoint(clean); err != nil {
		errs = append(errs, err)
		clean = false
	}
	if clean {
		if err := s.fs.Remove(s.abortPath()); err != nil {
			errs = append(errs, fmt.Errorf("storage: remove abort file: %w", err))
		} else if err := s.fs.SyncDir(s.cfg.StorePathRootDir); err != nil {
			errs = append(errs, fmt.Errorf("storage: sync root: %w", err))
		}
	}
	errs = append(errs, s.closeFiles())
	return errors.Join(errs...)
}

func (s *Store) closeFiles() error {
	var errs []error
	s.mu.Lock()
	for _, q := range s.cqs {
		errs = append(errs, q.Close())
	}
	s.cqs = map[QueueKey]*cq.Queue{}
	s.mu.Unlock()
	if s.idx != nil {
		errs = append(errs, s.idx.Close())
		s.idx = nil
	}
	errs = append(errs, s.cl.close())
	return errors.Join(errs...)
}
