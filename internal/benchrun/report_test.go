package benchrun

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wharfmq/wharf/internal/benchreport"
)

func TestBenchPerSecondRates(t *testing.T) {
	for _, c := range []struct {
		name    string
		counts  []int64
		elapsed time.Duration
		want    []float64
	}{
		{"whole seconds", []int64{10, 20, 30}, 3 * time.Second, []float64{10, 20, 30}},
		{"a short last part dropped", []int64{10, 20, 3}, 2*time.Second + 200*time.Millisecond, []float64{10, 20}},
		{"a long last part scaled", []int64{10, 20, 15}, 2*time.Second + 750*time.Millisecond, []float64{10, 20, 20}},
		{"quiet seconds count as 0", []int64{0, 5}, 4 * time.Second, []float64{0, 5, 0, 0}},
		{"under half a second", []int64{100}, 400 * time.Millisecond, nil},
		{"never opened", nil, 0, nil},
	} {
		if got := perSecondRates(c.counts, c.elapsed); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestBenchRecorderSamples: each completion counts in the second of the
// window it came in, and the result carries the rates, the curve and the
// largest latency.
func TestBenchRecorderSamples(t *testing.T) {
	r := newRecorder()
	at := func(into time.Duration, n int64, d time.Duration) {
		r.start.Store(time.Now().Add(-into).UnixNano()) // as if the window opened into ago
		r.done(n, d, nil)
	}
	at(200*time.Millisecond, 10, time.Millisecond)
	at(1200*time.Millisecond, 20, 2*time.Millisecond)
	at(2200*time.Millisecond, 6, 50*time.Millisecond)
	r.end.Store(r.start.Load() + int64(2600*time.Millisecond))
	res := r.result("x", 16)
	if want := []float64{10, 20, 10}; !reflect.DeepEqual(res.ThroughputPerS, want) {
		t.Errorf("throughput %v, want %v", res.ThroughputPerS, want)
	}
	if res.MaxMs == nil || *res.MaxMs != 50.015 {
		t.Errorf("max_ms %v, want 50.015", res.MaxMs)
	}
	c := res.LatencyCurve
	if len(c) != len(benchreport.CurvePercentiles()) || c[0].P != 0 || c[0].Ms != 1 || c[len(c)-1].P != 99.99 || c[len(c)-1].Ms != 50.015 {
		t.Errorf("curve %v", c)
	}
	for i := 1; i < len(c); i++ {
		if c[i].Ms < c[i-1].Ms {
			t.Errorf("curve falls at %v: %v", c[i].P, c)
		}
	}
}

// TestBenchReportScenarios: one chart per scenario and size, the lines of
// one comparison in one chart, skipped results left out.
func TestBenchReportScenarios(t *testing.T) {
	mx := 3.0
	rs := []Result{
		{Scenario: "async-256", Size: 1024, FlushMode: "ASYNC_FLUSH", MsgsPerS: 1, MaxMs: &mx},
		{Scenario: "async-256", Size: 128, FlushMode: "ASYNC_FLUSH"},
		{Scenario: "sync-flush-64", Size: 1024, Skipped: true},
		{Scenario: "sync-master-64", Size: 1024, FlushMode: "ASYNC_FLUSH"},
		{Scenario: "async-master-64", Size: 1024, FlushMode: "ASYNC_FLUSH"},
		{Scenario: "async-256/direct-1g", Size: 1024},
		{Scenario: "async-256/namesrv-2g", Size: 1024},
		{Scenario: "disk-fsync", Size: 0},
	}
	var got []string
	for _, sc := range reportScenarios([]Labelled{{Results: rs}}) {
		var names []string
		for _, s := range sc.Series {
			names = append(names, s.Name)
		}
		got = append(got, sc.Name+": "+strings.Join(names, ", "))
	}
	want := []string{
		"async-256, 1024 B: wharf ASYNC_FLUSH",
		"async-256, 128 B: wharf ASYNC_FLUSH",
		"sync-master-64, 1024 B: SYNC_MASTER, ASYNC_MASTER",
		"groups-2-vs-1 async-256, 1024 B: direct-1g, namesrv-2g",
		"disk-fsync: wharf",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("charts\n%q\nwant\n%q", got, want)
	}
	s := reportScenarios([]Labelled{{Results: rs}})[0].Series[0]
	if s.MaxMs != 3 || s.MsgsPerS != 1 {
		t.Errorf("summary figures: %+v", s)
	}
	if s := reportScenarios([]Labelled{{Results: rs}})[1].Series[0]; s.MaxMs != -1 || s.P50Ms != -1 || s.P999Ms != -1 {
		t.Errorf("latencies of a result without any: %+v, want -1 (not measured)", s)
	}
}

// TestBenchRunReport: --report writes the page, beside the table, even of
// skipped results only (then without charts).
func TestBenchRunReport(t *testing.T) {
	o := quickRunOptions(t)
	o.Scenarios, o.Broker = []string{"sync-flush-64,disk-probe"}, "127.0.0.1:1"
	o.Report = filepath.Join(t.TempDir(), "r.html")
	var out, errOut bytes.Buffer
	if _, err := Run(t.Context(), o, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	page, err := os.ReadFile(o.Report)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(page), "<svg "); n != 4 || !strings.Contains(string(page), ">disk-group-commit, 1024 B</h2>") {
		t.Errorf("%d charts in the report, want 4 (the disk probe's two results):\n%s", n, page)
	}
	if !strings.Contains(errOut.String(), "report written to "+o.Report) {
		t.Errorf("stderr does not name the report: %s", errOut.String())
	}
}

// TestBenchCompareRuns: the JSON lines of two runs, read back, give one
// chart per scenario with a line per run, named by the runs' labels.
func TestBenchCompareRuns(t *testing.T) {
	var a, b bytes.Buffer
	for _, r := range []Result{
		{Scenario: "sync-16", Size: 1024, FlushMode: "ASYNC_FLUSH", MsgsPerS: 10, LatencyCurve: []benchreport.Point{{P: 0, Ms: 1}}},
		{Scenario: "sync-master-64", Size: 1024, FlushMode: "ASYNC_FLUSH"},
		{Scenario: "async-master-64", Size: 1024, FlushMode: "ASYNC_FLUSH"},
	} {
		_ = writeJSON(&a, r)
		r.MsgsPerS *= 2
		_ = writeJSON(&b, r)
	}
	ra, err := ReadResults(strings.NewReader("bench: progress\n" + a.String() + "\n"))
	if err != nil || len(ra) != 3 || ra[0].LatencyCurve[0].Ms != 1 {
		t.Fatalf("read %+v, %v", ra, err)
	}
	rb, _ := ReadResults(&b)
	if _, err := ReadResults(strings.NewReader(`{"scenario": 1}`)); err == nil {
		t.Error("a broken line was read without an error")
	}
	var got []string
	for _, sc := range reportScenarios([]Labelled{{"before", ra}, {"after", rb}}) {
		var names []string
		for _, s := range sc.Series {
			names = append(names, fmt.Sprintf("%s %.0f", s.Name, s.MsgsPerS))
		}
		got = append(got, sc.Name+": "+strings.Join(names, ", "))
	}
	want := []string{
		"sync-16, 1024 B: before 10, after 20",
		"sync-master-64, 1024 B: before SYNC_MASTER 0, before ASYNC_MASTER 0, after SYNC_MASTER 0, after ASYNC_MASTER 0",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("charts\n%q\nwant\n%q", got, want)
	}
}
