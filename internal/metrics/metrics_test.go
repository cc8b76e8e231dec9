package metrics

import (
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
