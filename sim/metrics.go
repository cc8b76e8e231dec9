package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"time"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/protocol"
)

// MetricsTotals are what the brokers reported through the metrics seam
// in a run with Options.Metrics.
type MetricsTotals struct {
	Requests    int64 `json:"requests"`
	StoredMsgs  int64 `json:"stored_msgs"`
	StoredBytes int64 `json:"stored_bytes"`
	PulledMsgs  int64 `json:"pulled_msgs"`
	Fsyncs      int64 `json:"fsyncs"`
	Snapshots   int64 `json:"snapshots"`
	// MaxLag is the largest consumer lag (messages) a snapshot showed.
	MaxLag int64 `json:"max_lag"`
}

// metricsLog folds every metrics call of a run, with the node and the
// virtual time, into one hash: the same seed gives the same hash, which
// is what makes the seam's figures a deterministic output of the
// simulator (the simulator runs one thing at a time, so no lock).
type metricsLog struct {
	w      *World
	h      hash.Hash
	totals MetricsTotals
}

func newMetricsLog(w *World) *metricsLog { return &metricsLog{w: w, h: sha256.New()} }

func (m *metricsLog) record(node, format string, args ...any) {
	fmt.Fprintf(m.h, "%d %s ", m.w.Now().Sub(Epoch).Microseconds(), node)
	fmt.Fprintf(m.h, format, args...)
	m.h.Write([]byte{'\n'})
}

// Hash is the run's metrics hash.
func (m *metricsLog) Hash() string { return hex.EncodeToString(m.h.Sum(nil))[:16] }

// nodeMetrics is one node's Env.Metrics.
type nodeMetrics struct {
	log  *metricsLog
	node string
}

var _ actors.Metrics = nodeMetrics{}

func (n nodeMetrics) Request(code protocol.Code, st protocol.Status, took time.Duration) {
	n.log.totals.Requests++
	n.log.record(n.node, "request %d %d %d", code, st, took)
}

func (n nodeMetrics) Stored(topic string, msgs int, bytes int64) {
	n.log.totals.StoredMsgs += int64(msgs)
	n.log.totals.StoredBytes += bytes
	n.log.record(n.node, "stored %s %d %d", topic, msgs, bytes)
}

func (n nodeMetrics) Pulled(topic string, msgs int, bytes int64) {
	n.log.totals.PulledMsgs += int64(msgs)
	n.log.record(n.node, "pulled %s %d %d", topic, msgs, bytes)
}

func (n nodeMetrics) Fsync(took time.Duration, bytes, logBytes int64) {
	n.log.totals.Fsyncs++
	n.log.record(n.node, "fsync %d %d %d", took, bytes, logBytes)
}

func (n nodeMetrics) Connections(delta int) { n.log.record(n.node, "connections %d", delta) }
func (n nodeMetrics) LongPolls(delta int)   { n.log.record(n.node, "long polls %d", delta) }

// Snapshot records the whole snapshot (JSON sorts its maps' keys).
func (n nodeMetrics) Snapshot(s *actors.BrokerSnapshot) {
	n.log.totals.Snapshots++
	for _, g := range s.Groups {
		n.log.totals.MaxLag = max(n.log.totals.MaxLag, g.Lag)
	}
	b, err := json.Marshal(s)
	if err != nil {
		n.log.w.Violationf("%s: metrics snapshot does not encode: %v", n.node, err)
		return
	}
	n.log.record(n.node, "snapshot %s", b)
}
