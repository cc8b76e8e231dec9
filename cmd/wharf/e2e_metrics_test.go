package main

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wharfmq/wharf/internal/testwait"
)

// A real broker serves /metrics and /healthz on --metricsPort: /healthz
// says ready once it serves, and the counters move with the sends.
func TestE2EMetrics(t *testing.T) {
	t.Parallel()
	port := e2eFreePorts(t, 1)[0]
	b := startBroker(t, t.TempDir(), "--metricsPort", strconv.Itoa(port))
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	get := httpGetter(base)
	waitHealthy(t, get)

	ctx := e2eCtx(t, 30*time.Second)
	p := e2eProducer(t, b.addr)
	for i := range 5 {
		m := e2eMessage("metrics-topic", fmt.Sprintf("k%d", i))
		if _, err := p.Send(ctx, m); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	code, body := get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	for _, want := range []string{
		`wharf_messages_in_total{topic="metrics-topic"} 5`,
		`wharf_send_latency_seconds_count{code="SEND_MESSAGE",status="SUCCESS"} 5`,
		`wharf_connections 1`,
		`go_goroutines `,
		`process_resident_memory_bytes `,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics has no %q", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}

// The name server serves the runtime's metrics and /healthz too.
func TestE2ENamesrvMetrics(t *testing.T) {
	t.Parallel()
	port := e2eFreePorts(t, 1)[0]
	startNamesrv(t, "--metricsPort", strconv.Itoa(port))
	get := httpGetter(fmt.Sprintf("http://127.0.0.1:%d", port))
	waitHealthy(t, get)
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "go_goroutines ") {
		t.Errorf("/metrics: %d, no go_goroutines:\n%s", code, body)
	}
}

// httpGetter GETs paths under base: the status and the body (0 and the
// error when the request failed).
func httpGetter(base string) func(path string) (int, string) {
	return func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
}

func waitHealthy(t *testing.T, get func(string) (int, string)) {
	t.Helper()
	testwait.For(t, testwait.Wall, 10*time.Second, "/healthz ready", func() bool {
		code, body := get("/healthz")
		return code == http.StatusOK && strings.TrimSpace(body) == "ready"
	})
}
