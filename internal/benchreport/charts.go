package benchreport

import (
	"math"
	"strconv"
)

// ninesTicks label the percentile axis.
var ninesTicks = func() []tick {
	var ts []tick
	for _, p := range []float64{0, 50, 90, 99, 99.9, 99.99} {
		ts = append(ts, tick{nines(p), strconv.FormatFloat(p, 'f', -1, 64)})
	}
	return ts
}()

// LatencySVG is the chart of sc's latency percentile curves: percentile on
// the nines scale, latency in ms on a log scale, one path per series with a
// curve.
func LatencySVG(sc Scenario) string {
	c := chart{title: sc.Name + ": latency by percentile",
		x: axis{lo: 0, hi: curveNines, ticks: ninesTicks, label: "percentile"}}
	lo, hi := math.Inf(1), 0.0
	for _, s := range sc.Series {
		l := line{name: s.Name}
		for _, p := range s.Curve {
			if p.Ms <= 0 || math.IsNaN(p.Ms) || math.IsInf(p.Ms, 0) {
				continue
			}
			l.pts = append(l.pts, [2]float64{nines(p.P), p.Ms})
			lo, hi = min(lo, p.Ms), max(hi, p.Ms)
		}
		c.lines = append(c.lines, l)
	}
	c.y = logAxis(lo, hi, "latency, ms (log scale)")
	return c.svg()
}

// ThroughputSVG is the chart of sc's throughput over the measured window:
// one path (and a dot per sample) per series with samples.
func ThroughputSVG(sc Scenario) string {
	c := chart{title: sc.Name + ": throughput per second"}
	n, top := 0, 0.0
	for _, s := range sc.Series {
		l := line{name: s.Name, markers: true}
		for i, v := range s.Throughput {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			l.pts = append(l.pts, [2]float64{float64(i) + 0.5, v})
			top = max(top, v)
		}
		n = max(n, len(s.Throughput))
		c.lines = append(c.lines, l)
	}
	c.x = linearAxis(float64(max(n, 1)), "seconds into the measured window", 8, 1)
	c.y = linearAxis(top, "msg/s", 5, 0)
	return c.svg()
}

// logAxis spans whole decades around [lo, hi], with a tick per decade and,
// over at most two decades, at 2 and 5 of each too. No data: 0.1..10.
func logAxis(lo, hi float64, label string) axis {
	if hi <= 0 || math.IsInf(lo, 0) {
		lo, hi = 0.1, 10
	}
	a, b := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if b <= a {
		b = a + 1
	}
	ax := axis{lo: math.Pow(10, a), hi: math.Pow(10, b), log: true, label: label}
	for e := a; e <= b; e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if (m == 1 || b-a <= 2) && v <= ax.hi*(1+1e-9) {
				ax.ticks = append(ax.ticks, tick{v, number(v)})
			}
		}
	}
	return ax
}

// linearAxis spans 0..a round number at or above top, with about n ticks
// at a step of 1, 2 or 5 times a power of ten, and at least minStep.
func linearAxis(top float64, label string, n int, minStep float64) axis {
	if top <= 0 {
		top = 1
	}
	step := max(niceStep(top/float64(n)), minStep)
	hi := math.Ceil(top/step-1e-9) * step
	ax := axis{lo: 0, hi: hi, label: label}
	for i := 0; float64(i)*step <= hi*(1+1e-9); i++ {
		v := float64(i) * step
		ax.ticks = append(ax.ticks, tick{v, number(v)})
	}
	return ax
}

// niceStep is the smallest 1, 2 or 5 times a power of ten at or above x.
func niceStep(x float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// number labels a tick: six significant digits at most, from 10,000 on in
// thousands (k), from a million on in millions (M).
func number(v float64) string {
	suffix := ""
	switch {
	case v >= 1e6:
		v, suffix = v/1e6, "M"
	case v >= 1e4:
		v, suffix = v/1e3, "k"
	}
	v, _ = strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	return strconv.FormatFloat(v, 'f', -1, 64) + suffix
}
