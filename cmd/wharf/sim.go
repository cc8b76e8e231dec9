package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/spf13/cobra"

	"github.com/wharfmq/wharf/sim"
)

// simSummary is the --json line of `wharf sim`.
type simSummary struct {
	Seeds          int                   `json:"seeds"`
	Failures       int                   `json:"failures"`
	FailedSeeds    []int64               `json:"failed_seeds"`
	TraceHash      string                `json:"trace_hash,omitempty"`
	SimSeconds     float64               `json:"sim_seconds"`
	WallSeconds    float64               `json:"wall_seconds"`
	SeedsPerMinute float64               `json:"seeds_per_minute"`
	Bug            string                `json:"bug,omitempty"`
	Scenarios      map[string]int        `json:"scenarios"`
	AckLatency     map[string]latencyRow `json:"ack_latency_us"`
	Rebalance      *latencyRow           `json:"rebalance_ms,omitempty"`
	Liveness       *latencyRow           `json:"liveness_ms,omitempty"`
}

type latencyRow struct {
	Acks int64 `json:"acks"`
	P50  int64 `json:"p50"`
	P99  int64 `json:"p99"`
	P999 int64 `json:"p999"`
	Max  int64 `json:"max"`
}

func addSimCommand(root *cobra.Command) {
	var (
		seeds     int
		seed      int64
		first     int64
		scenario  string
		bug       string
		trace     bool
		asJSON    bool
		workers   int
		listOnly  bool
		verbosity bool
	)
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Run the deterministic simulator",
		Long: `Run the deterministic simulator: the broker's real actors on a virtual clock, disk
and network, in a cluster of 1-3 broker groups (a master and 0-2 slaves each) with a
configuration drawn from the seed, with faults (crash, torn write, fsync error, disk
stall, partition, connection reset), checking durability, ordering, flush timing and
replication invariants, and that the cluster converges once the faults heal. Seed N
runs scenario N mod the number of scenarios.

  wharf sim --seeds 1000                 run seeds 1..1000, print failures with their seed
  wharf sim --seed 42 --trace            replay one seed and print its trace
  wharf sim --bug ack-before-flush       plant a bug: the run must fail (exit status 1)
  wharf sim --list                       list scenarios and bugs`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if listOnly {
				return listSim(cmd.OutOrStdout())
			}
			if bug != "" {
				if _, err := sim.BugByName(bug); err != nil {
					return err
				}
			}
			if scenario != "" {
				if _, ok := sim.ScenarioByName(scenario); !ok {
					return fmt.Errorf("unknown scenario %q (wharf sim --list)", scenario)
				}
			}
			single := cmd.Flags().Changed("seed")
			if single {
				first, seeds = seed, 1
			}
			if seeds < 1 {
				return errors.New("--seeds must be at least 1")
			}
			var traceOut io.Writer
			if trace {
				if !single {
					return errors.New("--trace needs --seed")
				}
				bw := bufio.NewWriter(cmd.OutOrStdout())
				defer bw.Flush()
				traceOut = bw
			}
			return runSim(cmd, simRun{first: first, n: seeds, scenario: scenario, bug: bug, trace: traceOut,
				json: asJSON, workers: workers, single: single, verbose: verbosity})
		},
	}
	f := cmd.Flags()
	f.IntVar(&seeds, "seeds", 100, "number of seeds to run")
	f.Int64Var(&first, "first-seed", 1, "first seed of the range")
	f.Int64Var(&seed, "seed", 0, "run only this seed")
	f.StringVar(&scenario, "scenario", "", "run only this scenario (default: chosen by each seed)")
	f.StringVar(&bug, "bug", "", "plant a known bug (see --list); the run must then fail")
	f.BoolVar(&trace, "trace", false, "print the trace of the seed (with --seed)")
	f.BoolVar(&asJSON, "json", false, "print a JSON summary as the last line")
	f.IntVar(&workers, "workers", runtime.GOMAXPROCS(0), "seeds run in parallel")
	f.BoolVar(&listOnly, "list", false, "list scenarios and bugs")
	f.BoolVarP(&verbosity, "verbose", "v", false, "print every seed's result")
	root.AddCommand(cmd)
}

