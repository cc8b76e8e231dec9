package cq

import (
	"testing"

	"github.com/wharfmq/wharf/storage/vfs"
)

const benchEntries = 1_000_000

// BenchmarkRead reads a 1M-entry queue (default file size, 4 files)
// sequentially, 32 entries per call as a pull does.
func BenchmarkRead(b *testing.B) {
	for _, c := range fsCases {
		b.Run(c.name, func(b *testing.B) {
			fsys, dir := c.new(b)
			q := mustOpen(b, fsys, dir, 0)
			defer q.Close()
			appendN(b, q, 0, benchEntries, 0)
			buf := make([]Entry, 0, 32)
			b.SetBytes(benchEntries * UnitSize)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				n := 0
				for qo := int64(0); qo < benchEntries; {
					var err error
					buf, err = q.Read(qo, 32, buf[:0])
					if err != nil {
						b.Fatal(err)
					}
					qo += int64(len(buf))
					n += len(buf)
				}
				if n != benchEntries {
					b.Fatalf("read %d", n)
				}
			}
		})
	}
}

// BenchmarkAppend appends entries to a queue of default-size files (rolling
// every 300,000), with a Flush every 1000 entries.
func BenchmarkAppend(b *testing.B) {
	for _, c := range []struct {
		name string
		fs   func(b *testing.B) (vfs.FS, string)
	}{
		{"os", func(b *testing.B) (vfs.FS, string) { return fsCases[0].new(b) }},
		{"mem", func(b *testing.B) (vfs.FS, string) { return fsCases[1].new(b) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			fsys, dir := c.fs(b)
			q := mustOpen(b, fsys, dir, 0)
			defer q.Close()
			b.SetBytes(UnitSize)
			b.ReportAllocs()
			qo := int64(0)
			for b.Loop() {
				if err := q.Append(qo, Entry{Offset: qo * 200, Size: 200, TagsCode: qo}); err != nil {
					b.Fatal(err)
				}
				qo++
				if qo%1000 == 0 {
					if err := q.Flush(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
