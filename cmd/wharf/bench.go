package main

// `wharf bench`: its flags, mapped onto benchrun.Options, and `wharf bench
// serve`, the broker the bench starts. The scenarios, the child brokers and
// the report are internal/benchrun.

import (
	"errors"
	"expvar"
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof" // the child broker's profiling endpoint (loopback only)
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/wharfmq/wharf/cmd/wharf/brokerconf"
	"github.com/wharfmq/wharf/internal/benchrun"
)

func addBenchCommand(root *cobra.Command) { root.AddCommand(newBenchCmd(runBench)) }

// benchLong is `wharf bench --help`'s text.
const benchLong = `Run benchmark scenarios and print a table (and, with --json, one JSON object per
scenario and size on stdout):

  async-256, async-4096  async publish, 256 / 4096 sends in flight, one connection
  batch-32               async publish of batches of 32 messages (SEND_BATCH)
  sync-1, sync-16        sync publish (wait for each ack), 1 / 16 publishers
  sync-flush-64          64 sync publishers against a SYNC_FLUSH broker
  consume-backlog        pull a backlog of --backlog messages, --pull-inflight pulls
                         of --pull-batch in flight, one handler goroutine
  e2e-10k                publish at a fixed --rate, push-consume, latency publish->consume
  sync-master-64         SYNC_MASTER vs ASYNC_MASTER, 64 publishers (needs replication)
  disk-probe             fsync latency (write 4 KiB + fdatasync) and the raw
                         group-commit rate (64 writers of 1 KiB, one flusher)

Cluster scenarios (not in "all"; "cluster" names both), each on a name server
and broker groups (masters) of its own, registered with it:

  route-propagation      --route-rounds times: CreateTopicInCluster of a new topic
                         on --groups groups, to the first acked send of a running
                         producer on the name server (p50/p99/max in ms)
  groups-2-vs-1          async-256 and sync-16, each to one group by its address,
                         one group through the name server and two groups through
                         it, --ab-rounds rounds alternating the order; medians,
                         and ratio: namesrv-1g over direct-1g, namesrv-2g over
                         namesrv-1g (a median of per-round ratios)

By default each scenario gets a fresh broker: a child process of this binary on
a free loopback port with a temporary store (under --store-dir) and the right
flushDiskType; broker_cpu_s is the broker's CPU time (user+system) during the
measured window, from /proc. With --broker ADDR an existing broker is used
(--flush-mode labels it) and broker_cpu_s is null.

JSON fields: {scenario, size, msgs, msgs_per_s, mb_per_s, p50_ms, p99_ms,
p999_ms, errors, broker_cpu_s} plus elapsed_s, flush_mode,
broker_cpu_s_per_m_msgs, broker_heap_mib (Go heap after a forced GC, with the
backlog stored), client_cpu_s_per_m_msgs (this process's CPU, the load's
clients), skipped and note; the cluster scenarios add groups,
via_namesrv, rounds, max_ms, ratio and ratio_of (their broker_cpu_s sums the
brokers sent to and the name server), and, for the charts of --report,
max_ms, latency_curve ([{p, ms}] at percentiles 0 to 99.99, evenly spaced
in nines) and throughput_per_s (messages completed in each second of the
measured window). mb_per_s counts bodies in MB (10^6 bytes).
Latencies are from an HDR histogram: per send (per batch for batch-32), per
pull for consume-backlog, publish->consume for e2e-10k.

--report FILE.html writes the charts of this run; ` + "`wharf bench report`" + ` draws
several saved --json runs side by side.`

