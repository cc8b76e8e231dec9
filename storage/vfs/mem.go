// Crashable in-memory file system.
//
// Mem keeps, for every file, its current bytes (what reads see) and its
// durable bytes (what a power cut is guaranteed to leave), and for every
// directory its current entries and its durable entries. WriteAt and writes
// through a mapping change only the current bytes; Sync and SyncRange copy
// them into the durable copy. Creations, removals and renames change only the
// current entries; SyncDir of the parent (or MkdirAll, which syncs the parents
// of the directories it creates) makes them durable.
//
// Crash returns a new Mem holding one state a power cut could leave: the
// durable entries, each surviving file's durable bytes, plus a seeded subset
// of the unsynced pages (what the kernel may have written back on its own),
// and optionally a torn last page. Same seed and same state, same image.

package vfs

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"math/rand"
	"path"
	"sort"
	"strings"
	"sync"
	"time"
)

// MemEpoch is the fixed modification time of Mem files when no clock is
// given (WithClock).
var MemEpoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// DefaultMemCapacity is the device size of a Mem without WithCapacity.
const DefaultMemCapacity int64 = 1 << 40

// MemOption configures NewMem.
type MemOption func(*Mem)

// WithClock sets the source of modification times (the simulator passes its
// virtual clock). The default always returns MemEpoch.
func WithClock(now func() time.Time) MemOption {
	return func(m *Mem) { m.now = now }
}

// WithCapacity sets the device size in bytes: Create, and growing writes or
// truncations, that would take the files' total size past it fail with
// ErrNoSpace.
func WithCapacity(bytes int64) MemOption {
	return func(m *Mem) { m.capacity = bytes }
}

// CrashOptions says what unsynced state may survive Mem.Crash. The zero value
// keeps only durable state.
type CrashOptions struct {
	// UnsyncedKeepRatio is the probability, in [0, 1], that a page whose
	// current content differs from its durable content survives with its
	// current content (written back by the kernel before the power cut).
	UnsyncedKeepRatio float64
	// KeepEntries keeps the directory entries not yet synced as they are
	// (creates, renames, removals): the crash is the process's, not the
	// machine's. Use it with UnsyncedKeepRatio 1 (ProcessCrash).
	KeepEntries bool
	// TornLastPage makes the highest-offset differing page of each file, when
	// it survives, survive only as a prefix of seeded length (a torn write):
	// the new bytes up to some point, the durable ones after it.
	TornLastPage bool
}

// ProcessCrash is a crash of the process alone: everything the kernel
// holds survives, synced or not.
var ProcessCrash = CrashOptions{UnsyncedKeepRatio: 1, KeepEntries: true}

// Mem is the crashable in-memory FS. It is safe for concurrent use; every
// operation takes one mutex on the tree. Bytes of a mapping are outside the
// mutex: as with real mappings, their writer must not race their readers
// (including Sync and Crash).
type Mem struct {
	mu       sync.Mutex
	root     *memNode
	now      func() time.Time
	capacity int64
	used     int64 // total size of the files linked into the current tree
}

// memNode is a file or a directory (an inode: it outlives its entries while
// open, and a durable entry may still point at a node removed since).
type memNode struct {
	dir bool

	// Directory.
	children map[string]*memNode // current entries
	durable  map[string]*memNode // entries as of the last SyncDir

	// File.
	data    []byte // current bytes; len(data) is the size
	synced  []byte // durable bytes, followed by zeros up to durSize
	durSize int64  // durable size; len(synced) <= durSize
	maps    int    // handles that have it mapped: data must not move
	linked  bool   // counted in Mem.used
	modTime time.Time
}

// NewMem returns an empty in-memory FS; its root directory is durable.
func NewMem(opts ...MemOption) *Mem {
	m := &Mem{
		root:     newDir(),
		now:      func() time.Time { return MemEpoch },
		capacity: DefaultMemCapacity,
	}
	for _, o := range opts {
		o(m)
	}
	return m
}

func newDir() *memNode {
	return &memNode{dir: true, children: map[string]*memNode{}, durable: map[string]*memNode{}}
}

