// OS file system: real files on the host, preallocated with fallocate and
// memory-mapped with golang.org/x/sys/unix.
//
// A file is created unnamed (O_TMPFILE), its blocks reserved at once
// (fallocate mode 0, which also sets the size), then linked under its name
// (failing if the name exists), so a full device is a plain ENOSPC error at
// creation, never a fatal SIGBUS on a later page fault of the mapping, and a
// kill never leaves a short file under the name.
// Mappings are MAP_SHARED, PROT_READ|PROT_WRITE over the whole file; the exact
// slice unix.Mmap returned is kept for Munmap. Durability uses msync(MS_SYNC)
// on page-aligned ranges of a mapping, fdatasync for unmapped files, and fsync
// for the whole file and for directories.

package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// osPageSize is the host's page size (msync needs page-aligned starts).
var osPageSize = os.Getpagesize()

// fallocate is unix.Fallocate; tests replace it to reach the ENOSPC and
// EOPNOTSUPP paths without filling a real device.
var fallocate = unix.Fallocate

type osFS struct{}

// NewOS returns the FS of the host's real files.
func NewOS() FS { return osFS{} }

func hostPath(name string) string { return filepath.FromSlash(name) }

// wrapErr wraps err with the operation and path, adding ErrNoSpace when the
// cause is ENOSPC (or EDQUOT, a full quota, which means the same to callers).
func wrapErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		return fmt.Errorf("vfs: %s %s: %w (%w)", op, name, ErrNoSpace, err)
	}
	if errors.Is(err, unix.ENOTEMPTY) || (op == "remove" && errors.Is(err, unix.EEXIST)) {
		return fmt.Errorf("vfs: %s %s: %w (%w)", op, name, ErrNotEmpty, err)
	}
	return fmt.Errorf("vfs: %s %s: %w", op, name, err)
}

// Create makes a new zero-filled file of exactly size bytes with its blocks
// reserved. On any failure after the file was made, the file is removed.
//
// A size larger than the device's free space (as Usage reports it) fails
// with ErrNoSpace before anything is created: fallocate on ext4 would
// otherwise allocate blocks until the device is full, leaving every other
// writer on it without space until the failed file is removed.
func (osFS) Create(name string, size int64) (File, error) {
	if size < 0 {
		return nil, fmt.Errorf("vfs: create %s: negative size %d", name, size)
	}
	p := hostPath(name)
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(p), &st); err == nil {
		if free := st.Bavail * uint64(st.Bsize); uint64(size) > free {
			return nil, fmt.Errorf("vfs: create %s: %d bytes wanted, %d free: %w", name, size, free, ErrNoSpace)
		}
	}
	f, err := createWhole(p, size)
	if errors.Is(err, errNoTmpfile) {
		f, err = createInPlace(p, size)
	}
	if err != nil {
		return nil, wrapErr("create", name, err)
	}
	of := &osFile{f: f, name: name}
	of.size.Store(size)
	return of, nil
}

// errNoTmpfile: the directory's file system cannot make an unnamed file
// (O_TMPFILE) or name one (linkat through /proc): Create makes the file in
// place.
var errNoTmpfile = errors.New("no O_TMPFILE")

// createWhole makes the file unnamed in p's directory (O_TMPFILE), reserves
// its blocks, then gives it the name p (linkat, failing if p exists): the
// name never shows a file shorter than size. Made in place, a kill between
// the open and the fallocate left an empty file under the final name, and
// the store refused to open with a 0-byte CommitLog segment (found by
// TestE2EHASlaveRestartAndLateJoin: a slave killed as it rolled).
func createWhole(p string, size int64) (*os.File, error) {
	fd, err := unix.Open(filepath.Dir(p), unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o644)
	if err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL) {
			return nil, errNoTmpfile
		}
		return nil, err
	}
	f := os.NewFile(uintptr(fd), p)
	if err := reserve(f, size); err != nil {
		_ = f.Close() // an unnamed file: closing frees it
		return nil, err
	}
	proc := fmt.Sprintf("/proc/self/fd/%d", fd)
	if err := unix.Linkat(unix.AT_FDCWD, proc, unix.AT_FDCWD, p, unix.AT_SYMLINK_FOLLOW); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.ENOENT) {
			if _, serr := os.Stat(proc); serr != nil {
				return nil, errNoTmpfile // no /proc
			}
		}
		return nil, err
	}
	return f, nil
}

