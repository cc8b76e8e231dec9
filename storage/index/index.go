package index

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"sort"

	"github.com/wharfmq/wharf/storage/vfs"
)

// ErrCorrupt is wrapped by errors about an index file whose size or header is
// inconsistent.
var ErrCorrupt = errors.New("index: corrupt index file")

// ErrClosed is returned by the methods of a closed Index.
var ErrClosed = errors.New("index: closed")

// Defaults of Options (RocketMQ's maxHashSlotNum and maxIndexNum).
const (
	DefaultSlotNum  = 5_000_000
	DefaultIndexNum = 20_000_000
)

// maxCreateTries bounds the search for a free file name.
const maxCreateTries = 10_000

// Options sizes the index files. Every file of a directory has the same
// geometry; a file whose size does not match is reported as corrupt.
type Options struct {
	SlotNum  int // hash slots per file; 0 means DefaultSlotNum
	IndexNum int // entries per file, entry 0 unused; 0 means DefaultIndexNum
}

func (o Options) withDefaults() (Options, error) {
	if o.SlotNum == 0 {
		o.SlotNum = DefaultSlotNum
	}
	if o.IndexNum == 0 {
		o.IndexNum = DefaultIndexNum
	}
	if o.SlotNum < 1 || o.SlotNum > math.MaxInt32 {
		return o, fmt.Errorf("index: SlotNum %d outside [1, %d]", o.SlotNum, math.MaxInt32)
	}
	if o.IndexNum < 2 || o.IndexNum > math.MaxInt32 {
		return o, fmt.Errorf("index: IndexNum %d outside [2, %d]", o.IndexNum, math.MaxInt32)
	}
	return o, nil
}

// Index is the set of index files of one directory, oldest first. It has one
// owner: no method may be called concurrently with another.
type Index struct {
	fsys    vfs.FS
	dir     string
	opt     Options
	files   []*indexFile // sorted by name (creation order), oldest first
	syncErr error        // sticky Flush failure
	closed  bool
}

// Open loads the index files of dir, creating dir if needed. Entries that are
// not 17-digit file names are ignored. A file whose size or header is
// inconsistent fails Open with an error wrapping ErrCorrupt (the caller may
// then remove the directory and rebuild the index from the CommitLog).
func Open(fsys vfs.FS, dir string, opt Options) (*Index, error) {
	opt, err := opt.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := fsys.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("index: open %s: %w", dir, err)
	}
	names, err := fsys.List(dir)
	if err != nil {
		return nil, fmt.Errorf("index: open %s: %w", dir, err)
	}
	x := &Index{fsys: fsys, dir: dir, opt: opt}
	for _, name := range names {
		ms, ok := parseName(name)
		if !ok {
			continue
		}
		p := path.Join(dir, name)
		fi, err := fsys.Stat(p)
		if err != nil {
			x.Close()
			return nil, fmt.Errorf("index: open %s: %w", p, err)
		}
		if fi.IsDir {
			continue
		}
		f, err := x.openFile(name, ms)
		if err != nil {
			x.Close()
			return nil, err
		}
		x.files = append(x.files, f)
	}
	sort.SliceStable(x.files, func(i, j int) bool { return x.files[i].nameMs < x.files[j].nameMs })
	return x, nil
}

func (x *Index) newIndexFile(name string, ms int64) *indexFile {
	return &indexFile{
		name:       name,
		nameMs:     ms,
		path:       path.Join(x.dir, name),
		slotNum:    int32(x.opt.SlotNum),
		indexNum:   int32(x.opt.IndexNum),
		entriesOff: headerSize + int64(x.opt.SlotNum)*slotSize,
	}
}

// openFile opens, checks and maps an existing file.
func (x *Index) openFile(name string, ms int64) (*indexFile, error) {
	f := x.newIndexFile(name, ms)
	vf, err := x.fsys.Open(f.path)
	if err != nil {
		return nil, fmt.Errorf("index: open %s: %w", f.path, err)
	}
	if size, want := vf.Size(), x.opt.fileSize(); size != want {
		vf.Close()
		return nil, fmt.Errorf("index: %s: %w: size %d, want %d for SlotNum %d, IndexNum %d",
			f.path, ErrCorrupt, size, want, x.opt.SlotNum, x.opt.IndexNum)
	}
	data, err := vf.Map()
	if err != nil {
		vf.Close()
		return nil, fmt.Errorf("index: map %s: %w", f.path, err)
	}
	if int64(len(data)) != x.opt.fileSize() {
		vf.Close()
		return nil, fmt.Errorf("index: map %s: %w: mapping of %d bytes, want %d", f.path, ErrCorrupt, len(data), x.opt.fileSize())
	}
	f.f, f.data = vf, data
	f.hdr = decodeHeader(data)
	if err := f.validate(); err != nil {
		f.close()
		return nil, fmt.Errorf("index: %s: %w: %v", f.path, ErrCorrupt, err)
	}
	return f, nil
}

