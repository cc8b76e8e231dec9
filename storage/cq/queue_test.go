package cq

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"path"
	"testing"

	"github.com/wharfmq/wharf/storage/vfs"
)

// fsCase is a file system to run a test on, with a queue directory in it.
type fsCase struct {
	name string
	new  func(t testing.TB) (vfs.FS, string)
}

var fsCases = []fsCase{
	{"os", func(t testing.TB) (vfs.FS, string) {
		return vfs.NewOS(), path.Join(t.TempDir(), "consumequeue", "topic", "0")
	}},
	{"mem", func(t testing.TB) (vfs.FS, string) {
		return vfs.NewMem(), "/root/consumequeue/topic/0"
	}},
}

// ent is the i-th entry of a test queue: 100-byte records from phy base.
func ent(base int64, i int) Entry {
	return Entry{Offset: base + int64(i)*100, Size: 100, TagsCode: int64(i)*7 - 3}
}

func mustOpen(t testing.TB, fsys vfs.FS, dir string, per int) *Queue {
	t.Helper()
	q, err := Open(fsys, dir, per)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return q
}

// appendN appends n entries ent(base, i) at queue offsets from..from+n-1.
func appendN(t testing.TB, q *Queue, from int64, n int, base int64) {
	t.Helper()
	for i := 0; i < n; i++ {
		qo := from + int64(i)
		if err := q.Append(qo, ent(base, int(qo))); err != nil {
			t.Fatalf("Append(%d): %v", qo, err)
		}
	}
}

// readAll reads [MinOffset, MaxOffset) in chunks of chunk entries.
func readAll(t testing.TB, q *Queue, chunk int) []Entry {
	t.Helper()
	var out []Entry
	for qo := q.MinOffset(); qo < q.MaxOffset(); {
		n := len(out)
		var err error
		out, err = q.Read(qo, chunk, out)
		if err != nil {
			t.Fatalf("Read(%d): %v", qo, err)
		}
		if len(out) == n {
			t.Fatalf("Read(%d) made no progress (max %d)", qo, q.MaxOffset())
		}
		qo += int64(len(out) - n)
	}
	return out
}

// checkRange checks that [from, to) reads back as ent(base, qo).
func checkRange(t testing.TB, q *Queue, from, to int64, base int64) {
	t.Helper()
	if q.MinOffset() != from || q.MaxOffset() != to {
		t.Fatalf("offsets [%d, %d), want [%d, %d)", q.MinOffset(), q.MaxOffset(), from, to)
	}
	got := readAll(t, q, 3)
	if int64(len(got)) != to-from {
		t.Fatalf("read %d entries, want %d", len(got), to-from)
	}
	for i, e := range got {
		if want := ent(base, int(from)+i); e != want {
			t.Fatalf("entry %d = %v, want %v", from+int64(i), e, want)
		}
		if g, err := q.Get(from + int64(i)); err != nil || g != e {
			t.Fatalf("Get(%d) = %v, %v; want %v", from+int64(i), g, err, e)
		}
	}
	last, ok := q.LastEntry()
	if to > from && (!ok || last != ent(base, int(to-1))) {
		t.Fatalf("LastEntry = %v, %v; want %v", last, ok, ent(base, int(to-1)))
	}
}