// split cleans name into its components; the root is no components. Absolute
// and relative names address the same tree.
func split(name string) []string {
	c := path.Clean("/" + name)
	if c == "/" {
		return nil
	}
	return strings.Split(c[1:], "/")
}

// lookup returns the node at parts, or nil. Callers hold mu.
func (m *Mem) lookup(parts []string) *memNode {
	n := m.root
	for _, p := range parts {
		if !n.dir {
			return nil
		}
		n = n.children[p]
		if n == nil {
			return nil
		}
	}
	return n
}

// parent returns the directory holding the entry parts and the entry's name.
func (m *Mem) parent(op, name string) (*memNode, string, error) {
	parts := split(name)
	if len(parts) == 0 {
		return nil, "", fmt.Errorf("vfs: %s %s: invalid path (the root)", op, name)
	}
	d := m.lookup(parts[:len(parts)-1])
	if d == nil {
		return nil, "", fmt.Errorf("vfs: %s %s: parent directory: %w", op, name, ErrNotExist)
	}
	if !d.dir {
		return nil, "", fmt.Errorf("vfs: %s %s: parent is not a directory: %w", op, name, ErrNotExist)
	}
	return d, parts[len(parts)-1], nil
}

// reserveSpace accounts for a size change of a linked file. Callers hold mu.
func (m *Mem) reserveSpace(op, name string, n *memNode, newSize int64) error {
	if !n.linked {
		return nil
	}
	delta := newSize - int64(len(n.data))
	if delta > 0 && m.used+delta > m.capacity {
		return fmt.Errorf("vfs: %s %s: %d bytes needed, %d free: %w", op, name, delta, m.capacity-m.used, ErrNoSpace)
	}
	m.used += delta
	return nil
}

// unlink stops counting the files of the subtree n in used. Callers hold mu.
func (m *Mem) unlink(n *memNode) {
	if !n.dir {
		if n.linked {
			m.used -= int64(len(n.data))
			n.linked = false
		}
		return
	}
	for _, c := range n.children {
		m.unlink(c)
	}
}

// Create makes a new zero-filled file of size bytes. Its size and zero
// content are durable as soon as its entry is (SyncDir of the parent), as
// fallocate's size change is journaled with the entry on the OS FS.
func (m *Mem) Create(name string, size int64) (File, error) {
	if size < 0 {
		return nil, fmt.Errorf("vfs: create %s: negative size %d", name, size)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parent("create", name)
	if err != nil {
		return nil, err
	}
	if d.children[base] != nil {
		return nil, fmt.Errorf("vfs: create %s: %w", name, ErrExist)
	}
	if m.used+size > m.capacity {
		return nil, fmt.Errorf("vfs: create %s: %d bytes needed, %d free: %w", name, size, m.capacity-m.used, ErrNoSpace)
	}
	// The zero-filled size is durable with the entry (fallocate's size
	// change is journaled with it), so it needs no copy.
	n := &memNode{data: make([]byte, size), durSize: size, linked: true, modTime: m.now()}
	m.used += size
	d.children[base] = n
	return &memFile{m: m, n: n, name: name}, nil
}

func (m *Mem) Open(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.lookup(split(name))
	if n == nil {
		return nil, fmt.Errorf("vfs: open %s: %w", name, ErrNotExist)
	}
	if n.dir {
		return nil, fmt.Errorf("vfs: open %s: is a directory", name)
	}
	return &memFile{m: m, n: n, name: name}, nil
}

// Remove deletes a file or an empty directory.
func (m *Mem) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parent("remove", name)
	if err != nil {
		return err
	}
	n := d.children[base]
	if n == nil {
		return fmt.Errorf("vfs: remove %s: %w", name, ErrNotExist)
	}
	if n.dir && len(n.children) > 0 {
		return fmt.Errorf("vfs: remove %s: %w", name, ErrNotEmpty)
	}
	m.unlink(n)
	delete(d.children, base)
	m.touch(d)
	return nil
}

func (m *Mem) RemoveAll(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	parts := split(dir)
	if len(parts) == 0 {
		m.unlink(m.root)
		clear(m.root.children)
		return nil
	}
	d := m.lookup(parts[:len(parts)-1])
	if d == nil || !d.dir {
		return nil
	}
	n := d.children[parts[len(parts)-1]]
	if n == nil {
		return nil
	}
	m.unlink(n)
	delete(d.children, parts[len(parts)-1])
	m.touch(d)
	return nil
}

