package metrics

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/protocol"
)

// The counters move with what the seam reports, by topic.
func TestBrokerCounters(t *testing.T) {
	b := NewBroker(NewRegistry())
	b.Stored("T", 2, 10)
	b.Stored("T", 1, 5)
	b.Stored("U", 1, 1)
	b.Pulled("T", 3, 200)
	b.Fsync(time.Millisecond, 4096, 1<<20)
	b.Connections(1)
	b.Connections(1)
	b.Connections(-1)
	b.LongPolls(1)
	for _, c := range []struct {
		name string
		got  float64
		want float64
	}{
		{"messages in T", testutil.ToFloat64(b.msgsIn.WithLabelValues("T")), 3},
		{"bytes in T", testutil.ToFloat64(b.bytesIn.WithLabelValues("T")), 15},
		{"messages in U", testutil.ToFloat64(b.msgsIn.WithLabelValues("U")), 1},
		{"messages out T", testutil.ToFloat64(b.msgsOut.WithLabelValues("T")), 3},
		{"bytes out T", testutil.ToFloat64(b.bytesOut.WithLabelValues("T")), 200},
		{"commitlog bytes", testutil.ToFloat64(b.logBytes), 1 << 20},
		{"connections", testutil.ToFloat64(b.conns), 1},
		{"long polls", testutil.ToFloat64(b.longPolls), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

// Latencies go to the send, pull or other histogram, and a code or status
// protocol does not define is labelled "other", never its number.
func TestRequestLabels(t *testing.T) {
	reg := NewRegistry()
	b := NewBroker(reg)
	b.Request(protocol.CodeSendMessage, protocol.StatusOK, time.Millisecond)
	b.Request(protocol.CodeSendBatchMessage, protocol.StatusOK, time.Millisecond)
	b.Request(protocol.CodePullMessage, protocol.StatusOK, time.Second)
	b.Request(protocol.CodeHeartbeat, protocol.StatusOK, time.Microsecond)
	b.Request(protocol.Code(9999), protocol.StatusRequestCodeNotSupported, time.Microsecond)
	b.Request(protocol.CodeHeartbeat, protocol.Status(77777), time.Microsecond)
	for _, c := range []struct {
		name string
		got  int
		want int
	}{
		{"send series", testutil.CollectAndCount(b.send), 2},
		{"pull series", testutil.CollectAndCount(b.pull), 1},
		{"other series", testutil.CollectAndCount(b.requests), 3},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	// The unknown code and the unknown status each went to "other".
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var series []string
	for _, mf := range mfs {
		if mf.GetName() != "wharf_request_latency_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var kv []string
			for _, l := range m.GetLabel() {
				kv = append(kv, l.GetName()+"="+l.GetValue())
			}
			series = append(series, strings.Join(kv, ","))
		}
	}
	slices.Sort(series)
	want := []string{"code=HEART_BEAT,status=SUCCESS", "code=HEART_BEAT,status=other", "code=other,status=REQUEST_CODE_NOT_SUPPORTED"}
	if !slices.Equal(series, want) {
		t.Errorf("request series %q, want %q", series, want)
	}
}

// Every metric on a broker's registry, the runtime's included, passes
// promlint.
func TestPromlint(t *testing.T) {
	reg := NewRegistry()
	b := NewBroker(reg)
	b.Stored("T", 1, 1)
	b.Pulled("T", 1, 1)
	b.Request(protocol.CodeSendMessage, protocol.StatusOK, time.Millisecond)
	b.Request(protocol.CodePullMessage, protocol.StatusOK, time.Millisecond)
	b.Request(protocol.CodeHeartbeat, protocol.StatusOK, time.Millisecond)
	b.Fsync(time.Millisecond, 1, 1)
	b.Snapshot(&actors.BrokerSnapshot{MailboxDepths: map[string]int64{"writer": 1},
		Groups:      []actors.GroupSnapshot{{Group: "g", Queues: []actors.GroupQueueLag{{Topic: "T", Lag: 1}}}},
		Replication: actors.ReplicationSnapshot{Slaves: []actors.SlaveSnapshot{{BrokerID: 1}}}})
	b.OutboundQueued(func() int64 { return 0 })
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "wharf_") {
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}
	}
}

func TestHandler(t *testing.T) {
	reg := NewRegistry()
	NewBroker(reg).Stored("T", 1, 1)
	var ready atomic.Bool
	srv := httptest.NewServer(Handler(reg, func() bool { return ready.Load() }))
	defer srv.Close()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := get("/healthz"); code != http.StatusServiceUnavailable {
		t.Errorf("/healthz before ready: %d, want 503", code)
	}
	ready.Store(true)
	if code, body := get("/healthz"); code != http.StatusOK || strings.TrimSpace(body) != "ready" {
		t.Errorf("/healthz when ready: %d %q", code, body)
	}
	code, body := get("/metrics")
	for _, want := range []string{`wharf_messages_in_total{topic="T"} 1`, "go_goroutines", "process_cpu_seconds_total"} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("/metrics: %d, no %q", code, want)
		}
	}
}