// createInPlace makes the file under its name, then reserves its blocks
// (removing it if that fails): not atomic under a kill, the fallback of
// createWhole.
func createInPlace(p string, size int64) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	if err := reserve(f, size); err != nil {
		_ = f.Close()
		_ = os.Remove(p)
		return nil, err
	}
	return f, nil
}

// reserve gives f exactly size bytes of allocated, zero blocks.
func reserve(f *os.File, size int64) error {
	if size == 0 {
		return nil // fallocate rejects a zero length; an empty file needs nothing
	}
	err := fallocate(int(f.Fd()), 0, 0, size)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOTSUP) {
		return fmt.Errorf("fallocate %d bytes: %w", size, err)
	}
	// The file system cannot preallocate: write zeros instead. Refuse up front
	// a size that cannot fit, rather than filling the device first.
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err == nil {
		if free := st.Bavail * uint64(st.Bsize); uint64(size) > free {
			return fmt.Errorf("write %d zero bytes with %d free: %w", size, free, unix.ENOSPC)
		}
	}
	zeros := make([]byte, min(size, 1<<20))
	for off := int64(0); off < size; {
		n := min(int64(len(zeros)), size-off)
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return fmt.Errorf("write zeros: %w", err)
		}
		off += n
	}
	return nil
}

func (osFS) Open(name string) (File, error) {
	f, err := os.OpenFile(hostPath(name), os.O_RDWR, 0)
	if err != nil {
		return nil, wrapErr("open", name, err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, wrapErr("open", name, err)
	}
	of := &osFile{f: f, name: name}
	of.size.Store(st.Size())
	return of, nil
}

func (osFS) Remove(name string) error {
	return wrapErr("remove", name, os.Remove(hostPath(name)))
}

func (osFS) RemoveAll(dir string) error {
	return wrapErr("remove all", dir, os.RemoveAll(hostPath(dir)))
}

func (osFS) Rename(oldname, newname string) error {
	if err := os.Rename(hostPath(oldname), hostPath(newname)); err != nil {
		return fmt.Errorf("vfs: rename %s to %s: %w", oldname, newname, err)
	}
	return nil
}

// MkdirAll creates dir and its missing parents, then fsyncs the parent of
// every directory it created so the new entries are durable.
func (osFS) MkdirAll(dir string) error {
	p := filepath.Clean(hostPath(dir))
	var created []string // deepest first
	for q := p; ; {
		if _, err := os.Stat(q); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return wrapErr("mkdir", dir, err)
		}
		created = append(created, q)
		parent := filepath.Dir(q)
		if parent == q {
			break
		}
		q = parent
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		return wrapErr("mkdir", dir, err)
	}
	// Sync parents from the top down: a child's entry is only reachable
	// after a crash if its parent's entry is too.
	for i := len(created) - 1; i >= 0; i-- {
		if err := syncDir(filepath.Dir(created[i])); err != nil {
			return wrapErr("mkdir", dir, err)
		}
	}
	return nil
}

