package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/wharfmq/wharf/internal/benchreport"
)

func sectionKey(o *opts) string {
	if o.quick {
		return "quick"
	}
	return "full"
}

func cmdLine(o *opts) string {
	// o.args holds what make passed too (--wharf-bin ../bin/wharf-bench)
	s := "make bench-compare"
	if o.quick {
		s = "make bench-compare QUICK=1"
	}
	return fmt.Sprintf("`%s` (= `cd bench && go run . %s`)", s, strings.Join(o.args, " "))
}

func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func ms(x float64) string { return fmt.Sprintf("%.3f", x) }

func cpuPerM(r result) string {
	if r.BrokerCPUSPerMMsg == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f", *r.BrokerCPUSPerMMsg)
}

// latencies is a result's "p50 / p99 / p999" in ms.
func latencies(r result) string {
	return ms(r.P50Ms) + " / " + ms(r.P99Ms) + " / " + ms(r.P999Ms)
}

func clientCPUPerM(r result) string {
	if r.ClientCPUSPerMMsg == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f", *r.ClientCPUSPerMMsg)
}

func find(ps []*pair, sc string, size int) *pair {
	for _, p := range ps {
		if p.scenario == sc && p.size == size {
			return p
		}
	}
	return nil
}

func findDisk(disk []result, sc string) *result {
	for i := range disk {
		if disk[i].Scenario == sc {
			return &disk[i]
		}
	}
	return nil
}