func segNames(t testing.TB, fsys vfs.FS, dir string) []string {
	t.Helper()
	names, err := fsys.List(dir)
	if errors.Is(err, vfs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func names(starts ...int64) []string {
	var out []string
	for _, s := range starts {
		out = append(out, fmt.Sprintf("%020d", s))
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func forEachFS(t *testing.T, f func(t *testing.T, fsys vfs.FS, dir string)) {
	for _, c := range fsCases {
		t.Run(c.name, func(t *testing.T) {
			fsys, dir := c.new(t)
			f(t, fsys, dir)
		})
	}
}

func TestEntryEncoding(t *testing.T) {
	// Built by hand, byte by byte: offset 0x0102030405060708, size 0x0A0B0C0D,
	// tags -2 (two's complement).
	golden := []byte{
		0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
		0x0A, 0x0B, 0x0C, 0x0D,
		0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE,
	}
	e := Entry{Offset: 0x0102030405060708, Size: 0x0A0B0C0D, TagsCode: -2}
	b := make([]byte, UnitSize)
	PutEntry(b, e)
	if !bytes.Equal(b, golden) {
		t.Fatalf("PutEntry = % x, want % x", b, golden)
	}
	if got := EntryAt(golden); got != e {
		t.Fatalf("EntryAt = %v, want %v", got, e)
	}
	d := make([]byte, UnitSize)
	PutEntry(d, Dummy)
	if want := []byte{0, 0, 0, 0, 0, 0, 0, 0, 0x7F, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0}; !bytes.Equal(d, want) {
		t.Fatalf("Dummy = % x, want % x", d, want)
	}
	for _, c := range []struct {
		e     Entry
		valid bool
	}{
		{Entry{0, 1, 0}, true},
		{Entry{0, 0, 0}, false},
		{Entry{5, -1, 0}, false},
		{Entry{-1, 10, 0}, false},
		{Dummy, false},
		{Entry{math.MaxInt64 - 10, 10, 0}, true},
		{Entry{math.MaxInt64 - 10, 11, 0}, false},
	} {
		if c.e.Valid() != c.valid {
			t.Errorf("%v.Valid() = %v", c.e, !c.valid)
		}
	}
}

// TestGoldenFile checks the bytes Append writes against a hand-built file
// image: two entries then zeros, and the file name.
func TestGoldenFile(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		q := mustOpen(t, fsys, dir, 4)
		if err := q.Append(4, Entry{Offset: 0, Size: 0x2A, TagsCode: 0x0102}); err != nil {
			t.Fatal(err)
		}
		if err := q.Append(5, Entry{Offset: 0x2A, Size: 0x100, TagsCode: -1}); err != nil {
			t.Fatal(err)
		}
		if err := q.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		want := make([]byte, 80)
		copy(want[0:], []byte{
			0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x2A, 0, 0, 0, 0, 0, 0, 0x01, 0x02,
			0, 0, 0, 0, 0, 0, 0, 0x2A, 0, 0, 0x01, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
		})
		if got := segNames(t, fsys, dir); !equalStrings(got, []string{"00000000000000000080"}) {
			t.Fatalf("files %v", got)
		}
		f, err := fsys.Open(path.Join(dir, "00000000000000000080"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		got := make([]byte, f.Size())
		if _, err := f.ReadAt(got, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("file bytes\n% x\nwant\n% x", got, want)
		}
	})
}

func TestAppendReadRoll(t *testing.T) {
	for _, tc := range []struct {
		per, n int
	}{
		{4, 0}, {4, 1}, {4, 3}, {4, 4}, {4, 5}, {4, 17}, {1, 5}, {7, 50}, {300, 1000},
	} {
		t.Run(fmt.Sprintf("per%d_n%d", tc.per, tc.n), func(t *testing.T) {
			forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
				q := mustOpen(t, fsys, dir, tc.per)
				appendN(t, q, 0, tc.n, 0)
				checkRange(t, q, 0, int64(tc.n), 0)
				wantFiles := (tc.n + tc.per - 1) / tc.per
				if got := len(segNames(t, fsys, dir)); got != wantFiles {
					t.Fatalf("%d files, want %d", got, wantFiles)
				}
				// Reads past the end are empty, reads stop at MaxOffset.
				if got, err := q.Read(int64(tc.n), 10, nil); err != nil || len(got) != 0 {
					t.Fatalf("Read(max) = %v, %v", got, err)
				}
				if got, err := q.Read(0, 1<<30, nil); err != nil || len(got) != tc.n {
					t.Fatalf("Read(0, huge) = %d entries, %v", len(got), err)
				}
				if _, err := q.Get(int64(tc.n)); !errors.Is(err, ErrOffsetTooLarge) {
					t.Fatalf("Get(max) err = %v", err)
				}
				if err := q.Flush(); err != nil {
					t.Fatal(err)
				}
				if q.Dirty() {
					t.Fatal("dirty after Flush")
				}
				if err := q.Close(); err != nil {
					t.Fatal(err)
				}
				q = mustOpen(t, fsys, dir, tc.per)
				defer q.Close()
				checkRange(t, q, 0, int64(tc.n), 0)
				if q.DiscardedTail() != 0 {
					t.Fatalf("DiscardedTail = %d after a clean close", q.DiscardedTail())
				}
				appendN(t, q, int64(tc.n), 3, 0)
				checkRange(t, q, 0, int64(tc.n)+3, 0)
			})
		})
	}
}

func TestAppendRejects(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		q := mustOpen(t, fsys, dir, 4)
		defer q.Close()
		for _, e := range []Entry{{0, 0, 0}, {-1, 5, 0}, Dummy} {
			if err := q.Append(0, e); err == nil {
				t.Fatalf("Append(%v) accepted", e)
			}
		}
		if err := q.Append(-1, ent(0, 0)); err == nil {
			t.Fatal("negative queue offset accepted")
		}
		appendN(t, q, 0, 3, 1000)
		// Out of order: starts before the previous entry's end.
		if err := q.Append(3, Entry{Offset: 1000 + 250, Size: 10}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("out of order: %v", err)
		}
		// A hole after real entries.
		if err := q.Append(5, ent(1000, 5)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("hole: %v", err)
		}
		if q.MaxOffset() != 3 {
			t.Fatalf("max %d", q.MaxOffset())
		}
	})
}

