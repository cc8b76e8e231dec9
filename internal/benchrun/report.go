package benchrun

import (
	"fmt"
	"os"
	"strings"

	"github.com/wharfmq/wharf/internal/benchreport"
)

// writeReport writes rs as an HTML report (--report) to path: one chart
// pair per scenario and size, one series per configuration of it.
func writeReport(path string, rs []Result, lines []string) error {
	r := benchreport.Report{Title: "wharf bench", Lines: lines, Scenarios: reportScenarios(rs)}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	if err := benchreport.WriteHTML(f, r); err != nil {
		f.Close()
		return fmt.Errorf("--report %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--report %s: %w", path, err)
	}
	return nil
}

// reportScenarios groups rs into charts, in the order their first result
// came: the lines of one comparison (sync-master-64's two roles,
// groups-2-vs-1's configurations of one load) share a chart. Skipped
// results have nothing to draw.
func reportScenarios(rs []Result) []benchreport.Scenario {
	var out []benchreport.Scenario
	index := map[string]int{}
	for _, r := range rs {
		if r.Skipped {
			continue
		}
		chart, series := reportNames(r)
		name := chart
		if r.Size > 0 {
			name = fmt.Sprintf("%s, %d B", chart, r.Size)
		}
		i, ok := index[name]
		if !ok {
			i = len(out)
			index[name] = i
			out = append(out, benchreport.Scenario{Name: name})
		}
		out[i].Series = append(out[i].Series, reportSeries(series, r))
	}
	return out
}

// reportNames is the chart and the series a result belongs to.
func reportNames(r Result) (chart, series string) {
	switch {
	case strings.Contains(r.Scenario, "/"): // groups-2-vs-1: load/configuration
		load, config, _ := strings.Cut(r.Scenario, "/")
		return "groups-2-vs-1 " + load, config
	case r.Scenario == "sync-master-64" || r.Scenario == "async-master-64":
		return "sync-master-64", strings.ToUpper(strings.ReplaceAll(strings.TrimSuffix(r.Scenario, "-64"), "-", "_"))
	case r.FlushMode != "":
		return r.Scenario, "wharf " + r.FlushMode
	}
	return r.Scenario, "wharf"
}

// reportSeries is r as the series name of a report: its curve, its
// throughput samples and its summary figures.
func reportSeries(name string, r Result) benchreport.Series {
	s := benchreport.Series{Name: name, Curve: r.LatencyCurve, Throughput: r.ThroughputPerS,
		MsgsPerS: r.MsgsPerS, P50Ms: r.P50Ms, P99Ms: r.P99Ms, P999Ms: r.P999Ms, MaxMs: -1, Errors: r.Errors, Note: r.Note}
	if r.MaxMs != nil {
		s.MaxMs = *r.MaxMs
	}
	if len(r.LatencyCurve) == 0 { // no latency measured: not 0 ms
		s.P50Ms, s.P99Ms, s.P999Ms = -1, -1, -1
	}
	return s
}
