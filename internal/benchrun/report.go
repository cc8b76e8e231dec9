package benchrun

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/wharfmq/wharf/internal/benchreport"
)

// Labelled is the results of one run (one `wharf bench --json` output),
// under the name its lines get in a comparison's charts.
type Labelled struct {
	Label   string
	Results []Result
}

// ReadResults reads the JSON lines of `wharf bench --json`; other lines
// (progress a shell redirect caught, say) are skipped.
func ReadResults(r io.Reader) ([]Result, error) {
	var rs []Result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var res Result
		if err := json.Unmarshal(line, &res); err != nil {
			return rs, fmt.Errorf("a result line: %w", err)
		}
		if res.Scenario != "" {
			rs = append(rs, res)
		}
	}
	if err := sc.Err(); err != nil {
		return rs, fmt.Errorf("reading results: %w", err)
	}
	return rs, nil
}

// WriteReport writes runs as one HTML page to path: per scenario and size,
// a chart pair with one line per run (and per configuration of a
// comparison within a run), in the order they first came. Its title and
// lines head the page.
func WriteReport(path, title string, lines []string, runs []Labelled) error {
	r := benchreport.Report{Title: title, Lines: lines, Scenarios: reportScenarios(runs)}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := benchreport.WriteHTML(f, r); err != nil {
		f.Close()
		return fmt.Errorf("report %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("report %s: %w", path, err)
	}
	return nil
}

// reportScenarios groups the results of runs into charts, in the order
// their first result came: the lines of one comparison (sync-master-64's
// two roles, groups-2-vs-1's configurations of one load) share a chart,
// and so do the same scenario's results of different runs. Skipped results
// have nothing to draw.
func reportScenarios(runs []Labelled) []benchreport.Scenario {
	var out []benchreport.Scenario
	index := map[string]int{}
	for _, run := range runs {
		for _, r := range run.Results {
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
			out[i].Series = append(out[i].Series, reportSeries(labelled(run.Label, series), r))
		}
	}
	return out
}

// labelled names a run's series: the run's label for the broker itself,
// the label and the configuration for one line of a comparison.
func labelled(label, series string) string {
	switch {
	case label == "":
		return series
	case strings.HasPrefix(series, "wharf"):
		return label
	}
	return label + " " + series
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
