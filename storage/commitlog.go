package storage

import (
	"errors"
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/wharfmq/wharf/storage/vfs"
)

// ErrCorrupt is wrapped by every error that reports damaged data that cannot
// be a torn tail: it is never repaired silently.
var ErrCorrupt = errors.New("storage corrupt")

// ErrFlushFailed is wrapped by the sticky error of a failed sync: once a sync
// fails, the CommitLog never reports data as durable again (the kernel may
// have dropped the dirty pages, so a later successful sync proves nothing).
var ErrFlushFailed = errors.New("commitlog flush failed")

// ErrReadOnly is returned by appends after a storage error made the log
// refuse writes.
var ErrReadOnly = errors.New("commitlog is read-only after a storage error")

// segment is one fixed-size, memory-mapped CommitLog file.
type segment struct {
	start int64
	f     vfs.File
	data  []byte
}

func (s *segment) end() int64 { return s.start + int64(len(s.data)) }

// segmentName is RocketMQ's file name: the start offset as 20 decimal digits.
func segmentName(start int64) string { return fmt.Sprintf("%020d", start) }

// QueueKey names one topic queue.
type QueueKey struct {
	Topic   string
	QueueID int32
}

func (k QueueKey) String() string { return k.Topic + "-" + strconv.Itoa(int(k.QueueID)) }

// AppendResult describes one stored message.
type AppendResult struct {
	PhyOffset      int64
	Size           int32
	QueueOffset    int64
	StoreTimestamp int64
	Err            error // non-nil: this message was not stored (ErrIllegal)
}

// CommitLog is the single, sequentially written log of all messages, split
// into fixed-size memory-mapped segments. One goroutine appends; one (maybe
// another) flushes; any number read ranges below MaxOffset.
type CommitLog struct {
	fs        vfs.FS
	dir       string
	segSize   int64
	maxMsg    int
	storeHost netip.AddrPort
	prefault  bool
	okTopic   string // the last topic validTopic passed (writer only)
	// materialize (SYNC_FLUSH, syncFlushPrezeroEnable): the warm window ahead of the end is also
	// written back, so its blocks are written extents (see WarmAhead).
	materialize bool

	// segs is an immutable snapshot replaced on every change, so readers and
	// the flusher never take the writer's lock.
	segs atomic.Pointer[[]*segment]
	// next is a segment created ahead of need by Prepare (writer only).
	next *segment

	maxOffset atomic.Int64 // end of the last appended record
	warmTo    int64        // pages below are populated (writer only)
	flushed   atomic.Int64 // everything below is durable

	flushMu  sync.Mutex // one flush at a time; guards flushErr
	flushErr error

	writeErr atomic.Pointer[error] // sticky storage error of the writer

	// queueOffsets is the topic-queue offset table: the next queue offset of
	// each queue. Owned by the writer.
	queueOffsets map[QueueKey]int64
	faults       Faults

	// deleted are the watermarks of deleted topics (see Deleted): their
	// records below it never count in queueOffsets. Replaced whole by the
	// writer (Store.DeleteTopic), read from any goroutine.
	deleted    atomic.Pointer[Deleted]
	deletedMax int64 // the highest watermark in deleted (writer only)

	// nextDirPending: next was renamed into place by AdoptSegment and no
	// directory sync is known to have followed (writer only).
	nextDirPending bool

	wbuf []byte      // AppendBatch's encoding buffer (writer only)
	undo []queueNext // AppendBatch's undo log of queue offsets (writer only)

	// graveyard holds segments removed by retention until the next retention
	// pass, so a reader that took a slice of their mapping just before the
	// removal never touches unmapped memory.
	graveyard []*segment

	// dropped names an unfinished last segment openCommitLog removed ("" if
	// none), for the recovery report.
	dropped string
}

// CommitLogOptions configure a CommitLog.
type CommitLogOptions struct {
	SegmentSize    int64          // mappedFileSizeCommitLog
	MaxMessageSize int            // maxMessageSize: largest encoded record
	StoreHost      netip.AddrPort // written into every record
	Prefault       bool           // keep a window ahead of the end populated (WarmAhead)
	Materialize    bool           // and written back: syncFlushPrezeroEnable (WarmAhead)
	Faults         Faults
}

