// Tests specific to the OS FS: full device, fallocate failures and
// fallbacks, page-aligned msync of ranges.

package vfs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestOSCreateNoSpace asks for more than the device has free. It must fail
// with ErrNoSpace and leave no file behind. (Create refuses it before calling
// fallocate: on ext4 a too-large fallocate fills the device before failing.)
func TestOSCreateNoSpace(t *testing.T) {
	dir := t.TempDir()
	fsys := NewOS()
	u, err := fsys.Usage(dir)
	must(t, err)
	size := int64(u.Free) + 1<<30
	name := filepath.Join(dir, "huge")
	f, err := fsys.Create(name, size)
	if err == nil {
		f.Close()
		t.Fatalf("create of %d bytes with %d free succeeded", size, u.Free)
	}
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("create: %v, want ErrNoSpace", err)
	}
	if _, err := os.Stat(name); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file left behind: %v", err)
	}
}

// withFallocate replaces the fallocate seam for one test.
func withFallocate(t *testing.T, fn func(fd int, mode uint32, off, size int64) error) {
	old := fallocate
	fallocate = fn
	t.Cleanup(func() { fallocate = old })
}

func TestOSCreateFallocateErrors(t *testing.T) {
	tests := []struct {
		name      string
		errno     error
		wantErr   error // nil: Create succeeds by writing zeros
		wantExist bool
	}{
		{"ENOSPC", unix.ENOSPC, ErrNoSpace, false},
		{"EDQUOT", unix.EDQUOT, ErrNoSpace, false},
		{"EIO", unix.EIO, unix.EIO, false},
		{"EOPNOTSUPP falls back to zeros", unix.EOPNOTSUPP, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			withFallocate(t, func(int, uint32, int64, int64) error { calls++; return tc.errno })
			dir := t.TempDir()
			name := filepath.Join(dir, "seg")
			const size = 3*PageSize + 100
			// Make the fallback's zeros visible: the fallback must overwrite
			// nothing but must produce exactly size zero bytes.
			f, err := NewOS().Create(name, size)
			if calls != 1 {
				t.Fatalf("fallocate called %d times", calls)
			}
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("create: %v, want %v", err, tc.wantErr)
				}
			} else {
				must(t, err)
				defer f.Close()
				if f.Size() != size {
					t.Fatalf("size %d", f.Size())
				}
				if b := readAll(t, f); !bytes.Equal(b, make([]byte, size)) {
					t.Fatal("fallback did not zero-fill")
				}
			}
			_, statErr := os.Stat(name)
			if exists := statErr == nil; exists != tc.wantExist {
				t.Fatalf("file exists=%v, want %v (%v)", exists, tc.wantExist, statErr)
			}
		})
	}
}

func TestOSSyncRange(t *testing.T) {
	dir := t.TempDir()
	fsys := NewOS()
	f := create(t, fsys, filepath.Join(dir, "a"), 4*PageSize)
	ranges := [][2]int64{{0, 1}, {1, 1}, {PageSize - 1, 2}, {PageSize + 17, 3 * PageSize}, {4*PageSize - 1, 1}, {4 * PageSize, 10}, {0, 0}}
	for _, r := range ranges { // unmapped: fdatasync
		must(t, f.SyncRange(r[0], r[1]))
	}
	m, err := f.Map()
	must(t, err)
	for _, r := range ranges { // mapped: msync from the page start
		if r[0] < int64(len(m)) {
			m[r[0]] = 'x'
		}
		if err := f.SyncRange(r[0], r[1]); err != nil {
			t.Fatalf("SyncRange(%d, %d): %v", r[0], r[1], err)
		}
	}
	if err := f.SyncRange(-1, 1); err == nil {
		t.Fatal("negative offset accepted")
	}
	for _, a := range []Advice{AdviseNormal, AdviseSequential, AdviseRandom, AdviseWillNeed} {
		must(t, Advise(f, a))
	}
	must(t, f.Sync())
}

func TestOSMkdirAllCreatesParents(t *testing.T) {
	root := t.TempDir()
	fsys := NewOS()
	d := filepath.Join(root, "a", "b", "c")
	must(t, fsys.MkdirAll(d))
	if st, err := os.Stat(d); err != nil || !st.IsDir() {
		t.Fatalf("stat: %v", err)
	}
}

// TestOSMaterializeWritesExtents: a fallocated file's blocks are unwritten
// extents (ext4, xfs); Materialize must leave the blocks of its range
// written, those past it as they were, and every byte as it was.
func TestOSMaterializeWritesExtents(t *testing.T) {
	const size = 8 << 20
	fsys := NewOS()
	f, err := fsys.Create(filepath.Join(t.TempDir(), "seg"), size)
	must(t, err)
	defer f.Close()
	m, err := f.Map()
	if err != nil {
		t.Fatal(err)
	}
	fd := int(f.(*osFile).f.Fd())
	if unwrittenBytes(t, fd, 0, size) == 0 {
		t.Skip("this file system preallocates written blocks: nothing for Materialize to do")
	}
	record := []byte("a record appended before the window was materialized")
	_, err = f.WriteAt(record, 1<<20+100)
	must(t, err)
	must(t, Materialize(f, m[1<<20:5<<20]))
	if n := unwrittenBytes(t, fd, 1<<20, 4<<20); n != 0 {
		t.Errorf("%d bytes of the materialized range still unwritten", n)
	}
	if n := unwrittenBytes(t, fd, 6<<20, 2<<20); n != 2<<20 {
		t.Errorf("past the range: %d of %d bytes unwritten, want all", n, 2<<20)
	}
	got := make([]byte, 5<<20)
	_, err = f.ReadAt(got, 0)
	must(t, err)
	want := make([]byte, 5<<20)
	copy(want[1<<20+100:], record)
	if !bytes.Equal(got, want) {
		t.Fatal("Materialize changed the file's bytes")
	}
}

