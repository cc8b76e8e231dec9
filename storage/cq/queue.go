package cq

import (
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/wharfmq/wharf/storage/vfs"
)

// ErrCorrupt is wrapped by errors about inconsistent queue contents: an
// invalid or out-of-order entry inside the readable range, a re-appended
// entry that differs from the stored one, a hole in the queue, misnamed or
// missized files.
var ErrCorrupt = errors.New("corrupt consume queue")

// ErrOffsetTooSmall is wrapped by errors about a queue offset below
// MinOffset: the entry was deleted by retention (or is a gap filler).
var ErrOffsetTooSmall = errors.New("queue offset below min offset")

// ErrOffsetTooLarge is returned by Get for a queue offset at or past
// MaxOffset: nothing is written there yet.
var ErrOffsetTooLarge = errors.New("queue offset at or past max offset")

// ErrClosed is returned by every method of a closed Queue except the
// accessors MinOffset, MaxOffset, LastEntry and Dirty.
var ErrClosed = errors.New("consume queue closed")

// minScanBytes is the least span of the queue's tail that Open scans (three
// default files, as RocketMQ scans the last three): entries before it are
// trusted to be durable, so the owner must Flush at least that often.
const minScanBytes = 3 * DefaultEntriesPerFile * UnitSize

// repairSuffix names the temporary copy made while repairing a short file.
const repairSuffix = ".repair"

// segment is one mapped ConsumeQueue file.
type segment struct {
	start int64 // byte offset of its first unit, also its name
	f     vfs.File
	b     []byte // the mapping, len == fileSize
}

// Queue is one ConsumeQueue: the files of one topic queue under one
// directory. It has a single owner; no method is safe for concurrent use.
type Queue struct {
	fsys     vfs.FS
	dir      string
	perFile  int64 // entries per file
	fileSize int64 // perFile * UnitSize

	files   []*segment // contiguous, ascending by start
	dirMade bool       // dir exists

	minOff  int64 // first readable queue offset
	maxOff  int64 // next queue offset to write
	last    Entry // last real entry (the highest CommitLog offset indexed)
	hasLast bool

	// [dirtyLo, dirtyHi) is the byte range written (or zeroed) since the
	// last successful Flush; empty when dirtyLo >= dirtyHi.
	dirtyLo, dirtyHi int64
	syncErr          error // sticky Flush failure

	discarded int64 // non-zero tail bytes cut by Open
	closed    bool
}

// Open loads the ConsumeQueue stored under dir, with files of entriesPerFile
// entries (0 means DefaultEntriesPerFile). A missing dir is an empty queue;
// the directory is created by the first Append.
//
// Recovery: starting at the third file from the end, or earlier so as to
// cover at least 18,000,000 bytes (three default files) and further back if
// the boundary between two files does not hold a valid, ordered pair of
// entries, Open scans units while they are valid and strictly increasing (see Scan)
// and takes the first unit that is not as the end of the queue. Bytes after
// it are zeroed in the mapping (made durable by the next Flush) and later
// files are removed; DiscardedTail reports how much was cut. Files before the
// scanned ones are trusted: the owner must Flush at least once per two
// default files (600,000 entries) appended, which the flush interval ensures. MinOffset starts after the leading Dummy
// fillers of the first file; callers correct it against the CommitLog with
// SetMinPhyOffset.
//
// Files whose name is not 20 decimal digits are ignored (leftovers of an
// interrupted repair are removed). Files that are not
// aligned to the file size, not contiguous, or longer than the file size are
// ErrCorrupt. A file shorter than the file size (a crash right after its
// creation) is repaired: it is rewritten at full size, zero-filled.
func Open(fsys vfs.FS, dir string, entriesPerFile int) (*Queue, error) {
	if entriesPerFile == 0 {
		entriesPerFile = DefaultEntriesPerFile
	}
	if entriesPerFile < 0 || entriesPerFile > MaxEntriesPerFile {
		return nil, fmt.Errorf("cq %s: open: entries per file %d out of range [1, %d]", dir, entriesPerFile, MaxEntriesPerFile)
	}
	q := &Queue{fsys: fsys, dir: dir, perFile: int64(entriesPerFile), fileSize: int64(entriesPerFile) * UnitSize}
	names, err := fsys.List(dir)
	if errors.Is(err, vfs.ErrNotExist) {
		return q, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cq %s: open: %w", dir, err)
	}
	q.dirMade = true
	var starts []int64
	for _, name := range names {
		if base, ok := strings.CutSuffix(name, repairSuffix); ok && isSegmentName(base) {
			// A repair interrupted by a crash; the original is still there.
			if err := fsys.Remove(path.Join(dir, name)); err != nil && !errors.Is(err, vfs.ErrNotExist) {
				return nil, fmt.Errorf("cq %s: open: %w", dir, err)
			}
			continue
		}
		if !isSegmentName(name) {
			continue
		}
		start, err := strconv.ParseInt(name, 10, 64)
		if err != nil || start%q.fileSize != 0 || start > math.MaxInt64-2*q.fileSize {
			return nil, fmt.Errorf("cq %s: open: file %s is not aligned to the file size %d: %w", dir, name, q.fileSize, ErrCorrupt)
		}
		if n := len(starts); n > 0 && start != starts[n-1]+q.fileSize {
			return nil, fmt.Errorf("cq %s: open: file %s does not follow %020d (missing file): %w", dir, name, starts[n-1], ErrCorrupt)
		}
		starts = append(starts, start)
	}
	for _, start := range starts {
		s, err := q.openSegment(start)
		if err != nil {
			q.closeFiles()
			return nil, err
		}
		q.files = append(q.files, s)
	}
	if err := q.recover(); err != nil {
		q.closeFiles()
		return nil, err
	}
	return q, nil
}