// createFile creates, syncs into the directory and maps a new file named by
// storeTs (or the first free millisecond after the newest file's name, so
// that names keep the creation order even if store time went backwards).
func (x *Index) createFile(storeTs int64) (*indexFile, error) {
	ms := max(storeTs, 0)
	if n := len(x.files); n > 0 {
		ms = max(ms, x.files[n-1].nameMs+1)
	}
	ms = min(ms, maxNameMs)
	size := x.opt.fileSize()
	for tries := 0; ; tries++ {
		if tries >= maxCreateTries || ms > maxNameMs {
			return nil, fmt.Errorf("index: create in %s: no free file name at or after %s", x.dir, formatName(min(max(storeTs, 0), maxNameMs)))
		}
		name := formatName(ms)
		f := x.newIndexFile(name, ms)
		vf, err := x.fsys.Create(f.path, size)
		if errors.Is(err, vfs.ErrExist) {
			ms++
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("index: create %s: %w", f.path, err)
		}
		fail := func(err error) (*indexFile, error) {
			vf.Close()
			x.fsys.Remove(f.path) // best effort: an orphan is an empty file, harmless
			return nil, err
		}
		if err := x.fsys.SyncDir(x.dir); err != nil {
			return fail(fmt.Errorf("index: create %s: sync dir: %w", f.path, err))
		}
		data, err := vf.Map()
		if err != nil {
			return fail(fmt.Errorf("index: map %s: %w", f.path, err))
		}
		if int64(len(data)) != size {
			return fail(fmt.Errorf("index: map %s: mapping of %d bytes, want %d", f.path, len(data), size))
		}
		f.f, f.data = vf, data
		f.hdr = header{indexCount: 1}
		return f, nil
	}
}

// Put indexes key (the full "topic#key", see KeyOf) for the message at
// phyOffset stored at storeTimestampMs. It is a no-op when phyOffset is below
// MaxPhyOffset, or equal to it with key already indexed there (idempotent
// rebuild); offsets must come in non-decreasing order. A full file rolls to a
// new one.
func (x *Index) Put(key string, phyOffset, storeTimestampMs int64) error {
	if phyOffset < 0 && !x.closed {
		return fmt.Errorf("index: put %q: negative phy offset %d", key, phyOffset)
	}
	return x.PutHash(keyHash(key), phyOffset, storeTimestampMs)
}

// PutHash is Put of a key whose hash is h (KeyHash, or keyHash of the full
// key): what the index stores of a key is its hash, so a caller that has
// the key's parts need not build the "topic#key" string.
func (x *Index) PutHash(h int32, phyOffset, storeTimestampMs int64) error {
	if x.closed {
		return ErrClosed
	}
	if phyOffset < 0 {
		return fmt.Errorf("index: put: negative phy offset %d", phyOffset)
	}
	if h < 0 {
		return fmt.Errorf("index: put: negative key hash %d", h)
	}
	maxPhy := x.MaxPhyOffset()
	if phyOffset < maxPhy {
		return nil
	}
	if phyOffset == maxPhy && x.indexedAtMax(h, phyOffset) {
		return nil
	}
	var cur *indexFile
	if n := len(x.files); n > 0 {
		cur = x.files[n-1]
	}
	if cur == nil || cur.full() {
		f, err := x.createFile(storeTimestampMs)
		if err != nil {
			return err
		}
		x.files = append(x.files, f)
		cur = f
	}
	cur.put(h, phyOffset, storeTimestampMs)
	return nil
}

// indexedAtMax reports whether an entry with hash h and offset phy (which is
// MaxPhyOffset) exists. Offsets never decrease across entries, so such
// entries are the last ones written: the tail of the newest non-empty file,
// continuing into older files while a file holds nothing but phy (a message
// whose keys straddle a roll).
func (x *Index) indexedAtMax(h int32, phy int64) bool {
	for i := len(x.files) - 1; i >= 0; i-- {
		f := x.files[i]
		if f.empty() {
			continue
		}
		for n := f.hdr.indexCount - 1; n > 0; n-- {
			e := f.entry(n)
			if e.phy != phy {
				return false
			}
			if e.keyHash == h {
				return true
			}
		}
		if f.hdr.beginPhy != phy {
			return false
		}
	}
	return false
}

