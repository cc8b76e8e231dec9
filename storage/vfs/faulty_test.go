// Tests of the fault-injecting wrapper and its injectors, including the
// count-then-crash-at-every-op loop the store's tests use.

package vfs

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// smallWorkload runs a fixed sequence of ops and returns the first error.
func smallWorkload(fsys FS) error {
	if err := fsys.MkdirAll("/d"); err != nil {
		return err
	}
	f, err := fsys.Create("/d/a", 2*PageSize)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt([]byte("hello"), 0); err != nil {
		return err
	}
	if err := f.SyncRange(0, 5); err != nil {
		return err
	}
	if err := fsys.SyncDir("/d"); err != nil {
		return err
	}
	if _, err := f.WriteAt([]byte("world"), 5); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

// smallWorkloadOps is smallWorkload's op sequence.
var smallWorkloadOps = []OpKind{OpMkdirAll, OpCreate, OpWriteAt, OpSyncRange, OpSyncDir, OpWriteAt, OpSync, OpClose}

func TestFaultyCounter(t *testing.T) {
	var all Counter
	writes := Counter{Match: Kinds(OpWriteAt)}
	must(t, smallWorkload(NewFaulty(NewMem(), Any(&all, &writes))))
	if all.Count() != len(smallWorkloadOps) {
		t.Fatalf("counted %d ops, want %d", all.Count(), len(smallWorkloadOps))
	}
	if writes.Count() != 2 {
		t.Fatalf("counted %d writes", writes.Count())
	}
}

func TestFaultyOnIndex(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name     string
		p        Predicate
		k        int
		wantKind OpKind // the op that must fail
	}{
		{"all ops k=0", nil, 0, OpMkdirAll},
		{"all ops k=3", nil, 3, OpSyncRange},
		{"all ops k=7", nil, 7, OpClose},
		{"writes k=1", Kinds(OpWriteAt), 1, OpWriteAt},
		{"syncs k=1", Kinds(OpSync, OpSyncRange), 1, OpSync},
		{"path", PathIs("/d"), 1, OpSyncDir},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var seen []Op
			rec := InjectorFunc(func(op Op) error { seen = append(seen, op); return nil })
			err := smallWorkload(NewFaulty(NewMem(), Any(rec, OnIndex(tc.p, tc.k, boom))))
			if !errors.Is(err, boom) {
				t.Fatalf("workload: %v, want boom", err)
			}
			last := seen[len(seen)-1]
			if last.Kind != tc.wantKind {
				t.Fatalf("failed op %v, want kind %v", last, tc.wantKind)
			}
			matching := 0
			for _, op := range seen {
				if tc.p.match(op) {
					matching++
				}
			}
			if matching != tc.k+1 {
				t.Fatalf("failed at matching op #%d, want #%d", matching-1, tc.k)
			}
		})
	}
	// Past the last op nothing fails.
	must(t, smallWorkload(NewFaulty(NewMem(), OnIndex(nil, len(smallWorkloadOps), boom))))
}

func TestFaultyOnIndexFailsOnlyOnce(t *testing.T) {
	inj := OnIndex(nil, 1, nil)
	for i := range 5 {
		err := inj.MaybeError(Op{Kind: OpStat})
		if (err != nil) != (i == 1) {
			t.Fatalf("op %d: %v", i, err)
		}
		if err != nil && !errors.Is(err, ErrInjected) {
			t.Fatalf("nil error did not become ErrInjected: %v", err)
		}
	}
}

func TestFaultyAfterCountAndAlways(t *testing.T) {
	inj := AfterCount(Kinds(OpSync), 2, nil)
	for i := range 5 {
		if err := inj.MaybeError(Op{Kind: OpSync}); (err != nil) != (i >= 2) {
			t.Fatalf("sync %d: %v", i, err)
		}
		if err := inj.MaybeError(Op{Kind: OpWriteAt}); err != nil {
			t.Fatalf("non-matching op failed: %v", err)
		}
	}
	always := Always(Writes(), nil)
	if always.MaybeError(Op{Kind: OpReadAt}) != nil || always.MaybeError(Op{Kind: OpCreate}) == nil {
		t.Fatal("Always(Writes()) misclassified")
	}
}

