package benchrun

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

// The JSON field names are a format: bench/ (its result type) and
// bench/scripts/ab.sh parse them.
func TestBenchResultJSONFields(t *testing.T) {
	cpu := 1.5
	r := Result{Scenario: "s", BrokerCPUS: &cpu, BrokerCPUSPerMMsg: &cpu, BrokerHeapMiB: &cpu, FlushMode: "F", Skipped: true, Note: "n"}
	var buf bytes.Buffer
	if err := writeJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(buf.String(), "}\n") || strings.Count(buf.String(), "\n") != 1 {
		t.Fatalf("want one line of JSON: %q", buf.String())
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := []string{"broker_cpu_s", "broker_cpu_s_per_m_msgs", "broker_heap_mib", "elapsed_s", "errors", "flush_mode",
		"mb_per_s", "msgs", "msgs_per_s", "note", "p50_ms", "p999_ms", "p99_ms", "scenario", "size", "skipped"}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("fields %q, want %q", keys, want)
	}
	// Without a broker of our own broker_cpu_s is null, not left out.
	buf.Reset()
	_ = writeJSON(&buf, Result{Scenario: "s"})
	if !strings.Contains(buf.String(), `"broker_cpu_s":null`) || strings.Contains(buf.String(), "skipped") {
		t.Fatalf("zero result: %s", buf.String())
	}
}

func TestBenchWriteTable(t *testing.T) {
	cpu, per, heap := 1.234, 56.78, 12.34
	rs := []Result{
		{Scenario: "async-256", Size: 1024, Msgs: 1000, MsgsPerS: 500.4, MBPerS: 0.51, P50Ms: 1, P99Ms: 2.5, P999Ms: 3.25,
			BrokerCPUS: &cpu, BrokerCPUSPerMMsg: &per, Note: "a note"},
		{Scenario: "sync-flush-64", Size: 1024, Skipped: true, Note: "needs a SYNC_FLUSH broker"},
		{Scenario: "consume-backlog", Size: 64, Msgs: 7, Errors: 2, BrokerHeapMiB: &heap},
	}
	var buf bytes.Buffer
	writeTable(&buf, rs)
	want := "         scenario  size                                msgs  msg/s  MB/s  p50 ms  p99 ms  p99.9 ms  errors  broker cpu s  cpu s/M msgs\n" +
		"        async-256  1024                                1000    500   0.5   1.000   2.500     3.250       0          1.23          56.8\n" +
		"    sync-flush-64  1024  skipped: needs a SYNC_FLUSH broker\n" +
		"  consume-backlog    64                                   7      0   0.0   0.000   0.000     0.000       2             -             -\n" +
		"  async-256/1024: a note\n" +
		"  consume-backlog/64: broker Go heap 12.3 MiB (after GC, backlog stored)\n"
	// The skipped line pads its empty cells; compare without trailing blanks.
	var got []string
	for _, l := range strings.Split(buf.String(), "\n") {
		got = append(got, strings.TrimRight(l, " "))
	}
	if g := strings.Join(got, "\n"); g != want {
		t.Fatalf("table:\n%s\nwant:\n%s", g, want)
	}
}

func TestBenchRecorderResult(t *testing.T) {
	r := newRecorder()
	r.done(5, time.Millisecond, nil) // before the window: progress only
	r.start.Store(time.Now().Add(-2 * time.Second).UnixNano())
	for range 98 {
		r.done(10, 2*time.Millisecond, nil)
	}
	r.done(10, 100*time.Millisecond, nil)
	r.done(10, time.Second, nil)
	boom := errors.New("boom")
	r.done(3, 0, boom)
	r.done(1, 0, errors.New("later"))
	r.end.Store(r.start.Load() + int64(2*time.Second))
	r.done(10, time.Millisecond, nil) // after the window
	res := r.result("x", 1000)
	if res.Msgs != 1000 || r.total.Load() != 1015 || res.Errors != 4 || r.err() != boom {
		t.Fatalf("counts: %+v total %d err %v", res, r.total.Load(), r.err())
	}
	if res.ElapsedS != 2 || res.MsgsPerS != 500 || res.MBPerS != 0.5 {
		t.Fatalf("rates: %+v", res)
	}
	if res.P50Ms != 2 || res.P99Ms != 100.031 || res.P999Ms != 1000.447 {
		t.Fatalf("quantiles: %+v", res)
	}
	if empty := newRecorder().result("y", 1); empty.MsgsPerS != 0 || empty.P50Ms != 0 || empty.ElapsedS != 0 {
		t.Fatalf("a window never opened: %+v", empty)
	}
}

func TestBenchSetBrokerCPU(t *testing.T) {
	r := Result{Msgs: 2_000_000}
	r.setBrokerCPU(-1, 5)
	if r.BrokerCPUS != nil || r.BrokerCPUSPerMMsg != nil {
		t.Fatalf("unknown CPU reported: %+v", r)
	}
	r.setBrokerCPU(1, 4.0004)
	if r.BrokerCPUS == nil || *r.BrokerCPUS != 3 || r.BrokerCPUSPerMMsg == nil || *r.BrokerCPUSPerMMsg != 1.5 {
		t.Fatalf("cpu %v per %v", r.BrokerCPUS, r.BrokerCPUSPerMMsg)
	}
	none := Result{}
	none.setBrokerCPU(1, 2)
	if none.BrokerCPUS == nil || none.BrokerCPUSPerMMsg != nil {
		t.Fatalf("no messages: %+v", none)
	}
}