// isSegmentName reports whether name is 20 decimal digits.
func isSegmentName(name string) bool {
	if len(name) != 20 {
		return false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < '0' || name[i] > '9' {
			return false
		}
	}
	return true
}

func (q *Queue) fileName(start int64) string {
	return path.Join(q.dir, fmt.Sprintf("%020d", start))
}

// openSegment opens and maps an existing file, repairing a short one.
func (q *Queue) openSegment(start int64) (*segment, error) {
	name := q.fileName(start)
	f, err := q.fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("cq %s: open file: %w", q.dir, err)
	}
	if size := f.Size(); size > q.fileSize {
		f.Close()
		return nil, fmt.Errorf("cq %s: open: file %s has %d bytes, want %d: %w", q.dir, name, size, q.fileSize, ErrCorrupt)
	} else if size < q.fileSize {
		if f, err = q.repairShort(f); err != nil {
			return nil, err
		}
	}
	b, err := f.Map()
	if err == nil && int64(len(b)) != q.fileSize {
		err = fmt.Errorf("mapping has %d bytes, want %d: %w", len(b), q.fileSize, ErrCorrupt)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("cq %s: map %s: %w", q.dir, name, err)
	}
	return &segment{start: start, f: f, b: b}, nil
}

// repairShort replaces the short file f by a full-size copy, through a
// temporary file and a rename so that a crash leaves one or the other, and
// returns the new file. f is closed.
func (q *Queue) repairShort(f vfs.File) (vfs.File, error) {
	name := f.Name()
	data := make([]byte, f.Size())
	_, err := f.ReadAt(data, 0)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("cq %s: repair short file %s: %w", q.dir, name, err)
	}
	tmp := name + repairSuffix
	if err := q.fsys.Remove(tmp); err != nil && !errors.Is(err, vfs.ErrNotExist) {
		return nil, fmt.Errorf("cq %s: repair short file %s: %w", q.dir, name, err)
	}
	t, err := q.fsys.Create(tmp, q.fileSize)
	if err != nil {
		return nil, fmt.Errorf("cq %s: repair short file %s: %w", q.dir, name, err)
	}
	_, err = t.WriteAt(data, 0)
	if err == nil {
		err = t.Sync()
	}
	if cerr := t.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = q.fsys.Rename(tmp, name)
	}
	if err == nil {
		err = q.fsys.SyncDir(q.dir)
	}
	if err != nil {
		q.fsys.Remove(tmp)
		return nil, fmt.Errorf("cq %s: repair short file %s: %w", q.dir, name, err)
	}
	nf, err := q.fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("cq %s: repair short file %s: %w", q.dir, name, err)
	}
	return nf, nil
}

