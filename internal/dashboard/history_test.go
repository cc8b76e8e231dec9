package dashboard

import (
	"math"
	"strings"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

func lat(sum, count float64, counts ...float64) histogram {
	return histogram{Bounds: []float64{0.001, 0.01, math.Inf(1)}, Counts: counts, Sum: sum, Count: count}
}

// TestHistoryPoints: rates are deltas over the interval, latency comes
// from the histogram's increase, and a counter going back is a restart.
func TestHistoryPoints(t *testing.T) {
	type sample struct {
		at time.Duration
		c  counters
	}
	tests := []struct {
		name    string
		samples []sample
		want    []point // T left out
	}{
		{"first sample makes no point", []sample{{0, counters{MsgIn: 5}}}, nil},
		{"rates over two seconds", []sample{
			{0, counters{MsgIn: 10, MsgOut: 4, BytesIn: 1000}},
			{2 * time.Second, counters{MsgIn: 30, MsgOut: 8, BytesIn: 3000}},
		}, []point{{In: 10, Out: 2, BytesIn: 1000, LatMeanMs: -1, LatP99Ms: -1}}},
		{"latency from the histogram's increase", []sample{
			{0, counters{Lat: lat(1, 100, 50, 100, 100)}},
			{time.Second, counters{Lat: lat(1.05, 110, 50, 110, 110)}},
		}, []point{{LatMeanMs: 5, LatP99Ms: 10, LatSamples: 10}}},
		{"p99 in +Inf is the largest finite bound", []sample{
			{0, counters{Lat: lat(0, 0, 0, 0, 0)}},
			{time.Second, counters{Lat: lat(2, 1, 0, 0, 1)}},
		}, []point{{LatMeanMs: 2000, LatP99Ms: 10, LatSamples: 1}}},
		{"restart: new totals are the interval's", []sample{
			{0, counters{MsgIn: 100}},
			{time.Second, counters{MsgIn: 7}},
		}, []point{{In: 7, LatMeanMs: -1, LatP99Ms: -1, Restarted: true}}},
		{"a sample not after the last is dropped", []sample{
			{time.Second, counters{MsgIn: 1}},
			{time.Second, counters{MsgIn: 50}},
			{2 * time.Second, counters{MsgIn: 3}},
		}, []point{{In: 2, LatMeanMs: -1, LatP99Ms: -1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHistory(10)
			for _, s := range tt.samples {
				h.add(t0.Add(s.at), "b1", s.c)
			}
			got := h.points("b1")
			if len(got) != len(tt.want) {
				t.Fatalf("points = %+v, want %+v", got, tt.want)
			}
			for i := range got {
				got[i].T = 0
				got[i].LatMeanMs = math.Round(got[i].LatMeanMs*1e6) / 1e6
				if got[i] != tt.want[i] {
					t.Errorf("point %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// TestHistoryRing: the ring keeps the newest cap points, oldest first,
// and forget drops brokers no longer listed.
func TestHistoryRing(t *testing.T) {
	h := newHistory(3)
	for i := range 6 {
		h.add(t0.Add(time.Duration(i)*time.Second), "b1", counters{MsgIn: int64(i * i)})
	}
	h.add(t0, "b2", counters{})
	var ins []float64
	for _, p := range h.points("b1") {
		ins = append(ins, p.In)
	}
	if want := []float64{5, 7, 9}; len(ins) != 3 || ins[0] != want[0] || ins[1] != want[1] || ins[2] != want[2] {
		t.Errorf("ring = %v, want %v", ins, want)
	}
	h.forget(map[string]bool{"b1": true})
	if _, ok := h.brokers["b2"]; ok {
		t.Error("forget kept b2")
	}
	if got := h.points("nope"); got == nil || len(got) != 0 {
		t.Errorf("points of an unknown broker = %v, want empty non-nil", got)
	}
}

const exposition = `# HELP wharf_send_latency_seconds Send latency.
# TYPE wharf_send_latency_seconds histogram
wharf_send_latency_seconds_bucket{code="10",status="SEND_OK",le="0.001"} 3
wharf_send_latency_seconds_bucket{code="10",status="SEND_OK",le="0.01"} 5
wharf_send_latency_seconds_bucket{code="10",status="SEND_OK",le="+Inf"} 6
wharf_send_latency_seconds_sum{code="10",status="SEND_OK"} 0.5
wharf_send_latency_seconds_count{code="10",status="SEND_OK"} 6
wharf_send_latency_seconds_bucket{code="310",status="a b",le="0.001"} 1
wharf_send_latency_seconds_bucket{code="310",status="a b",le="0.01"} 1
wharf_send_latency_seconds_bucket{code="310",status="a b",le="+Inf"} 2
wharf_send_latency_seconds_sum{code="310",status="a b"} 1.5
wharf_send_latency_seconds_count{code="310",status="a b"} 2
wharf_pull_latency_seconds_count{code="11"} 99
`

// TestParseHistogram sums a histogram over its label sets and ignores
// other metrics; a bad line is an error, an absent histogram empty.
func TestParseHistogram(t *testing.T) {
	h, err := parseHistogram(strings.NewReader(exposition), sendLatencyMetric)
	if err != nil {
		t.Fatal(err)
	}
	if h.Count != 8 || h.Sum != 2 || len(h.Bounds) != 3 || h.Counts[0] != 4 || h.Counts[1] != 6 || h.Counts[2] != 8 || !math.IsInf(h.Bounds[2], 1) {
		t.Errorf("histogram = %+v", h)
	}
	if q := h.quantile(0.5); q != 0.001 {
		t.Errorf("p50 = %v, want 0.001", q)
	}
	if h, err := parseHistogram(strings.NewReader("other_metric 1\n"), sendLatencyMetric); err != nil || h.Count != 0 || h.quantile(0.99) != -1 {
		t.Errorf("absent histogram = %+v, %v", h, err)
	}
	for _, bad := range []string{"wharf_send_latency_seconds_count{a=\"b\"} x\n", "wharf_send_latency_seconds_bucket{le=\"oops\"} 1\n", "wharf_send_latency_seconds_sum\n"} {
		if _, err := parseHistogram(strings.NewReader(bad), sendLatencyMetric); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