// put appends an entry; the caller guarantees the file is not full.
func (f *indexFile) put(h int32, phy, ts int64) {
	hd := &f.hdr
	if f.empty() {
		*hd = header{beginTs: ts, endTs: ts, beginPhy: phy, endPhy: phy, indexCount: 1}
	}
	n := hd.indexCount
	slot := h % f.slotNum
	prev := f.slot(slot)

	eo := f.entryOff(n)
	b := f.data[eo:][:entrySize]
	be.PutUint32(b[0:], uint32(h))
	be.PutUint64(b[4:], uint64(phy))
	be.PutUint32(b[12:], uint32(timeDiff(ts, hd.beginTs)))
	be.PutUint32(b[16:], uint32(prev))
	markRange(&f.entLo, &f.entHi, eo, entrySize)

	so := f.slotOff(slot)
	be.PutUint32(f.data[so:], uint32(n))
	markRange(&f.slotLo, &f.slotHi, so, slotSize)

	if prev == 0 {
		hd.hashSlotCount = min(hd.hashSlotCount+1, f.slotNum)
	}
	hd.indexCount = n + 1
	hd.endPhy = phy
	hd.endTs = max(hd.endTs, ts)
	hd.encode(f.data[:headerSize])
	f.hdrDirty = true
}

// Query returns up to max phy offsets of entries whose hash is key's and whose
// store second overlaps [beginMs, endMs], newest first. Hash collisions are
// possible: the caller re-checks the key on the messages. max <= 0 or
// beginMs > endMs returns nothing.
func (x *Index) Query(key string, beginMs, endMs int64, max int) ([]int64, error) {
	if x.closed {
		return nil, ErrClosed
	}
	if max <= 0 || beginMs > endMs {
		return nil, nil
	}
	h := keyHash(key)
	var out []int64
	for i := len(x.files) - 1; i >= 0 && len(out) < max; i-- {
		f := x.files[i]
		if f.empty() || f.hdr.endTs < beginMs || f.hdr.beginTs > endMs {
			continue
		}
		if out == nil {
			out = make([]int64, 0, min(max, 64))
		}
		out = f.query(h, beginMs, endMs, max, out)
	}
	return out, nil
}

// query walks the chain of h's slot. Entry numbers must strictly decrease
// along the chain and stay below indexCount, and the walk takes at most
// indexCount steps, so garbage (cycles, wild prevIndex) cannot hang it or read
// out of bounds.
func (f *indexFile) query(h int32, beginMs, endMs int64, max int, out []int64) []int64 {
	n := f.slot(h % f.slotNum)
	for steps := int32(0); n > 0 && steps < f.hdr.indexCount && len(out) < max; steps++ {
		e := f.entry(n)
		if e.timeDiff >= 0 {
			// The entry was stored during [t, tEnd]: the second timeDiff
			// after the file's begin, capped by the file's end.
			t := satAdd(f.hdr.beginTs, int64(e.timeDiff)*1000)
			tEnd := min(satAdd(t, 999), f.hdr.endTs)
			if e.keyHash == h && t <= endMs && tEnd >= beginMs {
				out = append(out, e.phy)
			}
			if tEnd < beginMs {
				break // older entries down the chain are older still
			}
		}
		if e.prev <= 0 || e.prev >= n {
			break
		}
		n = e.prev
	}
	return out
}

// MaxPhyOffset is the phy offset of the newest indexed message (the
// endPhyOffset of the newest non-empty file), 0 when nothing is indexed.
// Re-putting from it is idempotent.
func (x *Index) MaxPhyOffset() int64 {
	for i := len(x.files) - 1; i >= 0; i-- {
		if f := x.files[i]; !f.empty() {
			return f.hdr.endPhy
		}
	}
	return 0
}

// TruncateAfter drops what the index holds at or after phyOffset, for a
// CommitLog whose tail from phyOffset was cut. Entries cannot be unlinked from
// their chains, so whole files go: every file whose beginPhyOffset >=
// phyOffset, and the file that straddles phyOffset (beginPhyOffset <
// phyOffset <= endPhyOffset), whose entries below phyOffset the caller must
// Put again. rebuildFrom is the offset to re-put from, -1 when nothing needs
// rebuilding. The removals are durable when it returns nil.
func (x *Index) TruncateAfter(phyOffset int64) (rebuildFrom int64, err error) {
	if x.closed {
		return -1, ErrClosed
	}
	if phyOffset < 0 {
		return -1, fmt.Errorf("index: truncate after negative phy offset %d", phyOffset)
	}
	rebuildFrom, drop := x.truncatePlan(phyOffset)
	if _, err := x.removeFiles(drop); err != nil {
		return -1, err
	}
	return rebuildFrom, nil
}