// recover finds the end of the queue in the loaded files, cuts what follows
// it, and sets the offsets and the last entry.
func (q *Queue) recover() error {
	n := len(q.files)
	if n == 0 {
		return nil
	}
	// Scan the last three files and at least minScanBytes, and further back
	// while the boundary into the first scanned file does not look like the
	// middle of a queue.
	k := max(0, n-3)
	for k > 0 && int64(n-k)*q.fileSize < minScanBytes {
		k--
	}
	for k > 0 {
		prev := EntryAt(q.files[k-1].b[q.fileSize-UnitSize:])
		first := EntryAt(q.files[k].b)
		if prev.Valid() && first.Valid() && first.Offset >= prev.End() {
			break
		}
		k--
	}
	s := scanner{allowDummy: k == 0}
	end := q.files[k].start
	for i := k; i < n; i++ {
		c := s.scan(q.files[i].b)
		s.allowDummy = false // fillers live in the first file only
		end = q.files[i].start + int64(c)*UnitSize
		if int64(c) < q.perFile {
			break
		}
	}
	// With k > 0 the first unit of files[k] is valid, so a scan that saw no
	// real entry started at files[0] and found fillers only.
	q.last, q.hasLast = s.last, s.hasLast
	q.maxOff = end / UnitSize

	// Cut the tail: zero the non-zero bytes after end in its file, remove
	// the files after it (last first, each removal made durable, so a crash
	// leaves a contiguous run).
	idx := int((end - q.files[0].start) / q.fileSize)
	for i := n - 1; i >= idx; i-- {
		seg := q.files[i]
		from := max(end-seg.start, 0)
		if j := lastNonZero(seg.b[from:]); j >= 0 {
			q.discarded = seg.start + from + int64(j) + 1 - end
			break
		}
	}
	for len(q.files) > idx+1 {
		if err := q.removeLast(); err != nil {
			return err
		}
	}
	if idx < len(q.files) {
		seg := q.files[idx]
		lo := end - seg.start
		if j := lastNonZero(seg.b[lo:]); j >= 0 {
			clear(seg.b[lo : lo+int64(j)+1])
			q.markDirty(end, end+int64(j)+1)
		}
	}

	// MinOffset: after the leading fillers of the first file.
	first := q.files[0]
	d := int64(0)
	for d < q.perFile && EntryAt(first.b[d*UnitSize:]) == Dummy {
		d++
	}
	q.minOff = min(first.start/UnitSize+d, q.maxOff)
	return nil
}

// lastNonZero returns the index of the last non-zero byte of b, or -1.
func lastNonZero(b []byte) int {
	i := len(b)
	for i >= 8 {
		w := b[i-8 : i]
		if w[0]|w[1]|w[2]|w[3]|w[4]|w[5]|w[6]|w[7] != 0 {
			break
		}
		i -= 8
	}
	for i > 0 {
		if b[i-1] != 0 {
			return i - 1
		}
		i--
	}
	return -1
}

// MinOffset is the first queue offset that can be read: entries below it
// were deleted by retention or are gap fillers.
func (q *Queue) MinOffset() int64 { return q.minOff }

// MaxOffset is the next queue offset to be written: the number of entries
// the queue ever held, counting the deleted ones and the gap fillers.
func (q *Queue) MaxOffset() int64 { return q.maxOff }

// LastEntry returns the last entry written, which is the one with the highest
// CommitLog offset (recovery resumes dispatch at its End). ok is false when
// the queue holds no real entry.
func (q *Queue) LastEntry() (e Entry, ok bool) { return q.last, q.hasLast }

// DiscardedTail is the number of bytes Open cut after the last valid entry:
// from the end of the queue to the last non-zero byte of its files (0 after
// a clean shutdown).
func (q *Queue) DiscardedTail() int64 { return q.discarded }

// Dirty reports whether bytes were written or zeroed since the last
// successful Flush.
func (q *Queue) Dirty() bool { return q.dirtyLo < q.dirtyHi }

// maxQueueOffset bounds queue offsets so that byte positions never overflow.
func (q *Queue) maxQueueOffset() int64 { return (math.MaxInt64 - 2*q.fileSize) / UnitSize }

// segAt returns the file holding byte position pos, or nil.
func (q *Queue) segAt(pos int64) *segment {
	if len(q.files) == 0 || pos < q.files[0].start {
		return nil
	}
	i := (pos - q.files[0].start) / q.fileSize
	if i >= int64(len(q.files)) {
		return nil
	}
	return q.files[i]
}

