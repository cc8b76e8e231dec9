package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"path"
	"slices"
	"testing"

	"github.com/wharfmq/wharf/storage/vfs"
)

// fsKinds are the file systems every behavioural test runs on.
var fsKinds = []struct {
	name string
	new  func(t testing.TB) (vfs.FS, string) // the FS and an index directory
}{
	{"OS", func(t testing.TB) (vfs.FS, string) { return vfs.NewOS(), path.Join(t.TempDir(), "index") }},
	{"Mem", func(t testing.TB) (vfs.FS, string) { return vfs.NewMem(), "/store/index" }},
}

func forEachFS(t *testing.T, fn func(t *testing.T, fsys vfs.FS, dir string)) {
	for _, k := range fsKinds {
		t.Run(k.name, func(t *testing.T) {
			fsys, dir := k.new(t)
			fn(t, fsys, dir)
		})
	}
}

func mustOpen(t testing.TB, fsys vfs.FS, dir string, opt Options) *Index {
	t.Helper()
	x, err := Open(fsys, dir, opt)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return x
}

func mustPut(t testing.TB, x *Index, key string, phy, ts int64) {
	t.Helper()
	if err := x.Put(key, phy, ts); err != nil {
		t.Fatalf("Put(%q, %d, %d): %v", key, phy, ts, err)
	}
}

func mustQuery(t testing.TB, x *Index, key string, begin, end int64, max int) []int64 {
	t.Helper()
	got, err := x.Query(key, begin, end, max)
	if err != nil {
		t.Fatalf("Query(%q): %v", key, err)
	}
	return got
}

func readFile(t testing.TB, fsys vfs.FS, p string) []byte {
	t.Helper()
	f, err := fsys.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, f.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t testing.TB, fsys vfs.FS, p string, b []byte) {
	t.Helper()
	if err := fsys.MkdirAll(path.Dir(p)); err != nil {
		t.Fatal(err)
	}
	f, err := fsys.Create(p, int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 {
		if _, err := f.WriteAt(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

const t0 = int64(1_700_000_000_123) // 2023-11-14T22:13:20.123Z

var tiny = Options{SlotNum: 4, IndexNum: 8}

// TestGoldenBytes builds the expected file field by field: two keys that
// share slot 2 with different hashes, so the second entry chains to the first.
func TestGoldenBytes(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		// keyHash("T#a") = 81906, keyHash("T#e") = 81910; both % 4 == 2.
		if keyHash("T#a") != 81906 || keyHash("T#e") != 81910 {
			t.Fatalf("hashes %d %d", keyHash("T#a"), keyHash("T#e"))
		}
		x := mustOpen(t, fsys, dir, tiny)
		mustPut(t, x, "T#a", 100, t0)
		mustPut(t, x, "T#e", 200, t0+2500) // 2.5 s later: timeDiff 2
		if err := x.Flush(); err != nil {
			t.Fatal(err)
		}
		if got := x.Files(); !slices.Equal(got, []string{"20231114221320123"}) {
			t.Fatalf("files %v", got)
		}
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}

		want := make([]byte, 40+4*4+8*20) // 216
		be := binary.BigEndian
		be.PutUint64(want[0:], uint64(t0))      // beginTimestamp
		be.PutUint64(want[8:], uint64(t0+2500)) // endTimestamp
		be.PutUint64(want[16:], 100)            // beginPhyOffset
		be.PutUint64(want[24:], 200)            // endPhyOffset
		be.PutUint32(want[32:], 1)              // hashSlotCount: only slot 2
		be.PutUint32(want[36:], 3)              // indexCount: entries 1 and 2, next is 3
		be.PutUint32(want[40+2*4:], 2)          // slot 2 -> entry 2 (newest)
		e1 := 40 + 16 + 1*20                    // entry 1
		be.PutUint32(want[e1:], 81906)          // keyHash
		be.PutUint64(want[e1+4:], 100)          // phyOffset
		be.PutUint32(want[e1+12:], 0)           // timeDiff
		be.PutUint32(want[e1+16:], 0)           // prevIndex: end of chain
		e2 := 40 + 16 + 2*20                    // entry 2
		be.PutUint32(want[e2:], 81910)
		be.PutUint64(want[e2+4:], 200)
		be.PutUint32(want[e2+12:], 2)
		be.PutUint32(want[e2+16:], 1) // prevIndex -> entry 1

		got := readFile(t, fsys, path.Join(dir, "20231114221320123"))
		if !slices.Equal(got, want) {
			t.Fatalf("file bytes\n got %x\nwant %x", got, want)
		}

		x = mustOpen(t, fsys, dir, tiny)
		defer x.Close()
		if got := mustQuery(t, x, "T#a", 0, t0+10_000, 10); !slices.Equal(got, []int64{100}) {
			t.Fatalf("T#a: %v", got)
		}
		if got := mustQuery(t, x, "T#e", 0, t0+10_000, 10); !slices.Equal(got, []int64{200}) {
			t.Fatalf("T#e: %v", got)
		}
	})
}

func TestDefaultGeometry(t *testing.T) {
	o, err := Options{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.fileSize() != 420_000_040 {
		t.Fatalf("default file size %d", o.fileSize())
	}
	for _, bad := range []Options{{SlotNum: -1}, {IndexNum: 1}, {IndexNum: -5}, {SlotNum: 1 << 40}} {
		if _, err := Open(vfs.NewMem(), "/i", bad); err == nil {
			t.Errorf("Open with %+v: no error", bad)
		}
	}
}

func TestCollisions(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		x := mustOpen(t, fsys, dir, Options{SlotNum: 1, IndexNum: 64}) // one slot: everything collides
		defer x.Close()
		for i := range 20 {
			mustPut(t, x, fmt.Sprintf("T#k%d", i%5), int64(i)*100, t0+int64(i)*1000)
		}
		// Same hash, different keys: both come back, the caller re-checks keys.
		mustPut(t, x, "Aa", 2000, t0+20_000)
		mustPut(t, x, "BB", 2100, t0+21_000)
		for k := range 5 {
			got := mustQuery(t, x, fmt.Sprintf("T#k%d", k), 0, t0+100_000, 100)
			want := []int64{int64(15+k) * 100, int64(10+k) * 100, int64(5+k) * 100, int64(k) * 100}
			if !slices.Equal(got, want) {
				t.Errorf("k%d: got %v, want %v", k, got, want)
			}
		}
		if got := mustQuery(t, x, "Aa", 0, t0+100_000, 100); !slices.Equal(got, []int64{2100, 2000}) {
			t.Errorf("Aa: %v", got)
		}
		if got := mustQuery(t, x, "nope", 0, t0+100_000, 100); len(got) != 0 {
			t.Errorf("nope: %v", got)
		}
	})
}