// The gauges follow the snapshot: lag summed per (group, topic) in
// messages, the oldest age in seconds, one series per slave; a group or
// slave gone from the snapshot loses its series.
func TestSnapshotGauges(t *testing.T) {
	b := NewBroker(NewRegistry())
	s := &actors.BrokerSnapshot{
		CommitLog:     actors.LogSnapshot{FlushBehindBytes: 10, DispatchBehindBytes: 20, DiskBytes: 1 << 30},
		MailboxDepths: map[string]int64{"writer": 3, "dispatch": 0},
		Groups: []actors.GroupSnapshot{{Group: "g", Queues: []actors.GroupQueueLag{
			{Topic: "T", QueueID: 0, Lag: 5, LagMs: 1500},
			{Topic: "T", QueueID: 1, Lag: 2, LagMs: 4000},
			{Topic: "U", QueueID: 0, Lag: 0},
		}}, {Group: "h", Queues: []actors.GroupQueueLag{{Topic: "T", Lag: 1, LagMs: 10}}}},
		Replication: actors.ReplicationSnapshot{InSyncSlaves: 1, SyncStateSet: []int64{0, 1},
			Slaves: []actors.SlaveSnapshot{{BrokerID: 1, LagBytes: 0}, {BrokerID: 2, LagBytes: 4096}}},
	}
	b.Snapshot(s)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"flush behind", testutil.ToFloat64(b.flushBehind), 10},
		{"dispatch behind", testutil.ToFloat64(b.dispatchBehind), 20},
		{"disk bytes", testutil.ToFloat64(b.diskBytes), 1 << 30},
		{"lag g/T", testutil.ToFloat64(b.lagMsgs.WithLabelValues("g", "T")), 7},
		{"lag g/U", testutil.ToFloat64(b.lagMsgs.WithLabelValues("g", "U")), 0},
		{"lag seconds g/T", testutil.ToFloat64(b.lagSecs.WithLabelValues("g", "T")), 4},
		{"lag h/T", testutil.ToFloat64(b.lagMsgs.WithLabelValues("h", "T")), 1},
		{"slave 2", testutil.ToFloat64(b.replLag.WithLabelValues("2")), 4096},
		{"sync state set", testutil.ToFloat64(b.syncSet), 2},
		{"in sync", testutil.ToFloat64(b.inSync), 1},
		{"writer mailbox", testutil.ToFloat64(b.mailbox.WithLabelValues("writer")), 3},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	s.Groups = s.Groups[:1]
	s.Replication.Slaves = s.Replication.Slaves[:1]
	b.Snapshot(s)
	if n := testutil.CollectAndCount(b.lagMsgs); n != 2 {
		t.Errorf("lag series after h left: %d, want 2", n)
	}
	if n := testutil.CollectAndCount(b.replLag); n != 1 {
		t.Errorf("slave series after slave 2 left: %d, want 1", n)
	}
}

// The lag series stop at maxLagSeries (group, topic) pairs, however many
// groups clients make up.
func TestLagSeriesBounded(t *testing.T) {
	b := NewBroker(NewRegistry())
	s := &actors.BrokerSnapshot{}
	for i := 0; i < maxLagSeries+10; i++ {
		s.Groups = append(s.Groups, actors.GroupSnapshot{Group: fmt.Sprint("g", i), Queues: []actors.GroupQueueLag{{Topic: "T", Lag: 1}}})
	}
	b.Snapshot(s)
	if n := testutil.CollectAndCount(b.lagMsgs); n != maxLagSeries {
		t.Errorf("lag series %d, want %d", n, maxLagSeries)
	}
}

// Two (code, status) pairs that share a slot of the observer cache each
// count in their own series, however their observations interleave.
func TestRequestCacheCollision(t *testing.T) {
	reg := NewRegistry()
	b := NewBroker(reg)
	a, c := protocol.CodeSendMessage, protocol.CodeSendMessage+hotSlots // one slot
	if (uint32(a)*31)%hotSlots != (uint32(c)*31)%hotSlots {
		t.Fatalf("codes %d and %d do not share a slot", a, c)
	}
	for i := range 10 {
		b.Request(a, protocol.StatusOK, time.Millisecond)
		if i%3 == 0 {
			b.Request(c, protocol.StatusOK, time.Millisecond)
		}
		b.Request(a, protocol.StatusOK, time.Millisecond)
	}
	// count is the observations of histogram name in the series whose
	// code label is code.
	count := func(name, code string) uint64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "code" && l.GetValue() == code {
						return m.GetHistogram().GetSampleCount()
					}
				}
			}
		}
		return 0
	}
	if n := count("wharf_send_latency_seconds", a.String()); n != 20 {
		t.Errorf("%s: %d observations, want 20", a, n)
	}
	label := "other"
	if c.Known() {
		label = c.String()
	}
	if n := count("wharf_request_latency_seconds", label); n != 4 {
		t.Errorf("%s: %d observations, want 4", label, n)
	}
}