// unit returns the bytes of the unit of queue offset qo, or nil if its file
// is not there.
func (q *Queue) unit(qo int64) []byte {
	if qo < 0 || qo > q.maxQueueOffset() {
		return nil
	}
	pos := qo * UnitSize
	s := q.segAt(pos)
	if s == nil {
		return nil
	}
	return s.b[pos-s.start : pos-s.start+UnitSize]
}

func (q *Queue) markDirty(lo, hi int64) {
	if q.dirtyLo >= q.dirtyHi {
		q.dirtyLo, q.dirtyHi = lo, hi
		return
	}
	q.dirtyLo, q.dirtyHi = min(q.dirtyLo, lo), max(q.dirtyHi, hi)
}

// Append writes e at queue offset queueOffset (byte queueOffset*20).
//
//   - queueOffset == MaxOffset: the entry is written, rolling to a new file
//     when the current one is full. e must be Valid and must not start before
//     LastEntry's End (ErrCorrupt otherwise).
//   - queueOffset < MaxOffset: a re-dispatch after a crash. If the stored
//     entry equals e it is a no-op; otherwise the error wraps ErrCorrupt (the
//     caller truncates first). If the entry's file was deleted the error
//     wraps ErrOffsetTooSmall.
//   - queueOffset > MaxOffset: allowed only while the queue holds no real
//     entry (a queue that starts past 0, e.g. after the log's head was
//     deleted). Older fillers-only files are removed, the gap before
//     queueOffset in its own file is filled with Dummy entries, and
//     MinOffset becomes queueOffset. With real entries it is a hole:
//     ErrCorrupt.
//
// Written bytes are durable after Flush.
func (q *Queue) Append(queueOffset int64, e Entry) error {
	if q.closed {
		return ErrClosed
	}
	if !e.Valid() {
		return fmt.Errorf("cq %s: append at %d: invalid entry %v", q.dir, queueOffset, e)
	}
	if queueOffset < 0 || queueOffset > q.maxQueueOffset() {
		return fmt.Errorf("cq %s: append at %d: queue offset out of range", q.dir, queueOffset)
	}
	if queueOffset < q.maxOff {
		u := q.unit(queueOffset)
		if u == nil {
			return fmt.Errorf("cq %s: re-append at %d: file deleted (min offset %d): %w", q.dir, queueOffset, q.minOff, ErrOffsetTooSmall)
		}
		if old := EntryAt(u); old != e {
			return fmt.Errorf("cq %s: re-append at %d: stored %v, got %v: %w", q.dir, queueOffset, old, e, ErrCorrupt)
		}
		return nil
	}
	if q.hasLast && e.Offset < q.last.End() {
		return fmt.Errorf("cq %s: append at %d: %v starts before the end %d of the last entry: %w", q.dir, queueOffset, e, q.last.End(), ErrCorrupt)
	}
	if queueOffset > q.maxOff || len(q.files) == 0 {
		if q.hasLast {
			return fmt.Errorf("cq %s: append at %d: hole after max offset %d: %w", q.dir, queueOffset, q.maxOff, ErrCorrupt)
		}
		if err := q.startAt(queueOffset); err != nil {
			return err
		}
	}
	pos := queueOffset * UnitSize
	s, err := q.writable(pos)
	if err != nil {
		return err
	}
	PutEntry(s.b[pos-s.start:], e)
	q.markDirty(pos, pos+UnitSize)
	q.maxOff = queueOffset + 1
	q.last, q.hasLast = e, true
	return nil
}

// startAt makes an entry-less queue continue at queue offset qo: files that
// hold only fillers and end before qo are removed, the gap before qo in its
// file is filled with Dummy entries, and both offsets become qo.
func (q *Queue) startAt(qo int64) error {
	pos := qo * UnitSize
	if n := len(q.files); n > 0 && pos >= q.files[n-1].start+q.fileSize {
		for len(q.files) > 0 {
			if err := q.removeLast(); err != nil {
				return err
			}
		}
	}
	from := q.maxOff * UnitSize
	if len(q.files) == 0 {
		from = pos - pos%q.fileSize
		if _, err := q.writable(from); err != nil {
			return err
		}
	}
	s := q.files[len(q.files)-1]
	for p := from; p < pos; p += UnitSize {
		PutEntry(s.b[p-s.start:], Dummy)
	}
	if from < pos {
		q.markDirty(from, pos)
	}
	q.maxOff, q.minOff = qo, qo
	return nil
}