// newBenchCmd is `wharf bench`: its flags become the Options run gets.
func newBenchCmd(run func(*cobra.Command, benchrun.Options) error) *cobra.Command {
	o := benchrun.DefaultOptions()
	var quick bool
	cmd := &cobra.Command{
		Use:   "bench [--scenario S,...] [--size B,...] [--duration D] [--quick] [--json] [--report FILE.html]",
		Short: "Measure throughput and latency of a broker in the scenarios of the benchmark suite",
		Long:  benchLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd, benchQuick(cmd.Flags(), o, quick))
		},
	}
	d := o
	f := cmd.Flags()
	f.StringVar(&o.Broker, "broker", d.Broker, "use this existing broker (host:port) instead of starting one per scenario")
	f.StringVar(&o.FlushMode, "flush-mode", d.FlushMode, "with --broker: the broker's flushDiskType, for the labels (sync-flush-64 runs only when SYNC_FLUSH)")
	f.StringSliceVar(&o.Scenarios, "scenario", d.Scenarios, "scenarios to run (repeatable or comma separated; 'all')")
	f.IntSliceVar(&o.Sizes, "size", d.Sizes, "message body sizes in bytes (repeatable or comma separated)")
	f.DurationVar(&o.Duration, "duration", d.Duration, "measured time of each scenario")
	f.DurationVar(&o.Warmup, "warmup", d.Warmup, "unmeasured load before each measured window")
	f.BoolVar(&quick, "quick", false, "short runs (1.5 s each after 0.3 s of warm-up, backlog 100,000, 500 fsyncs): the whole suite in under a minute")
	f.BoolVar(&o.JSON, "json", d.JSON, "print one JSON object per scenario and size on stdout")
	f.StringVar(&o.Report, "report", d.Report, "also write an HTML report to this file: latency percentile curves, throughput per second and the table, as inline SVG")
	f.IntVar(&o.Backlog, "backlog", d.Backlog, "consume-backlog: messages stored before consuming")
	f.IntVar(&o.Rate, "rate", d.Rate, "e2e-10k: publish rate in msg/s")
	f.IntVar(&o.PullBatch, "pull-batch", d.PullBatch, "consume-backlog: messages per pull")
	f.IntVar(&o.PullInflight, "pull-inflight", d.PullInflight, "consume-backlog: pulls in flight (each on its own queue), handled by one goroutine in order")
	f.IntVar(&o.BatchInflight, "batch-inflight", d.BatchInflight, "batch-32: batches in flight")
	f.BoolVar(&o.SendCoalescing, "send-coalescing", d.SendCoalescing, "the producers coalesce concurrent async sends into one request (false: one SEND per message)")
	f.IntVar(&o.Queues, "queues", d.Queues, "queues of the benchmark topic")
	f.StringVar(&o.StoreDir, "store-dir", d.StoreDir, "directory under which the temporary stores (and the disk probe's file) go (default: the system temp dir)")
	f.StringVar(&o.BrokerBin, "wharf-bin", d.BrokerBin, "wharf binary to start brokers with (default: this one)")
	f.StringVar(&o.ProfileDir, "profile", d.ProfileDir, "write the broker's and the clients' CPU profiles of each measured window and their allocation profiles to this directory")
	f.DurationVar(&o.Trace, "trace", d.Trace, "with --profile: also execution traces (runtime/trace; bench/tracewait reads them) of the broker and of the clients, this long from each window's start")
	f.DurationVar(&o.Settle, "settle", d.Settle, "before measuring, wait up to this long for the broker to idle and the system's dirty pages to be written back")
	f.IntVar(&o.Fsyncs, "fsyncs", d.Fsyncs, "disk-probe: write+fdatasync rounds")
	f.StringSliceVar(&o.BrokerArgs, "broker-arg", d.BrokerArgs, "extra flag for the started brokers (repeatable, e.g. --broker-arg=--flushIntervalCommitLog=200)")
	f.DurationVar(&o.Timeout, "timeout", d.Timeout, "client request timeout")
	f.StringVar(&o.BrokerLogLevel, "broker-log-level", d.BrokerLogLevel, "log level of the started brokers (their log goes to stderr)")
	f.IntVar(&o.Groups, "groups", d.Groups, "route-propagation: broker groups in the cluster")
	f.IntVar(&o.RouteRounds, "route-rounds", d.RouteRounds, "route-propagation: topics created (one measurement each)")
	f.IntVar(&o.ABRounds, "ab-rounds", d.ABRounds, "groups-2-vs-1: rounds, each running every configuration once, in alternating order")
	_ = f.MarkHidden("wharf-bin")
	cmd.AddCommand(newBenchServeCmd(), newBenchReportCmd())
	return cmd
}

