package benchrun

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/wharfmq/wharf/internal/benchreport"
)

// recorder counts the outcome of operations inside a measured window. The
// load's goroutines call done concurrently.
type recorder struct {
	start, end atomic.Int64 // window in UnixNano; 0: not yet open/closed
	msgs       atomic.Int64 // messages completed inside the window
	errs       atomic.Int64 // failed messages, inside or outside the window
	total      atomic.Int64 // messages completed at all (progress)
	firstErr   atomic.Pointer[error]

	mu        sync.Mutex
	hist      *hdrhistogram.Histogram // microseconds
	perSecond []int64                 // messages completed in each second of the window
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
	now := time.Now()
	if !r.inWindow(now) {
		return
	}
	r.msgs.Add(n)
	sec := int((now.UnixNano() - r.start.Load()) / int64(time.Second))
	r.mu.Lock()
	_ = r.hist.RecordValue(max(1, d.Microseconds()))
	for len(r.perSecond) <= sec {
		r.perSecond = append(r.perSecond, 0)
	}
	r.perSecond[sec] += n
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
		res.MaxMs = roundedPtr(float64(r.hist.Max()) / 1000)
		res.LatencyCurve = latencyCurve(r.hist)
	}
	res.ThroughputPerS = perSecondRates(r.perSecond, r.elapsed())
	return res
}

// latencyCurve samples h (in microseconds) at the report's percentiles.
func latencyCurve(h *hdrhistogram.Histogram) []benchreport.Point {
	ps := benchreport.CurvePercentiles()
	out := make([]benchreport.Point, len(ps))
	for i, p := range ps {
		out[i] = benchreport.Point{P: p, Ms: round(float64(h.ValueAtQuantile(p)) / 1000)}
	}
	return out
}

// perSecondRates turns counts per second of a window of length elapsed
// into rates: every whole second, and the last part-second if it lasted at
// least half a second (a shorter one would be mostly noise). Seconds with
// nothing completed count as 0.
func perSecondRates(counts []int64, elapsed time.Duration) []float64 {
	whole := int(elapsed / time.Second)
	rest := (elapsed - time.Duration(whole)*time.Second).Seconds()
	n := whole
	if rest >= 0.5 {
		n++
	}
	if n == 0 {
		return nil
	}
	out := make([]float64, n)
	for i := range out {
		var c int64
		if i < len(counts) {
			c = counts[i]
		}
		span := 1.0
		if i == whole {
			span = rest
		}
		out[i] = round(float64(c) / span)
	}
	return out
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
