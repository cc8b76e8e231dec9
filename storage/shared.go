package storage

import (
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/wharfmq/wharf/storage/cq"
	"github.com/wharfmq/wharf/storage/vfs"
)

// This file is the store's API for a broker that splits the work among
// several owners (the actors of DESIGN.md): one dispatcher per ConsumeQueue,
// one index owner, one reput owner that writes checkpoints. Store.Dispatch
// and Store.Checkpoint do the same work on one goroutine.

// ApplyConsumeQueue adds the entry of d to its ConsumeQueue (idempotently;
// see Dispatch). Only the owner of that queue calls it.
func (s *Store) ApplyConsumeQueue(d *DispatchRequest) error { return s.applyCQ(d) }

// ApplyConsumeQueueBatch is ApplyConsumeQueue of each of reqs, in order,
// every one of queue k (the queue is looked up once); it stops at the
// first that fails. Only the owner of that queue calls it.
func (s *Store) ApplyConsumeQueueBatch(k QueueKey, reqs []*DispatchRequest) error {
	if len(reqs) == 0 {
		return nil
	}
	q, err := s.ConsumeQueue(k, true)
	if err != nil {
		return err
	}
	for _, d := range reqs {
		if d.Key != k {
			return fmt.Errorf("storage: consume queue %s: an entry of queue %s in its batch", k, d.Key)
		}
		if err := applyTo(q, d); err != nil {
			return err
		}
	}
	return nil
}

// ApplyIndex adds the keys of d to the index. Only the index owner calls it.
func (s *Store) ApplyIndex(d *DispatchRequest) error { return s.applyIndex(d) }

// SetDispatched records the reput position (the reput owner calls it after
// handing every record below pos to the queue and index owners).
func (s *Store) SetDispatched(pos int64, lastStoreTs int64) {
	s.dispatched.Store(pos)
	s.lastStoreTs = lastStoreTs
}

// QueueMark is a ConsumeQueue's durable extent, reported by FlushQueue and
// recorded in the checkpoint.
type QueueMark struct {
	Key     QueueKey
	Max     int64
	LastPhy int64
}

// FlushQueue flushes the ConsumeQueue of k and reports its extent. Only the
// owner of that queue calls it.
func (s *Store) FlushQueue(k QueueKey) (QueueMark, error) {
	q, err := s.ConsumeQueue(k, false)
	if err != nil || q == nil {
		return QueueMark{Key: k, LastPhy: -1}, err
	}
	if err := q.Flush(); err != nil {
		return QueueMark{}, fmt.Errorf("storage: flush consume queue %s: %w", k, err)
	}
	m := QueueMark{Key: k, Max: q.MaxOffset(), LastPhy: -1}
	if e, ok := q.LastEntry(); ok {
		m.LastPhy = e.Offset
	}
	return m, nil
}

// FlushQueueJob is FlushQueue for an owner that must not wait for the disk:
// the mark to put in a checkpoint once the work has succeeded, and the work
// (nil: nothing to flush), which may run on another goroutine while the
// owner goes on applying entries, but not while it deletes files of the
// queue. A failure of the work must be reported with FailQueueFlush. Only
// the owner of the queue calls it.
func (s *Store) FlushQueueJob(k QueueKey) (QueueMark, func() error, error) {
	q, err := s.ConsumeQueue(k, false)
	if err != nil || q == nil {
		return QueueMark{Key: k, LastPhy: -1}, nil, err
	}
	job, err := q.FlushJob()
	if err != nil {
		return QueueMark{}, nil, fmt.Errorf("storage: flush consume queue %s: %w", k, err)
	}
	m := QueueMark{Key: k, Max: q.MaxOffset(), LastPhy: -1}
	if e, ok := q.LastEntry(); ok {
		m.LastPhy = e.Offset
	}
	return m, job, nil
}

// FailQueueFlush makes a failed FlushQueueJob sticky: queue k never reports
// its entries durable again. Only the owner of the queue calls it.
func (s *Store) FailQueueFlush(k QueueKey, err error) {
	if q, _ := s.ConsumeQueue(k, false); q != nil {
		q.FlushFailed(err)
	}
}

// FlushIndexJob is FlushIndex for an owner that must not wait for the disk:
// the MaxPhyOffset to put in a checkpoint once the work has succeeded, and
// the work (nil: nothing to flush); see FlushQueueJob. Only the index owner
// calls it.
func (s *Store) FlushIndexJob() (int64, func() error, error) {
	if s.idx == nil {
		return 0, nil, nil
	}
	job, err := s.idx.FlushJob()
	if err != nil {
		return 0, nil, fmt.Errorf("storage: flush index: %w", err)
	}
	return s.idx.MaxPhyOffset(), job, nil
}

// FailIndexFlush makes a failed FlushIndexJob sticky. Only the index owner
// calls it.
func (s *Store) FailIndexFlush(err error) {
	if s.idx != nil {
		s.idx.FlushFailed(err)
	}
}

