package cq

import (
	"errors"
	"fmt"
	"math"
	"path"
	"testing"

	"github.com/wharfmq/wharf/storage/vfs"
)

// fuzzImage lays data out as the files of a queue on a fresh Mem FS:
// data[0] picks the entries per file (1..8) and data[1] the first file's
// index (0..3); the rest fills consecutive files, the last one possibly
// short. At most 16 files.
func fuzzImage(data []byte) (*vfs.Mem, string, int) {
	mem := vfs.NewMem()
	const dir = "/cq/topic/0"
	per := 4
	first := int64(0)
	if len(data) > 0 {
		per = 1 + int(data[0]%8)
		data = data[1:]
	}
	if len(data) > 0 {
		first = int64(data[0] % 4)
		data = data[1:]
	}
	size := per * UnitSize
	if len(data) > 16*size {
		data = data[:16*size]
	}
	if len(data) == 0 {
		return mem, dir, per
	}
	if err := mem.MkdirAll(dir); err != nil {
		panic(err)
	}
	for i := 0; len(data) > 0; i++ {
		chunk := data[:min(size, len(data))]
		data = data[len(chunk):]
		name := path.Join(dir, fmt.Sprintf("%020d", (first+int64(i))*int64(size)))
		f, err := mem.Create(name, int64(len(chunk)))
		if err != nil {
			panic(err)
		}
		if _, err := f.WriteAt(chunk, 0); err != nil {
			panic(err)
		}
		if err := f.Sync(); err != nil {
			panic(err)
		}
		f.Close()
	}
	if err := mem.SyncDir(dir); err != nil {
		panic(err)
	}
	return mem, dir, per
}

// checkQueue reads the whole queue and checks its invariants.
func checkQueue(t *testing.T, q *Queue) []Entry {
	t.Helper()
	if q.MinOffset() > q.MaxOffset() || q.MinOffset() < 0 {
		t.Fatalf("offsets [%d, %d)", q.MinOffset(), q.MaxOffset())
	}
	var got []Entry
	for qo := q.MinOffset(); qo < q.MaxOffset(); {
		n := len(got)
		var err error
		got, err = q.Read(qo, 5, got)
		if err != nil {
			t.Fatalf("Read(%d): %v", qo, err)
		}
		if len(got) == n {
			t.Fatalf("Read(%d) made no progress", qo)
		}
		qo += int64(len(got) - n)
	}
	if int64(len(got)) != q.MaxOffset()-q.MinOffset() {
		t.Fatalf("read %d entries in [%d, %d)", len(got), q.MinOffset(), q.MaxOffset())
	}
	for i, e := range got {
		if !e.Valid() {
			t.Fatalf("invalid entry %v at %d", e, q.MinOffset()+int64(i))
		}
		if i > 0 && e.Offset < got[i-1].End() {
			t.Fatalf("out of order entry %v at %d", e, q.MinOffset()+int64(i))
		}
		if g, err := q.Get(q.MinOffset() + int64(i)); err != nil || g != e {
			t.Fatalf("Get(%d) = %v, %v; Read gave %v", q.MinOffset()+int64(i), g, err, e)
		}
	}
	if last, ok := q.LastEntry(); len(got) > 0 && (!ok || last != got[len(got)-1]) {
		t.Fatalf("LastEntry = %v, %v; last read %v", last, ok, got[len(got)-1])
	}
	if q.MinOffset() > 0 {
		if _, err := q.Read(q.MinOffset()-1, 1, nil); !errors.Is(err, ErrOffsetTooSmall) {
			t.Fatalf("Read below min: %v", err)
		}
	}
	return got
}

// FuzzOpen feeds arbitrary bytes to Open as queue files: Open must not fail
// on well-named files, never panic, and expose only valid, ordered entries;
// the queue must then accept appends, truncation and retention, and reopen to
// the same state.
func FuzzOpen(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{3, 0})
	f.Add(append([]byte{3, 1}, unitBytes(ent(0, 0))...))
	var img []byte
	for i := 0; i < 10; i++ {
		img = append(img, unitBytes(ent(7, i))...)
	}
	f.Add(append([]byte{3, 0}, img...))
	f.Add(append(append([]byte{3, 0}, img...), 0xFF, 0x01, 0x02))
	f.Add(append([]byte{1, 2}, append(unitBytes(Dummy), unitBytes(ent(0, 3))...)...))
	f.Fuzz(fuzzBody)
}

func fuzzBody(t *testing.T, data []byte) {
	{
		mem, dir, per := fuzzImage(data)
		q, err := Open(mem, dir, per)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		got := checkQueue(t, q)
		max0 := q.MaxOffset()

		// The queue goes on after what was recovered.
		next := int64(0)
		if last, ok := q.LastEntry(); ok {
			next = last.End()
		}
		if next > math.MaxInt64-100 {
			// No room after the recovered end of the log.
			q.Close()
			return
		}
		for i := 0; i < 3; i++ {
			e := Entry{Offset: next, Size: 10, TagsCode: int64(i)}
			if err := q.Append(max0+int64(i), e); err != nil {
				t.Fatalf("Append(%d): %v", max0+int64(i), err)
			}
			next = e.End()
		}
		if len(got) > 0 {
			if err := q.Append(q.MinOffset(), got[0]); err != nil {
				t.Fatalf("re-Append: %v", err)
			}
			mid := got[len(got)/2]
			if _, err := q.DeleteBefore(mid.Offset); err != nil {
				t.Fatalf("DeleteBefore: %v", err)
			}
		}
		checkQueue(t, q)
		if err := q.TruncateByPhy(next - 15); err != nil {
			t.Fatalf("TruncateByPhy: %v", err)
		}
		want := checkQueue(t, q)
		wantMin, wantMax := q.MinOffset(), q.MaxOffset()
		if wantMax != max0+2 {
			t.Fatalf("max %d after truncating the last append, want %d", wantMax, max0+2)
		}
		if err := q.Flush(); err != nil {
			t.Fatalf("Flush: %v", err)
		}
		if err := q.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}

		// Only durable state survives a crash, and it is all there.
		r, err := Open(mem.Crash(1, vfs.CrashOptions{}), dir, per)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer r.Close()
		if r.MaxOffset() != wantMax || r.MinOffset() > wantMin {
			t.Fatalf("reopen offsets [%d, %d), want [%d, %d)", r.MinOffset(), r.MaxOffset(), wantMin, wantMax)
		}
		if err := r.SetMinPhyOffset(0); err != nil {
			t.Fatal(err)
		}
		got2 := checkQueue(t, r)
		// Reopen may expose entries that retention only hid (MinOffset is
		// corrected by SetMinPhyOffset), never fewer.
		if len(got2) < len(want) {
			t.Fatalf("reopen read %d entries, want at least %d", len(got2), len(want))
		}
		for i := range want {
			if got2[len(got2)-len(want)+i] != want[i] {
				t.Fatalf("reopen entry %d differs", i)
			}
		}
	}
}
