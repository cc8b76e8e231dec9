package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/wharfmq/wharf/internal/benchrun"
)

// When the bench starts a broker from this test binary (it passes the test
// binary as --wharf-bin and sets benchrun.ChildEnv), the child runs the wharf
// command line instead of the tests.
func init() {
	if os.Getenv(benchrun.ChildEnv) == "1" && len(os.Args) > 1 && os.Args[1] == "bench" {
		if err := newRootCmd().Execute(); err != nil {
			fmt.Fprintln(os.Stderr, "wharf:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

func runBenchCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := &cobra.Command{Use: "wharf", SilenceUsage: true, SilenceErrors: true}
	addBenchCommand(root)
	var out, errOut syncBuffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// TestBenchQuickAsyncJSON runs `wharf bench --quick --scenario async-256
// --json` against a broker child process of its own and checks the JSON.
func TestBenchQuickAsyncJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker process")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, stderr, err := runBenchCLI(t, "bench", "--quick", "--scenario", "async-256", "--json",
		"--duration", "1s", "--warmup", "300ms", "--settle", "1s",
		"--store-dir", t.TempDir(), "--wharf-bin", exe,
		// a small CommitLog segment that is not pre-touched: a new 1 GiB
		// segment takes seconds to warm, longer than this test runs
		"--broker-arg=--mappedFileSizeCommitLog=67108864", "--broker-arg=--warmMapedFileEnable=false")
	if err != nil {
		t.Fatalf("bench: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1 {
		t.Fatalf("want one JSON line, got %d:\n%s", len(lines), out)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
		t.Fatalf("not JSON: %v: %s", err, lines[0])
	}
	for _, k := range []string{"scenario", "size", "msgs", "msgs_per_s", "mb_per_s", "p50_ms", "p99_ms", "p999_ms", "errors", "broker_cpu_s"} {
		if _, ok := m[k]; !ok {
			t.Errorf("field %q missing: %s", k, lines[0])
		}
	}
	var r benchrun.Result
	if err := json.Unmarshal([]byte(lines[0]), &r); err != nil {
		t.Fatal(err)
	}
	if r.Scenario != "async-256" || r.Size != 1024 || r.Msgs <= 0 || r.MsgsPerS <= 0 || r.MBPerS <= 0 ||
		r.P50Ms <= 0 || r.P99Ms < r.P50Ms || r.P999Ms < r.P99Ms || r.Errors != 0 {
		t.Fatalf("implausible result %+v", r)
	}
	if r.BrokerCPUS == nil || *r.BrokerCPUS <= 0 {
		t.Fatalf("broker_cpu_s %v: want the child broker's CPU seconds", r.BrokerCPUS)
	}
}

// TestBenchQuickFlags checks that --quick shortens the runs but leaves the
// flags given on the command line alone, and that the flags reach
// benchrun.Options.
func TestBenchQuickFlags(t *testing.T) {
	def, q := benchrun.DefaultOptions(), benchrun.QuickOptions()
	for _, tc := range []struct {
		args []string
		want func(o *benchrun.Options)
	}{
		{[]string{}, func(o *benchrun.Options) {}},
		{[]string{"--quick"}, func(o *benchrun.Options) {
			o.Duration, o.Warmup, o.Backlog, o.Settle, o.Fsyncs = q.Duration, q.Warmup, q.Backlog, q.Settle, q.Fsyncs
		}},
		{[]string{"--quick", "--duration", "7s", "--fsyncs", "9"}, func(o *benchrun.Options) {
			o.Duration, o.Warmup, o.Backlog, o.Settle, o.Fsyncs = 7*time.Second, q.Warmup, q.Backlog, q.Settle, 9
		}},
		{[]string{"--duration", "7s", "--backlog", "5", "--scenario", "sync-1,e2e-10k", "--size", "64,128", "--json",
			"--broker-arg=--a", "--broker-arg=--b", "--wharf-bin", "/x", "--broker", "h:1", "--flush-mode", "SYNC_FLUSH"}, func(o *benchrun.Options) {
			o.Duration, o.Backlog, o.Scenarios, o.Sizes, o.JSON = 7*time.Second, 5, []string{"sync-1", "e2e-10k"}, []int{64, 128}, true
			o.BrokerArgs, o.BrokerBin, o.Broker, o.FlushMode = []string{"--a", "--b"}, "/x", "h:1", "SYNC_FLUSH"
		}},
	} {
		var got benchrun.Options
		cmd := newBenchCmd(func(_ *cobra.Command, o benchrun.Options) error { got = o; return nil })
		cmd.SetArgs(tc.args)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		want := def
		tc.want(&want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%v:\n got %+v\nwant %+v", tc.args, got, want)
		}
	}
}

// TestBenchRejectsUnknownScenario checks that the flags reach benchrun's
// checks and its error reaches the command line.
func TestBenchRejectsUnknownScenario(t *testing.T) {
	if _, _, err := runBenchCLI(t, "bench", "--scenario", "nope"); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("unknown scenario accepted: %v", err)
	}
}