func listSim(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tFLUSH\tCLIENTS\tFAULTS")
	for _, s := range sim.Scenarios {
		var clients []string
		for _, c := range s.Clients {
			clients = append(clients, c.String())
		}
		var faults []string
		for _, f := range s.Faults {
			faults = append(faults, string(f))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Name, s.Flush, strings.Join(clients, ","), strings.Join(faults, ","))
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "BUG\tBREAKS")
	for _, b := range sim.Bugs {
		fmt.Fprintf(tw, "%s\t%s\n", b.Name, b.Breaks)
	}
	return tw.Flush()
}

type simRun struct {
	first    int64
	n        int
	scenario string
	bug      string
	trace    io.Writer
	json     bool
	workers  int
	single   bool
	verbose  bool
}

// simGC trades memory for speed: a seed allocates a lot of short-lived
// frames and records over a small live heap, so the default GOGC spends a
// third of the campaign collecting. GOGC or GOMEMLIMIT in the environment
// win.
func simGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(3 << 30)
	}
}

// runSim runs the campaign, then prints its summary (a table, or one JSON
// line) and turns it into the exit status.
func runSim(cmd *cobra.Command, r simRun) error {
	simGC()
	start := time.Now()
	results := runSimSeeds(r, cmd.ErrOrStderr(), start)
	sum := summarizeSim(r, results, time.Since(start).Seconds())
	out := cmd.OutOrStdout()
	if r.json {
		b, _ := json.Marshal(sum)
		fmt.Fprintln(out, string(b))
	} else {
		printSimSummary(out, r, sum, results)
	}
	if sum.Failures > 0 {
		return fmt.Errorf("%d of %d seeds broke an invariant", sum.Failures, sum.Seeds)
	}
	if r.bug != "" {
		return fmt.Errorf("bug %s was planted and no seed caught it: the simulator missed it", r.bug)
	}
	return nil
}