// TruncatePoint is the rebuildFrom that TruncateAfter(phyOffset) would
// return, with nothing removed: a caller records it durably first, so that
// a crash during the removal leaves a store that knows what to re-index.
func (x *Index) TruncatePoint(phyOffset int64) int64 {
	rebuildFrom, _ := x.truncatePlan(phyOffset)
	return rebuildFrom
}

// truncatePlan is the files TruncateAfter drops and where re-putting starts.
func (x *Index) truncatePlan(phyOffset int64) (rebuildFrom int64, drop []*indexFile) {
	rebuildFrom = -1
	for _, f := range x.files {
		if f.empty() || (f.hdr.beginPhy < phyOffset && f.hdr.endPhy < phyOffset) {
			continue
		}
		if f.hdr.beginPhy < phyOffset && (rebuildFrom < 0 || f.hdr.beginPhy < rebuildFrom) {
			rebuildFrom = f.hdr.beginPhy
		}
		drop = append(drop, f)
	}
	return rebuildFrom, drop
}

// DeleteBefore removes the files whose endPhyOffset < minPhy, except the
// newest, and returns how many it removed. The removals are durable when it
// returns a nil error.
func (x *Index) DeleteBefore(minPhy int64) (int, error) {
	if x.closed {
		return 0, ErrClosed
	}
	var drop []*indexFile
	for i, f := range x.files {
		if i < len(x.files)-1 && f.hdr.endPhy < minPhy {
			drop = append(drop, f)
		}
	}
	return x.removeFiles(drop)
}

// removeFiles closes, removes and forgets the files of drop, then syncs the
// directory. A file is forgotten even if its removal fails (it is closed);
// the next Open finds it again.
func (x *Index) removeFiles(drop []*indexFile) (int, error) {
	if len(drop) == 0 {
		return 0, nil
	}
	gone := make(map[*indexFile]bool, len(drop))
	var errs []error
	removed := 0
	for _, f := range drop {
		gone[f] = true
		if err := f.close(); err != nil {
			errs = append(errs, err)
		}
		if err := x.fsys.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("index: remove %s: %w", f.path, err))
			continue
		}
		removed++
	}
	keep := x.files[:0]
	for _, f := range x.files {
		if !gone[f] {
			keep = append(keep, f)
		}
	}
	clear(x.files[len(keep):])
	x.files = keep
	if err := x.fsys.SyncDir(x.dir); err != nil {
		errs = append(errs, fmt.Errorf("index: sync dir %s: %w", x.dir, err))
	}
	return removed, errors.Join(errs...)
}

// Flush makes every entry put so far durable: for each file written since the
// last flush, the entries, the slots, then the header. A failure is sticky.
func (x *Index) Flush() error {
	if x.closed {
		return ErrClosed
	}
	if x.syncErr != nil {
		return x.syncErr
	}
	for _, f := range x.files {
		if !f.dirty() {
			continue
		}
		if err := f.flush(); err != nil {
			x.syncErr = err
			return err
		}
	}
	return nil
}

// FlushJob is Flush in two halves, for an owner that must not wait for the
// disk: it returns the work that makes every Put so far durable (nil if
// there is none) and clears the dirty ranges. The work syncs only ranges
// written before the call, so it may run on another goroutine while the
// owner goes on putting; it must not overlap a deletion of index files. If
// it fails, the owner reports the error with FlushFailed, after which every
// flush fails.
func (x *Index) FlushJob() (func() error, error) {
	if x.closed {
		return nil, ErrClosed
	}
	if x.syncErr != nil {
		return nil, x.syncErr
	}
	var jobs []func() error
	for _, f := range x.files {
		if job := f.flushJob(); job != nil {
			jobs = append(jobs, job)
		}
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	return func() error {
		for _, job := range jobs {
			if err := job(); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// FlushFailed records the failure of a FlushJob's work: every later flush
// fails.
func (x *Index) FlushFailed(err error) {
	if x.syncErr == nil {
		x.syncErr = err
	}
}

// Close releases the files and their mappings without syncing (call Flush
// first). Closing twice is a no-op.
func (x *Index) Close() error {
	if x.closed {
		return nil
	}
	x.closed = true
	var errs []error
	for _, f := range x.files {
		if err := f.close(); err != nil {
			errs = append(errs, err)
		}
	}
	x.files = nil
	return errors.Join(errs...)
}

// Files returns the names of the index files, oldest first (for tests,
// retention reports and tooling).
func (x *Index) Files() []string {
	names := make([]string, len(x.files))
	for i, f := range x.files {
		names[i] = f.name
	}
	return names
}