// TestPutHash: a key put by the hash of its parts is found by its full
// key, is idempotent at the newest offset as Put is, and a hash no key can
// have is refused.
func TestPutHash(t *testing.T) {
	x := mustOpen(t, vfs.NewMem(), "/store/index", Options{SlotNum: 7, IndexNum: 64})
	defer x.Close()
	for _, phy := range []int64{100, 200, 200} {
		if err := x.PutHash(KeyHash("T", []byte("k1")), phy, t0+phy); err != nil {
			t.Fatal(err)
		}
	}
	if got := mustQuery(t, x, KeyOf("T", "k1"), 0, t0+1000, 10); !slices.Equal(got, []int64{200, 100}) {
		t.Fatalf("query: %v, want [200 100]", got)
	}
	if err := x.PutHash(-1, 300, t0+300); err == nil {
		t.Fatal("a negative hash was put")
	}
	if err := x.PutHash(KeyHash("T", nil), -1, t0); err == nil {
		t.Fatal("a negative offset was put")
	}
}

func TestTimeRangeAndMax(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		x := mustOpen(t, fsys, dir, Options{SlotNum: 7, IndexNum: 64})
		defer x.Close()
		// One message every 1.5 s: stored at t0, t0+1500, ..., t0+13500.
		for i := range 10 {
			mustPut(t, x, "T#k", int64(i)*10, t0+int64(i)*1500)
		}
		all := []int64{90, 80, 70, 60, 50, 40, 30, 20, 10, 0}
		if got := mustQuery(t, x, "T#k", t0, t0+13500, 100); !slices.Equal(got, all) {
			t.Fatalf("all: %v", got)
		}
		if got := mustQuery(t, x, "T#k", t0, t0+13500, 3); !slices.Equal(got, all[:3]) {
			t.Fatalf("max 3: %v", got)
		}
		for _, m := range []int{0, -1} {
			if got := mustQuery(t, x, "T#k", t0, t0+13500, m); len(got) != 0 {
				t.Fatalf("max %d: %v", m, got)
			}
		}
		if got := mustQuery(t, x, "T#k", t0+5000, t0, 10); len(got) != 0 {
			t.Fatalf("begin > end: %v", got)
		}
		if got := mustQuery(t, x, "T#k", t0+100_000, t0+200_000, 10); len(got) != 0 {
			t.Fatalf("after the file: %v", got)
		}
		if got := mustQuery(t, x, "T#k", 0, t0-1, 10); len(got) != 0 {
			t.Fatalf("before the file: %v", got)
		}
		// Every message inside a range is found; messages 1 s or more
		// outside it never are (one-second resolution).
		for lo := t0 - 2000; lo < t0+15000; lo += 250 {
			for hi := lo; hi < lo+6000; hi += 750 {
				got := mustQuery(t, x, "T#k", lo, hi, 100)
				for i := range 10 {
					ts, phy := t0+int64(i)*1500, int64(i)*10
					in := slices.Contains(got, phy)
					if ts >= lo && ts <= hi && !in {
						t.Fatalf("[%d, %d]: missed phy %d at %d: %v", lo-t0, hi-t0, phy, ts-t0, got)
					}
					if (ts < lo-999 || ts > hi+999) && in {
						t.Fatalf("[%d, %d]: phy %d at %d is out of range: %v", lo-t0, hi-t0, phy, ts-t0, got)
					}
				}
			}
		}
	})
}

