package dispatch

import (
	"fmt"
	"net/netip"
	"os"
	"testing"

	"github.com/wharfmq/wharf/storage"
	"github.com/wharfmq/wharf/storage/vfs"
)

// benchRecords is how many records the benchmark's log holds; a pass
// dispatches all of them, benchBatch per Dispatch.
const (
	benchRecords = 16384
	benchBatch   = 64
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

func benchStoreConfig(root string) storage.Config {
	cfg := storage.DefaultConfig(root)
	cfg.MappedFileSizeCommitLog = 64 << 20
	cfg.MaxHashSlotNum = 1 << 20 // 4 MiB of slots: still far beyond the caches, as the broker's 5 M
	cfg.MaxIndexNum = 1 << 21
	cfg.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	return cfg
}

// benchLog is a store whose log holds benchRecords records of 1 KiB, as
// a producer sends them: a unique key each (KEYS) and a UNIQ_KEY, 8 queues
// round robin. ends[i] is where record i ends.
func benchLog(b *testing.B) (*storage.Store, []int64) {
	s, _, err := storage.Open(vfs.NewOS(), benchStoreConfig(benchDir(b)))
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1024)
	ends := make([]int64, 0, benchRecords)
	for len(ends) < benchRecords {
		msgs := make([]*storage.Message, 256)
		for i := range msgs {
			seq := len(ends) + i
			props, _ := storage.EncodeProperties(storage.PropKeys, fmt.Sprintf("order-%08d", seq), storage.PropUniqKey, fmt.Sprintf("7F000001%024X", seq))
			msgs[i] = &storage.Message{Topic: "bench", QueueID: int32(seq % 8), Body: body, Properties: props,
				BornHost: netip.MustParseAddrPort("127.0.0.1:40000")}
		}
		res, err := s.AppendBatch(msgs, 1_700_000_000_000+int64(len(ends)), nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			ends = append(ends, r.PhyOffset+int64(r.Size))
		}
	}
	return s, ends
}

// BenchmarkReputDispatch is the dispatch path as the broker runs it, per
// record (b.N counts records): the Reput core reads benchBatch new records
// of the log into a Batch ("reput"), and then ("apply") the queue owners
// put each queue's entries into its ConsumeQueue and the index actor puts
// every record's keys into the index, as actors/dispatch.go and
// actors/index.go do. The queues and the index of a fresh store take the
// entries on every pass over the log (re-applying would be the no-op path).
func BenchmarkReputDispatch(b *testing.B) {
	for _, apply := range []bool{false, true} {
		name := "reput"
		if apply {
			name = "apply"
		}
		b.Run(name, func(b *testing.B) {
			src, ends := benchLog(b)
			defer src.Close()
			var sink *storage.Store
			var r *Reput
			next := 0 // records dispatched in this pass
			// fresh starts a pass: a new core and, applying, a new store
			// whose files were created by a first record of each queue
			// (a broker creates them once per 300,000 entries, not per pass).
			fresh := func() {
				if sink != nil {
					sink.Close()
				}
				r, next = NewReput(false, 0, 0, 0), 0
				if !apply {
					return
				}
				var err error
				if sink, _, err = storage.Open(vfs.NewOS(), benchStoreConfig(benchDir(b))); err != nil {
					b.Fatal(err)
				}
				r.Appended(ends[7])
				first, err := r.Dispatch(src)
				if err != nil {
					b.Fatal(err)
				}
				benchApply(b, sink, first)
				next = 8
			}
			fresh()
			b.ReportAllocs()
			b.SetBytes(1024)
			b.ResetTimer()
			for done := 0; done < b.N; {
				if next == len(ends) {
					b.StopTimer()
					fresh()
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
			b.StopTimer()
			if sink != nil {
				sink.Close()
			}
		})
	}
}

// benchApply does what the queue owners and the index actor do with a
// batch.
func benchApply(b *testing.B, sink *storage.Store, batch Batch) {
	for _, qb := range batch.Queues {
		for i := range qb.Reqs {
			if err := sink.ApplyConsumeQueue(&qb.Reqs[i]); err != nil {
				b.Fatal(err)
			}
		}
	}
	for i := range batch.All {
		if err := sink.ApplyIndex(&batch.All[i]); err != nil {
			b.Fatal(err)
		}
	}
}
