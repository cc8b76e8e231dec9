package benchreport

import (
	"math"
)

// Point is one point of a latency percentile curve.
type Point struct {
	P  float64 `json:"p"`  // percentile, 0..100
	Ms float64 `json:"ms"` // latency at P, in milliseconds
}

// Series is one compared line of a scenario: a broker, a configuration or
// a round.
type Series struct {
	Name string
	// Curve is the latency at each percentile (CurvePercentiles), in
	// increasing P; empty: no latency was measured.
	Curve []Point
	// Throughput is messages per second in each second of the measured
	// window, in order; empty: not sampled.
	Throughput []float64
	// The summary table's figures; a negative latency means not measured.
	MsgsPerS, P50Ms, P99Ms, P999Ms, MaxMs float64
	Errors                                int64
	Note                                  string
}

// Scenario is one chart pair and summary table.
type Scenario struct {
	Name   string // e.g. "async-256, 1024 B"
	Series []Series
}

// Report is a whole page.
type Report struct {
	Title     string
	Lines     []string // shown under the title: machine, command, date
	Scenarios []Scenario
}

// curveNines is the last point of the curves on the nines scale: 99.99.
const curveNines = 4

// curveSteps is the number of curve intervals per nine.
const curveSteps = 10

// CurvePercentiles returns the percentiles a Curve is sampled at: from 0 to
// 99.99, evenly spaced on the nines scale (ten per nine), rounded to four
// decimals.
func CurvePercentiles() []float64 {
	ps := make([]float64, 0, curveNines*curveSteps+1)
	for i := 0; i <= curveNines*curveSteps; i++ {
		x := float64(i) / curveSteps
		p := 100 * (1 - math.Pow(10, -x))
		ps = append(ps, math.Round(p*1e4)/1e4)
	}
	return ps
}

// nines maps a percentile to the x of the nines scale, clamped to
// [0, curveNines].
func nines(p float64) float64 {
	if p <= 0 {
		return 0
	}
	if p >= 99.99 {
		return curveNines
	}
	return min(curveNines, -math.Log10(1-p/100))
}
