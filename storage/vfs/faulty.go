// Fault injection, modeled on pebble's vfs/errorfs.
//
// NewFaulty wraps an FS. Before running, every operation, on the FS or on
// one of its files, is described as an Op and passed to an Injector; a
// non-nil error from the injector is returned instead and the operation does
// not run (except Close, which still releases the inner file, as close(2)
// does when it reports an error). An error injected into Sync or SyncRange is
// an fsync error.
//
// Injectors are small and compose: OnIndex fails the k-th matching op,
// AfterCount fails every matching op from the k-th on (a crash point),
// Always fails every matching op, NoSpaceOnCreate fills the disk, Latency
// delays ops, Counter counts them, OnOp runs a function at every op (for
// instance, to take a Mem.Crash snapshot exactly at op k), and Any and When
// combine them. All are safe for concurrent use.

package vfs

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// OpKind names an operation.
type OpKind int

// The operations an Injector sees.
const (
	OpCreate OpKind = iota
	OpOpen
	OpRemove
	OpRemoveAll
	OpRename
	OpMkdirAll
	OpList
	OpStat
	OpSyncDir
	OpUsage
	OpReadAt
	OpWriteAt
	OpMap
	OpUnmap
	OpSyncRange
	OpSync
	OpTruncate
	OpClose
	numOpKinds
)

var opKindNames = [numOpKinds]string{
	"create", "open", "remove", "remove-all", "rename", "mkdir-all", "list",
	"stat", "sync-dir", "usage", "read-at", "write-at", "map", "unmap",
	"sync-range", "sync", "truncate", "close",
}

func (k OpKind) String() string {
	if k >= 0 && k < numOpKinds {
		return opKindNames[k]
	}
	return fmt.Sprintf("OpKind(%d)", int(k))
}

// IsWrite reports whether the op changes the state of the FS or of a file
// (what a crash could lose). Reads, Stat, List, Usage, Map, Unmap and Close
// are not writes.
func (k OpKind) IsWrite() bool {
	switch k {
	case OpCreate, OpRemove, OpRemoveAll, OpRename, OpMkdirAll, OpSyncDir,
		OpWriteAt, OpSyncRange, OpSync, OpTruncate:
		return true
	}
	return false
}

// Op describes one operation.
type Op struct {
	Kind OpKind
	// Path is the file or directory operated on (the old name of a rename).
	Path string
	// NewPath is the new name of a rename; empty otherwise.
	NewPath string
	// Off is the offset of ReadAt, WriteAt and SyncRange.
	Off int64
	// N is the length of ReadAt, WriteAt and SyncRange, the size of Create
	// and Truncate; 0 otherwise.
	N int64
}

func (o Op) String() string {
	switch o.Kind {
	case OpRename:
		return fmt.Sprintf("%s %s %s", o.Kind, o.Path, o.NewPath)
	case OpReadAt, OpWriteAt, OpSyncRange:
		return fmt.Sprintf("%s %s [%d,+%d)", o.Kind, o.Path, o.Off, o.N)
	case OpCreate, OpTruncate:
		return fmt.Sprintf("%s %s %d", o.Kind, o.Path, o.N)
	}
	return fmt.Sprintf("%s %s", o.Kind, o.Path)
}

// Injector decides, before an operation runs, whether it fails.
type Injector interface {
	// MaybeError returns the error op fails with, or nil to let it run.
	MaybeError(op Op) error
}

// InjectorFunc adapts a function to Injector.
type InjectorFunc func(op Op) error

// MaybeError calls f.
func (f InjectorFunc) MaybeError(op Op) error { return f(op) }

// Predicate selects ops. A nil Predicate matches every op.
type Predicate func(op Op) bool

func (p Predicate) match(op Op) bool { return p == nil || p(op) }

// Kinds matches ops of any of the given kinds.
func Kinds(kinds ...OpKind) Predicate {
	var set [numOpKinds]bool
	for _, k := range kinds {
		if k >= 0 && k < numOpKinds {
			set[k] = true
		}
	}
	return func(op Op) bool { return op.Kind >= 0 && op.Kind < numOpKinds && set[op.Kind] }
}

// Writes matches the ops that change state (OpKind.IsWrite).
func Writes() Predicate { return func(op Op) bool { return op.Kind.IsWrite() } }

// PathIs matches ops on exactly path (either name of a rename).
func PathIs(path string) Predicate {
	return func(op Op) bool { return op.Path == path || op.NewPath == path }
}

