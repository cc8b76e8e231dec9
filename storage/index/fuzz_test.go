package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/wharfmq/wharf/storage/vfs"
)

// fuzzAllocLimit bounds what Open, Query and Put may allocate for one tiny
// (216-byte) file: a few KiB are needed; a count trusted from the header
// would take gigabytes.
const fuzzAllocLimit = 1 << 20

type fuzzSeed struct {
	data       []byte
	exact      bool // pad or cut data to the file size Open expects
	key        string
	begin, end int64
	max        int
}

func fuzzSeeds(tb testing.TB) []fuzzSeed {
	valid := validTinyFileTB(tb)
	be := binary.BigEndian
	huge := append([]byte(nil), valid...)
	be.PutUint32(huge[32:], math.MaxInt32) // hashSlotCount
	be.PutUint32(huge[36:], math.MaxInt32) // indexCount
	full := append([]byte(nil), valid...)
	be.PutUint32(full[36:], 8) // indexCount = indexNum: full, entries 3..7 are zeros
	cycle := append([]byte(nil), valid...)
	be.PutUint32(cycle[40+16+1*20+16:], 2) // entry 1 -> entry 2 -> entry 1
	wild := append([]byte(nil), valid...)
	for i := 40; i < len(wild); i += 4 {
		be.PutUint32(wild[i:], 0xFFFF_FFF0+uint32(i))
	}
	return []fuzzSeed{
		{valid, true, "T#a", 0, math.MaxInt64, 10},
		{valid, true, "T#e", t0, t0 + 2500, 1},
		{huge, true, "T#a", math.MinInt64, math.MaxInt64, math.MaxInt},
		{full, true, "T#a", 0, t0 + 10_000, 100},
		{cycle, true, "T#e", 0, t0 + 10_000, 100},
		{wild, true, "T#a", 0, t0 + 10_000, 100},
		{nil, true, "", 0, 0, 1},
		{[]byte("\x00\x00\x01\x8b\xd0\xd6\x3d\xfb"), false, "x", -1, 1, 3},
	}
}

func validTinyFileTB(tb testing.TB) []byte {
	fsys := vfs.NewMem()
	x := mustOpen(tb, fsys, "/i", tiny)
	mustPut(tb, x, "T#a", 100, t0)
	mustPut(tb, x, "T#e", 200, t0+2500)
	name := x.Files()[0]
	x.Close()
	return readFile(tb, fsys, "/i/"+name)
}

// FuzzOpenQuery opens arbitrary bytes as an index file, then queries, puts
// and truncates: no panic, no hang, no allocation beyond the file's size.
func FuzzOpenQuery(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s.data, s.exact, s.key, s.begin, s.end, s.max)
	}
	f.Fuzz(func(t *testing.T, data []byte, exact bool, key string, begin, end int64, maxResults int) {
		size := tiny.fileSize()
		if exact {
			b := make([]byte, size)
			copy(b, data)
			data = b
		}
		if len(data) > 4*int(size) {
			return
		}
		fsys := vfs.NewMem()
		writeFile(t, fsys, "/i/20231114221320123", data)

		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		x, err := Open(fsys, "/i", tiny)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open: %v, want ErrCorrupt", err)
			}
			return
		}
		defer x.Close()
		check := func(what string, got []int64) {
			t.Helper()
			limit := min(max(0, maxResults), tiny.IndexNum-1)
			if len(got) > limit {
				t.Fatalf("%s: %d results for max %d", what, len(got), maxResults)
			}
		}
		got, err := x.Query(key, begin, end, maxResults)
		if err != nil {
			t.Fatal(err)
		}
		check("Query", got)
		runtime.ReadMemStats(&ms)
		if d := ms.TotalAlloc - before; d > fuzzAllocLimit {
			t.Fatalf("Open+Query allocated %d bytes for a %d-byte file", d, len(data))
		}

		// The damaged file stays writable: put at MaxPhyOffset (a no-op or
		// a new entry, possibly in a new file), query, cut.
		mp := x.MaxPhyOffset()
		if mp < 0 {
			t.Fatalf("MaxPhyOffset %d", mp)
		}
		if err := x.Put(key, mp, end); err != nil {
			t.Fatalf("Put: %v", err)
		}
		if got, err := x.Query(key, math.MinInt64, math.MaxInt64, maxResults); err != nil {
			t.Fatal(err)
		} else {
			check("Query after Put", got)
		}
		if _, err := x.TruncateAfter(mp); err != nil {
			t.Fatal(err)
		}
		if _, err := x.DeleteBefore(mp); err != nil {
			t.Fatal(err)
		}
		if err := x.Flush(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestWriteFuzzSeeds regenerates testdata/fuzz/FuzzOpenQuery from fuzzSeeds
// when WHARF_WRITE_FUZZ_SEEDS=1.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("WHARF_WRITE_FUZZ_SEEDS") != "1" {
		t.Skip("set WHARF_WRITE_FUZZ_SEEDS=1 to regenerate the seed corpus")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzOpenQuery")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	names := []string{"valid", "valid-narrow", "huge-counts", "full", "cycle", "wild-slots", "empty", "short"}
	for i, s := range fuzzSeeds(t) {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nbool(%t)\nstring(%q)\nint64(%d)\nint64(%d)\nint(%d)\n",
			s.data, s.exact, s.key, s.begin, s.end, s.max)
		if err := os.WriteFile(filepath.Join(dir, names[i]), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