func TestRollOverAndReopen(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		opt := Options{SlotNum: 3, IndexNum: 4} // 3 entries per file
		x := mustOpen(t, fsys, dir, opt)
		for i := range 10 {
			// The store time stands still: names still increase by 1 ms.
			mustPut(t, x, fmt.Sprintf("T#k%d", i%2), int64(i)*100, t0)
		}
		files := x.Files()
		want := []string{"20231114221320123", "20231114221320124", "20231114221320125", "20231114221320126"}
		if !slices.Equal(files, want) {
			t.Fatalf("files %v, want %v", files, want)
		}
		if x.MaxPhyOffset() != 900 {
			t.Fatalf("MaxPhyOffset %d", x.MaxPhyOffset())
		}
		check := func(x *Index) {
			t.Helper()
			if got := mustQuery(t, x, "T#k0", t0, t0, 100); !slices.Equal(got, []int64{800, 600, 400, 200, 0}) {
				t.Fatalf("k0: %v", got)
			}
			if got := mustQuery(t, x, "T#k1", t0, t0, 100); !slices.Equal(got, []int64{900, 700, 500, 300, 100}) {
				t.Fatalf("k1: %v", got)
			}
			if got := mustQuery(t, x, "T#k1", t0, t0, 2); !slices.Equal(got, []int64{900, 700}) {
				t.Fatalf("k1 max 2: %v", got)
			}
		}
		check(x)
		if err := x.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
		if err := x.Put("T#k", 1000, t0); !errors.Is(err, ErrClosed) {
			t.Fatalf("Put after Close: %v", err)
		}
		if err := x.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}

		x = mustOpen(t, fsys, dir, opt)
		defer x.Close()
		if !slices.Equal(x.Files(), want) || x.MaxPhyOffset() != 900 {
			t.Fatalf("reopened: files %v, max %d", x.Files(), x.MaxPhyOffset())
		}
		check(x)
		// The newest file has room for two more entries, then a new file.
		mustPut(t, x, "T#k0", 1000, t0+5000)
		mustPut(t, x, "T#k1", 1100, t0+5000)
		if len(x.Files()) != 4 {
			t.Fatalf("files %v", x.Files())
		}
		mustPut(t, x, "T#k0", 1200, t0+6000)
		if got := x.Files(); len(got) != 5 || got[4] != formatName(t0+6000) {
			t.Fatalf("files %v", got)
		}
		if got := mustQuery(t, x, "T#k0", t0, t0+6000, 3); !slices.Equal(got, []int64{1200, 1000, 800}) {
			t.Fatalf("k0: %v", got)
		}
	})
}