func TestIdempotentReappend(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		q := mustOpen(t, fsys, dir, 4)
		appendN(t, q, 0, 10, 0)
		if err := q.Flush(); err != nil {
			t.Fatal(err)
		}
		// Re-dispatch of everything after a crash: no-ops.
		appendN(t, q, 0, 10, 0)
		if q.Dirty() {
			t.Fatal("re-append dirtied the queue")
		}
		checkRange(t, q, 0, 10, 0)
		// A different entry at a written offset is a mismatch.
		e := ent(0, 4)
		e.TagsCode++
		if err := q.Append(4, e); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("mismatch: %v", err)
		}
		// After a reopen too.
		q.Close()
		q = mustOpen(t, fsys, dir, 4)
		defer q.Close()
		appendN(t, q, 0, 12, 0)
		checkRange(t, q, 0, 12, 0)
	})
}

func TestGapFill(t *testing.T) {
	for _, tc := range []struct {
		start     int64
		wantFiles []int64 // file starts in bytes
		dummies   int64   // filler entries written
	}{
		{5, []int64{80}, 1},
		{7, []int64{80}, 3},
		{8, []int64{160}, 0},
		{1, []int64{0}, 1},
		{0, []int64{0}, 0},
	} {
		t.Run(fmt.Sprint(tc.start), func(t *testing.T) {
			forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
				q := mustOpen(t, fsys, dir, 4)
				appendN(t, q, tc.start, 6, 5000)
				checkRange(t, q, tc.start, tc.start+6, 5000)
				if got := segNames(t, fsys, dir); !equalStrings(got[:1], names(tc.wantFiles...)) {
					t.Fatalf("files %v, want first %v", got, names(tc.wantFiles...))
				}
				if tc.start > 0 {
					if _, err := q.Read(tc.start-1, 5, nil); !errors.Is(err, ErrOffsetTooSmall) {
						t.Fatalf("Read below min: %v", err)
					}
					if _, err := q.Get(tc.start - 1); !errors.Is(err, ErrOffsetTooSmall) {
						t.Fatalf("Get below min: %v", err)
					}
				}
				if tc.dummies > 0 {
					// A real entry over a filler is a mismatch.
					if err := q.Append(tc.start-1, ent(0, 0)); !errors.Is(err, ErrCorrupt) {
						t.Fatalf("append over filler: %v", err)
					}
				}
				if err := q.Flush(); err != nil {
					t.Fatal(err)
				}
				q.Close()
				q = mustOpen(t, fsys, dir, 4)
				defer q.Close()
				checkRange(t, q, tc.start, tc.start+6, 5000)
			})
		})
	}
}

// TestGapFillFillersOnly covers a queue whose only content is fillers (the
// first real entry was lost): it may restart further on.
func TestGapFillFillersOnly(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		q := mustOpen(t, fsys, dir, 4)
		appendN(t, q, 6, 1, 0)
		if err := q.TruncateByPhy(0); err != nil {
			t.Fatal(err)
		}
		// Fillers at 4, 5 stay; the queue is empty at 6.
		if q.MinOffset() != 6 || q.MaxOffset() != 6 {
			t.Fatalf("offsets [%d, %d)", q.MinOffset(), q.MaxOffset())
		}
		if _, ok := q.LastEntry(); ok {
			t.Fatal("LastEntry after truncating everything")
		}
		q.Flush()
		q.Close()
		q = mustOpen(t, fsys, dir, 4)
		if q.MinOffset() != 6 || q.MaxOffset() != 6 {
			t.Fatalf("reopen offsets [%d, %d)", q.MinOffset(), q.MaxOffset())
		}
		// Restart within the same file, then in a later one.
		appendN(t, q, 7, 1, 0)
		checkRange(t, q, 7, 8, 0)
		q.TruncateTo(7)
		appendN(t, q, 13, 2, 0)
		checkRange(t, q, 13, 15, 0)
		if got := segNames(t, fsys, dir); !equalStrings(got, names(240)) {
			t.Fatalf("files %v", got)
		}
		q.Flush()
		q.Close()
		q = mustOpen(t, fsys, dir, 4)
		defer q.Close()
		checkRange(t, q, 13, 15, 0)
	})
}

