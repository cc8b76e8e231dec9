package benchreport

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// The chart's geometry in pixels: the plot area, with room on the left for
// the y ticks, below for the x ticks and label, on the right for the legend.
const (
	chartW, chartH         = 600.0, 300.0
	padLeft, padRight      = 60.0, 180.0
	padTop, padBottom      = 30.0, 42.0
	plotW, plotH           = chartW - padLeft - padRight, chartH - padTop - padBottom
	legendX, legendY, rowH = chartW - padRight + 14, padTop + 4, 16.0
)

// palette colours the series by position (colour-blind safe first).
var palette = []string{"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000", "#f0e442"}

// tick is a labelled grid line.
type tick struct {
	v     float64
	label string
}

// axis maps data values onto one side of the plot area.
type axis struct {
	lo, hi float64
	log    bool // map log10(v)
	ticks  []tick
	label  string
}

// frac is v's position along the axis, 0 at lo and 1 at hi.
func (a axis) frac(v float64) float64 {
	lo, hi := a.lo, a.hi
	if a.log {
		v, lo, hi = math.Log10(max(v, 1e-12)), math.Log10(lo), math.Log10(hi)
	}
	if hi == lo {
		return 0
	}
	return (v - lo) / (hi - lo)
}

// line is one series as data coordinates; no points: no data.
type line struct {
	name    string
	pts     [][2]float64
	markers bool // a dot on each point (few samples would draw no line)
}

// chart is one SVG chart.
type chart struct {
	title string
	x, y  axis
	lines []line
}

func (c *chart) px(v float64) float64 { return padLeft + c.x.frac(v)*plotW }
func (c *chart) py(v float64) float64 { return padTop + plotH - c.y.frac(v)*plotH }

// f1 formats a pixel coordinate.
func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// esc escapes text for SVG and HTML content and attributes.
func esc(s string) string { return html.EscapeString(s) }

// svg renders c as a standalone <svg> element.
func (c *chart) svg() string {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="%s" height="%s" viewBox="0 0 %s %s" font-family="sans-serif" font-size="11" role="img" aria-label="%s">`+"\n",
		f1(chartW), f1(chartH), f1(chartW), f1(chartH), esc(c.title))
	fmt.Fprintf(&b, "<title>%s</title>\n", esc(c.title))
	fmt.Fprintf(&b, `<text x="%s" y="18" font-size="13" font-weight="bold">%s</text>`+"\n", f1(padLeft), esc(c.title))
	c.grid(&b)
	x0, y0, x1, y1 := f1(padLeft), f1(padTop+plotH), f1(padLeft+plotW), f1(padTop)
	fmt.Fprintf(&b, `<path class="axes" d="M%s,%s V%s H%s" fill="none" stroke="#333"/>`+"\n", x0, y1, y0, x1)
	fmt.Fprintf(&b, `<text class="xlabel" x="%s" y="%s" text-anchor="middle">%s</text>`+"\n",
		f1(padLeft+plotW/2), f1(chartH-6), esc(c.x.label))
	fmt.Fprintf(&b, `<text class="ylabel" x="14" y="%s" text-anchor="middle" transform="rotate(-90 14 %s)">%s</text>`+"\n",
		f1(padTop+plotH/2), f1(padTop+plotH/2), esc(c.y.label))
	for i, l := range c.lines {
		c.series(&b, l, palette[i%len(palette)])
	}
	c.legend(&b)
	b.WriteString("</svg>\n")
	return b.String()
}

// grid draws a line and a label per tick of both axes.
func (c *chart) grid(b *strings.Builder) {
	b.WriteString(`<g class="grid" stroke="#e4e4e4">` + "\n")
	for _, t := range c.x.ticks {
		x := f1(c.px(t.v))
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s"/>`+"\n", x, f1(padTop), x, f1(padTop+plotH))
	}
	for _, t := range c.y.ticks {
		y := f1(c.py(t.v))
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s"/>`+"\n", f1(padLeft), y, f1(padLeft+plotW), y)
	}
	b.WriteString("</g>\n<g class=\"ticks\" fill=\"#333\">\n")
	for _, t := range c.x.ticks {
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", f1(c.px(t.v)), f1(padTop+plotH+14), esc(t.label))
	}
	for _, t := range c.y.ticks {
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="end">%s</text>`+"\n", f1(padLeft-5), f1(c.py(t.v)+4), esc(t.label))
	}
	b.WriteString("</g>\n")
}

// series draws one line (and its dots), if it has points.
func (c *chart) series(b *strings.Builder, l line, color string) {
	if len(l.pts) == 0 {
		return
	}
	var d strings.Builder
	for i, p := range l.pts {
		cmd := "L"
		if i == 0 {
			cmd = "M"
		}
		fmt.Fprintf(&d, "%s%s,%s ", cmd, f1(c.px(p[0])), f1(c.py(p[1])))
	}
	fmt.Fprintf(b, `<path class="series" d="%s" fill="none" stroke="%s" stroke-width="1.8"><title>%s</title></path>`+"\n",
		strings.TrimSpace(d.String()), color, esc(l.name))
	if !l.markers {
		return
	}
	fmt.Fprintf(b, `<g class="markers" fill="%s">`+"\n", color)
	for _, p := range l.pts {
		fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="2"/>`+"\n", f1(c.px(p[0])), f1(c.py(p[1])))
	}
	b.WriteString("</g>\n")
}

// legend lists the series in order, with their colours.
func (c *chart) legend(b *strings.Builder) {
	b.WriteString(`<g class="legend">` + "\n")
	for i, l := range c.lines {
		y := legendY + float64(i)*rowH
		name := legendName(l.name)
		if len(l.pts) == 0 {
			name += " (no data)"
		}
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="3"/>`+"\n",
			f1(legendX), f1(y), f1(legendX+16), f1(y), palette[i%len(palette)])
		fmt.Fprintf(b, `<text x="%s" y="%s">%s</text>`+"\n", f1(legendX+22), f1(y+4), esc(name))
	}
	b.WriteString("</g>\n")
}

// legendMax is the longest name the legend has room for, in runes.
const legendMax = 22

// legendName shortens a long name with an ellipsis (the path's title keeps
// the whole name).
func legendName(s string) string {
	r := []rune(s)
	if len(r) <= legendMax {
		return s
	}
	return string(r[:legendMax-1]) + "…"
}
