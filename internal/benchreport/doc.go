// Package benchreport draws benchmark results as a self-contained HTML page
// with inline SVG charts: per scenario, the latency percentile curve of each
// compared series (a broker, a configuration, a round) and its throughput
// over the measured window, and a summary table.
//
// Contract:
//
//   - The input is plain data (Report, Scenario, Series); the package does
//     no I/O beyond the io.Writer WriteHTML is given, reads no clock and
//     starts no goroutine. The same input gives the same bytes, so a chart
//     can be checked against a golden file.
//   - The percentile axis is a "nines" scale: x = -log10(1 - p/100), so 90,
//     99, 99.9 and 99.99 are equally far apart and the tail gets as much
//     room as the body. Curves are sampled at CurvePercentiles, evenly
//     spaced on that scale from 0 to 99.99. Latency is drawn on a log scale.
//   - Each series with data is one <path class="series"> per chart, in the
//     order given, coloured by its position; a series without data keeps its
//     legend entry (marked "no data") and draws no path. Every name and note
//     is escaped.
//   - The page uses no script, no external style sheet, font or image: it
//     can be mailed or opened offline.
package benchreport
