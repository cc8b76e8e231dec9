package benchreport

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// fixed is a two-series scenario with a name that needs escaping, and a
// third series without data.
func fixed() Scenario {
	ps := CurvePercentiles()
	curve := func(base float64) []Point {
		var c []Point
		for i, p := range ps {
			c = append(c, Point{P: p, Ms: base * (1 + float64(i*i)/40)})
		}
		return c
	}
	return Scenario{Name: "async-256, 1024 B", Series: []Series{
		{Name: "wharf", Curve: curve(0.4), Throughput: []float64{210e3, 231e3, 225e3, 240e3},
			MsgsPerS: 226500, P50Ms: 0.8, P99Ms: 9.1, P999Ms: 15.2, MaxMs: 17},
		{Name: `Jet<Stream> & "co"`, Curve: curve(0.9), Throughput: []float64{131e3, 140e3, 138e3},
			MsgsPerS: 136000, P50Ms: 1.9, P99Ms: 21, P999Ms: 34, MaxMs: -1, Errors: 2, Note: "a <note>"},
		{Name: "empty"},
		{Name: "a name too long for the legend's room", Curve: curve(2)},
	}}
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it); got:\n%s", name, got)
	}
}

func TestChartsGolden(t *testing.T) {
	golden(t, "latency.svg", LatencySVG(fixed()))
	golden(t, "throughput.svg", ThroughputSVG(fixed()))
}

// TestChartContents: one path per series with data, in order and colour;
// axis labels and ticks; every name escaped; a series without data in the
// legend only.
func TestChartContents(t *testing.T) {
	sc := fixed()
	for name, svg := range map[string]string{"latency": LatencySVG(sc), "throughput": ThroughputSVG(sc)} {
		paths := regexp.MustCompile(`<path class="series"[^>]*stroke="([^"]+)"`).FindAllStringSubmatch(svg, -1)
		wantPaths := map[string]int{"latency": 3, "throughput": 2}[name]
		if len(paths) != wantPaths || paths[0][1] != palette[0] || paths[1][1] != palette[1] {
			t.Errorf("%s: series paths %v, want %d, coloured %s, %s, ...", name, paths, wantPaths, palette[0], palette[1])
		}
		if !strings.Contains(svg, ">a name too long for t…") {
			t.Errorf("%s: a long name is not shortened in the legend", name)
		}
		if strings.Contains(svg, "Jet<Stream>") || !strings.Contains(svg, "Jet&lt;Stream&gt; &amp; &#34;co&#34;") {
			t.Errorf("%s: the series name is not escaped", name)
		}
		if !strings.Contains(svg, ">empty (no data)</text>") {
			t.Errorf("%s: the series without data is not in the legend as such", name)
		}
		if strings.Count(svg, "<svg") != 1 || !strings.HasSuffix(svg, "</svg>\n") {
			t.Errorf("%s: not one svg element", name)
		}
	}
	lat := LatencySVG(sc)
	for _, want := range []string{">percentile</text>", ">latency, ms (log scale)</text>", ">99.99</text>", ">99.9</text>", ">50</text>", ">0.1</text>", ">10</text>"} {
		if !strings.Contains(lat, want) {
			t.Errorf("latency chart lacks %q", want)
		}
	}
	thr := ThroughputSVG(sc)
	for _, want := range []string{">seconds into the measured window</text>", ">msg/s</text>", ">250k</text>", ">0</text>"} {
		if !strings.Contains(thr, want) {
			t.Errorf("throughput chart lacks %q", want)
		}
	}
	if n := strings.Count(thr, "<circle"); n != 7 {
		t.Errorf("throughput chart has %d dots, want one per sample (7)", n)
	}
}

func TestCurvePercentiles(t *testing.T) {
	ps := CurvePercentiles()
	if len(ps) != 41 || ps[0] != 0 || ps[10] != 90 || ps[20] != 99 || ps[30] != 99.9 || ps[40] != 99.99 {
		t.Fatalf("CurvePercentiles = %v", ps)
	}
	for i := 1; i < len(ps); i++ {
		if ps[i] <= ps[i-1] {
			t.Fatalf("not increasing at %d: %v", i, ps)
		}
	}
	for _, c := range []struct{ p, x float64 }{{-1, 0}, {0, 0}, {90, 1}, {99, 2}, {99.99, 4}, {100, 4}} {
		if got := nines(c.p); got < c.x-1e-9 || got > c.x+1e-9 {
			t.Errorf("nines(%v) = %v, want %v", c.p, got, c.x)
		}
	}
}

func TestAxes(t *testing.T) {
	labels := func(a axis) string {
		var s []string
		for _, t := range a.ticks {
			s = append(s, t.label)
		}
		return strings.Join(s, " ")
	}
	for _, c := range []struct {
		name string
		ax   axis
		want string
	}{
		{"log, two decades", logAxis(0.3, 9, ""), "0.1 0.2 0.5 1 2 5 10"},
		{"log, three decades", logAxis(0.3, 12, ""), "0.1 1 10 100"},
		{"log, four decades", logAxis(0.05, 170, ""), "0.01 0.1 1 10 100 1000"},
		{"log, one value", logAxis(1, 1, ""), "1 2 5 10"},
		{"log, no data", logAxis(0, 0, ""), "0.1 0.2 0.5 1 2 5 10"},
		{"linear, msg/s", linearAxis(240e3, "", 5, 0), "0 50k 100k 150k 200k 250k"},
		{"linear, small", linearAxis(4500, "", 5, 0), "0 1000 2000 3000 4000 5000"},
		{"linear, seconds", linearAxis(10, "", 8, 1), "0 2 4 6 8 10"},
		{"linear, millions", linearAxis(1.3e6, "", 5, 0), "0 500k 1M 1.5M"},
		{"linear, few seconds", linearAxis(3, "", 8, 1), "0 1 2 3"},
		{"linear, nothing", linearAxis(0, "", 5, 0), "0 0.2 0.4 0.6 0.8 1"},
	} {
		if got := labels(c.ax); got != c.want {
			t.Errorf("%s: ticks %q, want %q", c.name, got, c.want)
		}
	}
}

// TestWriteHTML: a page with both charts and a table row per series for
// each scenario, escaped, and nothing it would fetch or run.
func TestWriteHTML(t *testing.T) {
	other := fixed()
	other.Name = "e2e-10k <1 KiB>"
	r := Report{Title: "Wharf & JetStream", Lines: []string{"machine: <2 cores>"}, Scenarios: []Scenario{fixed(), other}}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, r); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if n := strings.Count(page, "<svg "); n != 4 {
		t.Errorf("%d charts, want 4", n)
	}
	if n := strings.Count(page, "<tr><td"); n != 2*4*2 { // summary and section tables
		t.Errorf("%d table rows, want 16", n)
	}
	for _, bad := range []string{"<script", "https://", "<link", "<img", "e2e-10k <1", "<2 cores>", "Wharf & J", "a <note>"} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	if strings.Count(page, "http://") != 4 { // the SVG namespace of each chart
		t.Errorf("page names %d URLs, want only the 4 SVG namespaces", strings.Count(page, "http://"))
	}
	for _, want := range []string{"<title>Wharf &amp; JetStream</title>", `<a href="#s1">e2e-10k &lt;1 KiB&gt;</a>`, `<section id="s1">`, "<td>-</td>"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}