// writeAt overwrites bytes of a queue file at byte position pos of the queue.
func writeAt(t testing.TB, fsys vfs.FS, dir string, per int, pos int64, b []byte) {
	t.Helper()
	size := int64(per) * UnitSize
	start := pos - pos%size
	f, err := fsys.Open(path.Join(dir, fmt.Sprintf("%020d", start)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, pos-start); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func unitBytes(e Entry) []byte {
	b := make([]byte, UnitSize)
	PutEntry(b, e)
	return b
}

func TestReopenTail(t *testing.T) {
	const per = 4
	garbage := bytes.Repeat([]byte{0xA5}, 37)
	for _, tc := range []struct {
		name    string
		n       int    // entries written and flushed
		at      int64  // queue offset of the damage
		bytes   []byte // written at byte at*20
		wantMax int64
		wantCut bool // DiscardedTail > 0
	}{
		{"clean", 6, 6, nil, 6, false},
		{"zeros", 6, 6, make([]byte, 40), 6, false},
		{"garbage", 6, 6, garbage, 6, true},
		{"garbage at file start", 8, 8, garbage, 8, true},
		{"torn entry", 6, 6, unitBytes(ent(0, 6))[:10], 6, true},
		{"size zero", 6, 6, unitBytes(Entry{Offset: 600, Size: 0}), 6, true},
		{"size negative", 6, 6, unitBytes(Entry{Offset: 600, Size: -5}), 6, true},
		{"offset negative", 6, 6, unitBytes(Entry{Offset: -600, Size: 5}), 6, true},
		{"not increasing", 6, 6, unitBytes(Entry{Offset: 599, Size: 5}), 6, true},
		{"repeat of previous", 6, 6, unitBytes(ent(0, 5)), 6, true},
		{"dummy after real", 6, 6, unitBytes(Dummy), 6, true},
		{"valid extra entry", 6, 6, unitBytes(ent(0, 6)), 7, false},
		{"overwrite middle", 10, 5, unitBytes(Entry{Offset: 0, Size: 1}), 5, true},
		{"zero middle of full file", 12, 5, make([]byte, 20), 5, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
				q := mustOpen(t, fsys, dir, per)
				appendN(t, q, 0, tc.n, 0)
				// Force an extra, empty file after a full one.
				if tc.n%per == 0 {
					if _, err := q.writable(int64(tc.n) * UnitSize); err != nil {
						t.Fatal(err)
					}
				}
				if err := q.Flush(); err != nil {
					t.Fatal(err)
				}
				q.Close()
				if tc.bytes != nil {
					writeAt(t, fsys, dir, per, tc.at*UnitSize, tc.bytes)
				}
				q = mustOpen(t, fsys, dir, per)
				checkRange(t, q, 0, tc.wantMax, 0)
				if tc.wantCut != (q.DiscardedTail() > 0) {
					t.Fatalf("DiscardedTail = %d", q.DiscardedTail())
				}
				if tc.wantCut && !q.Dirty() {
					t.Fatal("cut tail not dirty")
				}
				// The queue continues right after the recovered end.
				appendN(t, q, tc.wantMax, 5, 0)
				if err := q.Flush(); err != nil {
					t.Fatal(err)
				}
				q.Close()
				q = mustOpen(t, fsys, dir, per)
				defer q.Close()
				checkRange(t, q, 0, tc.wantMax+5, 0)
			})
		})
	}
}

// TestReopenLaterFiles checks that files after the recovered end are removed.
func TestReopenLaterFiles(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		q := mustOpen(t, fsys, dir, 4)
		appendN(t, q, 0, 14, 0)
		q.Flush()
		q.Close()
		// Lose entry 5: files 160 and 240 are after the end.
		writeAt(t, fsys, dir, 4, 5*UnitSize, make([]byte, 20))
		q = mustOpen(t, fsys, dir, 4)
		defer q.Close()
		checkRange(t, q, 0, 5, 0)
		if got := segNames(t, fsys, dir); !equalStrings(got, names(0, 80)) {
			t.Fatalf("files %v", got)
		}
		if q.DiscardedTail() != 14*UnitSize-5*UnitSize {
			t.Fatalf("DiscardedTail = %d", q.DiscardedTail())
		}
	})
}

// TestReopenScansBack checks that a damaged boundary before the last three
// files makes Open scan further back.
func TestReopenScansBack(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		q := mustOpen(t, fsys, dir, 4)
		appendN(t, q, 0, 24, 0) // 6 full files
		q.Flush()
		q.Close()
		writeAt(t, fsys, dir, 4, 11*UnitSize, make([]byte, 20)) // last unit of file 2
		q = mustOpen(t, fsys, dir, 4)
		defer q.Close()
		checkRange(t, q, 0, 11, 0)
	})
}

func TestTruncateByPhy(t *testing.T) {
	for _, tc := range []struct {
		name      string
		n         int
		phy       int64
		wantMax   int64
		wantFiles []int64
	}{
		{"nothing", 10, 10_000, 10, []int64{0, 80, 160}},
		{"last entry", 10, 900, 9, []int64{0, 80, 160}},
		{"mid entry phy", 10, 850, 9, []int64{0, 80, 160}},
		{"file boundary", 10, 800, 8, []int64{0, 80}},
		{"across files", 10, 350, 4, []int64{0}},
		{"inside first file", 10, 200, 2, []int64{0}},
		{"all", 10, 0, 0, nil},
		{"all negative", 10, -5, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
				q := mustOpen(t, fsys, dir, 4)
				appendN(t, q, 0, tc.n, 0)
				q.Flush()
				if err := q.TruncateByPhy(tc.phy); err != nil {
					t.Fatal(err)
				}
				checkRange(t, q, 0, tc.wantMax, 0)
				if _, ok := q.LastEntry(); ok != (tc.wantMax > 0) {
					t.Fatalf("LastEntry ok = %v", ok)
				}
				if got := segNames(t, fsys, dir); !equalStrings(got, names(tc.wantFiles...)) {
					t.Fatalf("files %v, want %v", got, names(tc.wantFiles...))
				}
				if err := q.Flush(); err != nil {
					t.Fatal(err)
				}
				q.Close()
				q = mustOpen(t, fsys, dir, 4)
				defer q.Close()
				checkRange(t, q, 0, tc.wantMax, 0)
				appendN(t, q, tc.wantMax, 6, 0)
				checkRange(t, q, 0, tc.wantMax+6, 0)
			})
		})
	}
}

