// Package vfs is the file-system seam of Wharf's storage. Every byte the store
// reads or writes goes through an FS, so tests and the simulator can swap the
// real disk for an in-memory one that knows which bytes are durable, crashes on
// demand, and fails operations on purpose.
//
// Implementations:
//   - OS (NewOS): real files, mmap via golang.org/x/sys/unix, files created
//     with fallocate so a full disk is an ENOSPC error at creation and never a
//     SIGBUS on a later page fault.
//   - Mem (NewMem): an in-memory FS that tracks durability; Crash returns the
//     state a power cut could leave behind.
//   - Faulty (NewFaulty): wraps any FS and injects errors and latency.
//
// Durability model (shared by every implementation, and what the store relies
// on): bytes written through WriteAt or through a mapping are durable only
// after a Sync or SyncRange covering them returns nil. A file's existence (and
// a rename) is durable only after SyncDir of its parent directory returns nil.
// A file's size change by Truncate is durable after the next Sync of the file.
package vfs

import (
	"errors"
	"io/fs"
	"time"
)

// ErrNoSpace is wrapped by errors returned when the device is full
// (ENOSPC at creation or preallocation).
var ErrNoSpace = errors.New("no space left on device")

// ErrNotExist is wrapped by errors about missing files; errors.Is(err,
// fs.ErrNotExist) also holds.
var ErrNotExist = fs.ErrNotExist

// ErrExist is wrapped by Create when the file already exists.
var ErrExist = fs.ErrExist

// ErrNotEmpty is wrapped by Remove of a directory that is not empty.
var ErrNotEmpty = errors.New("directory not empty")

// FS is the file-system seam. Paths are slash-separated; implementations
// treat them as paths on the host (OS) or keys in a tree (Mem).
type FS interface {
	// Create makes a new file of exactly size bytes, zero-filled, with its
	// blocks reserved (fallocate on the OS FS), and opens it read-write. It
	// fails with an error wrapping ErrExist if the file exists and
	// ErrNoSpace if the blocks cannot be reserved. The new directory entry is
	// not durable until SyncDir of its parent.
	Create(name string, size int64) (File, error)
	// Open opens an existing file read-write.
	Open(name string) (File, error)
	// Remove deletes a file or an empty directory (durable after SyncDir
	// of its parent); a directory with entries fails with ErrNotEmpty.
	Remove(name string) error
	// RemoveAll deletes a directory tree; missing is not an error.
	RemoveAll(dir string) error
	// Rename atomically replaces newname with oldname (durable after SyncDir).
	Rename(oldname, newname string) error
	// MkdirAll creates a directory and its parents. New directories are
	// synced into their parents before MkdirAll returns.
	MkdirAll(dir string) error
	// List returns the names (not paths) of the entries of dir, sorted.
	List(dir string) ([]string, error)
	// Stat describes a file or directory.
	Stat(name string) (FileInfo, error)
	// SyncDir makes the entries of dir (creations, removals, renames) durable.
	SyncDir(dir string) error
	// Usage reports the space of the device holding path, for retention's
	// disk-usage thresholds.
	Usage(path string) (Usage, error)
}

// File is an open file. A File is used by one goroutine at a time, except
// that bytes of a mapping that are no longer being written may be read
// concurrently.
type File interface {
	// Name is the path the file was opened with.
	Name() string
	// Size is the current size in bytes.
	Size() int64
	// ReadAt reads len(p) bytes at off; short reads return io.EOF.
	ReadAt(p []byte, off int64) (int, error)
	// WriteAt writes p at off, growing the file if needed. Not durable until
	// Sync.
	WriteAt(p []byte, off int64) (int, error)
	// Map returns a read-write view of the whole file, of length Size().
	// Writes to the slice are writes to the file (not durable until Sync or
	// SyncRange). The same slice is returned on every call; it is valid until
	// Unmap or Close. Files must not be grown or truncated while mapped.
	Map() ([]byte, error)
	// Unmap releases the mapping, if any. Close also does.
	Unmap() error
	// SyncRange makes the bytes [off, off+n) durable (msync(MS_SYNC) of the
	// pages covering them on the OS FS).
	SyncRange(off, n int64) error
	// Sync makes the whole file, including its size, durable.
	Sync() error
	// Truncate sets the size. It fails if the file is mapped.
	Truncate(size int64) error
	// Close releases the file and any mapping.
	Close() error
}

// FileInfo describes a file.
type FileInfo struct {
	Name    string
	Size    int64
	ModTime time.Time
	IsDir   bool
}

// Usage is the space of one device.
type Usage struct {
	Total uint64 // bytes
	Free  uint64 // bytes available to an unprivileged writer
}

// UsedRatio is the used fraction of the device, in [0, 1].
func (u Usage) UsedRatio() float64 {
	if u.Total == 0 {
		return 0
	}
	return float64(u.Total-min(u.Free, u.Total)) / float64(u.Total)
}

// PageSize is the page granularity of durability: the Mem FS loses or keeps
// unsynced data in units of PageSize, as a kernel writes back pages.
const PageSize = 4096