func (osFS) List(dir string) ([]string, error) {
	entries, err := os.ReadDir(hostPath(dir)) // sorted by name
	if err != nil {
		return nil, wrapErr("list", dir, err)
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

func (osFS) Stat(name string) (FileInfo, error) {
	st, err := os.Stat(hostPath(name))
	if err != nil {
		return FileInfo{}, wrapErr("stat", name, err)
	}
	return FileInfo{Name: st.Name(), Size: st.Size(), ModTime: st.ModTime(), IsDir: st.IsDir()}, nil
}

func (osFS) SyncDir(dir string) error {
	return wrapErr("sync dir", dir, syncDir(hostPath(dir)))
}

func syncDir(p string) error {
	d, err := os.Open(p)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

func (osFS) Usage(path string) (Usage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(hostPath(path), &st); err != nil {
		return Usage{}, wrapErr("usage", path, err)
	}
	bs := uint64(st.Bsize)
	return Usage{Total: st.Blocks * bs, Free: st.Bavail * bs}, nil
}

// osFile is an open host file and its mapping, if any.
type osFile struct {
	f    *os.File
	name string
	size atomic.Int64 // read concurrently by readers of the mapping
	// mu orders the changes of the mapping and of closed (Map, Unmap,
	// Truncate, Close: the owner's) with SyncRange and Sync, which may run
	// on a background goroutine: a ConsumeQueue's FlushJob still syncing
	// while the broker's stop closes the store read a mapping being
	// unmapped (the race detector caught it in the client's tests).
	mu     sync.Mutex
	data   []byte // exactly what unix.Mmap returned; nil if unmapped
	mapped bool   // true also for an empty file's (nil) mapping
	closed atomic.Bool
}

func (f *osFile) Name() string { return f.name }
func (f *osFile) Size() int64  { return f.size.Load() }

func (f *osFile) ReadAt(p []byte, off int64) (int, error) {
	if f.closed.Load() {
		return 0, wrapErr("read", f.name, fs.ErrClosed)
	}
	n, err := f.f.ReadAt(p, off)
	if err == io.EOF {
		return n, io.EOF // unwrapped, as io.ReaderAt callers compare it
	}
	return n, wrapErr("read", f.name, err)
}

func (f *osFile) WriteAt(p []byte, off int64) (int, error) {
	if f.closed.Load() {
		return 0, wrapErr("write", f.name, fs.ErrClosed)
	}
	if off < 0 {
		return 0, fmt.Errorf("vfs: write %s: negative offset %d", f.name, off)
	}
	end := off + int64(len(p))
	if f.mapped && end > f.Size() {
		return 0, fmt.Errorf("vfs: write %s: [%d, %d) would grow a mapped file of %d bytes", f.name, off, end, f.Size())
	}
	n, err := f.f.WriteAt(p, off)
	if e := off + int64(n); e > f.Size() {
		f.size.Store(e)
	}
	return n, wrapErr("write", f.name, err)
}

// Map maps the whole file MAP_SHARED, read-write. An empty file maps to a
// nil slice (mmap rejects a zero length).
func (f *osFile) Map() ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed.Load() {
		return nil, wrapErr("map", f.name, fs.ErrClosed)
	}
	if f.mapped {
		return f.data, nil
	}
	size := f.Size()
	if size == 0 {
		f.mapped = true
		return nil, nil
	}
	if int64(int(size)) != size {
		return nil, fmt.Errorf("vfs: map %s: size %d too large", f.name, size)
	}
	data, err := unix.Mmap(int(f.f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, wrapErr("map", f.name, err)
	}
	f.data, f.mapped = data, true
	return data, nil
}

func (f *osFile) Unmap() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.unmapLocked()
}

func (f *osFile) unmapLocked() error {
	if !f.mapped {
		return nil
	}
	var err error
	if f.data != nil {
		err = unix.Munmap(f.data)
	}
	f.data, f.mapped = nil, false
	return wrapErr("unmap", f.name, err)
}

// SyncRange makes [off, off+n) durable: msync(MS_SYNC) of the covering pages
// of the mapping, or fdatasync when the file is not mapped.
func (f *osFile) SyncRange(off, n int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed.Load() {
		return wrapErr("sync range", f.name, fs.ErrClosed)
	}
	if off < 0 || n < 0 {
		return fmt.Errorf("vfs: sync range %s: bad range off=%d n=%d", f.name, off, n)
	}
	if f.data == nil {
		return wrapErr("sync range", f.name, unix.Fdatasync(int(f.f.Fd())))
	}
	end := min(off+n, int64(len(f.data)))
	start := off &^ int64(osPageSize-1)
	if start >= end {
		return nil
	}
	return wrapErr("sync range", f.name, unix.Msync(f.data[start:end], unix.MS_SYNC))
}

// Sync msyncs the whole mapping, if any, then fsyncs the file (data, size and
// metadata).
func (f *osFile) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed.Load() {
		return wrapErr("sync", f.name, fs.ErrClosed)
	}
	if f.data != nil {
		if err := unix.Msync(f.data, unix.MS_SYNC); err != nil {
			return wrapErr("sync", f.name, err)
		}
	}
	return wrapErr("sync", f.name, f.f.Sync())
}

func (f *osFile) Truncate(size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed.Load() {
		return wrapErr("truncate", f.name, fs.ErrClosed)
	}
	if f.mapped {
		return fmt.Errorf("vfs: truncate %s: file is mapped (unmap first: touching a mapped page past EOF is a fatal SIGBUS)", f.name)
	}
	if err := f.f.Truncate(size); err != nil {
		return wrapErr("truncate", f.name, err)
	}
	f.size.Store(size)
	return nil
}

func (f *osFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed.Load() {
		return wrapErr("close", f.name, fs.ErrClosed)
	}
	err := f.unmapLocked()
	f.closed.Store(true)
	return errors.Join(err, wrapErr("close", f.name, f.f.Close()))
}

// advise applies madvise to the mapping, if any.
func (f *osFile) advise(a Advice) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.data == nil {
		return nil
	}
	var adv int
	switch a {
	case AdviseNormal:
		adv = unix.MADV_NORMAL
	case AdviseSequential:
		adv = unix.MADV_SEQUENTIAL
	case AdviseRandom:
		adv = unix.MADV_RANDOM
	case AdviseWillNeed:
		adv = unix.MADV_WILLNEED
	default:
		return fmt.Errorf("vfs: advise %s: unknown advice %d", f.name, a)
	}
	return wrapErr("madvise", f.name, unix.Madvise(f.data, adv))
}