// TestTruncateKeepsMax checks that truncating every remaining entry of a
// queue whose head was deleted keeps MaxOffset across a reopen.
func TestTruncateKeepsMax(t *testing.T) {
	for _, cut := range []int64{8, 9, 12, 13} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
				q := mustOpen(t, fsys, dir, 4)
				appendN(t, q, 0, 14, 0)
				if _, err := q.DeleteBefore(ent(0, int(cut)).Offset); err != nil {
					t.Fatal(err)
				}
				if q.MinOffset() != cut {
					t.Fatalf("min %d", q.MinOffset())
				}
				if err := q.TruncateTo(cut); err != nil {
					t.Fatal(err)
				}
				if q.MinOffset() != cut || q.MaxOffset() != cut {
					t.Fatalf("offsets [%d, %d)", q.MinOffset(), q.MaxOffset())
				}
				q.Flush()
				q.Close()
				q = mustOpen(t, fsys, dir, 4)
				defer q.Close()
				if err := q.SetMinPhyOffset(ent(0, int(cut)).Offset); err != nil {
					t.Fatal(err)
				}
				if q.MinOffset() != cut || q.MaxOffset() != cut {
					t.Fatalf("reopen offsets [%d, %d)", q.MinOffset(), q.MaxOffset())
				}
				appendN(t, q, cut, 3, 0)
				checkRange(t, q, cut, cut+3, 0)
			})
		})
	}
}

func TestTruncateBelowFirstFile(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		q := mustOpen(t, fsys, dir, 4)
		appendN(t, q, 0, 14, 0)
		if _, err := q.DeleteBefore(ent(0, 9).Offset); err != nil {
			t.Fatal(err)
		}
		if err := q.TruncateTo(5); err != nil { // below the first file (8)
			t.Fatal(err)
		}
		if q.MinOffset() != 5 || q.MaxOffset() != 5 {
			t.Fatalf("offsets [%d, %d)", q.MinOffset(), q.MaxOffset())
		}
		q.Flush()
		q.Close()
		q = mustOpen(t, fsys, dir, 4)
		defer q.Close()
		if q.MinOffset() != 5 || q.MaxOffset() != 5 {
			t.Fatalf("reopen offsets [%d, %d)", q.MinOffset(), q.MaxOffset())
		}
		appendN(t, q, 5, 4, 0)
		checkRange(t, q, 5, 9, 0)
	})
}

func TestDeleteBefore(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		q := mustOpen(t, fsys, dir, 4)
		appendN(t, q, 0, 18, 0) // files 0,80,160,240,320 (2 entries)
		steps := []struct {
			minPhy      int64
			wantRemoved int
			wantMin     int64
			wantFiles   []int64
		}{
			{0, 0, 0, []int64{0, 80, 160, 240, 320}},
			{250, 0, 3, []int64{0, 80, 160, 240, 320}}, // entries 0..2 gone, file 0 keeps entry 3
			{300, 0, 3, []int64{0, 80, 160, 240, 320}}, // entry 3 still present
			{301, 1, 4, []int64{80, 160, 240, 320}},    // last entry of file 0 (300) < 301
			{100, 0, 4, []int64{80, 160, 240, 320}},    // never moves back
			{1250, 2, 13, []int64{240, 320}},           // inside file 240
			{100_000, 1, 18, []int64{320}},             // never the last file
			{200_000, 0, 18, []int64{320}},             // nothing more
		}
		for i, s := range steps {
			n, err := q.DeleteBefore(s.minPhy)
			if err != nil {
				t.Fatal(err)
			}
			if n != s.wantRemoved || q.MinOffset() != s.wantMin {
				t.Fatalf("step %d: removed %d min %d, want %d %d", i, n, q.MinOffset(), s.wantRemoved, s.wantMin)
			}
			if got := segNames(t, fsys, dir); !equalStrings(got, names(s.wantFiles...)) {
				t.Fatalf("step %d: files %v, want %v", i, got, names(s.wantFiles...))
			}
			if q.MaxOffset() != 18 {
				t.Fatalf("max %d", q.MaxOffset())
			}
			if s.wantMin > 0 {
				if _, err := q.Read(s.wantMin-1, 1, nil); !errors.Is(err, ErrOffsetTooSmall) {
					t.Fatalf("step %d: Read below min: %v", i, err)
				}
			}
			if got := readAll(t, q, 5); len(got) != int(18-s.wantMin) {
				t.Fatalf("step %d: read %d", i, len(got))
			}
		}
		// Re-dispatch of a deleted entry reports it as too small.
		if err := q.Append(2, ent(0, 2)); !errors.Is(err, ErrOffsetTooSmall) {
			t.Fatalf("append into deleted file: %v", err)
		}
		appendN(t, q, 18, 4, 0)
		q.Flush()
		q.Close()
		q = mustOpen(t, fsys, dir, 4)
		defer q.Close()
		if q.MinOffset() != 16 || q.MaxOffset() != 22 {
			t.Fatalf("reopen offsets [%d, %d)", q.MinOffset(), q.MaxOffset())
		}
		q.SetMinPhyOffset(200_000)
		checkRange(t, q, 22, 22, 0)
	})
}

