package main

import (
	"encoding/json"
	"net/http"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/internal/metrics"
	"github.com/wharfmq/wharf/netio"
)

// The broker's JSON status endpoints, beside /metrics (docs/OPERATIONS.md
// documents every field): /status, /topics, /groups, /replication. Each
// serves the broker's latest snapshot (actors.BrokerSnapshot, taken once
// a second by the broker itself), never actor state: a handler only reads
// an atomically published, immutable value. ?pretty indents the JSON.

// statusSource is a running broker and its client listener.
type statusSource struct {
	b   *actors.Broker
	srv *netio.Server
}

// serveBroker points the status endpoints and the transport's gauge at
// the broker of this run (nil b: between two runs).
func (m *metricsServer) serveBroker(b *actors.Broker, srv *netio.Server) {
	if m == nil {
		return
	}
	if b == nil {
		m.broker.Store(nil)
		return
	}
	m.broker.Store(&statusSource{b: b, srv: srv})
}

// brokerStatus registers the broker's status endpoints and the gauge of
// bytes queued on its connections (the transport's, read at each scrape).
func (m *metricsServer) brokerStatus(bm *metrics.Broker) {
	if m == nil {
		return
	}
	bm.OutboundQueued(func() int64 {
		if src := m.broker.Load(); src != nil && src.srv != nil {
			return src.srv.Stats().OutboundQueued
		}
		return 0
	})
	m.mux.HandleFunc("GET /status", m.snapshotHandler(func(s *actors.BrokerSnapshot, src *statusSource) any {
		doc := brokerStatusDoc{BrokerSnapshot: s, Epoch: s.Replication.Epoch, TopicCount: len(s.Topics), GroupCount: len(s.Groups)}
		if src.srv != nil {
			doc.OutboundQueuedBytes = src.srv.Stats().OutboundQueued
		}
		return doc
	}))
	m.mux.HandleFunc("GET /topics", m.snapshotHandler(func(s *actors.BrokerSnapshot, _ *statusSource) any {
		return topicsDoc{TimestampMs: s.TimestampMs, BrokerName: s.BrokerName, Topics: s.Topics}
	}))
	m.mux.HandleFunc("GET /groups", m.snapshotHandler(func(s *actors.BrokerSnapshot, _ *statusSource) any {
		return groupsDoc{TimestampMs: s.TimestampMs, BrokerName: s.BrokerName, Groups: s.Groups}
	}))
	m.mux.HandleFunc("GET /replication", m.snapshotHandler(func(s *actors.BrokerSnapshot, _ *statusSource) any {
		return replicationDoc{TimestampMs: s.TimestampMs, BrokerName: s.BrokerName, BrokerID: s.BrokerID,
			MaxOffset: s.CommitLog.MaxOffset, ConfirmOffset: s.CommitLog.ConfirmOffset, ReplicationSnapshot: s.Replication}
	}))
}

// brokerStatusDoc is /status: the snapshot without its lists (/topics,
// /groups and /replication have them), with their counts.
type brokerStatusDoc struct {
	*actors.BrokerSnapshot
	// The lists are left out: these shadow the snapshot's (nil, omitted).
	Topics      []actors.TopicSnapshot      `json:"topics,omitempty"`
	Groups      []actors.GroupSnapshot      `json:"groups,omitempty"`
	Replication *actors.ReplicationSnapshot `json:"replication,omitempty"`

	Epoch               int32 `json:"epoch"`
	TopicCount          int   `json:"topicCount"`
	GroupCount          int   `json:"groupCount"`
	OutboundQueuedBytes int64 `json:"outboundQueuedBytes"`
}

type topicsDoc struct {
	TimestampMs int64                  `json:"timestampMs"`
	BrokerName  string                 `json:"brokerName"`
	Topics      []actors.TopicSnapshot `json:"topics"`
}

type groupsDoc struct {
	TimestampMs int64                  `json:"timestampMs"`
	BrokerName  string                 `json:"brokerName"`
	Groups      []actors.GroupSnapshot `json:"groups"`
}

type replicationDoc struct {
	TimestampMs   int64  `json:"timestampMs"`
	BrokerName    string `json:"brokerName"`
	BrokerID      int64  `json:"brokerId"`
	MaxOffset     int64  `json:"maxOffset"`
	ConfirmOffset int64  `json:"confirmOffset"`
	actors.ReplicationSnapshot
}

// snapshotHandler serves doc of the latest snapshot; 503 while there is
// none (the broker starts, or starts again).
func (m *metricsServer) snapshotHandler(doc func(*actors.BrokerSnapshot, *statusSource) any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		src := m.broker.Load()
		var s *actors.BrokerSnapshot
		if src != nil {
			s = src.b.Snapshot()
		}
		if s == nil {
			writeJSON(w, r, http.StatusServiceUnavailable, map[string]string{"error": "the broker is starting: no snapshot yet"})
			return
		}
		writeJSON(w, r, http.StatusOK, doc(s, src))
	}
}

// writeJSON writes v as JSON, indented if the query has pretty.
func writeJSON(w http.ResponseWriter, r *http.Request, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	if r.URL.Query().Has("pretty") {
		enc.SetIndent("", "  ")
	}
	_ = enc.Encode(v) // the client went away: nothing to tell it
}
