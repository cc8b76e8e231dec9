package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/wharfmq/wharf/protocol"
)

// BenchmarkSendPath is what a send costs the metrics layer: its latency
// observation and its topic counters.
func BenchmarkSendPath(b *testing.B) {
	m := NewBroker(prometheus.NewRegistry())
	for b.Loop() {
		m.Request(protocol.CodeSendMessage, protocol.StatusOK, 200*time.Microsecond)
		m.Stored("bench", 1, 1024)
	}
}
