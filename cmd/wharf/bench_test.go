package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/wharfmq/wharf/internal/benchrun"
)

// When the bench starts a broker or a name server from this test binary (it
// passes the test binary as --wharf-bin and sets benchrun.ChildEnv), the
// child runs the wharf command line instead of the tests.
func init() {
	if os.Getenv(benchrun.ChildEnv) == "1" && len(os.Args) > 1 && (os.Args[1] == "bench" || os.Args[1] == "namesrv") {
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

// TestBenchClusterJSON runs both cluster scenarios, tiny, on a name server
// and broker groups started from this binary, and checks that their lines
// went through the name server and carry the cluster fields.
func TestBenchClusterJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a name server and broker processes")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, stderr, err := runBenchCLI(t, "bench", "--scenario", "cluster", "--json",
		"--duration", "500ms", "--warmup", "300ms", "--settle", "200ms", "--route-rounds", "3", "--ab-rounds", "1",
		"--store-dir", t.TempDir(), "--wharf-bin", exe,
		"--broker-arg=--mappedFileSizeCommitLog=67108864", "--broker-arg=--warmMapedFileEnable=false")
	if err != nil {
		t.Fatalf("bench: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr)
	}
	var rs []benchrun.Result
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r benchrun.Result
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("not JSON: %v: %s", err, l)
		}
		rs = append(rs, r)
	}
	if len(rs) != 7 {
		t.Fatalf("want 7 lines (route-propagation, 2 loads x 3 configurations), got %d:\n%s", len(rs), out)
	}
	rp := rs[0]
	if rp.Scenario != "route-propagation" || rp.Msgs != 3 || rp.Rounds != 3 || rp.Groups != 2 ||
		rp.ViaNamesrv == nil || !*rp.ViaNamesrv || rp.MaxMs == nil || *rp.MaxMs < rp.P99Ms || rp.P50Ms <= 0 {
		t.Fatalf("route-propagation %+v", rp)
	}
	want := []struct {
		scenario, ratioOf string
		groups            int
		viaNS             bool
	}{
		{"async-256/direct-1g", "", 1, false},
		{"async-256/namesrv-1g", "async-256/direct-1g", 1, true},
		{"async-256/namesrv-2g", "async-256/namesrv-1g", 2, true},
		{"sync-16/direct-1g", "", 1, false},
		{"sync-16/namesrv-1g", "sync-16/direct-1g", 1, true},
		{"sync-16/namesrv-2g", "sync-16/namesrv-1g", 2, true},
	}
	for i, w := range want {
		r := rs[i+1]
		if r.Scenario != w.scenario || r.Groups != w.groups || r.ViaNamesrv == nil || *r.ViaNamesrv != w.viaNS ||
			r.RatioOf != w.ratioOf || (r.Ratio != nil) != (w.ratioOf != "") || r.Msgs <= 0 || r.Errors != 0 ||
			r.Rounds != 1 || r.BrokerCPUS == nil {
			t.Errorf("line %d: %+v, want %+v", i+1, r, w)
		}
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
		{[]string{"--groups", "3", "--route-rounds", "7", "--ab-rounds", "5"}, func(o *benchrun.Options) {
			o.Groups, o.RouteRounds, o.ABRounds = 3, 7, 5
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

// TestBenchReportCommand: `wharf bench report` draws saved runs, one line
// per run, labelled as given or by the file's name.
func TestBenchReportCommand(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, msgs float64) string {
		path := filepath.Join(dir, name)
		line, _ := json.Marshal(benchrun.Result{Scenario: "sync-16", Size: 1024, FlushMode: "ASYNC_FLUSH", MsgsPerS: msgs, ThroughputPerS: []float64{msgs}})
		if err := os.WriteFile(path, append(line, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	a, b := write("a1.jsonl", 1000), write("b1.jsonl", 2000)
	out := filepath.Join(dir, "ab.html")
	if _, stderr, err := runBenchCLI(t, "bench", "report", "--out", out, "before="+a, b); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{">sync-16, 1024 B</h2>", `<td class="name">before</td><td>1000</td>`, `<td class="name">b1</td><td>2000</td>`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	empty := filepath.Join(dir, "empty.jsonl")
	_ = os.WriteFile(empty, []byte("no results here\n"), 0o644)
	if _, _, err := runBenchCLI(t, "bench", "report", "--out", out, empty); err == nil || !strings.Contains(err.Error(), "no results") {
		t.Errorf("a file without results: %v", err)
	}
	if _, _, err := runBenchCLI(t, "bench", "report", a); err == nil || !strings.Contains(err.Error(), "--out") {
		t.Errorf("no --out: %v", err)
	}
}