// ErrInjected is the error the convenience injectors use when given a nil
// error.
var ErrInjected = errors.New("vfs: injected error")

func orInjected(err error) error {
	if err == nil {
		return ErrInjected
	}
	return err
}

type indexInjector struct {
	match    Predicate
	k        int64
	err      error
	fromThen bool // fail every matching op from the k-th on
	n        atomic.Int64
}

func (in *indexInjector) MaybeError(op Op) error {
	if !in.match.match(op) {
		return nil
	}
	i := in.n.Add(1) - 1
	if i == in.k || (in.fromThen && i > in.k) {
		return fmt.Errorf("%w (op #%d: %s)", in.err, i, op)
	}
	return nil
}

// OnIndex fails the k-th (0-based) op matching p with err (ErrInjected if
// nil), counting only matching ops; every other op runs.
func OnIndex(p Predicate, k int, err error) Injector {
	return &indexInjector{match: p, k: int64(k), err: orInjected(err)}
}

// AfterCount lets the first k ops matching p run and fails every later one
// with err (ErrInjected if nil): the disk "dies" at op k, as after a crash.
func AfterCount(p Predicate, k int, err error) Injector {
	return &indexInjector{match: p, k: int64(k), err: orInjected(err), fromThen: true}
}

// Always fails every op matching p with err (ErrInjected if nil).
func Always(p Predicate, err error) Injector {
	err = orInjected(err)
	return InjectorFunc(func(op Op) error {
		if p.match(op) {
			return fmt.Errorf("%w (%s)", err, op)
		}
		return nil
	})
}

// NoSpaceOnCreate fails every Create with an error wrapping ErrNoSpace, as a
// full disk does.
func NoSpaceOnCreate() Injector {
	return InjectorFunc(func(op Op) error {
		if op.Kind == OpCreate {
			return fmt.Errorf("vfs: create %s: injected: %w", op.Path, ErrNoSpace)
		}
		return nil
	})
}

// Latency delays every op by d through sleep (time.Sleep if nil; the
// simulator passes a function that advances its virtual clock). It never
// fails an op; wrap it in When to delay only some.
func Latency(d time.Duration, sleep func(time.Duration)) Injector {
	if sleep == nil {
		sleep = time.Sleep
	}
	return InjectorFunc(func(Op) error {
		sleep(d)
		return nil
	})
}

// Counter counts the ops matching Match (every op if Match is nil) and never
// fails one. A test counts the ops of a workload with it, then reruns the
// workload failing or crashing at each k below Count(). The zero value is
// ready to use; do not copy it after use.
type Counter struct {
	Match Predicate
	n     atomic.Int64
}

// MaybeError counts op if it matches.
func (c *Counter) MaybeError(op Op) error {
	if c.Match.match(op) {
		c.n.Add(1)
	}
	return nil
}

// Count is the number of matching ops seen so far.
func (c *Counter) Count() int { return int(c.n.Load()) }

// OnOp calls fn with the 0-based index of every op (over all ops) and the op,
// before the op runs, and fails the op with fn's error if non-nil. Calls are
// not serialized: with concurrent ops, fn must be safe for concurrent use.
// A crash test takes mem.Crash(seed, opts) inside fn when n == k.
func OnOp(fn func(n int, op Op) error) Injector {
	var count atomic.Int64
	return InjectorFunc(func(op Op) error {
		return fn(int(count.Add(1)-1), op)
	})
}

// Any runs injectors in order and returns the first error (later ones do not
// see the op). Nil injectors are skipped.
func Any(injs ...Injector) Injector {
	return InjectorFunc(func(op Op) error {
		for _, in := range injs {
			if in == nil {
				continue
			}
			if err := in.MaybeError(op); err != nil {
				return err
			}
		}
		return nil
	})
}

// When passes only the ops matching p to inj.
func When(p Predicate, inj Injector) Injector {
	return InjectorFunc(func(op Op) error {
		if p.match(op) {
			return inj.MaybeError(op)
		}
		return nil
	})
}

// Faulty is the FS NewFaulty returns.
type Faulty struct {
	inner FS
	inj   Injector
}

// NewFaulty wraps inner so that every operation first asks inj (nil: no
// faults). The result is a *Faulty.
func NewFaulty(inner FS, inj Injector) FS {
	return &Faulty{inner: inner, inj: inj}
}

// Unwrap returns the wrapped FS.
func (f *Faulty) Unwrap() FS { return f.inner }

func (f *Faulty) check(op Op) error {
	if f.inj == nil {
		return nil
	}
	return f.inj.MaybeError(op)
}