func TestIdempotentRePut(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		opt := Options{SlotNum: 5, IndexNum: 5} // 4 entries per file
		x := mustOpen(t, fsys, dir, opt)
		defer x.Close()
		// Messages with several keys each; message 2's keys straddle a roll.
		msgs := []struct {
			phy  int64
			keys []string
		}{
			{0, []string{"T#a", "T#b"}},
			{100, []string{"T#c"}},
			{200, []string{"T#a", "T#d", "T#e"}},
			{300, []string{"T#b", "T#b"}}, // a key listed twice is indexed once
		}
		putAll := func() {
			for _, m := range msgs {
				for _, k := range m.keys {
					mustPut(t, x, k, m.phy, t0+m.phy)
				}
			}
		}
		putAll()
		if got := x.Files(); len(got) != 2 {
			t.Fatalf("files %v", got)
		}
		before := map[string][]int64{}
		for _, k := range []string{"T#a", "T#b", "T#c", "T#d", "T#e"} {
			before[k] = mustQuery(t, x, k, 0, t0+1000, 100)
		}
		if !slices.Equal(before["T#a"], []int64{200, 0}) || !slices.Equal(before["T#b"], []int64{300, 0}) {
			t.Fatalf("before %v", before)
		}
		// A rebuild replays everything, and the last message again.
		putAll()
		for _, k := range msgs[2].keys {
			mustPut(t, x, k, 200, t0+200)
		}
		putAll()
		if got := x.Files(); len(got) != 2 {
			t.Fatalf("files after re-put %v", got)
		}
		for k, want := range before {
			if got := mustQuery(t, x, k, 0, t0+1000, 100); !slices.Equal(got, want) {
				t.Errorf("%s after re-put: %v, want %v", k, got, want)
			}
		}
		// Re-putting the message at MaxPhyOffset with its keys: nothing new.
		if n := x.files[1].hdr.indexCount; n != 4 { // T#d, T#e at 200 and T#b at 300, next is 4
			t.Fatalf("newest file indexCount %d", n)
		}
		if err := x.Put("T#x", -1, t0); err == nil {
			t.Fatal("negative phy accepted")
		}
	})
}

// buildFiles puts 4 files of 3 entries each: file i holds phy 1000*i + {0,
// 100, 200} (keys T#k0..T#k2), stored at t0 + phy.
func buildFiles(t *testing.T, fsys vfs.FS, dir string) (*Index, Options) {
	opt := Options{SlotNum: 2, IndexNum: 4}
	x := mustOpen(t, fsys, dir, opt)
	for i := range 4 {
		for j := range 3 {
			phy := int64(1000*i + 100*j)
			mustPut(t, x, fmt.Sprintf("T#k%d", j), phy, t0+phy)
		}
	}
	if len(x.Files()) != 4 {
		t.Fatalf("files %v", x.Files())
	}
	return x, opt
}

func TestTruncateAfter(t *testing.T) {
	tests := []struct {
		cut         int64
		files       int
		rebuildFrom int64
	}{
		{5000, 4, -1},   // beyond everything
		{3201, 4, -1},   // just after the last entry
		{3200, 3, 3000}, // at the last entry: its file is rebuilt
		{3100, 3, 3000},
		{3000, 3, -1}, // at a file's begin: whole files only
		{2999, 3, -1},
		{2201, 3, -1},
		{2200, 2, 2000},
		{2150, 2, 2000},
		{1, 0, 0},
		{0, 0, -1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.cut), func(t *testing.T) {
			forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
				x, opt := buildFiles(t, fsys, dir)
				names := x.Files()
				from, err := x.TruncateAfter(tt.cut)
				if err != nil {
					t.Fatal(err)
				}
				if from != tt.rebuildFrom || len(x.Files()) != tt.files || !slices.Equal(x.Files(), names[:tt.files]) {
					t.Fatalf("rebuildFrom %d, files %v; want %d, %d files", from, x.Files(), tt.rebuildFrom, tt.files)
				}
				// Re-put what the CommitLog still holds from rebuildFrom.
				if from >= 0 {
					for phy := from; phy < tt.cut; phy += 100 {
						if phy%1000 <= 200 {
							mustPut(t, x, fmt.Sprintf("T#k%d", phy%1000/100), phy, t0+phy)
						}
					}
				}
				check := func(x *Index) {
					t.Helper()
					for j := range 3 {
						var want []int64
						for i := 3; i >= 0; i-- {
							if phy := int64(1000*i + 100*j); phy < tt.cut {
								want = append(want, phy)
							}
						}
						if got := mustQuery(t, x, fmt.Sprintf("T#k%d", j), 0, t0+10_000, 100); !slices.Equal(got, want) {
							t.Fatalf("k%d: %v, want %v", j, got, want)
						}
					}
				}
				check(x)
				x.Close()
				x = mustOpen(t, fsys, dir, opt)
				defer x.Close()
				check(x)
			})
		})
	}
}