// Rename moves oldname to newname, replacing a file (or an empty directory)
// there. Durable after SyncDir of each parent involved; between the two
// SyncDirs of a move across directories, a crash may keep the file under
// both names (as independent copies) or under neither.
func (m *Mem) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	od, obase, err := m.parent("rename", oldname)
	if err != nil {
		return err
	}
	n := od.children[obase]
	if n == nil {
		return fmt.Errorf("vfs: rename %s to %s: %w", oldname, newname, ErrNotExist)
	}
	nd, nbase, err := m.parent("rename", newname)
	if err != nil {
		return err
	}
	if od == nd && obase == nbase {
		return nil
	}
	if n.dir {
		op, np := path.Clean("/"+oldname), path.Clean("/"+newname)
		if strings.HasPrefix(np, op+"/") {
			return fmt.Errorf("vfs: rename %s to %s: into itself", oldname, newname)
		}
	}
	if t := nd.children[nbase]; t != nil {
		switch {
		case t.dir && !n.dir:
			return fmt.Errorf("vfs: rename %s to %s: target is a directory", oldname, newname)
		case !t.dir && n.dir:
			return fmt.Errorf("vfs: rename %s to %s: target is not a directory", oldname, newname)
		case t.dir && len(t.children) > 0:
			return fmt.Errorf("vfs: rename %s to %s: target directory not empty", oldname, newname)
		}
		m.unlink(t)
	}
	delete(od.children, obase)
	nd.children[nbase] = n
	m.touch(od)
	m.touch(nd)
	return nil
}

// MkdirAll creates dir and its parents; each new directory is durable at
// once, as is every pending change of the parents it was synced into.
func (m *Mem) MkdirAll(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.root
	for i, p := range split(dir) {
		c := n.children[p]
		if c == nil {
			c = newDir()
			c.modTime = m.now()
			n.children[p] = c
			n.syncEntries()
		} else if !c.dir {
			return fmt.Errorf("vfs: mkdir %s: %s is not a directory", dir, path.Join(split(dir)[:i+1]...))
		}
		n = c
	}
	return nil
}

func (m *Mem) List(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.lookup(split(dir))
	if n == nil {
		return nil, fmt.Errorf("vfs: list %s: %w", dir, ErrNotExist)
	}
	if !n.dir {
		return nil, fmt.Errorf("vfs: list %s: not a directory", dir)
	}
	return sortedNames(n.children), nil
}

