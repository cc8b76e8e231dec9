package dispatch

import (
	"fmt"
	"net/netip"
	"os"
	"testing"

	"github.com/wharfmq/wharf/storage"
	"github.com/wharfmq/wharf/storage/vfs"
)

// benchChunk is how many records the benchmark appends to its log at a
// time (off the clock): they are dispatched benchBatch per Dispatch, while
// the log's pages are still in the caches, as the Reput actor reads what
// the writer just appended.
const (
	benchChunk = 2048
	benchBatch = 64
)

// benchDir is a directory for a store of the benchmark: in memory where
// the machine has /dev/shm (as internal/brokertest's brokers), so that
// first touches of a fresh file's pages cost what they cost a broker's
// warm files, not the disk's block allocation.
func benchDir(b *testing.B) string {
	dir, err := os.MkdirTemp("/dev/shm", "wharf-dispatch-bench-")
	if err != nil {
		return b.TempDir()
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func benchStore(b *testing.B) *storage.Store {
	cfg := storage.DefaultConfig(benchDir(b))
	cfg.MappedFileSizeCommitLog = 64 << 20
	cfg.MaxHashSlotNum = 1 << 18 // 1 MiB of slots: beyond the caches, as the broker's 20 MB
	cfg.MaxIndexNum = 1 << 22
	cfg.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	s, _, err := storage.Open(vfs.NewOS(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// benchAppend appends benchChunk records of 1 KiB to s, as a producer
// sends them: a unique key each (KEYS) and a UNIQ_KEY, 8 queues round
// robin, from record seq on. It returns where each record ends.
func benchAppend(b *testing.B, s *storage.Store, seq int) []int64 {
	body := make([]byte, 1024)
	ends := make([]int64, 0, benchChunk)
	msgs := make([]*storage.Message, 256)
	for len(ends) < benchChunk {
		for i := range msgs {
			n := seq + len(ends) + i
			props, _ := storage.EncodeProperties(storage.PropKeys, fmt.Sprintf("order-%08d", n), storage.PropUniqKey, fmt.Sprintf("7F000001%024X", n))
			msgs[i] = &storage.Message{Topic: "bench", QueueID: int32(n % 8), Body: body, Properties: props,
				BornHost: netip.MustParseAddrPort("127.0.0.1:40000")}
		}
		res, err := s.AppendBatch(msgs, 1_700_000_000_000+int64(seq+len(ends)), nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			ends = append(ends, r.PhyOffset+int64(r.Size))
		}
	}
	return ends
}

// BenchmarkReputDispatch is the dispatch path as the broker runs it, per
// record (b.N counts records): the Reput core reads benchBatch new records
// of the log into a Batch ("reput"), and then ("apply") the queue owners
// put each queue's entries into its ConsumeQueue and the index actor puts
// every record's keys into the index, as actors/dispatch.go and
// actors/index.go do.
func BenchmarkReputDispatch(b *testing.B) {
	for _, apply := range []bool{false, true} {
		name := "reput"
		if apply {
			name = "apply"
		}
		b.Run(name, func(b *testing.B) {
			src := benchStore(b)
			var sink *storage.Store
			if apply {
				sink = benchStore(b)
			}
			r := NewReput(false, 0, 0, 0)
			var ends []int64
			next, seq := 0, 0 // records of ends dispatched; records appended
			b.ReportAllocs()
			b.SetBytes(1024)
			b.ResetTimer()
			for done := 0; done < b.N; {
				if next == len(ends) {
					b.StopTimer()
					ends, next = benchAppend(b, src, seq), 0
					seq += len(ends)
					b.StartTimer()
				}
				n := min(benchBatch, b.N-done, len(ends)-next)
				r.Appended(ends[next+n-1])
				batch, err := r.Dispatch(src)
				if err != nil || len(batch.All) != n {
					b.Fatalf("dispatch: %d records, want %d: %v", len(batch.All), n, err)
				}
				if apply {
					benchApply(b, sink, batch)
				}
				next += n
				done += n
			}
		})
	}
}

// benchApply does what the queue owners and the index actor do with a
// batch.
func benchApply(b *testing.B, sink *storage.Store, batch Batch) {
	for _, qb := range batch.Queues {
		if err := sink.ApplyConsumeQueueBatch(qb.Key, qb.Reqs); err != nil {
			b.Fatal(err)
		}
	}
	for i := range batch.All {
		if err := sink.ApplyIndex(&batch.All[i]); err != nil {
			b.Fatal(err)
		}
	}
}