func (f *osFile) populate(m []byte) {
	m = pageAligned(m)
	// In steps of populateStep: the kernel holds the process's mmap lock
	// for reading through one call, and a 32 MiB call (8,192 page faults)
	// holds it for milliseconds, while anything wanting it for writing
	// (the Go runtime mapping more heap) and every page fault queued behind
	// that wait. (The broker's tail-latency stalls measured with the window
	// on came mostly from ext4's journal, not from this; see STORAGE.md.)
	for at := 0; at < len(m); at += populateStep {
		_ = unix.Madvise(m[at:min(at+populateStep, len(m))], unix.MADV_POPULATE_WRITE) // a hint: an old kernel just faults later
	}
}

// materialize is Materialize on the OS FS: populate and msync a step at a
// time, so no single call holds the mmap lock or the device for long (a
// step's writeback is about a millisecond of this machine's disk, which an
// acknowledgement's fsync may queue behind).
func (f *osFile) materialize(m []byte) error {
	m = pageAligned(m)
	for at := 0; at < len(m); at += populateStep {
		b := m[at:min(at+populateStep, len(m))]
		_ = unix.Madvise(b, unix.MADV_POPULATE_WRITE) // a hint (see populate)
		if err := unix.Msync(b, unix.MS_SYNC); err != nil {
			return wrapErr("materialize", f.name, err)
		}
	}
	return nil
}

// pageAligned is m from its first page boundary on (madvise and msync
// want page-aligned addresses; the partial page before it is the one the
// writer is filling).
func pageAligned(m []byte) []byte {
	if len(m) == 0 {
		return nil
	}
	skip := int(-uintptr(unsafe.Pointer(&m[0])) & uintptr(osPageSize-1))
	if skip >= len(m) {
		return nil
	}
	return m[skip:]
}

// populateStep bounds one MADV_POPULATE_WRITE call (see populate).
const populateStep = 1 << 20