func openCommitLog(fsys vfs.FS, dir string, o CommitLogOptions) (*CommitLog, error) {
	if o.SegmentSize < 4096 || o.SegmentSize%4096 != 0 {
		return nil, fmt.Errorf("commitlog: segment size %d must be a positive multiple of 4096", o.SegmentSize)
	}
	if int64(o.MaxMessageSize)+BlankRecordSize > o.SegmentSize {
		return nil, fmt.Errorf("commitlog: maxMessageSize %d does not fit a segment of %d bytes", o.MaxMessageSize, o.SegmentSize)
	}
	c := &CommitLog{fs: fsys, dir: dir, segSize: o.SegmentSize, maxMsg: o.MaxMessageSize,
		storeHost: o.StoreHost, prefault: o.Prefault, materialize: o.Materialize, faults: o.Faults, queueOffsets: map[QueueKey]int64{}}
	if err := fsys.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("commitlog: %w", err)
	}
	names, err := fsys.List(dir)
	if err != nil {
		return nil, fmt.Errorf("commitlog: list %s: %w", dir, err)
	}
	segNames, err := segmentNames(fsys, dir, names)
	if err != nil {
		return nil, err
	}
	var segs []*segment
	for i, name := range segNames {
		start, _ := strconv.ParseInt(name, 10, 64)
		f, err := fsys.Open(path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("commitlog: open segment %s: %w", name, err)
		}
		if f.Size() != o.SegmentSize {
			if err := dropUnfinished(fsys, dir, f, o.SegmentSize, i == len(segNames)-1); err != nil {
				closeSegments(segs)
				return nil, err
			}
			c.dropped = name
			break // it was the last
		}
		data, err := f.Map()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("commitlog: map segment %s: %w", name, err)
		}
		if start%o.SegmentSize != 0 || (len(segs) > 0 && segs[len(segs)-1].end() != start) {
			f.Close()
			closeSegments(segs)
			return nil, fmt.Errorf("%w: commitlog segment %s does not follow the previous one (missing segment?)", ErrCorrupt, name)
		}
		segs = append(segs, &segment{start: start, f: f, data: data})
	}
	c.segs.Store(&segs)
	if len(segs) > 0 {
		c.maxOffset.Store(segs[len(segs)-1].end())
		c.flushed.Store(c.maxOffset.Load())
	}
	return c, nil
}

// segmentNames removes prepared segments that were never adopted and
// returns the names of dir's segments (20-digit start offsets), in order.
func segmentNames(fsys vfs.FS, dir string, names []string) ([]string, error) {
	var segs []string
	for _, name := range names {
		if strings.HasSuffix(name, preparedSuffix) { // prepared, never adopted
			if err := fsys.Remove(path.Join(dir, name)); err != nil {
				return nil, fmt.Errorf("commitlog: remove %s: %w", name, err)
			}
			continue
		}
		if _, err := strconv.ParseInt(name, 10, 64); err != nil || len(name) != 20 {
			continue // not a segment (a temp file, say)
		}
		segs = append(segs, name)
	}
	return segs, nil
}

// allZero reports whether every byte of f is zero.
func allZero(f vfs.File) (bool, error) {
	size := f.Size()
	buf := make([]byte, min(size, 1<<20))
	for off := int64(0); off < size; {
		n := min(int64(len(buf)), size-off)
		if _, err := f.ReadAt(buf[:n], off); err != nil {
			return false, fmt.Errorf("commitlog: read short segment %s: %w", f.Name(), err)
		}
		for _, b := range buf[:n] {
			if b != 0 {
				return false, nil
			}
		}
		off += n
	}
	return true, nil
}

