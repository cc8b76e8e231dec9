package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// runWharf runs the command in process and returns its stdout (stderr is
// appended after a marker line for failure messages).
func runWharf(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.Execute()
	if errOut.Len() > 0 {
		t.Logf("stderr of wharf %v:\n%.3000s", args, errOut.String())
	}
	return out.String(), err
}

func simLastJSON(t *testing.T, out string, v any) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), v); err != nil {
		t.Fatalf("last line is not JSON: %v\n%s", err, out)
	}
}

// TestSimPlantedBugsFail: the simulator has teeth: with a planted bug the
// command reports a violation and fails.
func TestSimPlantedBugsFail(t *testing.T) {
	for _, bug := range []struct{ name, scenario string }{{"ack-before-flush", "sync-flush"}, {"skip-crc-check", "async-power-cuts"}} {
		out, err := runWharf(t, "sim", "--bug", bug.name, "--scenario", bug.scenario, "--seeds", "20", "--json")
		var sum simSummary
		simLastJSON(t, out, &sum)
		if err == nil || sum.Failures == 0 {
			t.Fatalf("--bug %s: err %v, %d failures; want a reported violation and a failure\n%s", bug.name, err, sum.Failures, out)
		}
	}
}

// TestSimReplay: a seed replays to the same trace, and a clean run passes.
func TestSimReplay(t *testing.T) {
	var a, b simSummary
	out, err := runWharf(t, "sim", "--seed", "11", "--json")
	if err != nil {
		t.Fatalf("seed 11: %v\n%s", err, out)
	}
	simLastJSON(t, out, &a)
	out, err = runWharf(t, "sim", "--seed", "11", "--json")
	if err != nil {
		t.Fatal(err)
	}
	simLastJSON(t, out, &b)
	if a.TraceHash == "" || a.TraceHash != b.TraceHash || a.Seeds != 1 || a.Failures != 0 {
		t.Fatalf("replay: %+v vs %+v", a, b)
	}
	out, err = runWharf(t, "sim", "--seed", "11", "--trace")
	if err != nil || !strings.Contains(out, "scenario ") || !strings.Contains(out, "trace "+a.TraceHash) {
		t.Fatalf("--trace output lacks the scenario line or the hash: %v\n%.2000s", err, out)
	}
}

// TestSimSummaryText pins the text report: headline, one latency row per
// flush mode in name order, the optional rows, and the failed seeds.
func TestSimSummaryText(t *testing.T) {
	sum := simSummary{Seeds: 3, Failures: 1, FailedSeeds: []int64{2}, SimSeconds: 7, WallSeconds: 1.5, SeedsPerMinute: 120,
		AckLatency: map[string]latencyRow{
			"SYNC_FLUSH":   {Acks: 10, P50: 100, P99: 200, P999: 300, Max: 400},
			"ASYNC_MASTER": {Acks: 2000, P50: 1, P99: 2, P999: 3, Max: 4},
		},
		Liveness: &latencyRow{Acks: 3, P50: 100, P99: 600, P999: 600, Max: 600}}
	var out bytes.Buffer
	printSimSummary(&out, simRun{n: 3}, sum, nil)
	want := `3 seeds, 1 failed, 7 virtual s in 1.5 wall s (120 seeds/min)
                ack latency (virtual µs)  acks  p50  p99  p99.9  max
                            ASYNC_MASTER  2000    1    2      3    4
                              SYNC_FLUSH    10  100  200    300  400
  convergence after healing (virtual ms)     3  100  600    600  600
failed seeds: [2] (replay one with: wharf sim --seed N --trace)
`
	if out.String() != want {
		t.Errorf("got:\n%q\nwant:\n%q", out.String(), want)
	}
}