// FlushIndex flushes the index and returns its MaxPhyOffset for the
// checkpoint. Only the index owner calls it.
func (s *Store) FlushIndex() (int64, error) {
	if s.idx == nil {
		return 0, nil
	}
	if err := s.idx.Flush(); err != nil {
		return 0, fmt.Errorf("storage: flush index: %w", err)
	}
	return s.idx.MaxPhyOffset(), nil
}

// WriteCheckpoint durably records that every ConsumeQueue entry of records
// below dispatched is flushed (marks), and the index's flushed extent. The
// caller must have flushed them (FlushQueue, FlushIndex) after every record
// below dispatched was applied.
func (s *Store) WriteCheckpoint(dispatched, indexed int64, marks []QueueMark) error {
	return s.WriteCheckpointAt(dispatched, indexed, s.lastStoreTs, marks)
}

// ErrStoreClosed is returned by WriteCheckpointAt after Close.
var ErrStoreClosed = errors.New("storage: store closed")

// WriteCheckpointAt is WriteCheckpoint with the store time of the last
// dispatched record given, for a caller on another goroutine than the
// reput's. After Close (which writes the final checkpoint) it writes
// nothing and returns ErrStoreClosed.
func (s *Store) WriteCheckpointAt(dispatched, indexed, logicsMsgTime int64, marks []QueueMark) error {
	s.cpMu.Lock()
	defer s.cpMu.Unlock()
	if s.cpClosed {
		return ErrStoreClosed
	}
	cp := &checkpoint{CLFlushed: s.cl.FlushedOffset(), CLMax: s.cl.MaxOffset(), Dispatched: dispatched,
		Indexed: indexed, LogicsMsgTime: logicsMsgTime, ConsumeQueueSize: int64(s.cfg.MappedFileSizeConsumeQueue)}
	for _, m := range marks {
		cp.Queues = append(cp.Queues, queueMark(m))
	}
	sortQueueMarks(cp.Queues)
	if err := writeFileAtomic(s.fs, s.checkpointPath(), cp.encode()); err != nil {
		return fmt.Errorf("storage: checkpoint: %w", err)
	}
	return nil
}

// ConsumeQueueBounds returns the min and max offset of queue k (0, 0 if it
// does not exist). Only the owner of that queue calls it.
func (s *Store) ConsumeQueueBounds(k QueueKey) (minOff, maxOff int64) {
	q, _ := s.ConsumeQueue(k, false)
	if q == nil {
		return 0, 0
	}
	return q.MinOffset(), q.MaxOffset()
}

// QueueEntry returns the entry at queue offset qo of k. Only the owner of
// that queue calls it.
func (s *Store) QueueEntry(k QueueKey, qo int64) (cq.Entry, error) {
	q, _ := s.ConsumeQueue(k, false)
	if q == nil {
		return cq.Entry{}, fmt.Errorf("storage: no consume queue %s", k)
	}
	return q.Get(qo)
}

// Root is the store's root directory.
func (s *Store) Root() string { return s.cfg.StorePathRootDir }

// ConfigPath is the path of a config file of this store.
func (s *Store) ConfigPath(name string) string {
	return path.Join(s.cfg.StorePathRootDir, "config", name)
}

// FS is the store's file system.
func (s *Store) FS() vfs.FS { return s.fs }

// PreparedSegment is a CommitLog segment created ahead of need, off the
// writer's goroutine.
type PreparedSegment struct{ seg *segment }

// Start is where the prepared segment starts in the log.
func (p *PreparedSegment) Start() int64 { return p.seg.start }

// NextSegmentStart is where the segment after the current one will start,
// and whether one still needs preparing. Writer only.
func (c *CommitLog) NextSegmentStart() (int64, bool) {
	return c.nextSegmentStart(), c.next == nil
}

// CreateSegment creates (preallocated) and maps the segment starting at
// start, under a temporary name. It touches no shared state, so
// it may run on any goroutine; the writer then hands the result to
// AdoptSegment.
func (c *CommitLog) CreateSegment(start int64) (*PreparedSegment, error) {
	s, err := c.createSegment(start, true)
	if err != nil {
		return nil, err
	}
	return &PreparedSegment{s}, nil
}

// AdoptSegment makes p the next segment if it is still the one needed (it is
// renamed into place); otherwise it is discarded. It does not sync the
// directory: on the writer's goroutine that fsync held every append for
// 20-25 ms under load. The writer has SyncDir run off its goroutine and
// reports it with NextDirSynced; a roll into the segment before that
// syncs the directory itself, so no record is ever written into a segment
// whose entry a crash could lose. Writer only.
func (c *CommitLog) AdoptSegment(p *PreparedSegment) error {
	tmp := path.Join(c.dir, segmentName(p.seg.start)+preparedSuffix)
	if start, need := c.NextSegmentStart(); !need || p.seg.start != start {
		p.seg.f.Close()
		_ = c.fs.Remove(tmp)
		return nil
	}
	if err := c.fs.Rename(tmp, path.Join(c.dir, segmentName(p.seg.start))); err != nil {
		p.seg.f.Close()
		_ = c.fs.Remove(tmp)
		return fmt.Errorf("commitlog: adopt segment %s: %w", segmentName(p.seg.start), err)
	}
	c.next, c.nextDirPending = p.seg, true
	return nil
}