// newBenchReportCmd is `wharf bench report`: the charts of runs saved with
// --json, one line per run in each scenario's charts (A vs B builds, or
// rounds).
func newBenchReportCmd() *cobra.Command {
	var out, title string
	cmd := &cobra.Command{
		Use:   "report --out FILE.html [LABEL=]RESULTS.jsonl...",
		Short: "Draw saved `wharf bench --json` runs side by side as an HTML report",
		Long: `Read the JSON lines of one or more ` + "`wharf bench --json`" + ` runs and write one HTML page
with, per scenario and size, the latency percentile curves and the throughput per
second of every run (labelled LABEL, or the file's name without its extension),
and their table. For example, two builds alternated by bench/scripts/ab.sh:

  wharf bench report --out ab.html before=a1.jsonl after=b1.jsonl`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return errors.New("--out: name the HTML file to write")
			}
			runs, err := readBenchRuns(args)
			if err != nil {
				return err
			}
			if err := benchrun.WriteReport(out, title, []string{"runs: " + strings.Join(args, ", ")}, runs); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "bench: report written to %s\n", out)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "the HTML file to write")
	cmd.Flags().StringVar(&title, "title", "wharf bench: runs compared", "the page's title")
	return cmd
}

// readBenchRuns reads each [LABEL=]FILE argument's results.
func readBenchRuns(args []string) ([]benchrun.Labelled, error) {
	var runs []benchrun.Labelled
	for _, a := range args {
		label, path, ok := strings.Cut(a, "=")
		if !ok {
			path = a
			label = strings.TrimSuffix(filepath.Base(a), filepath.Ext(a))
		}
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		rs, err := benchrun.ReadResults(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(rs) == 0 {
			return nil, fmt.Errorf("%s: no results (want the output of wharf bench --json)", path)
		}
		runs = append(runs, benchrun.Labelled{Label: label, Results: rs})
	}
	return runs, nil
}

// benchQuick gives the options --quick shortens their quick values, unless
// their flags were set on the command line.
func benchQuick(f *pflag.FlagSet, o benchrun.Options, quick bool) benchrun.Options {
	if !quick {
		return o
	}
	q := benchrun.QuickOptions()
	if !f.Changed("duration") {
		o.Duration = q.Duration
	}
	if !f.Changed("warmup") {
		o.Warmup = q.Warmup
	}
	if !f.Changed("backlog") {
		o.Backlog = q.Backlog
	}
	if !f.Changed("settle") {
		o.Settle = q.Settle
	}
	if !f.Changed("fsyncs") {
		o.Fsyncs = q.Fsyncs
	}
	return o
}

// runBench runs the bench with a progress line on a terminal; a signal
// stops it after the scenario under way.
func runBench(cmd *cobra.Command, o benchrun.Options) error {
	stderr := cmd.ErrOrStderr()
	o.Progress = func(line func() string) func() { return startCLIProgress(stderr, line).Stop }
	ctx, stop := cliSignalContext(cmd.Context())
	defer stop()
	_, err := benchrun.Run(ctx, o, cmd.OutOrStdout(), stderr)
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return cliErrInterrupted
	}
	return err
}

// newBenchServeCmd is `wharf bench serve`, hidden: exactly `wharf broker`
// (same flags, same runBroker) plus a loopback HTTP listener with
// net/http/pprof and expvar, so that the bench can read the broker's heap
// and profile it. The bench starts its brokers with it.
func newBenchServeCmd() *cobra.Command {
	defaults := brokerconf.Default()
	var pprofAddr, logLevel string
	cmd := &cobra.Command{
		Use:    "serve",
		Short:  "Run a broker for the bench (wharf broker plus a pprof listener)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(logLevel, "text")
			if err != nil {
				return err
			}
			cfg, warnings, err := brokerconf.Resolve(cmd.Flags(), "")
			if err != nil {
				return err
			}
			for _, w := range warnings {
				log.Warn("config: " + w)
			}
			if pprofAddr != "" {
				ln, err := net.Listen("tcp", pprofAddr)
				if err != nil {
					return fmt.Errorf("--pprof-addr: %w", err)
				}
				go func() { _ = http.Serve(ln, nil) }()
			}
			return runBroker(cmd.Context(), cfg, log)
		},
	}
	defaults.RegisterFlags(cmd.Flags())
	cmd.Flags().StringVar(&pprofAddr, "pprof-addr", "", "serve /debug/pprof and /debug/vars on this loopback address")
	cmd.Flags().StringVar(&logLevel, "log-level", "warn", "log level")
	return cmd
}

var _ = expvar.Get // expvar registers /debug/vars on the default mux