// dropUnfinished closes f, a segment of the wrong size, and removes it if it
// is the last segment, shorter than segSize and holds only zeros: a creation
// cut short by a crash (on a file system where the name appears before the
// blocks are reserved, or in a store written by a build that created
// segments that way). It holds no record, so removing it loses nothing: the
// log ends where the segment before it ends, and the writer creates the next
// one when it needs it. Any other size mismatch is an error wrapping
// ErrCorrupt: a short last segment with a non-zero byte may be a segment of
// another mappedFileSizeCommitLog.
func dropUnfinished(fsys vfs.FS, dir string, f vfs.File, segSize int64, last bool) error {
	name, size := path.Base(f.Name()), f.Size()
	unfinished, err := last && size < segSize, error(nil)
	if unfinished {
		unfinished, err = allZero(f)
	}
	f.Close()
	if err != nil {
		return err
	}
	if !unfinished {
		return fmt.Errorf("%w: commitlog segment %s is %d bytes, mappedFileSizeCommitLog is %d (changing the segment size of an existing store is not supported)",
			ErrCorrupt, name, size, segSize)
	}
	if err := fsys.Remove(path.Join(dir, name)); err != nil {
		return fmt.Errorf("commitlog: remove unfinished segment %s: %w", name, err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("commitlog: remove unfinished segment %s: %w", name, err)
	}
	return nil
}

func closeSegments(segs []*segment) {
	for _, s := range segs {
		s.f.Close()
	}
}

func (c *CommitLog) segments() []*segment { return *c.segs.Load() }

// MinOffset is the first offset still held (0 for an empty log).
func (c *CommitLog) MinOffset() int64 {
	segs := c.segments()
	if len(segs) == 0 {
		return c.maxOffset.Load()
	}
	return segs[0].start
}

// MaxOffset is the offset the next record will be written at: the end of
// everything appended.
func (c *CommitLog) MaxOffset() int64 { return c.maxOffset.Load() }

// FlushedOffset is the offset below which every byte is durable.
func (c *CommitLog) FlushedOffset() int64 { return c.flushed.Load() }

// DiskBytes is the size of the segment files on disk (each is
// preallocated to its full size): what the log takes of the disk, beside
// MaxOffset - MinOffset, what it holds. Safe from any goroutine.
func (c *CommitLog) DiskBytes() int64 {
	var n int64
	for _, s := range c.segments() {
		n += int64(len(s.data))
	}
	return n
}

// SegmentSize is the size of every segment.
func (c *CommitLog) SegmentSize() int64 { return c.segSize }

// QueueOffset returns the next queue offset of a queue.
func (c *CommitLog) QueueOffset(k QueueKey) int64 { return c.queueOffsets[k] }

// QueueOffsets returns a copy of the topic-queue offset table.
func (c *CommitLog) QueueOffsets() map[QueueKey]int64 {
	m := make(map[QueueKey]int64, len(c.queueOffsets))
	for k, v := range c.queueOffsets {
		m[k] = v
	}
	return m
}

func (c *CommitLog) findSegment(off int64) *segment {
	segs := c.segments()
	if len(segs) == 0 || off < segs[0].start {
		return nil
	}
	i := int((off - segs[0].start) / c.segSize)
	if i >= len(segs) {
		return nil
	}
	return segs[i]
}

// createSegment makes the segment starting at start and makes its directory
// entry durable, so that a later flush of its bytes means something. With
// temp set it is created under a temporary name for AdoptSegment to rename.
func (c *CommitLog) createSegment(start int64, temp bool) (*segment, error) {
	name := path.Join(c.dir, segmentName(start))
	if temp {
		name += preparedSuffix
		_ = c.fs.Remove(name)
	}
	f, err := c.fs.Create(name, c.segSize)
	if err != nil {
		return nil, fmt.Errorf("commitlog: create segment %s: %w", segmentName(start), err)
	}
	data, err := f.Map()
	if err != nil {
		f.Close()
		c.fs.Remove(name)
		return nil, fmt.Errorf("commitlog: map segment %s: %w", segmentName(start), err)
	}
	if !temp {
		if err := c.fs.SyncDir(c.dir); err != nil {
			f.Close()
			c.fs.Remove(name)
			return nil, fmt.Errorf("commitlog: sync dir for segment %s: %w", segmentName(start), err)
		}
	}
	return &segment{start: start, f: f, data: data}, nil
}

// preparedSuffix marks a segment prepared ahead of need and not yet adopted;
// Open removes leftovers.
const preparedSuffix = ".prepared"

// Prepare creates the segment after the current one ahead of need, so the
// append that rolls over does not pay for fallocate and page faults. The
// writer calls it when idle.
func (c *CommitLog) Prepare() error {
	if c.next != nil {
		return nil
	}
	start := c.nextSegmentStart()
	s, err := c.createSegment(start, false)
	if err != nil {
		return err
	}
	c.next = s
	return nil
}

func (c *CommitLog) nextSegmentStart() int64 {
	segs := c.segments()
	if len(segs) == 0 {
		// An empty log starts at the segment holding maxOffset (0 for a new
		// store; after retention removed everything, where it left off).
		return c.maxOffset.Load() - c.maxOffset.Load()%c.segSize
	}
	return segs[len(segs)-1].end()
}

// roll makes a new segment the current one.
func (c *CommitLog) roll() (*segment, error) {
	s := c.next
	c.next = nil
	if s != nil && c.nextDirPending && s.start == c.nextSegmentStart() {
		// Needed before the background sync of its directory came back:
		// its entry must be durable before a record goes into it.
		if err := c.fs.SyncDir(c.dir); err != nil {
			s.f.Close()
			return nil, fmt.Errorf("commitlog: sync dir for segment %s: %w", segmentName(s.start), err)
		}
	}
	c.nextDirPending = false
	if s == nil || s.start != c.nextSegmentStart() {
		if s != nil { // stale preparation (cannot happen without a truncate)
			s.f.Close()
		}
		var err error
		if s, err = c.createSegment(c.nextSegmentStart(), false); err != nil {
			return nil, err
		}
	}
	segs := append(slices.Clip(c.segments()), s)
	c.segs.Store(&segs)
	return s, nil
}

func (c *CommitLog) fail(err error) error {
	c.writeErr.CompareAndSwap(nil, &err)
	return err
}

// Err returns the sticky write error, if a storage error made the log refuse
// writes.
func (c *CommitLog) Err() error {
	if p := c.writeErr.Load(); p != nil {
		return *p
	}
	return nil
}

// AppendBatch appends msgs in order, assigning each its physical and queue
// offset, and returns one result per message in out (reused if it has room).
// A message that cannot be stored gets a result with Err wrapping ErrIllegal
// and does not stop the batch. A storage error (a segment that cannot be
// created) stops the batch: results before it are stored, the error is
// returned, and the log refuses all later appends.
func (c *CommitLog) AppendBatch(msgs []*Message, storeTimestamp int64, out []AppendResult) ([]AppendResult, error) {
	out = out[:0]
	if err := c.Err(); err != nil {
		return out, fmt.Errorf("%w: %w", ErrReadOnly, err)
	}
	r := c.startRun(out)
	defer r.done()
	off := r.at
	for _, m := range msgs {
		size, err := c.recordSize(m)
		if err != nil {
			r.out = append(r.out, AppendResult{Err: err})
			continue
		}
		if r.cur == nil || off+int64(size)+BlankRecordSize > r.cur.end() {
			if off, err = r.roll(off); err != nil {
				return r.out, c.fail(err)
			}
		}
		r.encode(m, size, off, storeTimestamp)
		off += int64(size)
	}
	if r.cur != nil {
		if err := r.write(); err != nil {
			return r.out, c.fail(err)
		}
	}
	c.maxOffset.Store(off)
	if cap(c.wbuf) > 8<<20 {
		c.wbuf = nil // do not keep a huge batch's buffer
	}
	return r.out, nil
}

// recordSize is the encoded size of m, or why m cannot be stored.
// Writer only.
func (c *CommitLog) recordSize(m *Message) (int, error) {
	if err := c.validTopic(m.Topic); err != nil {
		return 0, err
	}
	size, err := recordSizeOfValid(m, c.storeHost)
	if err == nil && size > c.maxMsg {
		err = fmt.Errorf("%w: record of %d bytes exceeds maxMessageSize %d", ErrIllegal, size, c.maxMsg)
	}
	return size, err
}

// validTopic is ValidateTopic(t), remembering the last topic that passed:
// a batch's messages, and the writer's check before the append
// (CheckMessage), mostly name the same one (ValidateTopic twice per message
// was 1.4 % of the broker's samples in async-256). Writer only.
func (c *CommitLog) validTopic(t string) error {
	if t == c.okTopic && t != "" {
		return nil
	}
	if err := ValidateTopic(t); err != nil {
		return err
	}
	c.okTopic = t
	return nil
}

// appendRun is AppendBatch's state: the records encoded since the last
// write and how to take them back if that write fails.
//
// The records are encoded into c.wbuf and written into the segment's file
// with one WriteAt per run (pwrite into the page cache), not stored through
// the mapping: a store to a mapped page the kernel has cleaned (written
// back) or not yet faulted in takes a page fault, and on ext4 that starts a
// journal handle, which waits while the journal commits. Appends then
// stalled for milliseconds at every checkpoint and flush. Readers still
// read through the mapping: it is the same page cache. A run whose write
// fails is not stored: its results are cut and its queue offsets restored,
// and the log refuses later appends.
type appendRun struct {
	c     *CommitLog
	cur   *segment       // the segment the run is written into (nil: none yet)
	at    int64          // log offset of c.wbuf[0]
	start int            // first result of the run in out
	out   []AppendResult // the batch's results
	undo  []queueNext    // queue offsets before the run's records
}

func (c *CommitLog) startRun(out []AppendResult) *appendRun {
	r := &appendRun{c: c, at: c.maxOffset.Load(), out: out, undo: c.undo[:0]}
	if segs := c.segments(); len(segs) > 0 {
		r.cur = segs[len(segs)-1]
	}
	c.wbuf = c.wbuf[:0]
	return r
}

// done keeps the undo log's memory for the next batch.
func (r *appendRun) done() { r.c.undo = r.undo[:0] }

// next extends the run by n bytes, holding what the reused buffer held
// before: the caller writes every one of them (EncodeRecord does, and
// asserts it) or clears them (see blank).
func (r *appendRun) next(n int) []byte {
	c := r.c
	at := len(c.wbuf)
	c.wbuf = slices.Grow(c.wbuf, n)[:at+n]
	return c.wbuf[at:]
}

// blank extends the run by a blank filler of n bytes. What EncodeBlank
// leaves unwritten (the filler's body) must be zeros, as in a fresh
// segment, or a slave's copy would differ.
func (r *appendRun) blank(n int) {
	b := r.next(n)
	clear(b)
	EncodeBlank(b, n)
}

// write writes the run into its segment and starts the next run after it.
func (r *appendRun) write() error {
	c := r.c
	if len(c.wbuf) > 0 {
		if _, err := r.cur.f.WriteAt(c.wbuf, r.at-r.cur.start); err != nil {
			r.out = r.out[:r.start] // not stored
			for i := len(r.undo) - 1; i >= 0; i-- {
				c.queueOffsets[r.undo[i].k] = r.undo[i].next
			}
			return fmt.Errorf("storage: write commitlog %s at %d: %w", segmentName(r.cur.start), r.at-r.cur.start, err)
		}
	}
	r.undo = r.undo[:0]
	r.at += int64(len(c.wbuf))
	r.start = len(r.out)
	c.wbuf = c.wbuf[:0]
	return nil
}

// roll ends the current segment at off (a blank filler up to its end, the
// run written, the log's end published there) and starts a new one; it
// returns where the next record goes.
func (r *appendRun) roll(off int64) (int64, error) {
	c := r.c
	if r.cur != nil {
		if off < r.cur.end() { // after recovery the log may end exactly at a segment end
			n := int(r.cur.end() - off)
			r.blank(n)
			off = r.cur.end()
		}
		if err := r.write(); err != nil {
			return off, err
		}
		c.maxOffset.Store(off)
	}
	cur, err := c.roll()
	if err != nil {
		return off, err
	}
	r.cur, r.at = cur, off
	return off, nil
}

// encode adds m's record at off to the run with its queue offset.
func (r *appendRun) encode(m *Message, size int, off, storeTimestamp int64) {
	c := r.c
	k := QueueKey{m.Topic, m.QueueID}
	qo := c.queueOffsets[k]
	r.undo = append(r.undo, queueNext{k, qo})
	if c.faults.SkipQueueOffset && qo%5 == 3 {
		qo++
	}
	c.queueOffsets[k] = qo + 1
	EncodeRecord(r.next(size), m, qo, off, storeTimestamp, c.storeHost)
	r.out = append(r.out, AppendResult{PhyOffset: off, Size: int32(size), QueueOffset: qo, StoreTimestamp: storeTimestamp})
}

// queueNext is a queue's next offset (AppendBatch's undo log).
type queueNext struct {
	k    QueueKey
	next int64
}

// AppendRaw writes bytes copied from another broker's CommitLog at exactly
// offset at (a slave replicating its master). at must equal MaxOffset; the
// bytes must be whole records and blank fillers as the master wrote them
// (every record is checked, CRCs included, before anything is published).
// Queue offsets are taken from the records.
func (c *CommitLog) AppendRaw(at int64, data []byte) error {
	if err := c.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrReadOnly, err)
	}
	if at != c.maxOffset.Load() {
		return fmt.Errorf("commitlog: raw append at %d, log ends at %d", at, c.maxOffset.Load())
	}
	for len(data) > 0 {
		segEnd := at - at%c.segSize + c.segSize
		n := int(min(int64(len(data)), segEnd-at))
		type qo struct {
			k  QueueKey
			qo int64
		}
		var seen []qo
		del := c.Deleted()
		for p := 0; p < n; {
			size, magic, ok := PeekHeader(data[p:n])
			if !ok || size <= 0 || int(size) > n-p {
				return fmt.Errorf("%w: raw append at %d: partial record", ErrCorrupt, at+int64(p))
			}
			if magic == MagicBlank {
				if at+int64(p)+int64(size) != segEnd {
					return fmt.Errorf("%w: raw append at %d: blank record of %d bytes does not end the segment", ErrCorrupt, at+int64(p), size)
				}
			} else {
				r, err := DecodeRecord(data[p:n], true)
				if err != nil {
					return fmt.Errorf("%w: raw append at %d: %w", ErrCorrupt, at+int64(p), err)
				}
				if r.PhysicalOffset != at+int64(p) {
					return fmt.Errorf("%w: raw append at %d: record says it belongs at %d", ErrCorrupt, at+int64(p), r.PhysicalOffset)
				}
				if !del.Covers(r.Topic, r.PhysicalOffset) { // a deleted topic's record counts for nothing
					seen = append(seen, qo{QueueKey{string(r.Topic), r.QueueID}, r.QueueOffset})
				}
			}
			p += int(size)
		}
		segs := c.segments()
		var cur *segment
		if len(segs) > 0 && segs[len(segs)-1].end() > at {
			cur = segs[len(segs)-1]
		} else {
			var err error
			if cur, err = c.roll(); err != nil {
				return c.fail(err)
			}
		}
		copy(cur.data[at-cur.start:], data[:n])
		for _, s := range seen {
			c.queueOffsets[s.k] = s.qo + 1
		}
		at += int64(n)
		data = data[n:]
		c.maxOffset.Store(at)
	}
	return nil
}