func TestFaultyNoSpaceOnCreate(t *testing.T) {
	mem := NewMem()
	fsys := NewFaulty(mem, NoSpaceOnCreate())
	must(t, fsys.MkdirAll("/d"))
	if _, err := fsys.Create("/d/a", 10); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("create: %v", err)
	}
	if _, err := mem.Stat("/d/a"); !errors.Is(err, ErrNotExist) {
		t.Fatal("failed create reached the inner FS")
	}
}

func TestFaultyLatency(t *testing.T) {
	var mu sync.Mutex
	var slept time.Duration
	sleep := func(d time.Duration) { mu.Lock(); slept += d; mu.Unlock() }
	must(t, smallWorkload(NewFaulty(NewMem(), When(Kinds(OpSync, OpSyncRange), Latency(time.Millisecond, sleep)))))
	if slept != 2*time.Millisecond {
		t.Fatalf("slept %v", slept)
	}
}

func TestFaultyCloseReleasesInner(t *testing.T) {
	mem := NewMem()
	fsys := NewFaulty(mem, Always(Kinds(OpClose), nil))
	f, err := fsys.Create("/a", PageSize)
	must(t, err)
	_, err = f.Map()
	must(t, err)
	if err := f.Close(); !errors.Is(err, ErrInjected) {
		t.Fatalf("close: %v", err)
	}
	// The inner handle was closed and unmapped: the file can be truncated.
	g, err := mem.Open("/a")
	must(t, err)
	must(t, g.Truncate(1))
}

// TestFaultyCrashAtEveryOp is the loop the store's crash tests follow: count
// the ops of a workload, then for every k rerun it, snapshot a crash image
// exactly before op k, and fail every op from k on.
func TestFaultyCrashAtEveryOp(t *testing.T) {
	var c Counter
	must(t, smallWorkload(NewFaulty(NewMem(), &c)))
	for k := 0; k <= c.Count(); k++ {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			mem := NewMem()
			var snap *Mem
			inj := OnOp(func(n int, op Op) error {
				if n == k {
					snap = mem.Crash(int64(k), CrashOptions{UnsyncedKeepRatio: 0.5, TornLastPage: true})
				}
				if n >= k {
					return fmt.Errorf("crashed before %v: %w", op, ErrInjected)
				}
				return nil
			})
			err := smallWorkload(NewFaulty(mem, inj))
			if k == c.Count() {
				must(t, err)
				snap = mem.Crash(int64(k), CrashOptions{})
			} else if !errors.Is(err, ErrInjected) {
				t.Fatalf("workload: %v", err)
			}
			// What may survive: nothing before SyncDir (op 4) ran; "hello"
			// once it has; "helloworld" once Sync (op 6) has.
			got, ok := crashRead(t, snap, "/d/a")
			switch {
			case k <= 4:
				if ok {
					t.Fatalf("file survived before its SyncDir: %q", got[:10])
				}
			case k <= 6:
				if !ok || string(got[:5]) != "hello" {
					t.Fatalf("synced bytes lost: %v %q", ok, got)
				}
			default:
				if !ok || string(got[:10]) != "helloworld" {
					t.Fatalf("synced bytes lost: %v %q", ok, got)
				}
			}
		})
	}
}

func TestOpKindString(t *testing.T) {
	for k := OpKind(0); k < numOpKinds; k++ {
		if k.String() == "" || k.String() == fmt.Sprintf("OpKind(%d)", int(k)) {
			t.Fatalf("kind %d has no name", k)
		}
	}
	if s := (Op{Kind: OpRename, Path: "a", NewPath: "b"}).String(); s != "rename a b" {
		t.Fatal(s)
	}
}
