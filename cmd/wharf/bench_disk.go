package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// The raw-disk probe: what this machine's disk allows, with no broker.
//
// Both parts overwrite a 64 MiB file that was written and synced first (as
// a broker overwrites a pre-touched, preallocated CommitLog segment), so an
// fdatasync flushes data, not a growing file's metadata.

const benchProbeFile = 64 << 20

func benchProbePrepare(dir string) (*os.File, error) {
	f, err := os.CreateTemp(dir, "wharf-disk-probe-")
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 1<<20)
	for off := int64(0); off < benchProbeFile; off += int64(len(buf)) {
		if _, err := f.WriteAt(buf, off); err != nil {
			f.Close()
			os.Remove(f.Name())
			return nil, err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return f, nil
}

// runDiskProbe returns two results: disk-fsync (write 4 KiB + fdatasync,
// n times, one after the other) and disk-group-commit (64 goroutines each
// appending 1 KiB records and waiting for them to be durable; one flusher
// fdatasyncs everything written so far in a loop).
func runDiskProbe(ctx context.Context, o *benchFlags, progress io.Writer) ([]benchResult, error) {
	f, err := benchProbePrepare(o.storeDir)
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()

	// 1. fsync latency.
	hist := hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)
	page := make([]byte, 4096)
	for i := range page {
		page[i] = byte(i)
	}
	start := time.Now()
	n := 0
	for ; n < o.fsyncN && ctx.Err() == nil; n++ {
		t0 := time.Now()
		if _, err := f.WriteAt(page, int64(n*4096)%benchProbeFile); err != nil {
			return nil, err
		}
		if err := benchDatasync(f); err != nil {
			return nil, err
		}
		_ = hist.RecordValue(max(1, time.Since(t0).Microseconds()))
	}
	el := time.Since(start).Seconds()
	fs := benchResult{Scenario: "disk-fsync", Size: 4096, Msgs: int64(n), ElapsedS: cliRound(el),
		P50Ms:  cliRound(float64(hist.ValueAtQuantile(50)) / 1000),
		P99Ms:  cliRound(float64(hist.ValueAtQuantile(99)) / 1000),
		P999Ms: cliRound(float64(hist.ValueAtQuantile(99.9)) / 1000),
		Note:   "write 4 KiB + fdatasync, one at a time; msgs_per_s is fsyncs/s"}
	if el > 0 {
		fs.MsgsPerS = cliRound(float64(n) / el)
		fs.MBPerS = cliRound(float64(n) * 4096 / 1e6 / el)
	}

	// 2. group commit, 64 writers of 1 KiB.
	gc, err := benchGroupCommit(ctx, f, 64, 1024, o.duration)
	if err != nil {
		return []benchResult{fs}, err
	}
	return []benchResult{fs, gc}, nil
}

func benchGroupCommit(ctx context.Context, f *os.File, writers, recSize int, d time.Duration) (benchResult, error) {
	var (
		mu      sync.Mutex
		cond    = sync.NewCond(&mu)
		written int64 // bytes appended (logical, before the wrap)
		durable int64 // bytes known durable
		stop    bool
		ferr    error
		syncs   int64
	)
	rec := newBenchRecorder()
	var wg sync.WaitGroup
	// The flusher: fdatasync whatever was written since the last one.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			mu.Lock()
			for written == durable && !stop {
				cond.Wait()
			}
			if stop && written == durable {
				mu.Unlock()
				return
			}
			target := written
			mu.Unlock()
			err := benchDatasync(f)
			mu.Lock()
			syncs++
			if err != nil && ferr == nil {
				ferr = err
				stop = true
			}
			durable = target
			cond.Broadcast()
			mu.Unlock()
		}
	}()
	buf := make([]byte, recSize)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				t0 := time.Now()
				mu.Lock()
				if stop {
					mu.Unlock()
					return
				}
				off := written
				written += int64(recSize)
				// Writes are serialised, as appends to one log are.
				_, err := f.WriteAt(buf, off%benchProbeFile)
				if err != nil && ferr == nil {
					ferr, stop = err, true
				}
				cond.Broadcast()
				for durable < off+int64(recSize) && !stop {
					cond.Wait()
				}
				ok := durable >= off+int64(recSize)
				mu.Unlock()
				if ok {
					rec.done(1, time.Since(t0), nil)
				}
			}
		}()
	}
	benchSleep(ctx, 300*time.Millisecond) // warm-up
	mu.Lock()
	s0 := syncs
	mu.Unlock()
	rec.open()
	benchSleep(ctx, d)
	rec.close()
	mu.Lock()
	s1 := syncs
	stop = true
	cond.Broadcast()
	mu.Unlock()
	wg.Wait()
	r := rec.result("disk-group-commit", recSize)
	r.Note = fmt.Sprintf("%d writers, one flusher; msgs_per_s is durable records/s; %d fdatasyncs in the window (%.0f records each)",
		writers, s1-s0, float64(r.Msgs)/float64(max(1, s1-s0)))
	return r, ferr
}
