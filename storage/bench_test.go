package storage

import (
	"fmt"
	"net/netip"
	"path"
	"testing"
	"time"

	"github.com/wharfmq/wharf/storage/vfs"
)

// benchConfig is a production-like store on the real disk.
func benchConfig(root string, segSize int64) Config {
	cfg := DefaultConfig(root)
	cfg.MappedFileSizeCommitLog = segSize
	cfg.WarmMappedFileEnable = true
	cfg.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	return cfg
}

func benchMessages(n, size int, topic string, queues int) []*Message {
	msgs := make([]*Message, n)
	body := make([]byte, size)
	for i := range body {
		body[i] = byte(i)
	}
	for i := range msgs {
		props, _ := EncodeProperties(PropKeys, fmt.Sprintf("key-%d", i), PropUniqKey, fmt.Sprintf("%032x", i))
		msgs[i] = &Message{Topic: topic, QueueID: int32(i % queues), Body: body, Properties: props}
	}
	return msgs
}

// BenchmarkAppend measures batched appends (32 messages per batch) into a
// memory-mapped, preallocated segment whose pages ahead of the end are kept
// populated (CommitLog.WarmAhead, off the clock as the writer runs it off its
// goroutine) on the OS FS: the
// writer's cost without fsync, at page-cache speed. MB/s counts message
// bodies. Run it with a fixed count (make bench uses -benchtime 4000x, 125 MiB
// of 1 KiB bodies) so the run measures appends, not the kernel's write-back:
// past the dirty-page limit any writer is held to the disk's write bandwidth.
func BenchmarkAppend(b *testing.B) {
	for _, c := range []struct {
		size int
		warm bool
	}{{1024, true}, {128, true}, {1024, false}, {128, false}} {
		size := c.size
		b.Run(fmt.Sprintf("body=%d/warm=%v", size, c.warm), func(b *testing.B) {
			batch := benchMessages(32, size, "bench", 8)
			perSeg := int64(1<<30) / int64(len(batch)*(size+200))
			var s *Store
			var out []AppendResult
			b.SetBytes(int64(size * len(batch)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if int64(i)%perSeg == 0 { // a fresh store with its segment prepared, off the clock
					b.StopTimer()
					if s != nil {
						s.closeFiles()
					}
					cfg := benchConfig(b.TempDir(), 1<<30)
					cfg.WarmMappedFileEnable = c.warm
					s, _ = mustOpen(b, vfs.NewOS(), cfg)
					if err := s.CommitLog().Prepare(); err != nil {
						b.Fatal(err)
					}
					if warm := s.CommitLog().WarmAhead(); warm != nil {
						warm()
					}
					b.StartTimer()
				}
				var err error
				if out, err = s.AppendBatch(batch, 1, out); err != nil {
					b.Fatal(err)
				}
				if warm := s.CommitLog().WarmAhead(); warm != nil { // the writer runs it off its goroutine
					b.StopTimer()
					warm()
					b.StartTimer()
				}
			}
			b.StopTimer()
			s.closeFiles()
		})
	}
}

// BenchmarkReadQueue reads 1M messages of 1 KiB through a ConsumeQueue and
// the CommitLog, 32 per GetMessages call, as pulls do.
func BenchmarkReadQueue(b *testing.B) {
	const total = 1 << 20
	s, _ := mustOpen(b, vfs.NewOS(), benchConfig(b.TempDir(), 1<<30))
	defer s.Close()
	batch := benchMessages(256, 1024, "bench", 1)
	for n := 0; n < total; n += len(batch) {
		if _, err := s.AppendBatch(batch, 1, nil); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := s.Dispatch(s.CommitLog().MaxOffset(), nil); err != nil {
		b.Fatal(err)
	}
	k := QueueKey{"bench", 0}
	b.ResetTimer()
	start, read := time.Now(), 0
	for i := 0; i < b.N; i++ {
		for off := int64(0); off < total; {
			res, err := s.GetMessages(k, off, GetLimits{Msgs: 32}, nil)
			if err != nil || res.Status != GetFound {
				b.Fatalf("get at %d: %v %v", off, res.Status, err)
			}
			read += len(res.Records)
			off = res.NextBeginOffset
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(read)/time.Since(start).Seconds(), "msgs/s")
}

// BenchmarkRecoverAbnormal measures Open after an unclean stop whose last
// checkpoint lies at the start of a full 1 GiB segment: recovery validates
// every record of the segment (both CRCs), re-dispatches its ConsumeQueue
// entries and rebuilds its index keys.
func BenchmarkRecoverAbnormal(b *testing.B) {
	const segSize = 1 << 30
	root := b.TempDir()
	cfg := benchConfig(root, segSize)
	s, _ := mustOpen(b, vfs.NewOS(), cfg)
	if err := s.Checkpoint(); err != nil { // the last checkpoint: an empty store
		b.Fatal(err)
	}
	batch := benchMessages(256, 1024, "bench", 8)
	for s.CommitLog().MaxOffset() < segSize-2<<20 {
		if _, err := s.AppendBatch(batch, 1, nil); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := s.Flush(s.CommitLog().MaxOffset()); err != nil {
		b.Fatal(err)
	}
	logBytes := s.CommitLog().MaxOffset()
	s.closeFiles() // no Close: the abort file stays, as after kill -9
	b.SetBytes(logBytes)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		// Every iteration recovers the same crashed state: drop what the
		// previous recovery built and restore the stale checkpoint.
		if i > 0 {
			fsys := vfs.NewOS()
			fsys.RemoveAll(path.Join(root, "consumequeue"))
			fsys.RemoveAll(path.Join(root, "index"))
			if err := writeFileAtomic(fsys, path.Join(root, checkpointName), (&checkpoint{ConsumeQueueSize: int64(cfg.MappedFileSizeConsumeQueue)}).encode()); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		s, rep, err := Open(vfs.NewOS(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if !rep.Abnormal || rep.TruncatedAt != logBytes || rep.Redispatched == 0 {
			b.Fatalf("recovery report %v, log %d bytes", rep, logBytes)
		}
		s.closeFiles()
		b.StartTimer()
	}
}
