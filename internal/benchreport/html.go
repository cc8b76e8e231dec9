package benchreport

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// style is the page's whole style sheet, inline.
const style = `body{font-family:sans-serif;margin:24px;color:#222}
h1{font-size:20px}h2{font-size:16px;margin-top:32px}
table{border-collapse:collapse;font-size:13px;margin:8px 0}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}
.name,.note{text-align:left}
.charts{display:flex;flex-wrap:wrap;gap:12px}
.lines{color:#555;font-size:13px}`

// WriteHTML writes r as one self-contained HTML page: the title and lines,
// a summary table of every scenario and series, then per scenario its two
// charts and its table.
func WriteHTML(w io.Writer, r Report) error {
	var b strings.Builder
	title := r.Title
	if title == "" {
		title = "Benchmark report"
	}
	fmt.Fprintf(&b, "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>%s</title>\n<style>\n%s\n</style>\n</head>\n<body>\n", esc(title), style)
	fmt.Fprintf(&b, "<h1>%s</h1>\n", esc(title))
	if len(r.Lines) > 0 {
		b.WriteString("<div class=\"lines\">\n")
		for _, l := range r.Lines {
			fmt.Fprintf(&b, "<p>%s</p>\n", esc(l))
		}
		b.WriteString("</div>\n")
	}
	b.WriteString("<h2>Summary</h2>\n")
	summaryTable(&b, r.Scenarios, true)
	for i, sc := range r.Scenarios {
		fmt.Fprintf(&b, "<section id=\"s%d\">\n<h2>%s</h2>\n<div class=\"charts\">\n", i, esc(sc.Name))
		b.WriteString(LatencySVG(sc))
		b.WriteString(ThroughputSVG(sc))
		b.WriteString("</div>\n")
		summaryTable(&b, []Scenario{sc}, false)
		b.WriteString("</section>\n")
	}
	b.WriteString("</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("benchreport: write: %w", err)
	}
	return nil
}

// summaryTable writes one row per series of scs; withScenario adds the
// scenario's name (linked to its section) as the first column.
func summaryTable(b *strings.Builder, scs []Scenario, withScenario bool) {
	b.WriteString("<table>\n<tr>")
	if withScenario {
		b.WriteString(`<th class="name">scenario</th>`)
	}
	b.WriteString(`<th class="name">series</th><th>msg/s</th><th>p50 ms</th><th>p99 ms</th><th>p99.9 ms</th><th>max ms</th><th>errors</th><th class="note">note</th></tr>` + "\n")
	for i, sc := range scs {
		for _, s := range sc.Series {
			b.WriteString("<tr>")
			if withScenario {
				fmt.Fprintf(b, "<td class=\"name\"><a href=\"#s%d\">%s</a></td>", i, esc(sc.Name))
			}
			fmt.Fprintf(b, "<td class=\"name\">%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%d</td><td class=\"note\">%s</td></tr>\n",
				esc(s.Name), strconv.FormatFloat(s.MsgsPerS, 'f', 0, 64), msCell(s.P50Ms), msCell(s.P99Ms), msCell(s.P999Ms), msCell(s.MaxMs),
				s.Errors, esc(s.Note))
		}
	}
	b.WriteString("</table>\n")
}

// msCell formats a latency; negative: not measured.
func msCell(v float64) string {
	if v < 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}