// runSimSeeds runs r's seeds on r.workers goroutines and returns their
// results in seed order. It reports each failure (and, verbose, each pass)
// on errOut as it comes, and on a terminal the progress since start.
func runSimSeeds(r simRun, errOut io.Writer, start time.Time) []*sim.Result {
	results := make([]*sim.Result, r.n)
	var (
		mu   sync.Mutex
		done int
		wg   sync.WaitGroup
	)
	next := make(chan int)
	tty := isTerminal(os.Stderr) && !r.single
	for range max(1, r.workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				res := sim.Run(sim.Options{Seed: r.first + int64(i), Scenario: r.scenario, Trace: r.trace, Bug: r.bug})
				mu.Lock()
				results[i] = res
				done++
				reportSimSeed(errOut, res, r.verbose)
				if tty {
					fmt.Fprintf(errOut, "\r%d/%d seeds, %.0f s", done, r.n, time.Since(start).Seconds())
				}
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < r.n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	if tty {
		fmt.Fprintln(errOut)
	}
	return results
}

// reportSimSeed prints one seed's failure with its first violations, or
// with verbose its pass.
func reportSimSeed(errOut io.Writer, res *sim.Result, verbose bool) {
	if res.Failed() {
		fmt.Fprintf(errOut, "\rFAIL seed %d (%s): %s\n     config %s\n", res.Seed, res.Scenario, res.Violations[0], res.Config)
		for _, v := range res.Violations[1:min(len(res.Violations), 5)] {
			fmt.Fprintf(errOut, "     %s\n", v)
		}
	} else if verbose {
		fmt.Fprintf(errOut, "ok   seed %d (%s): %d acks, %d fsyncs, %d crashes, trace %s\n", res.Seed, res.Scenario, res.AcksOK, res.Fsyncs, res.Crashes, res.TraceHash)
	}
}

// summarizeSim merges the seeds' results: failures, scenarios, and the ack,
// rebalance and convergence latencies over all seeds.
func summarizeSim(r simRun, results []*sim.Result, wall float64) simSummary {
	sum := simSummary{Seeds: r.n, WallSeconds: wall, Bug: r.bug, Scenarios: map[string]int{}, AckLatency: map[string]latencyRow{},
		FailedSeeds: []int64{}}
	hists := map[string]*hdrhistogram.Histogram{}
	reb := hdrhistogram.New(1, 600_000, 3)
	conv := hdrhistogram.New(1, 600_000, 3)
	for _, res := range results {
		if res.Converged > 0 {
			conv.RecordValue(res.Converged.Milliseconds())
		}
		if res.Rebalance != nil {
			reb.Merge(res.Rebalance)
		}
		sum.SimSeconds += res.SimSeconds
		sum.Scenarios[res.Scenario]++
		if res.Failed() {
			sum.Failures++
			sum.FailedSeeds = append(sum.FailedSeeds, res.Seed)
		}
		for mode, h := range res.ByMode {
			if hists[mode] == nil {
				hists[mode] = hdrhistogram.New(1, 60_000_000, 3)
			}
			hists[mode].Merge(h)
		}
	}
	if r.single {
		sum.TraceHash = results[0].TraceHash
	}
	if wall > 0 {
		sum.SeedsPerMinute = float64(r.n) / wall * 60
	}
	for m, h := range hists {
		sum.AckLatency[m] = latencyRow{Acks: h.TotalCount(), P50: h.ValueAtQuantile(50), P99: h.ValueAtQuantile(99),
			P999: h.ValueAtQuantile(99.9), Max: h.Max()}
	}
	sum.Rebalance, sum.Liveness = histRow(reb), histRow(conv)
	return sum
}

// printSimSummary prints sum as the text report: a headline (with the
// single seed's trace hash, scenario and config), the latency table with
// one row per flush mode, and the failed seeds.
func printSimSummary(out io.Writer, r simRun, sum simSummary, results []*sim.Result) {
	fmt.Fprintf(out, "%d seeds, %d failed, %.0f virtual s in %.1f wall s (%.0f seeds/min)", sum.Seeds, sum.Failures, sum.SimSeconds, sum.WallSeconds, sum.SeedsPerMinute)
	if r.single {
		fmt.Fprintf(out, ", trace %s\nscenario %s, config %s", sum.TraceHash, results[0].Scenario, results[0].Config)
	}
	fmt.Fprintln(out)
	modes := make([]string, 0, len(sum.AckLatency))
	for m := range sum.AckLatency {
		modes = append(modes, m)
	}
	sort.Strings(modes)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "ack latency (virtual µs)\tacks\tp50\tp99\tp99.9\tmax\t")
	for _, m := range modes {
		l := sum.AckLatency[m]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t\n", m, l.Acks, l.P50, l.P99, l.P999, l.Max)
	}
	if l := sum.Rebalance; l != nil {
		fmt.Fprintf(tw, "rebalance after a member left (virtual ms)\t%d\t%d\t%d\t%d\t%d\t\n", l.Acks, l.P50, l.P99, l.P999, l.Max)
	}
	if l := sum.Liveness; l != nil {
		fmt.Fprintf(tw, "convergence after healing (virtual ms)\t%d\t%d\t%d\t%d\t%d\t\n", l.Acks, l.P50, l.P99, l.P999, l.Max)
	}
	tw.Flush()
	if len(sum.FailedSeeds) > 0 {
		fmt.Fprintf(out, "failed seeds: %v (replay one with: wharf sim --seed N --trace)\n", sum.FailedSeeds)
	}
}

// histRow summarizes h (nil if empty).
func histRow(h *hdrhistogram.Histogram) *latencyRow {
	if h.TotalCount() == 0 {
		return nil
	}
	return &latencyRow{Acks: h.TotalCount(), P50: h.ValueAtQuantile(50), P99: h.ValueAtQuantile(99), P999: h.ValueAtQuantile(99.9), Max: h.Max()}
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