func TestFlushRanges(t *testing.T) {
	mem := vfs.NewMem()
	dir := "/cq/t/1"
	q := mustOpen(t, mem, dir, 1000) // 20,000-byte files: several pages
	if q.Dirty() {
		t.Fatal("new queue dirty")
	}
	appendN(t, q, 0, 300, 0) // 6000 bytes
	if !q.Dirty() {
		t.Fatal("not dirty after Append")
	}
	if err := q.Flush(); err != nil {
		t.Fatal(err)
	}
	appendN(t, q, 300, 10, 0) // unflushed, in page 1
	// A crash keeping nothing unsynced keeps exactly the flushed entries.
	c := mem.Crash(1, vfs.CrashOptions{})
	q2 := mustOpen(t, c, dir, 1000)
	checkRange(t, q2, 0, 300, 0)
	q2.Close()
	if err := q.Flush(); err != nil {
		t.Fatal(err)
	}
	q2 = mustOpen(t, mem.Crash(2, vfs.CrashOptions{}), dir, 1000)
	checkRange(t, q2, 0, 310, 0)
	q2.Close()
	// Truncation is durable after Flush.
	if err := q.TruncateTo(100); err != nil {
		t.Fatal(err)
	}
	if !q.Dirty() {
		t.Fatal("not dirty after truncation")
	}
	q.Flush()
	q2 = mustOpen(t, mem.Crash(3, vfs.CrashOptions{}), dir, 1000)
	checkRange(t, q2, 0, 100, 0)
	q2.Close()
	q.Close()
}

// failSyncFS fails SyncRange once armed.
type failSyncFS struct {
	vfs.FS
	fail *bool
}

type failSyncFile struct {
	vfs.File
	fail *bool
}

func (f failSyncFS) Create(name string, size int64) (vfs.File, error) {
	x, err := f.FS.Create(name, size)
	if err != nil {
		return nil, err
	}
	return failSyncFile{x, f.fail}, nil
}

func (f failSyncFS) Open(name string) (vfs.File, error) {
	x, err := f.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return failSyncFile{x, f.fail}, nil
}

func (f failSyncFile) SyncRange(off, n int64) error {
	if *f.fail {
		return errors.New("injected EIO")
	}
	return f.File.SyncRange(off, n)
}

func TestFlushSticky(t *testing.T) {
	fail := false
	fsys := failSyncFS{vfs.NewMem(), &fail}
	q := mustOpen(t, fsys, "/q", 4)
	defer q.Close()
	appendN(t, q, 0, 3, 0)
	fail = true
	if err := q.Flush(); err == nil {
		t.Fatal("Flush succeeded")
	}
	fail = false
	if err := q.Flush(); err == nil {
		t.Fatal("Flush error not sticky")
	}
	if !q.Dirty() {
		t.Fatal("clean after a failed Flush")
	}
}

