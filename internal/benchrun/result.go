package benchrun

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"github.com/wharfmq/wharf/internal/benchreport"
)

// Result is one scenario at one size, and one line of --json output: its
// JSON field names are a format that bench/ and bench/scripts parse.
type Result struct {
	Scenario   string   `json:"scenario"`
	Size       int      `json:"size"`
	Msgs       int64    `json:"msgs"`
	MsgsPerS   float64  `json:"msgs_per_s"`
	MBPerS     float64  `json:"mb_per_s"` // bodies, in MB of 10^6 bytes
	P50Ms      float64  `json:"p50_ms"`
	P99Ms      float64  `json:"p99_ms"`
	P999Ms     float64  `json:"p999_ms"`
	Errors     int64    `json:"errors"`
	BrokerCPUS *float64 `json:"broker_cpu_s"` // nil: not a broker of our own
	// Extras, beyond the fields the benchmark suite asks for.
	ElapsedS          float64  `json:"elapsed_s"`
	FlushMode         string   `json:"flush_mode,omitempty"`
	SendCoalescing    *bool    `json:"send_coalescing,omitempty"` // the producers' client.WithSendCoalescing; nil: no producer of the load's own
	BrokerCPUSPerMMsg *float64 `json:"broker_cpu_s_per_m_msgs,omitempty"`
	BrokerHeapMiB     *float64 `json:"broker_heap_mib,omitempty"` // Go heap after a forced GC, backlog stored
	// The cluster scenarios' fields: broker groups, whether the clients
	// found them through a name server, rounds run (medians are over
	// them), the largest latency (every scenario's, with a latency), and
	// the throughput of this line over that of the scenario named in
	// ratio_of (a median of per-round ratios).
	Groups     int      `json:"groups,omitempty"`
	ViaNamesrv *bool    `json:"via_namesrv,omitempty"`
	Rounds     int      `json:"rounds,omitempty"`
	MaxMs      *float64 `json:"max_ms,omitempty"`
	Ratio      *float64 `json:"ratio,omitempty"`
	RatioOf    string   `json:"ratio_of,omitempty"`
	// The CPU time of this process (the load's clients) in the measured
	// window: where a client-side cost such as routing shows.
	ClientCPUSPerMMsg *float64 `json:"client_cpu_s_per_m_msgs,omitempty"`
	Skipped           bool     `json:"skipped,omitempty"`
	Note              string   `json:"note,omitempty"`
	// The report's data (--report): the latency at each of
	// benchreport.CurvePercentiles, and the messages per second completed
	// in each second of the measured window.
	LatencyCurve   []benchreport.Point `json:"latency_curve,omitempty"`
	ThroughputPerS []float64           `json:"throughput_per_s,omitempty"`
}

// writeJSON writes r as one line of JSON.
func writeJSON(w io.Writer, r Result) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// writeTable writes rs as a right-aligned table, then the notes and heap
// figures, one line each.
func writeTable(w io.Writer, rs []Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tsize\tmsgs\tmsg/s\tMB/s\tp50 ms\tp99 ms\tp99.9 ms\terrors\tbroker cpu s\tcpu s/M msgs\t")
	for _, r := range rs {
		if r.Skipped {
			fmt.Fprintf(tw, "%s\t%d\tskipped: %s\t\t\t\t\t\t\t\t\t\n", r.Scenario, r.Size, r.Note)
			continue
		}
		cpu, per := "-", "-"
		if r.BrokerCPUS != nil {
			cpu = fmt.Sprintf("%.2f", *r.BrokerCPUS)
		}
		if r.BrokerCPUSPerMMsg != nil {
			per = fmt.Sprintf("%.1f", *r.BrokerCPUSPerMMsg)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.1f\t%.3f\t%.3f\t%.3f\t%d\t%s\t%s\t\n",
			r.Scenario, r.Size, r.Msgs, r.MsgsPerS, r.MBPerS, r.P50Ms, r.P99Ms, r.P999Ms, r.Errors, cpu, per)
	}
	tw.Flush()
	for _, r := range rs {
		if r.Note != "" && !r.Skipped {
			fmt.Fprintf(w, "  %s/%d: %s\n", r.Scenario, r.Size, r.Note)
		}
		if r.BrokerHeapMiB != nil {
			fmt.Fprintf(w, "  %s/%d: broker Go heap %.1f MiB (after GC, backlog stored)\n", r.Scenario, r.Size, *r.BrokerHeapMiB)
		}
	}
}

// round rounds x to 3 decimals for reports (NaN and Inf become 0).
func round(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return math.Round(x*1000) / 1000
}

// roundedPtr is round(x) for the optional fields.
func roundedPtr(x float64) *float64 { x = round(x); return &x }

// setBrokerCPU fills the broker CPU fields from the child's CPU seconds at
// the start and end of the window (negative: unknown).
func (r *Result) setBrokerCPU(cpu0, cpu1 float64) {
	if cpu0 < 0 || cpu1 < 0 {
		return
	}
	r.BrokerCPUS = roundedPtr(cpu1 - cpu0)
	if r.Msgs > 0 {
		r.BrokerCPUSPerMMsg = roundedPtr((cpu1 - cpu0) / float64(r.Msgs) * 1e6)
	}
}

// setClientCPU fills ClientCPUSPerMMsg from this process's CPU seconds at
// the start and end of the window (negative: unknown).
func (r *Result) setClientCPU(cpu0, cpu1 float64) {
	if cpu0 >= 0 && cpu1 >= 0 && r.Msgs > 0 {
		r.ClientCPUSPerMMsg = roundedPtr((cpu1 - cpu0) / float64(r.Msgs) * 1e6)
	}
}
