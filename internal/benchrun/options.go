package benchrun

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// scenarios lists every scenario in the order they run.
var scenarios = []string{
	"async-256", "async-4096", "batch-32", "sync-1", "sync-16", "sync-flush-64",
	"consume-backlog", "e2e-10k", "sync-master-64", "disk-probe",
}

// clusterScenarios run on a name server and broker groups of their own;
// "all" leaves them out (they take minutes), "cluster" names them.
var clusterScenarios = []string{"route-propagation", "groups-2-vs-1"}

// canonical is every scenario, in the order they run.
var canonical = append(append([]string(nil), scenarios...), clusterScenarios...)

// Options is what a run does. Each field is one flag of `wharf bench`,
// named in its comment.
type Options struct {
	Broker         string        // --broker: an existing broker (host:port); "" starts one per scenario
	FlushMode      string        // --flush-mode: with Broker, its flushDiskType (labels, and whether sync-flush-64 runs)
	Scenarios      []string      // --scenario: names, comma separated lists, "all", "disk" or "cluster"
	Sizes          []int         // --size: message body sizes in bytes
	Duration       time.Duration // --duration: measured time of each scenario
	Warmup         time.Duration // --warmup: unmeasured load before each measured window
	JSON           bool          // --json: one JSON object per result on stdout instead of a table
	Report         string        // --report: write an HTML report with charts to this file ("": none)
	Backlog        int           // --backlog: consume-backlog's stored messages
	Rate           int           // --rate: e2e-10k's publish rate in msg/s
	PullBatch      int           // --pull-batch: consume-backlog's messages per pull
	PullInflight   int           // --pull-inflight: consume-backlog's pulls in flight
	BatchInflight  int           // --batch-inflight: batch-32's batches in flight
	SendCoalescing bool          // --send-coalescing: the producers coalesce concurrent async sends (client.WithSendCoalescing)
	Queues         int           // --queues: queues of the benchmark topic
	StoreDir       string        // --store-dir: where the temporary stores and the disk probe's file go ("": the temp dir)
	BrokerBin      string        // --wharf-bin: the binary started as broker ("": this process's own)
	ProfileDir     string        // --profile: where the broker's and the clients' profiles go ("": none)
	Trace          time.Duration // --trace: with ProfileDir, a runtime/trace of the broker and one of the clients, this long from each window's start (0: none)
	Settle         time.Duration // --settle: longest wait for the broker and the page cache to idle
	Fsyncs         int           // --fsyncs: disk-probe's write+fdatasync rounds
	BrokerArgs     []string      // --broker-arg: extra flags for the started brokers
	Timeout        time.Duration // --timeout: client request timeout
	BrokerLogLevel string        // --broker-log-level: log level of the started brokers
	Groups         int           // --groups: route-propagation's broker groups
	RouteRounds    int           // --route-rounds: route-propagation's topics created
	ABRounds       int           // --ab-rounds: groups-2-vs-1's rounds (each runs every configuration once)

	// Progress, if set, shows a status line while a scenario runs: line
	// gives its current text, and stop ends it. The caller decides whether
	// its terminal wants one.
	Progress func(line func() string) (stop func())
}

// DefaultOptions returns the defaults of `wharf bench`.
func DefaultOptions() Options {
	return Options{
		FlushMode:      "ASYNC_FLUSH",
		Scenarios:      []string{"all"},
		Sizes:          []int{1024},
		Duration:       10 * time.Second,
		Warmup:         2 * time.Second,
		Backlog:        1_000_000,
		Rate:           10_000,
		PullBatch:      256,
		PullInflight:   2,
		BatchInflight:  16,
		SendCoalescing: true,
		Queues:         8,
		Settle:         30 * time.Second,
		Fsyncs:         2000,
		Timeout:        5 * time.Second,
		BrokerLogLevel: "warn",
		Groups:         2,
		RouteRounds:    20,
		ABRounds:       4,
	}
}