// Flush makes every byte below upTo (capped at MaxOffset) durable and returns
// the new flushed offset. A failed sync is sticky: it and every later call
// return an error wrapping ErrFlushFailed and the flushed offset never moves
// again.
func (c *CommitLog) Flush(upTo int64) (int64, error) {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	if c.flushErr != nil {
		return c.flushed.Load(), c.flushErr
	}
	upTo = min(upTo, c.maxOffset.Load())
	from := c.flushed.Load()
	for from < upTo {
		s := c.findSegment(from)
		if s == nil {
			break
		}
		end := min(upTo, s.end())
		if err := s.f.SyncRange(from-s.start, end-from); err != nil {
			c.flushErr = fmt.Errorf("%w: sync %s [%d, %d): %w", ErrFlushFailed, segmentName(s.start), from, end, err)
			c.fail(c.flushErr)
			return c.flushed.Load(), c.flushErr
		}
		from = end
		c.flushed.Store(from)
	}
	return c.flushed.Load(), nil
}

// Read returns the n bytes at off without copying: the slice aliases the
// mapping and stays valid until retention removes the segment (at the second
// retention pass after the removal). It fails if the range is not written or
// crosses a segment end.
func (c *CommitLog) Read(off int64, n int) ([]byte, error) {
	if off < 0 || n < 0 || off+int64(n) > c.maxOffset.Load() {
		return nil, fmt.Errorf("commitlog: read [%d, %d) outside the written log [%d, %d)", off, off+int64(n), c.MinOffset(), c.MaxOffset())
	}
	s := c.findSegment(off)
	if s == nil {
		return nil, fmt.Errorf("commitlog: read at %d: offset below the log's minimum %d (deleted by retention)", off, c.MinOffset())
	}
	pos := off - s.start
	if pos+int64(n) > int64(len(s.data)) {
		return nil, fmt.Errorf("commitlog: read [%d, %d) crosses the end of segment %s", off, off+int64(n), segmentName(s.start))
	}
	return s.data[pos : pos+int64(n) : pos+int64(n)], nil
}

