package dashboard

import (
	"math"
	"time"
)

// counters is one sample of a broker's cumulative statistics.
type counters struct {
	MsgIn, MsgOut, BytesIn int64
	Lat                    histogram // send latency; empty without /metrics
}

// point is one interval of a broker's chart: rates over the interval
// between two samples, and the send latency of the sends in it.
type point struct {
	T          int64   `json:"t"`                    // end of the interval, Unix ms
	In         float64 `json:"in"`                   // messages stored per second
	Out        float64 `json:"out"`                  // messages pulled per second
	BytesIn    float64 `json:"bytesIn"`              // bytes stored per second
	LatMeanMs  float64 `json:"latMeanMs"`            // mean send latency; -1: unknown
	LatP99Ms   float64 `json:"latP99Ms"`             // p99 bound from the buckets; -1: unknown
	Restarted  bool    `json:"restarted,omitempty"`  // a counter went back: the broker restarted
	LatSamples float64 `json:"latSamples,omitempty"` // sends the latency figures cover
}

// series is one broker's ring of points and its last sample.
type series struct {
	last   counters
	lastAt time.Time
	have   bool
	points []point // ring of at most cap points, oldest at start
	start  int
}

// history holds every broker's series. It is a plain value: the sampler
// owns it and passes the time in.
type history struct {
	cap     int
	brokers map[string]*series
}

func newHistory(capacity int) *history {
	return &history{cap: max(capacity, 2), brokers: map[string]*series{}}
}

// add records a sample of addr taken at now and returns the point it made
// (ok false for a broker's first sample, or one not after the last).
func (h *history) add(now time.Time, addr string, c counters) (point, bool) {
	s := h.brokers[addr]
	if s == nil {
		s = &series{}
		h.brokers[addr] = s
	}
	prev, prevAt, had := s.last, s.lastAt, s.have
	if had && !now.After(prevAt) {
		return point{}, false
	}
	s.last, s.lastAt, s.have = c, now, true
	if !had {
		return point{}, false
	}
	p := interval(prev, c, now.Sub(prevAt))
	p.T = now.UnixMilli()
	if len(s.points) < h.cap {
		s.points = append(s.points, p)
	} else {
		s.points[s.start] = p
		s.start = (s.start + 1) % h.cap
	}
	return p, true
}

// interval turns two samples dt apart into a point. A counter that went
// back means the broker restarted: its new totals are the interval's.
func interval(prev, cur counters, dt time.Duration) point {
	sec := dt.Seconds()
	p := point{LatMeanMs: -1, LatP99Ms: -1}
	if cur.MsgIn < prev.MsgIn || cur.MsgOut < prev.MsgOut || cur.BytesIn < prev.BytesIn || cur.Lat.Count < prev.Lat.Count {
		p.Restarted = true
		prev = counters{}
	}
	p.In = float64(cur.MsgIn-prev.MsgIn) / sec
	p.Out = float64(cur.MsgOut-prev.MsgOut) / sec
	p.BytesIn = float64(cur.BytesIn-prev.BytesIn) / sec
	d := cur.Lat.minus(prev.Lat)
	if d.Count > 0 {
		p.LatSamples = d.Count
		p.LatMeanMs = d.Sum / d.Count * 1000
		if q := d.quantile(0.99); q >= 0 {
			p.LatP99Ms = q * 1000
		}
	}
	return p
}

// points returns addr's points, oldest first (a copy).
func (h *history) points(addr string) []point {
	s := h.brokers[addr]
	if s == nil {
		return []point{}
	}
	out := make([]point, 0, len(s.points))
	out = append(out, s.points[s.start:]...)
	return append(out, s.points[:s.start]...)
}

// forget drops the brokers not in keep (gone from the name server's list).
func (h *history) forget(keep map[string]bool) {
	for addr := range h.brokers {
		if !keep[addr] {
			delete(h.brokers, addr)
		}
	}
}

// histogram is a cumulative Prometheus histogram summed over its labels.
type histogram struct {
	Bounds []float64 // upper bounds, ascending, the last +Inf
	Counts []float64 // cumulative count per bound
	Sum    float64
	Count  float64
}

// minus is h's increase since an earlier prev with the same buckets
// (without them, h itself).
func (h histogram) minus(prev histogram) histogram {
	if len(prev.Bounds) != len(h.Bounds) {
		return h
	}
	d := histogram{Bounds: h.Bounds, Counts: make([]float64, len(h.Counts)), Sum: h.Sum - prev.Sum, Count: h.Count - prev.Count}
	for i := range h.Counts {
		d.Counts[i] = h.Counts[i] - prev.Counts[i]
	}
	return d
}

// quantile is the upper bound of the bucket holding the q-quantile (the
// largest finite bound when it falls in +Inf), -1 without buckets: a
// bound, not an estimate inside the bucket, so the chart never claims more
// precision than the buckets have.
func (h histogram) quantile(q float64) float64 {
	rank := q * h.Count
	for i, c := range h.Counts {
		if c >= rank && c > 0 {
			if math.IsInf(h.Bounds[i], 1) && i > 0 {
				return h.Bounds[i-1]
			}
			return h.Bounds[i]
		}
	}
	return -1
}
