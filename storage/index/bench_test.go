package index

import (
	"fmt"
	"testing"

	"github.com/wharfmq/wharf/storage/vfs"
)

// benchOpt is a mid-sized geometry: 64 Ki slots, 1 Mi entries (about 21 MB
// per file), so a benchmark exercises rolls without 420 MB files.
var benchOpt = Options{SlotNum: 1 << 16, IndexNum: 1 << 20}

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = KeyOf("TopicTest", fmt.Sprintf("KEY%d", i))
	}
	return keys
}

func forEachFSBench(b *testing.B, fn func(b *testing.B, fsys vfs.FS, dir string)) {
	for _, k := range fsKinds {
		b.Run(k.name, func(b *testing.B) {
			fsys, dir := k.new(b)
			fn(b, fsys, dir)
		})
	}
}

func BenchmarkPut(b *testing.B) {
	keys := benchKeys(100_000)
	forEachFSBench(b, func(b *testing.B, fsys vfs.FS, dir string) {
		x := mustOpen(b, fsys, dir, benchOpt)
		defer x.Close()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := x.Put(keys[i%len(keys)], int64(i)*200, t0+int64(i)); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		if err := x.Flush(); err != nil {
			b.Fatal(err)
		}
	})
}

func BenchmarkQuery(b *testing.B) {
	const entries = 500_000
	keys := benchKeys(50_000) // 10 messages per key, 7-8 entries per slot
	forEachFSBench(b, func(b *testing.B, fsys vfs.FS, dir string) {
		x := mustOpen(b, fsys, dir, benchOpt)
		defer x.Close()
		for i := range entries {
			mustPut(b, x, keys[i%len(keys)], int64(i)*200, t0+int64(i)*10)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			got, err := x.Query(keys[(i*7919)%len(keys)], t0, t0+entries*10, 64)
			if err != nil {
				b.Fatal(err)
			}
			if len(got) != 10 {
				b.Fatalf("%d results", len(got))
			}
		}
	})
}

// BenchmarkKeyHash hashes a UNIQ_KEY (32 hex digits) of a topic, as the
// Reput does for every message it indexes.
func BenchmarkKeyHash(b *testing.B) {
	key := []byte("7F0000014E2018B4AAC2712A3B800000")
	var sink int32
	for b.Loop() {
		sink += KeyHash("TopicTest", key)
	}
	_ = sink
}