// render writes the section: machine, date, command, the side-by-side
// table and the targets.
func render(o *opts, disk []result, ps []*pair, took time.Duration) string {
	var b strings.Builder
	key := sectionKey(o)
	fmt.Fprintf(&b, "<!-- bench-compare %s: begin (written by bench/, do not edit by hand) -->\n", key)
	title := "full run"
	if o.quick {
		title = "quick run"
	}
	fmt.Fprintf(&b, "### Wharf vs NATS JetStream, %s (%s)\n\n", title, time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&b, "- Machine: %s; shared and noisy: read the ratios, taken in one run.\n", machine())
	fmt.Fprintf(&b, "- Command: %s; took %s.\n", cmdLine(o), took.Round(time.Second))
	fmt.Fprintf(&b, "- Each figure: %s warm-up, then %s measured; a fresh broker (fresh store) per scenario and broker, Wharf and JetStream alternately; clients in one process, broker in another, all on loopback. Backlog %d messages.\n",
		o.warmup, o.duration, o.backlog)
	fmt.Fprintf(&b, "- JetStream: nats-server v2.15.2 (embedded in a child process), nats.go v1.55.0, one file-backed stream (R1); default sync (acks from the page cache) vs Wharf ASYNC_FLUSH, `sync_interval: always` vs Wharf SYNC_FLUSH.\n")
	fmt.Fprintf(&b, "- Broker CPU: the broker process's user+system seconds during the measured window, per million messages.\n\n")

	if fs := findDisk(disk, "disk-fsync"); fs != nil {
		fmt.Fprintf(&b, "Raw disk (no broker): write 4 KiB + fdatasync: p50 %s ms, p99 %s ms (%.0f fsyncs/s)", ms(fs.P50Ms), ms(fs.P99Ms), fs.MsgsPerS)
	}
	if gc := findDisk(disk, "disk-group-commit"); gc != nil {
		fmt.Fprintf(&b, "; group commit, 64 writers of 1 KiB: **%.0f records/s** (p50 %s ms, p99 %s ms).\n\n", gc.MsgsPerS, ms(gc.P50Ms), ms(gc.P99Ms))
	}

	b.WriteString("| scenario | size | Wharf msg/s | JetStream msg/s | ratio | Wharf p50 / p99 / p999 ms | JetStream p50 / p99 / p999 ms | broker CPU s per M msgs (Wharf / JetStream) | client CPU s per M msgs (Wharf / JetStream) | errors (W / J) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	var notes []string
	for _, p := range ps {
		n := p.nats
		for i, w := range p.wharf {
			if w.Skipped {
				fmt.Fprintf(&b, "| %s | %d | skipped | | | | | | | |\n", w.Scenario, w.Size)
				notes = append(notes, fmt.Sprintf("%s: %s", w.Scenario, w.Note))
				continue
			}
			nm, np, nr, ncpu, nccpu, nerr := "-", "-", "-", "-", "-", "-"
			if i == 0 && !n.Skipped && p.nerr == "" || i == 0 && n.MsgsPerS > 0 {
				nm = fmt.Sprintf("%.0f", n.MsgsPerS)
				np = latencies(n)
				if n.P50Ms == 0 && n.P99Ms == 0 {
					np = "-" // not measured (JetStream consume: no per-pull latency)
				}
				nr = ratio(w.MsgsPerS, n.MsgsPerS)
				ncpu = cpuPerM(n)
				nccpu = clientCPUPerM(n)
				nerr = fmt.Sprint(n.Errors)
			}
			fmt.Fprintf(&b, "| %s | %d | %.0f | %s | %s | %s | %s | %s / %s | %s / %s | %d / %s |\n",
				w.Scenario, w.Size, w.MsgsPerS, nm, nr, latencies(w), np, cpuPerM(w), ncpu, clientCPUPerM(w), nccpu, w.Errors, nerr)
			if w.Note != "" {
				notes = append(notes, fmt.Sprintf("%s/%d Wharf: %s", w.Scenario, w.Size, w.Note))
			}
			if w.BrokerHeapMiB != nil {
				notes = append(notes, fmt.Sprintf("%s/%d Wharf: broker Go heap %.1f MiB after a forced GC with the backlog stored", w.Scenario, w.Size, *w.BrokerHeapMiB))
			}
		}
		if len(p.wharf) == 0 {
			fmt.Fprintf(&b, "| %s | %d | failed | %.0f | | | | | | |\n", p.scenario, p.size, n.MsgsPerS)
		}
		if n.Note != "" {
			notes = append(notes, fmt.Sprintf("%s/%d JetStream: %s", p.scenario, p.size, n.Note))
		}
		if p.werr != "" {
			notes = append(notes, fmt.Sprintf("%s/%d Wharf error: %s", p.scenario, p.size, firstLine(p.werr)))
		}
		if p.nerr != "" {
			notes = append(notes, fmt.Sprintf("%s/%d JetStream error: %s", p.scenario, p.size, firstLine(p.nerr)))
		}
	}
	b.WriteString("\n")
	for _, n := range notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	b.WriteString("\n")
	b.WriteString(targets(o, disk, ps))
	b.WriteString(targets17(o, disk, ps))
	fmt.Fprintf(&b, "<!-- bench-compare %s: end -->\n", key)
	return b.String()
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func wharf1(ps []*pair, sc string, size int) (*result, *result) {
	p := find(ps, sc, size)
	if p == nil || len(p.wharf) == 0 {
		return nil, nil
	}
	var n *result
	if p.nats.MsgsPerS > 0 {
		n = &p.nats
	}
	return &p.wharf[0], n
}

func met(ok bool) string {
	if ok {
		return "**met**"
	}
	return "not met"
}

// targetTable starts the targets table of an issue: the builder, and
// row to add a scenario's target, figures and verdict to it.
func targetTable(issue string) (*strings.Builder, func(sc, target, measured, verdict string)) {
	b := &strings.Builder{}
	fmt.Fprintf(b, "Targets of issue %s (1 KiB), as measured in this run:\n\n", issue)
	b.WriteString("| scenario | target | measured | verdict |\n|---|---|---|---|\n")
	return b, func(sc, target, measured, verdict string) {
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", sc, target, measured, verdict)
	}
}

// targets renders the targets table of issue 7 with the measured figures.
func targets(o *opts, disk []result, ps []*pair) string {
	b, row := targetTable("7")
	const k = 1024
	if w, n := wharf1(ps, "async-256", k); w != nil && n != nil {
		r := w.MsgsPerS / n.MsgsPerS
		row("async publish, 256 in flight", ">= 2.0x msgs/s", fmt.Sprintf("%.0f vs %.0f msg/s = %.2fx", w.MsgsPerS, n.MsgsPerS, r), met(r >= 2))
	}
	if w, n := wharf1(ps, noCoalesce, k); w != nil && n != nil {
		r := w.MsgsPerS / n.MsgsPerS
		row("async publish, 256 in flight, Wharf's send coalescing off (issue 17)", ">= 1.5x msgs/s", fmt.Sprintf("%.0f vs %.0f msg/s = %.2fx", w.MsgsPerS, n.MsgsPerS, r), met(r >= 1.5))
	}
	if w, _ := wharf1(ps, "batch-32", k); w != nil {
		row("async publish, batches of 32", ">= 500,000 msg/s", fmt.Sprintf("%.0f msg/s", w.MsgsPerS), met(w.MsgsPerS >= 500000))
	}
	if w, n := wharf1(ps, "sync-1", k); w != nil && n != nil {
		row("sync publish, 1 publisher", "p50 <= JetStream's", fmt.Sprintf("p50 %s vs %s ms", ms(w.P50Ms), ms(n.P50Ms)), met(w.P50Ms <= n.P50Ms))
	}
	if w, n := wharf1(ps, "sync-16", k); w != nil && n != nil {
		r := w.MsgsPerS / n.MsgsPerS
		row("sync publish, 16 publishers", ">= 1.5x msgs/s", fmt.Sprintf("%.0f vs %.0f msg/s = %.2fx", w.MsgsPerS, n.MsgsPerS, r), met(r >= 1.5))
	}
	if w, n := wharf1(ps, "sync-flush-64", k); w != nil {
		gc := findDisk(disk, "disk-group-commit")
		m, ok := fmt.Sprintf("%.0f msg/s", w.MsgsPerS), false
		if gc != nil && gc.MsgsPerS > 0 {
			r := w.MsgsPerS / gc.MsgsPerS
			m += fmt.Sprintf(" = %.2fx the disk's %.0f records/s", r, gc.MsgsPerS)
			ok = r >= 0.8
		}
		if n != nil {
			m += fmt.Sprintf("; %.1fx JetStream with fsync always (%.0f msg/s)", w.MsgsPerS/n.MsgsPerS, n.MsgsPerS)
		}
		row("SYNC_FLUSH, 64 producers", ">= 0.8x raw group-commit rate (and >= 15x JetStream fsync-always)", m, met(ok))
	}
	if w, n := wharf1(ps, "consume-backlog", k); w != nil && n != nil {
		r := w.MsgsPerS / n.MsgsPerS
		row(fmt.Sprintf("consume a backlog (%d)", o.backlog), ">= 2.0x JetStream's fastest consume", fmt.Sprintf("%.0f vs %.0f msg/s = %.2fx", w.MsgsPerS, n.MsgsPerS, r), met(r >= 2))
	}
	if w, _ := wharf1(ps, "e2e-10k", k); w != nil {
		row("end to end at 10 k msg/s", "p99 <= 1 ms", fmt.Sprintf("p99 %s ms (p50 %s)", ms(w.P99Ms), ms(w.P50Ms)), met(w.P99Ms <= 1 && w.Msgs > 0))
	}
	if p := find(ps, "sync-master-64", k); p != nil && len(p.wharf) > 0 {
		if len(p.wharf) == 2 && !p.wharf[0].Skipped && p.wharf[1].MsgsPerS > 0 {
			r := p.wharf[0].MsgsPerS / p.wharf[1].MsgsPerS
			row("SYNC_MASTER vs ASYNC_MASTER, 64 producers", ">= 0.7x", fmt.Sprintf("%.0f vs %.0f msg/s = %.2fx", p.wharf[0].MsgsPerS, p.wharf[1].MsgsPerS, r), met(r >= 0.7))
		} else {
			row("SYNC_MASTER vs ASYNC_MASTER", ">= 0.7x", "not run: "+p.wharf[0].Note, "not measured")
		}
	}
	if w, _ := wharf1(ps, "consume-backlog", k); w != nil {
		if w.BrokerHeapMiB != nil {
			verdict := met(*w.BrokerHeapMiB <= 256)
			if o.backlog < 1_000_000 {
				verdict = "not measured at 1 M (backlog " + fmt.Sprint(o.backlog) + ")"
			}
			row("broker Go heap with a 1 M backlog", "<= 256 MiB", fmt.Sprintf("%.1f MiB with %d stored", *w.BrokerHeapMiB, o.backlog), verdict)
		}
	}
	b.WriteString("\n")
	return b.String()
}

// writeSection replaces the section of key in path, or appends it.
func writeSection(path, key, section string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(old)
	begin := fmt.Sprintf("<!-- bench-compare %s: begin", key)
	end := fmt.Sprintf("<!-- bench-compare %s: end -->\n", key)
	i := strings.Index(s, begin)
	j := strings.Index(s, end)
	if i >= 0 && j > i {
		s = s[:i] + section + s[j+len(end):]
	} else {
		if !strings.HasSuffix(s, "\n\n") {
			s += "\n"
		}
		s += section
	}
	return os.WriteFile(path, []byte(s), 0o644)
}

// htmlReport is the run as a benchreport page: per scenario and size, the
// Wharf lines and JetStream's (the median round's, with --rounds).
func htmlReport(o *opts, ps []*pair, took time.Duration) benchreport.Report {
	r := benchreport.Report{Title: "Wharf vs NATS JetStream, " + sectionKey(o) + " run",
		Lines: []string{
			time.Now().UTC().Format("2006-01-02 15:04 UTC") + "; " + machine(),
			"command: " + cmdLine(o) + "; took " + took.Round(time.Second).String(),
			fmt.Sprintf("%s warm-up, %s measured per scenario; with --rounds %d the curves are the median round's", o.warmup, o.duration, o.rounds),
		}}
	for _, p := range ps {
		sc := benchreport.Scenario{Name: fmt.Sprintf("%s, %d B", p.scenario, p.size)}
		for _, w := range p.wharf {
			if w.Skipped {
				continue
			}
			name := "Wharf"
			if len(p.wharf) > 1 {
				name = "Wharf " + strings.ToUpper(strings.ReplaceAll(strings.TrimSuffix(w.Scenario, "-64"), "-", "_"))
			}
			sc.Series = append(sc.Series, series(name, w))
		}
		if !p.nats.Skipped && (p.nerr == "" || p.nats.MsgsPerS > 0) {
			sc.Series = append(sc.Series, series("JetStream", p.nats))
		}
		if len(sc.Series) > 0 {
			r.Scenarios = append(r.Scenarios, sc)
		}
	}
	return r
}

func series(name string, r result) benchreport.Series {
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

// writeReport writes the HTML report to path (its folder created).
func writeReport(path string, r benchreport.Report) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	var b bytes.Buffer
	if err := benchreport.WriteHTML(&b, r); err != nil {
		return err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// publishScenarios are the scenarios whose p999 issue 17 bounds by
// JetStream's.
var publishScenarios = []string{"async-256", noCoalesce, "async-4096", "batch-32", "sync-1", "sync-16", "sync-flush-64"}

// targets17 renders the targets table of issue 17 with the measured
// figures.
func targets17(o *opts, disk []result, ps []*pair) string {
	b, row := targetTable("17")
	const k = 1024
	if w, n := wharf1(ps, "e2e-10k", k); w != nil && n != nil && n.P99Ms > 0 {
		r := w.P99Ms / n.P99Ms
		row("end to end at 10 k msg/s, ASYNC_FLUSH", "p99 <= 1 ms and <= 0.7x JetStream's, p999 reported",
			fmt.Sprintf("p99 %s vs %s ms = %.2fx; p999 %s vs %s ms", ms(w.P99Ms), ms(n.P99Ms), r, ms(w.P999Ms), ms(n.P999Ms)),
			met(w.P99Ms <= 1 && r <= 0.7 && w.Msgs > 0))
	}
	if w, n := wharf1(ps, "consume-backlog", k); w != nil && n != nil {
		r := w.MsgsPerS / n.MsgsPerS
		row(fmt.Sprintf("consume a backlog (%d), at most 512 in flight", o.backlog), ">= 2.0x JetStream's fastest mode, client CPU per message reported",
			fmt.Sprintf("%.0f vs %.0f msg/s = %.2fx; client CPU %s vs %s s per M", w.MsgsPerS, n.MsgsPerS, r, clientCPUPerM(*w), clientCPUPerM(*n)), met(r >= 2))
	}
	if w, n := wharf1(ps, "async-256", k); w != nil && n != nil {
		r := w.MsgsPerS / n.MsgsPerS
		row("async publish, 256 in flight", ">= 2.5x JetStream", fmt.Sprintf("%.0f vs %.0f msg/s = %.2fx", w.MsgsPerS, n.MsgsPerS, r), met(r >= 2.5))
	}
	if w, n := wharf1(ps, noCoalesce, k); w != nil && n != nil {
		r := w.MsgsPerS / n.MsgsPerS
		row("async publish, 256 in flight, coalescing off", ">= 1.5x JetStream", fmt.Sprintf("%.0f vs %.0f msg/s = %.2fx", w.MsgsPerS, n.MsgsPerS, r), met(r >= 1.5))
	}
	var p999 []string
	all, seen := true, false
	for _, sc := range publishScenarios {
		w, n := wharf1(ps, sc, k)
		if w == nil || n == nil || n.P999Ms <= 0 {
			continue
		}
		seen = true
		mark := ""
		if w.P999Ms > n.P999Ms {
			all, mark = false, "**"
		}
		p999 = append(p999, fmt.Sprintf("%s%s %s vs %s%s", mark, sc, ms(w.P999Ms), ms(n.P999Ms), mark))
	}
	if seen {
		row("p999 of every publish scenario", "<= JetStream's", strings.Join(p999, "; ")+" ms", met(all))
	}
	if w, _ := wharf1(ps, "sync-flush-64", k); w != nil {
		if gc := findDisk(disk, "disk-group-commit"); gc != nil && gc.MsgsPerS > 0 {
			r := w.MsgsPerS / gc.MsgsPerS
			row("SYNC_FLUSH, 64 sync publishers", ">= 0.6x the raw group-commit probe", fmt.Sprintf("%.0f msg/s vs %.0f records/s = %.2fx", w.MsgsPerS, gc.MsgsPerS, r), met(r >= 0.6))
		}
	}
	b.WriteString("\n")
	return b.String()
}
