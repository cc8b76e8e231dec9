package benchrun

import (
	"context"
	"fmt"
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

const probeFileSize = 64 << 20

func prepareProbeFile(dir string) (*os.File, error) {
	f, err := os.CreateTemp(dir, "wharf-disk-probe-")
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 1<<20)
	for off := int64(0); off < probeFileSize; off += int64(len(buf)) {
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
// o.Fsyncs times, one after the other) and disk-group-commit (64 goroutines
// each appending 1 KiB records and waiting for them to be durable; one
// flusher fdatasyncs everything written so far in a loop).
func runDiskProbe(ctx context.Context, o *Options) ([]Result, error) {
	f, err := prepareProbeFile(o.StoreDir)
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	fs, err := probeFsync(ctx, f, o.Fsyncs)
	if err != nil {
		return nil, err
	}
	gc, err := probeGroupCommit(ctx, f, 64, 1024, o.Duration)
	if err != nil {
		return []Result{fs}, err
	}
	return []Result{fs, gc}, nil
}

// probeFsync writes a 4 KiB page and fdatasyncs it, rounds times (or until
// ctx ends), and reports the latency of each round.
func probeFsync(ctx context.Context, f *os.File, rounds int) (Result, error) {
	hist := hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)
	page := make([]byte, 4096)
	for i := range page {
		page[i] = byte(i)
	}
	start := time.Now()
	n := 0
	for ; n < rounds && ctx.Err() == nil; n++ {
		t0 := time.Now()
		if _, err := f.WriteAt(page, int64(n*4096)%probeFileSize); err != nil {
			return Result{}, err
		}
		if err := datasync(f); err != nil {
			return Result{}, err
		}
		_ = hist.RecordValue(max(1, time.Since(t0).Microseconds()))
	}
	el := time.Since(start).Seconds()
	r := Result{Scenario: "disk-fsync", Size: 4096, Msgs: int64(n), ElapsedS: round(el),
		Note: "write 4 KiB + fdatasync, one at a time; msgs_per_s is fsyncs/s"}
	r.P50Ms, r.P99Ms, r.P999Ms = quantilesMs(hist)
	if el > 0 {
		r.MsgsPerS = round(float64(n) / el)
		r.MBPerS = round(float64(n) * 4096 / 1e6 / el)
	}
	return r, nil
}

// groupLog is the state the group-commit probe's writers and flusher share:
// an append-only log in f (wrapping at probeFileSize) and how much of it is
// durable.
type groupLog struct {
	f       *os.File
	mu      sync.Mutex
	cond    *sync.Cond
	written int64 // bytes appended (logical, before the wrap)
	durable int64 // bytes known durable
	stop    bool
	err     error // the first write or sync error; it stops everything
	syncs   int64
}

func newGroupLog(f *os.File) *groupLog {
	l := &groupLog{f: f}
	l.cond = sync.NewCond(&l.mu)
	return l
}

// fail records err (the first one counts) and stops the probe; l.mu held.
func (l *groupLog) fail(err error) {
	if err != nil && l.err == nil {
		l.err, l.stop = err, true
	}
}

// flusher fdatasyncs whatever was written since the last one, until stopped
// and everything written is durable.
func (l *groupLog) flusher() {
	for {
		l.mu.Lock()
		for l.written == l.durable && !l.stop {
			l.cond.Wait()
		}
		if l.stop && l.written == l.durable {
			l.mu.Unlock()
			return
		}
		target := l.written
		l.mu.Unlock()
		err := datasync(l.f)
		l.mu.Lock()
		l.syncs++
		l.fail(err)
		l.durable = target
		l.cond.Broadcast()
		l.mu.Unlock()
	}
}

// writer appends buf and waits for it to be durable, in a loop until
// stopped, recording each durable record into rec.
func (l *groupLog) writer(buf []byte, rec *recorder) {
	size := int64(len(buf))
	for {
		t0 := time.Now()
		l.mu.Lock()
		if l.stop {
			l.mu.Unlock()
			return
		}
		off := l.written
		l.written += size
		// Writes are serialised, as appends to one log are.
		_, err := l.f.WriteAt(buf, off%probeFileSize)
		l.fail(err)
		l.cond.Broadcast()
		for l.durable < off+size && !l.stop {
			l.cond.Wait()
		}
		ok := l.durable >= off+size
		l.mu.Unlock()
		if ok {
			rec.done(1, time.Since(t0), nil)
		}
	}
}

// syncCount reads the number of fdatasyncs so far.
func (l *groupLog) syncCount() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.syncs
}

// halt stops the writers and the flusher and returns the number of
// fdatasyncs so far.
func (l *groupLog) halt() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stop = true
	l.cond.Broadcast()
	return l.syncs
}

// probeGroupCommit runs writers goroutines appending records of recSize
// bytes with one flusher for 300 ms of warm-up and then d measured, and
// reports the durable records per second.
func probeGroupCommit(ctx context.Context, f *os.File, writers, recSize int, d time.Duration) (Result, error) {
	l := newGroupLog(f)
	rec := newRecorder()
	var wg sync.WaitGroup
	wg.Go(l.flusher)
	buf := make([]byte, recSize)
	for range writers {
		wg.Go(func() { l.writer(buf, rec) })
	}
	sleepCtx(ctx, 300*time.Millisecond) // warm-up
	s0 := l.syncCount()
	rec.open()
	sleepCtx(ctx, d)
	rec.close()
	s1 := l.halt()
	wg.Wait()
	r := rec.result("disk-group-commit", recSize)
	r.Note = fmt.Sprintf("%d writers, one flusher; msgs_per_s is durable records/s; %d fdatasyncs in the window (%.0f records each)",
		writers, s1-s0, float64(r.Msgs)/float64(max(1, s1-s0)))
	return r, l.err
}
