package dashboard

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// sendLatencyMetric is the broker's send-latency histogram (seconds), by
// request code and status; the dashboard sums it over its labels.
const sendLatencyMetric = "wharf_send_latency_seconds"

// parseHistogram reads Prometheus' text exposition and returns the
// histogram name summed over its label sets. A missing histogram is an
// empty one, not an error: a broker with no sends yet may not list it.
func parseHistogram(r io.Reader, name string) (histogram, error) {
	byBound := map[float64]float64{}
	var h histogram
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"_") {
			continue
		}
		series, value, ok := cutValue(line)
		if !ok {
			return histogram{}, fmt.Errorf("metrics line %q: no value", line)
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return histogram{}, fmt.Errorf("metrics line %q: %w", line, err)
		}
		metric, labels, _ := strings.Cut(series, "{")
		switch metric {
		case name + "_sum":
			h.Sum += v
		case name + "_count":
			h.Count += v
		case name + "_bucket":
			le, err := labelLE(labels)
			if err != nil {
				return histogram{}, fmt.Errorf("metrics line %q: %w", line, err)
			}
			byBound[le] += v
		}
	}
	if err := sc.Err(); err != nil {
		return histogram{}, fmt.Errorf("read metrics: %w", err)
	}
	for b := range byBound {
		h.Bounds = append(h.Bounds, b)
	}
	slices.Sort(h.Bounds)
	for _, b := range h.Bounds {
		h.Counts = append(h.Counts, byBound[b])
	}
	return h, nil
}

// cutValue splits "series value [timestamp]" (labels may hold spaces, so
// the split is after the closing brace).
func cutValue(line string) (series, value string, ok bool) {
	rest := line
	if i := strings.LastIndexByte(line, '}'); i >= 0 {
		series, rest = line[:i+1], line[i+1:]
	} else {
		i := strings.IndexByte(line, ' ')
		if i < 0 {
			return "", "", false
		}
		series, rest = line[:i], line[i:]
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return "", "", false
	}
	return series, fields[0], true
}

// labelLE finds le="..." in a label list.
func labelLE(labels string) (float64, error) {
	i := strings.Index(labels, `le="`)
	if i < 0 {
		return 0, fmt.Errorf("bucket without le")
	}
	v, _, ok := strings.Cut(labels[i+4:], `"`)
	if !ok {
		return 0, fmt.Errorf("unterminated le")
	}
	if v == "+Inf" {
		return math.Inf(1), nil
	}
	return strconv.ParseFloat(v, 64)
}