// ReadRecord decodes the record at off. size, if positive, is what the
// ConsumeQueue says the record's size is and must match.
func (c *CommitLog) ReadRecord(off int64, size int32, checkCRC bool) (Record, error) {
	if size <= 0 {
		b, err := c.Read(off, 8)
		if err != nil {
			return Record{}, err
		}
		size, _, _ = PeekHeader(b)
		if size <= 0 {
			return Record{}, fmt.Errorf("%w: record at %d has size %d", ErrCorrupt, off, size)
		}
	}
	b, err := c.Read(off, int(size))
	if err != nil {
		return Record{}, err
	}
	r, err := DecodeRecord(b, checkCRC)
	if err != nil {
		return r, fmt.Errorf("commitlog: record at %d: %w", off, err)
	}
	if r.PhysicalOffset != off || r.TotalSize != size {
		return r, fmt.Errorf("%w: record at %d claims offset %d size %d (want size %d)", ErrCorrupt, off, r.PhysicalOffset, r.TotalSize, size)
	}
	return r, nil
}

// ReadChunk returns up to max bytes at off, stopping at the end of the log or
// of the segment (replication streams whole segments' bytes this way).
func (c *CommitLog) ReadChunk(off int64, max int) ([]byte, error) {
	end := c.maxOffset.Load()
	if off >= end {
		return nil, nil
	}
	s := c.findSegment(off)
	if s == nil {
		return nil, fmt.Errorf("commitlog: chunk at %d below the log's minimum %d", off, c.MinOffset())
	}
	n := min(int64(max), s.end()-off, end-off)
	return c.Read(off, int(n))
}