func sortedNames(entries map[string]*memNode) []string {
	names := make([]string, 0, len(entries))
	for k := range entries {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func (m *Mem) Stat(name string) (FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	parts := split(name)
	n := m.lookup(parts)
	if n == nil {
		return FileInfo{}, fmt.Errorf("vfs: stat %s: %w", name, ErrNotExist)
	}
	base := "/"
	if len(parts) > 0 {
		base = parts[len(parts)-1]
	}
	return FileInfo{Name: base, Size: int64(len(n.data)), ModTime: n.modTime, IsDir: n.dir}, nil
}

func (m *Mem) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.lookup(split(dir))
	if n == nil {
		return fmt.Errorf("vfs: sync dir %s: %w", dir, ErrNotExist)
	}
	if !n.dir {
		return fmt.Errorf("vfs: sync dir %s: not a directory", dir)
	}
	n.syncEntries()
	return nil
}

func (n *memNode) syncEntries() {
	clear(n.durable)
	for k, v := range n.children {
		n.durable[k] = v
	}
}

func (m *Mem) touch(n *memNode) { n.modTime = m.now() }

// Usage reports the capacity and what the current files leave free.
func (m *Mem) Usage(string) (Usage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return Usage{Total: uint64(m.capacity), Free: uint64(max(m.capacity-m.used, 0))}, nil
}

// Crash returns a new Mem holding what a power cut could leave of m: the
// durable directory entries only, and for each surviving file its durable
// bytes plus, for each PageSize page whose current content differs from its
// durable content, the current page with probability
// opts.UnsyncedKeepRatio. With opts.TornLastPage, the highest-offset differing
// page of a file, if kept, is kept only as a prefix of seeded length. The
// draws come from math/rand seeded with seed, in sorted path order, so the
// same seed and state give the same image. m itself is unchanged and stays
// usable; the new Mem has the same clock and capacity, and everything in it
// is durable.
func (m *Mem) Crash(seed int64, opts CrashOptions) *Mem {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := &Mem{now: m.now, capacity: m.capacity}
	rng := rand.New(rand.NewSource(seed))
	c.root = c.crashDir(m.root, rng, opts)
	return c
}

// crashDir copies the durable tree under d. Callers hold the source's mu.
func (c *Mem) crashDir(d *memNode, rng *rand.Rand, opts CrashOptions) *memNode {
	out := newDir()
	out.modTime = d.modTime
	// Directory entries not yet synced are lost, unless the process died
	// and the machine did not (KeepEntries): the kernel then keeps every
	// create, rename and removal it was told of.
	entries := d.durable
	if opts.KeepEntries {
		entries = d.children
	}
	for _, name := range sortedNames(entries) {
		n := entries[name]
		var cn *memNode
		if n.dir {
			cn = c.crashDir(n, rng, opts)
		} else {
			img := crashImage(n, rng, opts)
			cn = &memNode{data: img, synced: bytes.Clone(img), durSize: int64(len(img)), linked: true, modTime: n.modTime}
			c.used += int64(len(img))
		}
		out.children[name] = cn
		out.durable[name] = cn
	}
	return out
}

// crashImage is the durable bytes of a file with a seeded subset of the
// differing pages of the current bytes written over them.
func crashImage(n *memNode, rng *rand.Rand, opts CrashOptions) []byte {
	cur := n.data
	img := make([]byte, n.durSize)
	copy(img, n.synced)
	var diff []int // page numbers whose current content differs
	for p := 0; p*PageSize < len(cur); p++ {
		lo, hi := p*PageSize, min((p+1)*PageSize, len(cur))
		if !bytes.Equal(cur[lo:hi], img[min(lo, len(img)):min(hi, len(img))]) {
			diff = append(diff, p)
		}
	}
	for i, p := range diff {
		// Always draw, so a page's fate does not depend on the ratio of
		// draws before it (stable images across ratios for a seed).
		keep := rng.Float64() < opts.UnsyncedKeepRatio
		lo, hi := p*PageSize, min((p+1)*PageSize, len(cur))
		if opts.TornLastPage && i == len(diff)-1 {
			cut := rng.Intn(hi - lo + 1)
			hi = lo + cut
		}
		if !keep || hi == lo {
			continue
		}
		if hi > len(img) {
			img = append(img, make([]byte, hi-len(img))...)
		}
		copy(img[lo:hi], cur[lo:hi])
	}
	return img
}

// memFile is an open handle on a Mem file.
type memFile struct {
	m      *Mem
	n      *memNode
	name   string
	mapped bool
	closed bool
}

func (f *memFile) Name() string { return f.name }

func (f *memFile) Size() int64 {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	return int64(len(f.n.data))
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return 0, fmt.Errorf("vfs: read %s: %w", f.name, fs.ErrClosed)
	}
	if off < 0 {
		return 0, fmt.Errorf("vfs: read %s: negative offset %d", f.name, off)
	}
	if off >= int64(len(f.n.data)) {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return 0, fmt.Errorf("vfs: write %s: %w", f.name, fs.ErrClosed)
	}
	if off < 0 {
		return 0, fmt.Errorf("vfs: write %s: negative offset %d", f.name, off)
	}
	n := f.n
	end := off + int64(len(p))
	if end > int64(len(n.data)) {
		if n.maps > 0 {
			return 0, fmt.Errorf("vfs: write %s: [%d, %d) would grow a mapped file of %d bytes", f.name, off, end, len(n.data))
		}
		if err := f.m.reserveSpace("write", f.name, n, end); err != nil {
			return 0, err
		}
		n.data = grow(n.data, int(end))
	}
	copy(n.data[off:], p)
	n.modTime = f.m.now()
	return len(p), nil
}

