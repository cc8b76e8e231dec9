package benchrun

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func quickRunOptions(t *testing.T) Options {
	o := DefaultOptions()
	o.Fsyncs, o.Duration, o.StoreDir = 50, 300*time.Millisecond, t.TempDir()
	return o
}

// TestBenchRunSkipsAndDiskProbe runs the disk probe and the skip of
// sync-flush-64 and sync-master-64 against an existing ASYNC_FLUSH broker
// (none is contacted), as JSON lines.
func TestBenchRunSkipsAndDiskProbe(t *testing.T) {
	o := quickRunOptions(t)
	o.Scenarios = []string{"sync-master-64,disk-probe", "sync-flush-64"}
	o.JSON, o.Broker = true, "127.0.0.1:1"
	var out, errOut bytes.Buffer
	rs, err := Run(context.Background(), o, &out, &errOut)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut.String())
	}
	var got []Result
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r Result
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		got = append(got, r)
	}
	if len(got) != 4 || len(rs) != 4 ||
		got[0].Scenario != "sync-flush-64" || !got[0].Skipped || !strings.Contains(got[0].Note, "SYNC_FLUSH") ||
		got[1].Scenario != "sync-master-64" || !got[1].Skipped || got[1].Size != 1024 ||
		got[2].Scenario != "disk-fsync" || got[2].Msgs != 50 || got[2].P50Ms <= 0 || got[2].Size != 4096 ||
		got[3].Scenario != "disk-group-commit" || got[3].MsgsPerS <= 0 || got[3].Errors != 0 {
		t.Fatalf("results %+v", got)
	}
	if got[2].BrokerCPUS != nil || got[3].BrokerCPUS != nil {
		t.Fatalf("broker CPU reported without a broker: %+v", got)
	}
}

// Without --json the results come as one table at the end.
func TestBenchRunTable(t *testing.T) {
	o := quickRunOptions(t)
	o.Scenarios, o.Broker = []string{"sync-flush-64"}, "127.0.0.1:1"
	var out, errOut bytes.Buffer
	if _, err := Run(context.Background(), o, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "p99.9 ms") || !strings.Contains(lines[1], "sync-flush-64  1024  skipped: needs a SYNC_FLUSH broker") {
		t.Fatalf("table:\n%s", out.String())
	}
}

func TestBenchRunRejectsOptions(t *testing.T) {
	o := quickRunOptions(t)
	o.Rate = 0
	var out bytes.Buffer
	if rs, err := Run(context.Background(), o, &out, &out); err == nil || err.Error() != "--rate must be at least 1" || rs != nil || out.Len() != 0 {
		t.Fatalf("Run = %v, %v; output %q", rs, err, out.String())
	}
}

// A failed scenario is reported, and the others still run.
func TestBenchRunReportsFailures(t *testing.T) {
	o := quickRunOptions(t)
	o.Scenarios, o.JSON = []string{"sync-1", "disk-probe"}, true
	o.BrokerBin = "/nonexistent/wharf"
	var out, errOut bytes.Buffer
	rs, err := Run(context.Background(), o, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "1 scenario(s) failed: sync-1/1024: start broker /nonexistent/wharf") {
		t.Fatalf("error %v", err)
	}
	if len(rs) != 2 || rs[0].Scenario != "disk-fsync" || !strings.Contains(errOut.String(), "bench sync-1 size 1024: start broker") {
		t.Fatalf("results %+v, stderr %s", rs, errOut.String())
	}
}

// A cancelled context stops before the next scenario and is the error.
func TestBenchRunCancelled(t *testing.T) {
	o := quickRunOptions(t)
	o.Scenarios = []string{"disk-probe"}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	rs, err := Run(ctx, o, &out, &out)
	if err != context.Canceled || len(rs) != 0 {
		t.Fatalf("Run = %+v, %v", rs, err)
	}
}

func TestBenchLastFlushMode(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "ASYNC_FLUSH"},
		{[]string{"--flushIntervalCommitLog=200"}, "ASYNC_FLUSH"},
		{[]string{"--flushDiskType=SYNC_FLUSH"}, "SYNC_FLUSH"},
		{[]string{"--flushDiskType", "SYNC_FLUSH", "--x"}, "SYNC_FLUSH"},
		{[]string{"--flushDiskType=SYNC_FLUSH", "--flushDiskType", "ASYNC_FLUSH"}, "ASYNC_FLUSH"},
		{[]string{"--flushDiskType"}, "ASYNC_FLUSH"}, // no value: the broker will refuse it
	} {
		if got := lastFlushMode(tc.args, "ASYNC_FLUSH"); got != tc.want {
			t.Errorf("%q: %s, want %s", tc.args, got, tc.want)
		}
	}
}

func TestBenchRefusal(t *testing.T) {
	for _, tc := range []struct{ err, want string }{
		{"broker exited (exit status 1): level=ERROR msg=x\nconfig: brokerRole SYNC_MASTER: not supported\nmore", "brokerRole SYNC_MASTER: not supported"},
		{"  no such flag  ", "no such flag"},
	} {
		if got := refusal(errString(tc.err)); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.err, got, tc.want)
		}
	}
}

type errString string

func (e errString) Error() string { return string(e) }