// writable returns the file for byte position pos, creating it when pos is
// the start of the next file (or of the first one).
func (q *Queue) writable(pos int64) (*segment, error) {
	if n := len(q.files); n > 0 {
		last := q.files[n-1]
		if pos >= last.start && pos < last.start+q.fileSize {
			return last, nil
		}
		if pos != last.start+q.fileSize {
			return nil, fmt.Errorf("cq %s: write at byte %d outside the current file %020d: %w", q.dir, pos, last.start, ErrCorrupt)
		}
	}
	s, err := q.create(pos - pos%q.fileSize)
	if err != nil {
		return nil, err
	}
	q.files = append(q.files, s)
	return s, nil
}

// mkdir makes the queue's directory. Its parent, the topic's directory, is
// removed when the topic's last queue is dropped (a deleted topic), and
// the owner of another queue of the topic may do that between the moment
// MkdirAll found the parent and the one it made the queue's directory in
// it: then the parent is made again.
func (q *Queue) mkdir() error {
	var err error
	for range 3 {
		if err = q.fsys.MkdirAll(q.dir); !errors.Is(err, vfs.ErrNotExist) {
			return err
		}
	}
	return err
}

// create makes, syncs and maps a new zero-filled file and makes its directory
// entry durable.
func (q *Queue) create(start int64) (*segment, error) {
	if !q.dirMade {
		if err := q.mkdir(); err != nil {
			return nil, fmt.Errorf("cq %s: create dir: %w", q.dir, err)
		}
		q.dirMade = true
	}
	name := q.fileName(start)
	f, err := q.fsys.Create(name, q.fileSize)
	if err != nil {
		return nil, fmt.Errorf("cq %s: create file: %w", q.dir, err)
	}
	// Sync makes the size durable with the file (the vfs durability model);
	// SyncDir makes its directory entry durable.
	err = f.Sync()
	var b []byte
	if err == nil {
		b, err = f.Map()
	}
	if err == nil && int64(len(b)) != q.fileSize {
		err = fmt.Errorf("mapping has %d bytes, want %d", len(b), q.fileSize)
	}
	if err == nil {
		err = q.fsys.SyncDir(q.dir)
	}
	if err != nil {
		f.Close()
		q.fsys.Remove(name)
		return nil, fmt.Errorf("cq %s: create file %s: %w", q.dir, name, err)
	}
	return &segment{start: start, f: f, b: b}, nil
}

// removeLast closes and removes the last file, durably.
func (q *Queue) removeLast() error {
	s := q.files[len(q.files)-1]
	q.files = q.files[:len(q.files)-1]
	return q.removeSeg(s)
}

func (q *Queue) removeSeg(s *segment) error {
	name := q.fileName(s.start)
	s.f.Close()
	if err := q.fsys.Remove(name); err != nil && !errors.Is(err, vfs.ErrNotExist) {
		return fmt.Errorf("cq %s: remove file: %w", q.dir, err)
	}
	if err := q.fsys.SyncDir(q.dir); err != nil {
		return fmt.Errorf("cq %s: remove file %s: %w", q.dir, name, err)
	}
	return nil
}

// Get returns the entry at queueOffset. Below MinOffset the error wraps
// ErrOffsetTooSmall; at or past MaxOffset it wraps ErrOffsetTooLarge; an
// invalid stored entry is ErrCorrupt.
func (q *Queue) Get(queueOffset int64) (Entry, error) {
	if q.closed {
		return Entry{}, ErrClosed
	}
	if queueOffset < q.minOff {
		return Entry{}, fmt.Errorf("cq %s: get %d (min %d): %w", q.dir, queueOffset, q.minOff, ErrOffsetTooSmall)
	}
	if queueOffset >= q.maxOff {
		return Entry{}, fmt.Errorf("cq %s: get %d (max %d): %w", q.dir, queueOffset, q.maxOff, ErrOffsetTooLarge)
	}
	u := q.unit(queueOffset)
	if u == nil {
		return Entry{}, fmt.Errorf("cq %s: get %d: no file: %w", q.dir, queueOffset, ErrCorrupt)
	}
	e := EntryAt(u)
	if !e.Valid() {
		return Entry{}, fmt.Errorf("cq %s: get %d: invalid entry %v: %w", q.dir, queueOffset, e, ErrCorrupt)
	}
	return e, nil
}