// grow returns b extended with zeros to size.
func grow(b []byte, size int) []byte {
	if size <= cap(b) {
		old := len(b)
		b = b[:size]
		clear(b[old:])
		return b
	}
	nb := make([]byte, size, max(size, 2*cap(b)))
	copy(nb, b)
	return nb
}

// Map returns the file's current bytes themselves: writes to the slice are
// writes to the file. The slice does not move while any handle maps it.
func (f *memFile) Map() ([]byte, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return nil, fmt.Errorf("vfs: map %s: %w", f.name, fs.ErrClosed)
	}
	if !f.mapped {
		f.mapped = true
		f.n.maps++
	}
	d := f.n.data
	return d[:len(d):len(d)], nil
}

func (f *memFile) Unmap() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	f.unmapLocked()
	return nil
}

func (f *memFile) unmapLocked() {
	if f.mapped {
		f.mapped = false
		f.n.maps--
	}
}

// SyncRange makes the pages covering [off, off+n) durable; the durable size
// grows to cover them if needed (as fdatasync keeps data reachable).
func (f *memFile) SyncRange(off, n int64) error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return fmt.Errorf("vfs: sync range %s: %w", f.name, fs.ErrClosed)
	}
	if off < 0 || n < 0 {
		return fmt.Errorf("vfs: sync range %s: bad range off=%d n=%d", f.name, off, n)
	}
	nd := f.n
	lo := off &^ (PageSize - 1)
	hi := min((off+n+PageSize-1)&^(PageSize-1), int64(len(nd.data)))
	if n == 0 || lo >= hi {
		return nil
	}
	if hi > int64(len(nd.synced)) {
		nd.synced = grow(nd.synced, int(hi)) // the tail was zeros already
	}
	copy(nd.synced[lo:hi], nd.data[lo:hi])
	nd.durSize = max(nd.durSize, hi)
	return nil
}

// Sync makes the whole file, and its size, durable.
func (f *memFile) Sync() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return fmt.Errorf("vfs: sync %s: %w", f.name, fs.ErrClosed)
	}
	nd := f.n
	if cap(nd.synced) >= len(nd.data) {
		nd.synced = nd.synced[:len(nd.data)]
	} else {
		nd.synced = make([]byte, len(nd.data))
	}
	copy(nd.synced, nd.data)
	nd.durSize = int64(len(nd.data))
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return fmt.Errorf("vfs: truncate %s: %w", f.name, fs.ErrClosed)
	}
	if size < 0 {
		return fmt.Errorf("vfs: truncate %s: negative size %d", f.name, size)
	}
	nd := f.n
	if nd.maps > 0 {
		return fmt.Errorf("vfs: truncate %s: file is mapped (unmap first)", f.name)
	}
	if err := f.m.reserveSpace("truncate", f.name, nd, size); err != nil {
		return err
	}
	if size <= int64(len(nd.data)) {
		nd.data = nd.data[:size]
	} else {
		nd.data = grow(nd.data, int(size))
	}
	nd.modTime = f.m.now()
	return nil
}

func (f *memFile) Close() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return fmt.Errorf("vfs: close %s: %w", f.name, fs.ErrClosed)
	}
	f.unmapLocked()
	f.closed = true
	return nil
}

// DurableBytes returns a copy of the bytes [off, off+n) of name as a crash
// right now would leave them if every unsynced page were lost (zeros past
// the durable content). ok is false if the file, or its directory entry, is
// not durable. The simulator uses it to check that an acknowledgement never
// claims more durability than happened.
func (m *Mem) DurableBytes(name string, off int64, n int) (b []byte, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	parts := split(name)
	if len(parts) == 0 {
		return nil, false
	}
	dir := m.lookup(parts[:len(parts)-1])
	if dir == nil || !dir.dir {
		return nil, false
	}
	nd := dir.durable[parts[len(parts)-1]]
	if nd == nil || nd.dir || nd != dir.children[parts[len(parts)-1]] {
		return nil, false
	}
	b = make([]byte, n)
	if off < int64(len(nd.synced)) {
		copy(b, nd.synced[off:])
	}
	return b, off+int64(n) <= nd.durSize
}