// truncate cuts the log at off: zeroes the rest of its segment, syncs it, and
// removes every later segment. Recovery only.
func (c *CommitLog) truncate(off int64) error {
	segs := c.segments()
	keep := segs[:0:0]
	var gone []*segment
	for _, s := range segs {
		switch {
		case s.end() <= off:
			keep = append(keep, s)
		case s.start < off || (s.start == off && s.start == segs[0].start):
			pos := off - s.start
			clear(s.data[pos:])
			if err := s.f.SyncRange(pos, int64(len(s.data))-pos); err != nil {
				return fmt.Errorf("commitlog: truncate %s at %d: %w", segmentName(s.start), pos, err)
			}
			keep = append(keep, s)
		default:
			gone = append(gone, s)
		}
	}
	// The last segment goes first, so that a crash in between leaves no gap.
	for _, s := range slices.Backward(gone) {
		s.f.Close()
		if err := c.fs.Remove(path.Join(c.dir, segmentName(s.start))); err != nil {
			return fmt.Errorf("commitlog: remove segment %s: %w", segmentName(s.start), err)
		}
	}
	if err := c.fs.SyncDir(c.dir); err != nil {
		return fmt.Errorf("commitlog: sync dir after truncate: %w", err)
	}
	c.segs.Store(&keep)
	c.maxOffset.Store(off)
	c.flushed.Store(off)
	return nil
}

// deleteOldest removes the oldest segment (retention). The last segment is
// never removed.
func (c *CommitLog) deleteOldest() error {
	segs := c.segments()
	if len(segs) < 2 {
		return nil
	}
	s := segs[0]
	if err := c.fs.Remove(path.Join(c.dir, segmentName(s.start))); err != nil {
		return fmt.Errorf("commitlog: remove segment %s: %w", segmentName(s.start), err)
	}
	rest := slices.Clone(segs[1:])
	c.segs.Store(&rest)
	c.graveyard = append(c.graveyard, s)
	return nil
}

// buryDead closes segments removed by an earlier retention pass.
func (c *CommitLog) buryDead() {
	for _, s := range c.graveyard {
		s.f.Close()
	}
	c.graveyard = c.graveyard[:0]
}

func (c *CommitLog) close() error {
	var errs []error
	for _, s := range c.segments() {
		errs = append(errs, s.f.Close())
	}
	if c.next != nil {
		errs = append(errs, c.next.f.Close())
		c.next = nil
	}
	c.buryDead()
	empty := []*segment{}
	c.segs.Store(&empty)
	return errors.Join(errs...)
}