// Read appends to dst up to max entries starting at queue offset from, and
// returns the extended slice. It reads no further than MaxOffset: from at or
// past MaxOffset (or max <= 0) returns dst unchanged. from below MinOffset
// wraps ErrOffsetTooSmall. Every entry returned is Valid and their offsets
// strictly increase; a stored entry that is not (corruption in a file Open
// trusted) ends the read with the entries before it and an ErrCorrupt error.
func (q *Queue) Read(from int64, max int, dst []Entry) ([]Entry, error) {
	if q.closed {
		return dst, ErrClosed
	}
	if from < q.minOff {
		return dst, fmt.Errorf("cq %s: read %d (min %d): %w", q.dir, from, q.minOff, ErrOffsetTooSmall)
	}
	if from >= q.maxOff || max <= 0 {
		return dst, nil
	}
	end := q.maxOff
	if int64(max) < end-from {
		end = from + int64(max)
	}
	var prevEnd int64
	for qo := from; qo < end; {
		pos := qo * UnitSize
		s := q.segAt(pos)
		if s == nil {
			return dst, fmt.Errorf("cq %s: read %d: no file: %w", q.dir, qo, ErrCorrupt)
		}
		lo := pos - s.start
		n := min(end-qo, (q.fileSize-lo)/UnitSize)
		dst = slices.Grow(dst, int(n))
		b := s.b[lo : lo+n*UnitSize]
		for i := 0; i < len(b); i += UnitSize {
			e := EntryAt(b[i : i+UnitSize])
			if !e.Valid() || e.Offset < prevEnd {
				return dst, fmt.Errorf("cq %s: read %d: invalid or out-of-order entry %v: %w", q.dir, qo+int64(i/UnitSize), e, ErrCorrupt)
			}
			prevEnd = e.End()
			dst = append(dst, e)
		}
		qo += n
	}
	return dst, nil
}

// firstAtOrAbove returns the first queue offset in [lo, MaxOffset) whose
// entry is real with Offset >= phy, or MaxOffset. It relies on the queue's
// order (fillers, then strictly increasing entries): a binary search.
func (q *Queue) firstAtOrAbove(lo, phy int64) int64 {
	n := q.maxOff - lo
	if n <= 0 {
		return q.maxOff
	}
	i := sort.Search(int(n), func(i int) bool {
		u := q.unit(lo + int64(i))
		if u == nil {
			return false
		}
		e := EntryAt(u)
		return e.Valid() && e.Offset >= phy
	})
	return lo + int64(i)
}

// TruncateByPhy removes every entry whose CommitLog offset is >= phyOffset
// (after the CommitLog's tail was cut at phyOffset on recovery); see
// TruncateTo. Gap fillers are not entries and stay.
func (q *Queue) TruncateByPhy(phyOffset int64) error {
	if q.closed {
		return ErrClosed
	}
	if len(q.files) == 0 {
		return nil
	}
	return q.TruncateTo(q.firstAtOrAbove(q.files[0].start/UnitSize, phyOffset))
}

// TruncateTo removes the entries at queue offsets >= queueOffset, so that
// MaxOffset becomes queueOffset (nothing happens if it is not below
// MaxOffset). Their bytes are zeroed in the mapping (durable after Flush),
// files left without entries are removed (durably, last first), and
// MinOffset is lowered to queueOffset if above it. The file at queueOffset is
// kept (or recreated with fillers) when it would be the only one, so that
// MaxOffset survives a reopen.
func (q *Queue) TruncateTo(queueOffset int64) error {
	if q.closed {
		return ErrClosed
	}
	t := max(queueOffset, 0)
	if t >= q.maxOff {
		return nil
	}
	cut, oldEnd := t*UnitSize, q.maxOff*UnitSize
	for n := len(q.files); n > 0; n = len(q.files) {
		s := q.files[n-1]
		if s.start < cut || (s.start == cut && n == 1 && t > 0) {
			break
		}
		if err := q.removeLast(); err != nil {
			return err
		}
	}
	if n := len(q.files); n > 0 {
		s := q.files[n-1]
		lo, hi := max(cut, s.start), min(oldEnd, s.start+q.fileSize)
		if lo < hi {
			clear(s.b[lo-s.start : hi-s.start])
			q.markDirty(lo, hi)
		}
	}
	q.maxOff = t
	q.minOff = min(q.minOff, t)
	q.last, q.hasLast = Entry{}, false
	if u := q.unit(t - 1); u != nil {
		if e := EntryAt(u); e.Valid() {
			q.last, q.hasLast = e, true
		}
	}
	if len(q.files) == 0 && t > 0 {
		return q.startAt(t)
	}
	return nil
}

