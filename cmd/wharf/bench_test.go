package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// When the bench starts a broker from this test binary (it passes the test
// binary as --wharf-bin and sets benchChildEnv), the child runs the wharf
// command line instead of the tests.
func init() {
	if os.Getenv(benchChildEnv) == "1" && len(os.Args) > 1 && os.Args[1] == "bench" {
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
	var r benchResult
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

// TestBenchFlagsAndSkips checks scenario parsing, the disk probe and the
// skip of sync-flush-64 against an existing ASYNC_FLUSH broker.
func TestBenchFlagsAndSkips(t *testing.T) {
	if _, _, err := runBenchCLI(t, "bench", "--scenario", "nope"); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("unknown scenario accepted: %v", err)
	}
	out, stderr, err := runBenchCLI(t, "bench", "--scenario", "sync-flush-64,disk-probe", "--json", "--broker", "127.0.0.1:1",
		"--fsyncs", "50", "--duration", "300ms", "--store-dir", t.TempDir())
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr)
	}
	var got []benchResult
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r benchResult
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		got = append(got, r)
	}
	if len(got) != 3 || got[0].Scenario != "sync-flush-64" || !got[0].Skipped ||
		got[1].Scenario != "disk-fsync" || got[1].Msgs != 50 || got[1].P50Ms <= 0 ||
		got[2].Scenario != "disk-group-commit" || got[2].MsgsPerS <= 0 {
		t.Fatalf("results %+v", got)
	}
}