// TestTruncateStraddle cuts at a message whose keys straddle a roll.
func TestTruncateStraddle(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		x := mustOpen(t, fsys, dir, Options{SlotNum: 2, IndexNum: 3}) // 2 entries per file
		defer x.Close()
		mustPut(t, x, "T#a", 0, t0)
		mustPut(t, x, "T#a", 100, t0) // file 1: [0, 100]
		mustPut(t, x, "T#b", 100, t0) // file 2: [100, 100]
		from, err := x.TruncateAfter(100)
		if err != nil {
			t.Fatal(err)
		}
		if from != 0 || len(x.Files()) != 0 {
			t.Fatalf("rebuildFrom %d, files %v", from, x.Files())
		}
		mustPut(t, x, "T#a", 0, t0)
		if got := mustQuery(t, x, "T#a", 0, t0, 10); !slices.Equal(got, []int64{0}) {
			t.Fatalf("a: %v", got)
		}
	})
}

func TestDeleteBefore(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		x, opt := buildFiles(t, fsys, dir)
		names := x.Files()
		n, err := x.DeleteBefore(200) // file 0 ends at 200: kept
		if err != nil || n != 0 {
			t.Fatalf("DeleteBefore(200) = %d, %v", n, err)
		}
		n, err = x.DeleteBefore(2100) // files 0 and 1 end below
		if err != nil || n != 2 || !slices.Equal(x.Files(), names[2:]) {
			t.Fatalf("DeleteBefore(2100) = %d, %v, files %v", n, err, x.Files())
		}
		n, err = x.DeleteBefore(1 << 60) // never the newest
		if err != nil || n != 1 || !slices.Equal(x.Files(), names[3:]) {
			t.Fatalf("DeleteBefore(max) = %d, %v, files %v", n, err, x.Files())
		}
		if got := mustQuery(t, x, "T#k1", 0, t0+10_000, 10); !slices.Equal(got, []int64{3100}) {
			t.Fatalf("k1: %v", got)
		}
		if x.MaxPhyOffset() != 3200 {
			t.Fatalf("MaxPhyOffset %d", x.MaxPhyOffset())
		}
		x.Close()
		x = mustOpen(t, fsys, dir, opt)
		defer x.Close()
		if !slices.Equal(x.Files(), names[3:]) {
			t.Fatalf("reopened files %v", x.Files())
		}
	})
}

// validTinyFile returns a valid tiny file (two entries) for tests to damage.
func validTinyFile(t *testing.T) []byte { return validTinyFileTB(t) }

func TestOpenCorrupt(t *testing.T) {
	put32 := func(off int, v int32) func([]byte) []byte {
		return func(b []byte) []byte { binary.BigEndian.PutUint32(b[off:], uint32(v)); return b }
	}
	put64 := func(off int, v int64) func([]byte) []byte {
		return func(b []byte) []byte { binary.BigEndian.PutUint64(b[off:], uint64(v)); return b }
	}
	tests := []struct {
		name   string
		damage func([]byte) []byte
	}{
		{"short", func(b []byte) []byte { return b[:len(b)-1] }},
		{"long", func(b []byte) []byte { return append(b, 0) }},
		{"empty", func(b []byte) []byte { return nil }},
		{"header only", func(b []byte) []byte { return b[:40] }},
		{"indexCount > indexNum", put32(36, 9)},
		{"indexCount huge", put32(36, 1<<30)},
		{"indexCount negative", put32(36, -1)},
		{"hashSlotCount > slotNum", put32(32, 5)},
		{"hashSlotCount > entries", func(b []byte) []byte { return put32(32, 3)(b) }},
		{"hashSlotCount negative", put32(32, -2)},
		{"phy out of order", put64(16, 300)},
		{"negative phy", func(b []byte) []byte { return put64(24, -1)(put64(16, -5)(b)) }},
		{"time out of order", put64(8, t0-1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
				writeFile(t, fsys, path.Join(dir, "20231114221320123"), tt.damage(validTinyFile(t)))
				x, err := Open(fsys, dir, tiny)
				if !errors.Is(err, ErrCorrupt) {
					if x != nil {
						x.Close()
					}
					t.Fatalf("Open: %v, want ErrCorrupt", err)
				}
			})
		})
	}

	// Not corrupt: a file created but never written, a foreign name.
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		writeFile(t, fsys, path.Join(dir, "20231114221320123"), make([]byte, tiny.fileSize()))
		writeFile(t, fsys, path.Join(dir, "README"), []byte("not an index file"))
		writeFile(t, fsys, path.Join(dir, "2023111422132012x"), []byte("not an index file"))
		x := mustOpen(t, fsys, dir, tiny)
		defer x.Close()
		if !slices.Equal(x.Files(), []string{"20231114221320123"}) || x.MaxPhyOffset() != 0 {
			t.Fatalf("files %v max %d", x.Files(), x.MaxPhyOffset())
		}
		// The empty file is reused by the first Put.
		mustPut(t, x, "T#a", 100, t0+9000)
		if len(x.Files()) != 1 || x.MaxPhyOffset() != 100 {
			t.Fatalf("files %v max %d", x.Files(), x.MaxPhyOffset())
		}
		if got := mustQuery(t, x, "T#a", t0+9000, t0+9000, 10); !slices.Equal(got, []int64{100}) {
			t.Fatalf("a: %v", got)
		}
	})
}