// SetMinPhyOffset advances MinOffset to the first entry whose CommitLog
// offset is >= minPhy (MaxOffset if none): entries below it point into
// deleted CommitLog segments. MinOffset never moves back.
func (q *Queue) SetMinPhyOffset(minPhy int64) error {
	if q.closed {
		return ErrClosed
	}
	if len(q.files) == 0 {
		return nil
	}
	lo := max(q.minOff, q.files[0].start/UnitSize)
	q.minOff = max(q.minOff, q.firstAtOrAbove(lo, minPhy))
	return nil
}

// DeleteBefore applies retention after the CommitLog deleted its segments
// below minPhy: it removes, oldest first and never the last file, every file
// whose last entry has an Offset < minPhy, then advances MinOffset as
// SetMinPhyOffset does. It returns the number of files removed.
func (q *Queue) DeleteBefore(minPhy int64) (removedFiles int, err error) {
	if q.closed {
		return 0, ErrClosed
	}
	for len(q.files) > 1 {
		s := q.files[0]
		e := EntryAt(s.b[q.fileSize-UnitSize:])
		if !e.Valid() || e.Offset >= minPhy {
			break
		}
		q.files = q.files[1:]
		if err := q.removeSeg(s); err != nil {
			return removedFiles, err
		}
		removedFiles++
	}
	if len(q.files) > 0 {
		q.minOff = max(q.minOff, min(q.files[0].start/UnitSize, q.maxOff))
	}
	return removedFiles, q.SetMinPhyOffset(minPhy)
}

// Flush makes the bytes written or zeroed since the last Flush durable, with
// SyncRange over that range only. A failed sync is sticky: every later Flush
// returns the same error and the queue must be reopened (which recovers
// what is durable).
func (q *Queue) Flush() error {
	lo, hi := q.dirtyLo, q.dirtyHi
	job, err := q.FlushJob()
	if err != nil || job == nil {
		return err
	}
	if err := job(); err != nil {
		q.FlushFailed(err)
		q.markDirty(lo, hi) // still not durable
		return q.syncErr
	}
	return nil
}

// FlushJob is Flush in two halves, for an owner that must not wait for the
// disk: it returns the work that makes every write made so far durable (nil
// if there is none) and clears the dirty range as Flush does. The work
// syncs only ranges written before the call, so it may run on another
// goroutine while the owner goes on appending; it must not overlap a
// removal of the queue's files. If it fails, the owner reports the error
// with FlushFailed, after which every flush fails, as after a failed Flush.
func (q *Queue) FlushJob() (func() error, error) {
	if q.closed {
		return nil, ErrClosed
	}
	if q.syncErr != nil {
		return nil, q.syncErr
	}
	if !q.Dirty() {
		return nil, nil
	}
	type span struct {
		f      vfs.File
		off, n int64
	}
	var spans []span
	for _, s := range q.files {
		lo, hi := max(q.dirtyLo, s.start), min(q.dirtyHi, s.start+q.fileSize)
		if lo < hi {
			spans = append(spans, span{s.f, lo - s.start, hi - lo})
		}
	}
	q.dirtyLo, q.dirtyHi = 0, 0
	dir := q.dir
	return func() error {
		for _, sp := range spans {
			if err := sp.f.SyncRange(sp.off, sp.n); err != nil {
				return fmt.Errorf("cq %s: flush: %w", dir, err)
			}
		}
		return nil
	}, nil
}

// FlushFailed records the failure of a FlushJob's work: the queue never
// reports its writes durable again (the kernel may have dropped the dirty
// pages, so a later successful sync would prove nothing).
func (q *Queue) FlushFailed(err error) {
	if q.syncErr == nil {
		q.syncErr = err
	}
}

// Close releases the files and their mappings. It does not sync: call Flush
// first for a clean shutdown.
func (q *Queue) Close() error {
	if q.closed {
		return ErrClosed
	}
	q.closed = true
	return q.closeFiles()
}

func (q *Queue) closeFiles() error {
	var first error
	for _, s := range q.files {
		if err := s.f.Close(); err != nil && first == nil {
			first = fmt.Errorf("cq %s: close: %w", q.dir, err)
		}
	}
	q.files = nil
	return first
}