// QuickOptions returns the defaults of `wharf bench --quick`: short runs
// (1.5 s each after 0.3 s of warm-up, a backlog of 100,000, 500 fsyncs), so
// the whole suite takes under a minute. Only Duration, Warmup, Backlog,
// Settle and Fsyncs differ from DefaultOptions.
func QuickOptions() Options {
	o := DefaultOptions()
	o.Duration = 1500 * time.Millisecond
	o.Warmup = 300 * time.Millisecond
	o.Backlog = 100_000
	o.Settle = 1500 * time.Millisecond
	o.Fsyncs = 500
	return o
}

// resolve checks o and fills in what it leaves to the environment: the
// scenarios in their canonical order, the broker binary, the store dir.
func (o *Options) resolve() error {
	sc, err := parseScenarios(o.Scenarios)
	if err != nil {
		return err
	}
	o.Scenarios = sc
	if err := o.check(); err != nil {
		return err
	}
	return o.fillPaths()
}

// parseScenarios expands names, comma separated lists, "all" and "disk"
// into the scenarios to run, each once, in the order of scenarios.
func parseScenarios(args []string) ([]string, error) {
	var want []string
	for _, s := range args {
		for _, p := range strings.Split(s, ",") {
			p = strings.TrimSpace(p)
			switch {
			case p == "":
			case p == "all":
				want = append(want, scenarios...)
			case p == "disk":
				want = append(want, "disk-probe")
			case p == "cluster":
				want = append(want, clusterScenarios...)
			case slices.Contains(canonical, p):
				want = append(want, p)
			default:
				return nil, fmt.Errorf("--scenario %q: want one of %s, all or cluster", p, strings.Join(canonical, ", "))
			}
		}
	}
	var out []string
	for _, s := range canonical {
		if slices.Contains(want, s) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("--scenario: nothing to run")
	}
	return out, nil
}

// check rejects values no scenario can run with.
func (o *Options) check() error {
	for _, s := range o.Sizes {
		if s < 16 || s > 4<<20 {
			return fmt.Errorf("--size %d: want 16..4194304 (the e2e scenario puts a timestamp in the body)", s)
		}
	}
	switch {
	case o.Duration <= 0:
		return errors.New("--duration must be positive")
	case o.Backlog < 1:
		return errors.New("--backlog must be at least 1")
	case o.Rate < 1:
		return errors.New("--rate must be at least 1")
	case o.PullBatch < 1 || o.PullBatch > 1024:
		return errors.New("--pull-batch must be in 1..1024")
	case o.PullInflight < 1 || o.PullInflight > 64:
		return errors.New("--pull-inflight must be in 1..64")
	case o.Queues < 1:
		return errors.New("--queues must be at least 1")
	case o.BatchInflight < 1:
		return errors.New("--batch-inflight must be at least 1")
	case o.Groups < 1 || o.Groups > 8:
		return errors.New("--groups must be in 1..8")
	case o.RouteRounds < 1:
		return errors.New("--route-rounds must be at least 1")
	case o.ABRounds < 1:
		return errors.New("--ab-rounds must be at least 1")
	case o.FlushMode != "ASYNC_FLUSH" && o.FlushMode != "SYNC_FLUSH":
		return errors.New("--flush-mode: want ASYNC_FLUSH or SYNC_FLUSH")
	}
	return nil
}

// fillPaths defaults the broker binary to this one and the store dir to
// the temp dir, and creates the profile dir.
func (o *Options) fillPaths() error {
	if o.BrokerBin == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("cannot find this binary to start brokers with: %w", err)
		}
		o.BrokerBin = exe
	}
	if o.StoreDir == "" {
		o.StoreDir = os.TempDir()
	}
	if o.ProfileDir != "" {
		if err := os.MkdirAll(o.ProfileDir, 0o755); err != nil {
			return fmt.Errorf("--profile: %w", err)
		}
	}
	return nil
}