func TestOpenErrors(t *testing.T) {
	mk := func(t *testing.T, mem *vfs.Mem, dir string, start, size int64) {
		t.Helper()
		mem.MkdirAll(dir)
		f, err := mem.Create(path.Join(dir, fmt.Sprintf("%020d", start)), size)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	t.Run("misaligned", func(t *testing.T) {
		mem := vfs.NewMem()
		mk(t, mem, "/q", 40, 80)
		if _, err := Open(mem, "/q", 4); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("missing middle", func(t *testing.T) {
		mem := vfs.NewMem()
		mk(t, mem, "/q", 0, 80)
		mk(t, mem, "/q", 160, 80)
		if _, err := Open(mem, "/q", 4); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("too long", func(t *testing.T) {
		mem := vfs.NewMem()
		mk(t, mem, "/q", 0, 100)
		if _, err := Open(mem, "/q", 4); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("bad size", func(t *testing.T) {
		if _, err := Open(vfs.NewMem(), "/q", -1); err == nil {
			t.Fatal("accepted")
		}
		if _, err := Open(vfs.NewMem(), "/q", MaxEntriesPerFile+1); err == nil {
			t.Fatal("accepted")
		}
	})
	t.Run("ignored names", func(t *testing.T) {
		mem := vfs.NewMem()
		mem.MkdirAll("/q")
		f, _ := mem.Create("/q/notes.txt", 7)
		f.Close()
		q := mustOpen(t, mem, "/q", 4)
		defer q.Close()
		if q.MaxOffset() != 0 {
			t.Fatalf("max %d", q.MaxOffset())
		}
	})
	t.Run("missing dir", func(t *testing.T) {
		mem := vfs.NewMem()
		q := mustOpen(t, mem, "/a/b/c", 4)
		if q.MaxOffset() != 0 || q.MinOffset() != 0 {
			t.Fatal("not empty")
		}
		if _, ok := q.LastEntry(); ok {
			t.Fatal("LastEntry on empty")
		}
		if got := segNames(t, mem, "/a/b/c"); got != nil {
			t.Fatalf("dir created by Open: %v", got)
		}
		appendN(t, q, 0, 1, 0)
		if got := segNames(t, mem, "/a/b/c"); !equalStrings(got, names(0)) {
			t.Fatalf("files %v", got)
		}
		q.Close()
		if err := q.Append(1, ent(0, 1)); !errors.Is(err, ErrClosed) {
			t.Fatalf("append after close: %v", err)
		}
	})
}

// TestShortFileRepair covers a file whose size did not survive a crash.
func TestShortFileRepair(t *testing.T) {
	mem := vfs.NewMem()
	mem.MkdirAll("/q")
	f, err := mem.Create("/q/00000000000000000000", 50) // 2.5 units of 4
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(append(unitBytes(ent(0, 0)), unitBytes(ent(0, 1))...), 0)
	f.Close()
	q := mustOpen(t, mem, "/q", 4)
	checkRange(t, q, 0, 2, 0)
	appendN(t, q, 2, 5, 0)
	q.Flush()
	q.Close()
	if fi, err := mem.Stat("/q/00000000000000000000"); err != nil || fi.Size != 80 {
		t.Fatalf("stat %+v %v", fi, err)
	}
	q = mustOpen(t, mem, "/q", 4)
	defer q.Close()
	checkRange(t, q, 0, 7, 0)
}

// TestCrashLoop appends, flushes, truncates and deletes at random on the
// in-memory FS, crashes it with unsynced pages kept at random (and torn), and
// checks that the reopened queue holds every flushed entry and only written
// entries, in order.
func TestCrashLoop(t *testing.T) {
	seeds := 200
	if testing.Short() {
		seeds = 40
	}
	for seed := int64(1); seed <= int64(seeds); seed++ {
		rng := rand.New(rand.NewSource(seed))
		mem := vfs.NewMem()
		const dir = "/store/consumequeue/t/3"
		per := 1 + rng.Intn(300)
		q := mustOpen(t, mem, dir, per)
		start := int64(0)
		if rng.Intn(3) == 0 {
			start = rng.Int63n(int64(per) * 3)
		}
		next := start // next queue offset
		flushed := start
		truncated := false
		for step := 0; step < 40; step++ {
			switch r := rng.Intn(10); {
			case r < 6:
				n := rng.Intn(2*per + 1)
				appendN(t, q, next, n, 0)
				next += int64(n)
			case r < 8:
				if err := q.Flush(); err != nil {
					t.Fatal(err)
				}
				flushed = next
				truncated = false
			case r < 9 && next > start:
				cut := start + rng.Int63n(next-start)
				if err := q.TruncateByPhy(ent(0, int(cut)).Offset); err != nil {
					t.Fatal(err)
				}
				next = q.MaxOffset()
				truncated = true
			default:
				if _, err := q.DeleteBefore(ent(0, int(start+rng.Int63n(next-start+1))).Offset); err != nil {
					t.Fatal(err)
				}
			}
		}
		c := mem.Crash(seed, vfs.CrashOptions{UnsyncedKeepRatio: rng.Float64(), TornLastPage: rng.Intn(2) == 0})
		q.Close()
		r, err := Open(c, dir, per)
		if err != nil {
			t.Fatalf("seed %d: Open after crash: %v", seed, err)
		}
		max := r.MaxOffset()
		if !truncated && max < min(flushed, next) {
			t.Fatalf("seed %d: max %d < flushed %d", seed, max, flushed)
		}
		got := readAll(t, r, 1+rng.Intn(50))
		for i, e := range got {
			qo := r.MinOffset() + int64(i)
			want := ent(0, int(qo))
			if e == want {
				continue
			}
			// A write torn inside TagsCode leaves a valid-looking entry
			// (the format has no checksum); it can only be caught against
			// the CommitLog record. Cut there, as the store would.
			if e.Offset == want.Offset && e.Size == want.Size {
				if err := r.TruncateTo(qo); err != nil {
					t.Fatal(err)
				}
				break
			}
			t.Fatalf("seed %d: entry %d = %v, want %v", seed, qo, e, want)
		}
		max = r.MaxOffset()
		// Recovery truncates to what the log kept, then re-dispatches.
		keep := min(max, next)
		if err := r.TruncateByPhy(ent(0, int(keep)).Offset); err != nil {
			t.Fatal(err)
		}
		from := r.MaxOffset()
		if _, ok := r.LastEntry(); !ok && from < start {
			from = start
		}
		appendN(t, r, from, 5, 0)
		if err := r.Flush(); err != nil {
			t.Fatal(err)
		}
		r.Close()
		r = mustOpen(t, c.Crash(seed, vfs.CrashOptions{}), dir, per)
		if r.MaxOffset() != from+5 {
			t.Fatalf("seed %d: max %d after re-dispatch, want %d", seed, r.MaxOffset(), from+5)
		}
		readAll(t, r, 7)
		r.Close()
	}
}

func TestScan(t *testing.T) {
	var b []byte
	b = append(b, unitBytes(Dummy)...)
	b = append(b, unitBytes(Dummy)...)
	b = append(b, unitBytes(ent(0, 0))...)
	b = append(b, unitBytes(ent(0, 1))...)
	b = append(b, unitBytes(Dummy)...)
	n, last, ok := Scan(b)
	if n != 4 || !ok || last != ent(0, 1) {
		t.Fatalf("Scan = %d %v %v", n, last, ok)
	}
	if n, _, ok := Scan(b[:40]); n != 2 || ok {
		t.Fatalf("fillers only: %d %v", n, ok)
	}
	if n, _, _ := Scan(b[40:79]); n != 1 {
		t.Fatalf("partial unit: %d", n)
	}
}

// TestFlushJob: the work of a FlushJob makes durable exactly what was
// written before the job was taken, even when it runs after more appends;
// a reported failure is sticky.
func TestFlushJob(t *testing.T) {
	mem := vfs.NewMem()
	q := mustOpen(t, mem, "/q", 4)
	appendN(t, q, 0, 6, 0) // two files
	job, err := q.FlushJob()
	if err != nil || job == nil {
		t.Fatalf("FlushJob: work %v, err %v", job != nil, err)
	}
	if q.Dirty() {
		t.Fatal("dirty after taking the job")
	}
	appendN(t, q, 6, 3, 0) // goes on while the job is pending
	if !q.Dirty() {
		t.Fatal("appends after the job are not dirty")
	}
	if err := job(); err != nil {
		t.Fatal(err)
	}
	// A crash that keeps only durable bytes keeps the first 6 entries.
	img := mem.Crash(1, vfs.CrashOptions{})
	q2 := mustOpen(t, img, "/q", 4)
	if got := q2.MaxOffset(); got < 6 {
		t.Fatalf("after the job and a crash %d entries survive, want at least 6", got)
	}
	q2.Close()
	if job, err := q.FlushJob(); err != nil || job == nil {
		t.Fatalf("second FlushJob: work %v, err %v", job != nil, err)
	} else {
		q.FlushFailed(errors.New("injected EIO"))
	}
	if job, err := q.FlushJob(); err == nil || job != nil {
		t.Fatalf("FlushJob after a reported failure: work %v, err %v, want the sticky error", job != nil, err)
	}
	if err := q.Flush(); err == nil {
		t.Fatal("Flush after a reported failure succeeded")
	}
	q.Close()
}

// vanishingParentFS fails the first MkdirAll with ErrNotExist, as
// os.MkdirAll does when another queue's owner removes the topic's empty
// directory between MkdirAll's look at it and its mkdir of the queue's.
type vanishingParentFS struct {
	vfs.FS
	failed *bool
}

func (f vanishingParentFS) MkdirAll(dir string) error {
	if !*f.failed {
		*f.failed = true
		return fmt.Errorf("vfs: mkdir %s: %w", dir, vfs.ErrNotExist)
	}
	return f.FS.MkdirAll(dir)
}

// TestCreateDirAgainWhenItsParentVanished: the queue's first file is made
// after its directory is made again.
func TestCreateDirAgainWhenItsParentVanished(t *testing.T) {
	failed := false
	fsys := vanishingParentFS{FS: vfs.NewMem(), failed: &failed}
	q := mustOpen(t, fsys, "/cq/topic/0", 4)
	appendN(t, q, 0, 5, 0)
	checkRange(t, q, 0, 5, 0)
	if !failed {
		t.Fatal("the queue never made its directory")
	}
}