// unwrittenBytes is how many bytes of [off, off+n) of fd lie in extents
// flagged unwritten (FS_IOC_FIEMAP).
func unwrittenBytes(t *testing.T, fd int, off, n int64) int64 {
	t.Helper()
	const (
		extentSize = 56 // struct fiemap_extent
		maxExtents = 256
		flagLast   = 0x1   // FIEMAP_EXTENT_LAST
		unwritten  = 0x800 // FIEMAP_EXTENT_UNWRITTEN
		fsIocFiemp = 0xC020660B
	)
	buf := make([]byte, 32+maxExtents*extentSize)
	le := binary.LittleEndian
	le.PutUint64(buf[0:], uint64(off))
	le.PutUint64(buf[8:], uint64(n))
	// No FIEMAP_FLAG_SYNC: that would write dirty pages back itself.
	le.PutUint32(buf[24:], maxExtents)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), fsIocFiemp, uintptr(unsafe.Pointer(&buf[0]))); e != 0 {
		t.Skipf("FIEMAP: %v", e)
	}
	var total int64
	for i := range int(le.Uint32(buf[20:])) {
		e := buf[32+i*extentSize:]
		lo, length, flags := int64(le.Uint64(e[0:])), int64(le.Uint64(e[16:])), le.Uint32(e[40:])
		if flags&unwritten != 0 {
			total += max(0, min(lo+length, off+n)-max(lo, off))
		}
		if flags&flagLast != 0 {
			break
		}
	}
	return total
}

// TestOSWarmWorkAfterUnmap: the warm work runs off the writer and may
// outlive the mapping it was handed (a broker stopping unmaps its
// segments): it must then fail or do nothing, never crash, and never
// read the file's state (the race detector watches the mapping field).
func TestOSWarmWorkAfterUnmap(t *testing.T) {
	f, err := NewOS().Create(filepath.Join(t.TempDir(), "seg"), 4<<20)
	must(t, err)
	defer f.Close()
	m, err := f.Map()
	must(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Populate(f, m)
		_ = Materialize(f, m)
	}()
	must(t, f.Unmap())
	<-done
	Populate(f, m)
	if err := Materialize(f, m); err == nil {
		t.Log("msync of the unmapped range succeeded (the addresses were mapped again)")
	}
}

// TestOSSyncRangeDuringClose: a sync on another goroutine (a ConsumeQueue's
// FlushJob at the broker's stop) and the owner's Close of the same mapped
// file: the sync either runs on the whole mapping or sees the file closed,
// never the mapping half gone (an msync of unmapped pages fails with
// ENOMEM; under -race the unguarded mapping is a reported race).
func TestOSSyncRangeDuringClose(t *testing.T) {
	dir := t.TempDir()
	for i := range 50 {
		f, err := NewOS().Create(filepath.Join(dir, fmt.Sprint("q", i)), 1<<20)
		must(t, err)
		m, err := f.Map()
		must(t, err)
		m[0], m[len(m)-1] = 1, 1
		errs := make(chan error, 1)
		go func() {
			var err error
			for range 20 {
				if err = f.SyncRange(0, int64(len(m))); err != nil {
					break
				}
			}
			errs <- err
		}()
		must(t, f.Close())
		if err := <-errs; err != nil && !errors.Is(err, fs.ErrClosed) {
			t.Fatalf("file %d: a sync racing Close failed with %v, want success or fs.ErrClosed", i, err)
		}
	}
}

// TestOSCreateNameAppearsWhole: while Create reserves a file's blocks the
// name does not exist yet, so a process killed meanwhile leaves no short
// file under it (a 0-byte CommitLog segment made the store refuse to open).
func TestOSCreateNameAppearsWhole(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "00000000000001048576")
	var during []string
	withFallocate(t, func(fd int, mode uint32, off, size int64) error {
		if st, err := os.Stat(name); err == nil {
			during = append(during, fmt.Sprintf("%d bytes", st.Size()))
		} else {
			during = append(during, "absent")
		}
		return unix.Fallocate(fd, mode, off, size)
	})
	const size = 1 << 20
	f, err := NewOS().Create(name, size)
	must(t, err)
	defer f.Close()
	if len(during) != 1 || during[0] != "absent" {
		t.Fatalf("the name during fallocate: %v, want [absent]", during)
	}
	if st, err := os.Stat(name); err != nil || st.Size() != size || f.Size() != size {
		t.Fatalf("after Create: %v, %v, file size %d; want %d bytes", st, err, f.Size(), size)
	}
	if _, err := NewOS().Create(name, size); !errors.Is(err, ErrExist) {
		t.Fatalf("second Create: %v, want ErrExist", err)
	}
	if names, _ := os.ReadDir(dir); len(names) != 1 {
		t.Fatalf("%d entries in the directory, want 1", len(names))
	}
}