// TestGarbageChains hand-crafts files with wild slots and prevIndex values:
// queries terminate and stay in bounds.
func TestGarbageChains(t *testing.T) {
	be := binary.BigEndian
	entry := func(b []byte, n int, hash int32, phy int64, diff, prev int32) {
		o := 40 + 4*4 + n*20
		be.PutUint32(b[o:], uint32(hash))
		be.PutUint64(b[o+4:], uint64(phy))
		be.PutUint32(b[o+12:], uint32(diff))
		be.PutUint32(b[o+16:], uint32(prev))
	}
	h := keyHash("T#a")
	slot := 40 + int(h%4)*4
	tests := []struct {
		name  string
		build func(b []byte)
		want  []int64
	}{
		{"self loop", func(b []byte) { entry(b, 3, h, 3, 0, 3); be.PutUint32(b[slot:], 3) }, []int64{3}},
		{"two-cycle", func(b []byte) {
			entry(b, 3, h, 3, 0, 2)
			entry(b, 2, h, 2, 0, 3)
			be.PutUint32(b[slot:], 3)
		}, []int64{3, 2}},
		{"prev beyond indexCount", func(b []byte) { entry(b, 3, h, 3, 0, 7); be.PutUint32(b[slot:], 3) }, []int64{3}},
		{"prev negative", func(b []byte) { entry(b, 3, h, 3, 0, -9); be.PutUint32(b[slot:], 3) }, []int64{3}},
		{"slot beyond indexCount", func(b []byte) { entry(b, 3, h, 3, 0, 0); be.PutUint32(b[slot:], 6) }, nil},
		{"slot huge", func(b []byte) { be.PutUint32(b[slot:], 1<<31-1) }, nil},
		{"slot negative", func(b []byte) { be.PutUint32(b[slot:], 1<<31) }, nil},
		{"negative timeDiff skipped", func(b []byte) {
			entry(b, 3, h, 3, -1, 2)
			entry(b, 2, h, 2, 0, 0)
			be.PutUint32(b[slot:], 3)
		}, []int64{2}},
		{"huge timeDiff", func(b []byte) { entry(b, 3, h, 3, 1<<31-1, 0); be.PutUint32(b[slot:], 3) }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := make([]byte, tiny.fileSize())
			hd := header{beginTs: t0, endTs: t0 + 5000, beginPhy: 1, endPhy: 5, hashSlotCount: 1, indexCount: 5}
			hd.encode(b)
			tt.build(b)
			fsys := vfs.NewMem()
			writeFile(t, fsys, "/i/20231114221320123", b)
			x := mustOpen(t, fsys, "/i", tiny)
			defer x.Close()
			if got := mustQuery(t, x, "T#a", t0, t0+5000, 100); !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			// Putting into the damaged file keeps working.
			mustPut(t, x, "T#a", 10, t0+5000)
			if got := mustQuery(t, x, "T#a", t0, t0+5000, 1); !slices.Equal(got, []int64{10}) {
				t.Fatalf("after put: %v", got)
			}
		})
	}
}

