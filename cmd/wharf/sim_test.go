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
