package benchrun

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// recorder counts the outcome of operations inside a measured window. The
// load's goroutines call done concurrently.
type recorder struct {
	start, end atomic.Int64 // window in UnixNano; 0: not yet open/closed
	msgs       atomic.Int64 // messages completed inside the window
	errs       atomic.Int64 // failed messages, inside or outside the window
	total      atomic.Int64 // messages completed at all (progress)
	firstErr   atomic.Pointer[error]

	mu   sync.Mutex
	hist *hdrhistogram.Histogram // microseconds
}

func newRecorder() *recorder {
	return &recorder{hist: hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3)}
}

func (r *recorder) inWindow(now time.Time) bool {
	s, e := r.start.Load(), r.end.Load()
	n := now.UnixNano()
	return s != 0 && n >= s && (e == 0 || n < e)
}

// done records n messages completed now after latency d (err: failed).
func (r *recorder) done(n int64, d time.Duration, err error) {
	if err != nil {
		r.errs.Add(n)
		r.firstErr.CompareAndSwap(nil, &err)
		return
	}
	r.total.Add(n)
	if !r.inWindow(time.Now()) {
		return
	}
	r.msgs.Add(n)
	r.mu.Lock()
	_ = r.hist.RecordValue(max(1, d.Microseconds()))
	r.mu.Unlock()
}

func (r *recorder) open()  { r.start.Store(time.Now().UnixNano()) }
func (r *recorder) close() { r.end.Store(time.Now().UnixNano()) }

func (r *recorder) elapsed() time.Duration {
	s, e := r.start.Load(), r.end.Load()
	if s == 0 {
		return 0
	}
	if e == 0 {
		e = time.Now().UnixNano()
	}
	return time.Duration(e - s)
}

// rate is the messages per second of the window so far, for progress.
func (r *recorder) rate() float64 {
	return float64(r.msgs.Load()) / max(r.elapsed().Seconds(), 1e-9)
}

func (r *recorder) err() error {
	if p := r.firstErr.Load(); p != nil {
		return *p
	}
	return nil
}

// result fills the common fields.
func (r *recorder) result(scenario string, size int) Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	secs := r.elapsed().Seconds()
	res := Result{Scenario: scenario, Size: size, Msgs: r.msgs.Load(), Errors: r.errs.Load(), ElapsedS: round(secs)}
	if secs > 0 {
		res.MsgsPerS = round(float64(res.Msgs) / secs)
		res.MBPerS = round(float64(res.Msgs) * float64(size) / 1e6 / secs)
	}
	if r.hist.TotalCount() > 0 {
		res.P50Ms, res.P99Ms, res.P999Ms = quantilesMs(r.hist)
	}
	return res
}

// quantilesMs returns the 50th, 99th and 99.9th percentiles of h (in
// microseconds) in milliseconds.
func quantilesMs(h *hdrhistogram.Histogram) (p50, p99, p999 float64) {
	ms := func(q float64) float64 { return round(float64(h.ValueAtQuantile(q)) / 1000) }
	return ms(50), ms(99), ms(99.9)
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