// SyncDir makes the entries of the log's directory durable. It touches no
// state of the log, so it may run on any goroutine.
func (c *CommitLog) SyncDir() error {
	if err := c.fs.SyncDir(c.dir); err != nil {
		return fmt.Errorf("commitlog: sync dir: %w", err)
	}
	return nil
}

// NextDirSynced reports that a SyncDir begun after the segment at start was
// adopted returned: its directory entry is durable. Writer only.
func (c *CommitLog) NextDirSynced(start int64) {
	if c.next != nil && c.next.start == start {
		c.nextDirPending = false
	}
}

// CheckMessage reports whether m can be stored (size and field limits),
// so a writer can reject a whole batch before appending any of it. Writer
// only.
func (c *CommitLog) CheckMessage(m *Message) error {
	_, err := c.recordSize(m)
	return err
}

// CleanCommitLog is the CommitLog part of Clean: it deletes expired
// segments and sets the disk-full state. The writer calls it; it then has
// the owners of the ConsumeQueues and the index call DeleteQueueBefore and
// DeleteIndexBefore with the log's new MinOffset.
func (s *Store) CleanCommitLog(now time.Time, force bool) (RetentionReport, error) {
	return s.cleanLog(now, force)
}

// DeleteQueueBefore drops ConsumeQueue files of k wholly below minPhy. Only
// the owner of that queue calls it.
func (s *Store) DeleteQueueBefore(k QueueKey, minPhy int64) (int, error) {
	q, _ := s.ConsumeQueue(k, false)
	if q == nil {
		return 0, nil
	}
	n, err := q.DeleteBefore(minPhy)
	if err != nil {
		return n, fmt.Errorf("storage: retention: consume queue %s: %w", k, err)
	}
	return n, nil
}

// DeleteIndexBefore drops index files wholly below minPhy. Index owner only.
func (s *Store) DeleteIndexBefore(minPhy int64) (int, error) {
	if s.idx == nil {
		return 0, nil
	}
	n, err := s.idx.DeleteBefore(minPhy)
	if err != nil {
		return n, fmt.Errorf("storage: retention: index: %w", err)
	}
	return n, nil
}

// WarmWindow is how far ahead of the log's end WarmAhead keeps pages
// populated. Small enough that the zero pages it dirties are overwritten by
// real appends before the kernel writes them back (so the disk writes each
// page once), large enough to stay ahead of a writer at full speed. (With
// Materialize the window is written back at once: the disk
// writes each page twice, zeros ahead of time and then the records.)
const WarmWindow = 64 << 20

// WarmAhead returns work that prepares the pages of the next stretch of the
// log ahead of its end (across the current and the prepared segment), or nil
// if enough is prepared already or there is nothing to do. With
// warmMapedFileEnable it populates them; with Materialize (syncFlushPrezeroEnable) it
// populates them and writes them back (vfs.Materialize), so the fsyncs that
// acknowledgements wait for find written extents, not unwritten ones whose
// conversion writes extent blocks and the inode (or commits the journal) in
// every fsync. The writer runs the work
// off its goroutine: neither changes bytes, so it is safe while the writer
// appends into the same pages. Writer only.
func (c *CommitLog) WarmAhead() func() {
	if !c.prefault && !c.materialize {
		return nil
	}
	end := c.maxOffset.Load()
	if c.warmTo-end >= WarmWindow/2 {
		return nil
	}
	from, to := max(c.warmTo, end), end+WarmWindow
	type span struct {
		f vfs.File
		m []byte // taken here, on the writer: the work never reads the segment
	}
	var spans []span
	segs := c.segments()
	cands := []*segment{}
	if len(segs) > 0 {
		cands = append(cands, segs[len(segs)-1])
	}
	if c.next != nil {
		cands = append(cands, c.next)
	}
	covered := from
	for _, sg := range cands {
		lo, hi := max(from, sg.start), min(to, sg.end())
		if lo < hi {
			spans = append(spans, span{sg.f, sg.data[lo-sg.start : hi-sg.start]})
			covered = hi
		}
	}
	if covered <= c.warmTo {
		return nil
	}
	c.warmTo = covered
	materialize := c.materialize
	return func() {
		for _, sp := range spans {
			if !materialize {
				vfs.Populate(sp.f, sp.m)
				continue
			}
			// An error here makes nothing less durable: the fsync an
			// acknowledgement waits for meets a failing disk itself.
			_ = vfs.Materialize(sp.f, sp.m)
		}
	}
}
