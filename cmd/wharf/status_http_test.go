package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wharfmq/wharf/cmd/wharf/brokerconf"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// The status endpoints, read while the broker takes sends, in this
// process (so that -race sees the handlers, the snapshot actor and the
// broker's owners together): every endpoint answers JSON, before the
// first snapshot, then 200; /nope is 404.
func TestStatusEndpointsUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	ports := e2eFreePorts(t, 3)
	c := brokerconf.Default()
	c.ListenPort, c.HAListenPort, c.MetricsPort = ports[0], ports[1], ports[2]
	c.StorePathRootDir = t.TempDir()
	c.MappedFileSizeCommitLog, c.MappedFileSizeConsumeQueue, c.WarmMapedFileEnable = 16<<20, 6000, false
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runBroker(ctx, c, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("broker: %v", err)
		}
	})
	get := httpGetter(fmt.Sprintf("http://127.0.0.1:%d", ports[2]))
	waitHealthy(t, get)
	p := e2eProducer(t, fmt.Sprintf("127.0.0.1:%d", ports[0]))
	paths := []string{"/status", "/topics", "/groups", "/replication"}
	testwait.For(t, testwait.Wall, 5*time.Second, "the first snapshot", func() bool {
		code, _ := get("/status")
		return code == http.StatusOK
	})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sctx := e2eCtx(t, 30*time.Second)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := p.Send(sctx, &protocol.Message{Topic: fmt.Sprint("S", i%3), Body: []byte("x")}); err != nil {
				t.Errorf("send %d: %v", i, err)
				return
			}
		}
	}()
	// Read every endpoint while the sends go on, across three snapshots.
	seen := map[int64]bool{}
	testwait.For(t, testwait.Wall, 15*time.Second, "three snapshots read under load", func() bool {
		for _, path := range append(paths, "/metrics") {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", ports[2], path))
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				TimestampMs int64 `json:"timestampMs"`
			}
			ct := resp.Header.Get("Content-Type")
			if path != "/metrics" {
				if ct != "application/json" || json.NewDecoder(resp.Body).Decode(&doc) != nil {
					t.Errorf("%s: content type %q, or not JSON", path, ct)
				}
				seen[doc.TimestampMs] = true
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s: %d", path, resp.StatusCode)
			}
		}
		return len(seen) >= 3
	})
	close(stop)
	wg.Wait()
	testwait.For(t, testwait.Wall, 5*time.Second, "the three topics in /topics", func() bool {
		_, body := get("/topics")
		return strings.Contains(body, `"topic":"S0"`) && strings.Contains(body, `"topic":"S2"`)
	})
	if code, _ := get("/nope"); code != http.StatusNotFound {
		t.Errorf("/nope: %d, want 404", code)
	}
}