func TestFaults(t *testing.T) {
	t.Run("flush failure is sticky", func(t *testing.T) {
		fsys := vfs.NewFaulty(vfs.NewMem(), vfs.OnIndex(vfs.Kinds(vfs.OpSyncRange), 0, nil))
		x := mustOpen(t, fsys, "/i", tiny)
		defer x.Close()
		mustPut(t, x, "T#a", 0, t0)
		err := x.Flush()
		if !errors.Is(err, vfs.ErrInjected) {
			t.Fatalf("Flush: %v", err)
		}
		if err2 := x.Flush(); !errors.Is(err2, vfs.ErrInjected) {
			t.Fatalf("second Flush: %v", err2)
		}
	})
	t.Run("no space", func(t *testing.T) {
		fsys := vfs.NewFaulty(vfs.NewMem(), vfs.NoSpaceOnCreate())
		x := mustOpen(t, fsys, "/i", tiny)
		defer x.Close()
		if err := x.Put("T#a", 0, t0); !errors.Is(err, vfs.ErrNoSpace) {
			t.Fatalf("Put: %v", err)
		}
		if len(x.Files()) != 0 || x.MaxPhyOffset() != 0 {
			t.Fatalf("files %v", x.Files())
		}
	})
	t.Run("sync dir fails at creation", func(t *testing.T) {
		mem := vfs.NewMem()
		fsys := vfs.NewFaulty(mem, vfs.OnIndex(vfs.Kinds(vfs.OpSyncDir), 0, nil))
		x := mustOpen(t, fsys, "/i", tiny)
		defer x.Close()
		if err := x.Put("T#a", 0, t0); !errors.Is(err, vfs.ErrInjected) {
			t.Fatalf("Put: %v", err)
		}
		if names, _ := mem.List("/i"); len(names) != 0 {
			t.Fatalf("left behind %v", names)
		}
		mustPut(t, x, "T#a", 0, t0) // the fault was one-shot
		if got := mustQuery(t, x, "T#a", t0, t0, 10); !slices.Equal(got, []int64{0}) {
			t.Fatalf("a: %v", got)
		}
	})
	t.Run("remove fails", func(t *testing.T) {
		mem := vfs.NewMem()
		fsys := vfs.NewFaulty(mem, vfs.OnIndex(vfs.Kinds(vfs.OpRemove), 0, nil))
		x, _ := buildFiles(t, fsys, "/i")
		defer x.Close()
		n, err := x.DeleteBefore(2100)
		if !errors.Is(err, vfs.ErrInjected) || n != 1 || len(x.Files()) != 2 {
			t.Fatalf("DeleteBefore = %d, %v, files %v", n, err, x.Files())
		}
	})
}

// TestCrashRecovery follows the recovery recipe of the package doc on the
// crashable Mem FS: after a power cut that keeps a random subset of the
// unsynced pages, TruncateAfter(the offset flushed last) and a re-put from
// rebuildFrom give back exactly the index of the surviving CommitLog.
func TestCrashRecovery(t *testing.T) {
	opt := Options{SlotNum: 1100, IndexNum: 400} // slots and entries span several pages
	keys := []string{"T#a", "T#b", "T#c", "T#d", "Aa", "BB"}
	for seed := int64(0); seed < 40; seed++ {
		rng := rand.New(rand.NewSource(seed))
		mem := vfs.NewMem()
		x := mustOpen(t, mem, "/s/index", opt)
		var log model // the CommitLog: every message survives the crash here
		phy, ts := int64(0), t0-t0%1000
		flushed := int64(-1)
		n := 200 + rng.Intn(1200)
		flushAt := rng.Intn(n)
		for i := range n {
			phy += int64(rng.Intn(2)) * 50
			ts += int64(rng.Intn(2)) * 1000
			k := keys[rng.Intn(len(keys))]
			mustPut(t, x, k, phy, ts)
			log.put(k, phy, ts)
			if i == flushAt {
				if err := x.Flush(); err != nil {
					t.Fatal(err)
				}
				flushed = x.MaxPhyOffset()
			}
		}
		crashed := mem.Crash(seed, vfs.CrashOptions{UnsyncedKeepRatio: rng.Float64(), TornLastPage: rng.Intn(2) == 0})
		x.Close()

		y, err := Open(crashed, "/s/index", opt)
		if err != nil {
			t.Fatalf("seed %d: Open after crash: %v", seed, err)
		}
		from, err := y.TruncateAfter(flushed)
		if err != nil {
			t.Fatal(err)
		}
		if from < 0 || from > flushed {
			from = flushed
		}
		for _, p := range log.puts {
			if p.phy >= from {
				mustPut(t, y, p.key, p.phy, p.ts)
			}
		}
		for _, k := range keys {
			if got, want := mustQuery(t, y, k, 0, ts, 1<<20), log.query(k, 0, ts, 1<<20); !slices.Equal(got, want) {
				t.Fatalf("seed %d (%d puts, flushed at %d): %q: %d results, want %d", seed, n, flushed, k, len(got), len(want))
			}
		}
		y.Close()
	}
}