func (f *Faulty) Create(name string, size int64) (File, error) {
	if err := f.check(Op{Kind: OpCreate, Path: name, N: size}); err != nil {
		return nil, err
	}
	inner, err := f.inner.Create(name, size)
	if err != nil {
		return nil, err
	}
	return &faultyFile{fs: f, inner: inner}, nil
}

func (f *Faulty) Open(name string) (File, error) {
	if err := f.check(Op{Kind: OpOpen, Path: name}); err != nil {
		return nil, err
	}
	inner, err := f.inner.Open(name)
	if err != nil {
		return nil, err
	}
	return &faultyFile{fs: f, inner: inner}, nil
}

func (f *Faulty) Remove(name string) error {
	if err := f.check(Op{Kind: OpRemove, Path: name}); err != nil {
		return err
	}
	return f.inner.Remove(name)
}

func (f *Faulty) RemoveAll(dir string) error {
	if err := f.check(Op{Kind: OpRemoveAll, Path: dir}); err != nil {
		return err
	}
	return f.inner.RemoveAll(dir)
}

func (f *Faulty) Rename(oldname, newname string) error {
	if err := f.check(Op{Kind: OpRename, Path: oldname, NewPath: newname}); err != nil {
		return err
	}
	return f.inner.Rename(oldname, newname)
}

func (f *Faulty) MkdirAll(dir string) error {
	if err := f.check(Op{Kind: OpMkdirAll, Path: dir}); err != nil {
		return err
	}
	return f.inner.MkdirAll(dir)
}

func (f *Faulty) List(dir string) ([]string, error) {
	if err := f.check(Op{Kind: OpList, Path: dir}); err != nil {
		return nil, err
	}
	return f.inner.List(dir)
}

func (f *Faulty) Stat(name string) (FileInfo, error) {
	if err := f.check(Op{Kind: OpStat, Path: name}); err != nil {
		return FileInfo{}, err
	}
	return f.inner.Stat(name)
}

func (f *Faulty) SyncDir(dir string) error {
	if err := f.check(Op{Kind: OpSyncDir, Path: dir}); err != nil {
		return err
	}
	return f.inner.SyncDir(dir)
}

func (f *Faulty) Usage(path string) (Usage, error) {
	if err := f.check(Op{Kind: OpUsage, Path: path}); err != nil {
		return Usage{}, err
	}
	return f.inner.Usage(path)
}

// faultyFile is a File of a Faulty FS.
type faultyFile struct {
	fs    *Faulty
	inner File
}

// Unwrap returns the wrapped file.
func (f *faultyFile) Unwrap() File { return f.inner }

func (f *faultyFile) Name() string { return f.inner.Name() }
func (f *faultyFile) Size() int64  { return f.inner.Size() }

func (f *faultyFile) op(kind OpKind, off, n int64) Op {
	return Op{Kind: kind, Path: f.inner.Name(), Off: off, N: n}
}

func (f *faultyFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(f.op(OpReadAt, off, int64(len(p)))); err != nil {
		return 0, err
	}
	return f.inner.ReadAt(p, off)
}

func (f *faultyFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(f.op(OpWriteAt, off, int64(len(p)))); err != nil {
		return 0, err
	}
	return f.inner.WriteAt(p, off)
}

func (f *faultyFile) Map() ([]byte, error) {
	if err := f.fs.check(f.op(OpMap, 0, 0)); err != nil {
		return nil, err
	}
	return f.inner.Map()
}

func (f *faultyFile) Unmap() error {
	if err := f.fs.check(f.op(OpUnmap, 0, 0)); err != nil {
		return err
	}
	return f.inner.Unmap()
}

func (f *faultyFile) SyncRange(off, n int64) error {
	if err := f.fs.check(f.op(OpSyncRange, off, n)); err != nil {
		return err
	}
	return f.inner.SyncRange(off, n)
}

func (f *faultyFile) Sync() error {
	if err := f.fs.check(f.op(OpSync, 0, 0)); err != nil {
		return err
	}
	return f.inner.Sync()
}

func (f *faultyFile) Truncate(size int64) error {
	if err := f.fs.check(f.op(OpTruncate, 0, size)); err != nil {
		return err
	}
	return f.inner.Truncate(size)
}

// Close releases the inner file even when the injector fails the op, and
// then reports the injected error.
func (f *faultyFile) Close() error {
	injected := f.fs.check(f.op(OpClose, 0, 0))
	err := f.inner.Close()
	if injected != nil {
		return injected
	}
	return err
}
