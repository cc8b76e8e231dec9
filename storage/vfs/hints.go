// Performance hints for mapped files: access-pattern advice (madvise) and
// pre-touching the pages of a freshly created file. Neither changes what the
// file holds or what is durable, so the in-memory FS ignores them.

package vfs

// Advice is an access-pattern hint for a file's mapping (madvise).
type Advice int

const (
	// AdviseNormal is the kernel's default read-ahead.
	AdviseNormal Advice = iota
	// AdviseSequential reads ahead aggressively and drops pages soon after
	// use (CommitLog scans).
	AdviseSequential
	// AdviseRandom disables read-ahead (index files).
	AdviseRandom
	// AdviseWillNeed starts reading the whole mapping in now (a consumer
	// catching up).
	AdviseWillNeed
)

// Advise applies a to f's current mapping. It is a no-op when f is not mapped
// or does not live on the OS FS (Mem files, for instance). Files wrapped by
// NewFaulty are unwrapped.
func Advise(f File, a Advice) error {
	if x := onOS(f); x != nil {
		return x.advise(a)
	}
	return nil
}

// onOS is the OS FS file under f (unwrapping NewFaulty's), or nil.
func onOS(f File) *osFile {
	for {
		switch x := f.(type) {
		case *osFile:
			return x
		case interface{ Unwrap() File }:
			f = x.Unwrap()
		default:
			return nil
		}
	}
}

// Prefault touches every page of b for writing, so that later appends into a
// freshly created, zero-filled mapping run at page-cache speed instead of
// taking a page fault (and a block-mapping update) per page.
//
// It stores a zero into the first byte of each page whose first byte reads
// as zero, and leaves pages starting with a non-zero byte alone, so it never
// changes the file's content. Still, call it only on a freshly created file
// that no other goroutine is writing yet: a concurrent write of that byte
// could be lost between the load and the store. Reading alone would not do:
// it maps the page read-only and the first write faults again.
func Prefault(b []byte) {
	for i := 0; i < len(b); i += osPageSize {
		if b[i] == 0 {
			b[i] = 0
		}
	}
}

// Materialize makes the blocks under m written blocks of the file system:
// it populates the pages (as Populate) and writes them back (msync
// MS_SYNC), a step of populateStep at a time. m is a stretch of f's
// mapping (as Map returned it) that the caller took while it was mapped.
//
// Why: a preallocated (fallocate) file's blocks are unwritten extents on
// ext4 and xfs. The first writeback of each block converts its extent, a
// metadata change, so every fdatasync that covers freshly appended bytes
// also writes the extent blocks and the inode synchronously (ext4 without
// a journal) or commits the journal: 0.63-0.92 ms against 0.25-0.29 ms per
// sync of 26 KiB appends on this project's test machine (docs/
// BENCHMARKS.md, issue 17). Materialized ahead of the appends, the
// conversion is paid once per window, off the path an acknowledgement
// waits on.
//
// Like Populate it never changes a byte (a populated page keeps its content
// and writeback writes what the pages hold), so it is safe while another
// goroutine appends into the same pages; bytes appended meanwhile may reach
// the disk early, which promises nothing and breaks nothing. Neither reads
// f's state, nor touches m's bytes from Go: a file unmapped meanwhile (a
// broker stopping) makes the kernel calls fail, or act on whatever was
// mapped at those addresses since, which they cannot change either. It is a no-op for
// files not on the OS FS, and returns the first msync error.
func Materialize(f File, m []byte) error {
	if x := onOS(f); x != nil {
		return x.materialize(m)
	}
	return nil
}

// Populate makes the pages under m, a stretch of f's mapping taken while
// it was mapped, present and writable (madvise MADV_POPULATE_WRITE), so
// appends there run at page-cache speed instead of faulting per page.
// Unlike Prefault it never touches the bytes, so it is safe while another
// goroutine writes the same pages, and after f is unmapped (the kernel call
// fails). It is a no-op for files not on the OS FS, and on kernels without
// MADV_POPULATE_WRITE (before 5.14).
func Populate(f File, m []byte) {
	if x := onOS(f); x != nil {
		x.populate(m)
	}
}