// model is the reference semantics: the idempotent log of puts, queried
// newest first by hash and exact store time (tests use whole seconds).
type model struct {
	puts []struct {
		key     string
		phy, ts int64
	}
}

func (m *model) put(key string, phy, ts int64) {
	if n := len(m.puts); n > 0 {
		last := m.puts[n-1].phy
		if phy < last {
			return
		}
		for i := n - 1; i >= 0 && m.puts[i].phy == phy; i-- {
			if keyHash(m.puts[i].key) == keyHash(key) {
				return
			}
		}
	}
	m.puts = append(m.puts, struct {
		key     string
		phy, ts int64
	}{key, phy, ts})
}

func (m *model) query(key string, begin, end int64, max int) []int64 {
	var out []int64
	for i := len(m.puts) - 1; i >= 0 && len(out) < max; i-- {
		p := m.puts[i]
		if keyHash(p.key) == keyHash(key) && p.ts >= begin && p.ts <= end {
			out = append(out, p.phy)
		}
	}
	return out
}

func (m *model) truncate(cut int64) {
	i := 0
	for i < len(m.puts) && m.puts[i].phy < cut {
		i++
	}
	m.puts = m.puts[:i]
}

// TestModel drives random puts, re-puts, reopens and truncations against the
// model, with tiny files so that chains, collisions and rolls are frequent.
func TestModel(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		for seed := int64(1); seed <= 20; seed++ {
			d := path.Join(dir, fmt.Sprint(seed))
			rng := rand.New(rand.NewSource(seed))
			opt := Options{SlotNum: 1 + rng.Intn(5), IndexNum: 2 + rng.Intn(12)}
			x := mustOpen(t, fsys, d, opt)
			var m model
			keys := []string{"Aa", "BB", "T#a", "T#b", "T#c", "T#d", "T#e", "T#f", "polygenelubricants", ""}
			phy, ts := int64(0), t0-t0%1000
			for step := range 400 {
				switch r := rng.Intn(100); {
				case r < 70:
					phy += int64(rng.Intn(3)) * 64
					ts += int64(rng.Intn(3)) * 1000
					k := keys[rng.Intn(len(keys))]
					mustPut(t, x, k, phy, ts)
					m.put(k, phy, ts)
				case r < 75 && len(m.puts) > 0: // replay a suffix of the log
					p := m.puts[rng.Intn(len(m.puts))]
					mustPut(t, x, p.key, p.phy, p.ts)
				case r < 80:
					if err := x.Flush(); err != nil {
						t.Fatal(err)
					}
					if err := x.Close(); err != nil {
						t.Fatal(err)
					}
					x = mustOpen(t, fsys, d, opt)
				case r < 85 && phy > 0:
					cut := rng.Int63n(phy + 1)
					from, err := x.TruncateAfter(cut)
					if err != nil {
						t.Fatal(err)
					}
					m.truncate(cut)
					if from >= 0 {
						for _, p := range m.puts {
							if p.phy >= from {
								mustPut(t, x, p.key, p.phy, p.ts)
							}
						}
					}
					phy = cut
				default:
					k := keys[rng.Intn(len(keys))]
					begin := ts - int64(rng.Intn(30))*1000
					end := begin + int64(rng.Intn(30))*1000
					max := 1 + rng.Intn(20)
					got := mustQuery(t, x, k, begin, end, max)
					if want := m.query(k, begin, end, max); !slices.Equal(got, want) {
						t.Fatalf("seed %d step %d %+v: Query(%q, %d, %d, %d) = %v, want %v",
							seed, step, opt, k, begin-t0, end-t0, max, got, want)
					}
				}
				if n := len(m.puts); n > 0 && x.MaxPhyOffset() != m.puts[n-1].phy {
					t.Fatalf("seed %d step %d: MaxPhyOffset %d, want %d", seed, step, x.MaxPhyOffset(), m.puts[n-1].phy)
				}
			}
			for _, k := range keys {
				if got, want := mustQuery(t, x, k, 0, ts, 1<<30), m.query(k, 0, ts, 1<<30); !slices.Equal(got, want) {
					t.Fatalf("seed %d: final %q: %v, want %v", seed, k, got, want)
				}
			}
			x.Close()
		}
	})
}
