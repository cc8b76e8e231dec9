package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/client"
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

// The name server's and the controller's /status ask the daemon itself,
// over its own port, with a timeout (their tables live in one actor each,
// which publishes no snapshot): GET_BROKER_CLUSTER_INFO and the topic
// list of a name server, GET_METADATA_INFO of a controller node. A daemon
// that does not answer in statusTimeout gives 503.

const statusTimeout = 2 * time.Second

// namesrvStatusDoc is a name server's /status.
type namesrvStatusDoc struct {
	TimestampMs      int64              `json:"timestampMs"`
	ListenAddr       string             `json:"listenAddr"`
	UptimeMs         int64              `json:"uptimeMs"`
	Brokers          []namesrvBrokerDoc `json:"brokers"`
	BrokerCount      int                `json:"brokerCount"`
	AliveBrokerCount int                `json:"aliveBrokerCount"`
	TopicCount       int                `json:"topicCount"`
	// Controller: the embedded controller node's status, if one runs.
	Controller *controllerStatusDoc `json:"controller,omitempty"`
}

// namesrvBrokerDoc is one broker the name server knows.
type namesrvBrokerDoc struct {
	ClusterName     string `json:"clusterName"`
	BrokerName      string `json:"brokerName"`
	BrokerID        int64  `json:"brokerId"`
	BrokerAddr      string `json:"brokerAddr"`
	HAServerAddr    string `json:"haServerAddr,omitempty"`
	BrokerRole      string `json:"brokerRole"`
	Alive           bool   `json:"alive"`
	LiveSinceMs     int64  `json:"liveSinceMs"`
	LastHeartbeatMs int64  `json:"lastHeartbeatMs"`
	LeaseMillis     int64  `json:"leaseMillis"`
	Topics          int32  `json:"topics"`
}

// controllerStatusDoc is a controller node's /status.
type controllerStatusDoc struct {
	TimestampMs int64                `json:"timestampMs"`
	ListenAddr  string               `json:"listenAddr"`
	UptimeMs    int64                `json:"uptimeMs"`
	IsLeader    bool                 `json:"isLeader"`
	LeaderAddr  string               `json:"leaderAddr"`
	Term        int64                `json:"term"`
	Groups      []controllerGroupDoc `json:"groups"`
}

// controllerGroupDoc is one broker group as the controller node holds it.
type controllerGroupDoc struct {
	ClusterName       string           `json:"clusterName"`
	BrokerName        string           `json:"brokerName"`
	MasterID          int64            `json:"masterId"` // 0: no master (protocol.NoBroker)
	MasterAddr        string           `json:"masterAddr"`
	MasterEpoch       int32            `json:"masterEpoch"`
	SyncStateSet      []int64          `json:"syncStateSet"`
	SyncStateSetEpoch int32            `json:"syncStateSetEpoch"`
	Replicas          []controllerRepl `json:"replicas"`
}

type controllerRepl struct {
	BrokerID   int64  `json:"brokerId"`
	BrokerAddr string `json:"brokerAddr"`
	Alive      bool   `json:"alive"`
}

// namesrvStatus registers a name server's /status: the name server on
// addr, and the embedded controller node on ctlAddr ("": none).
func (m *metricsServer) namesrvStatus(addr, ctlAddr string, boot time.Time) {
	if m == nil {
		return
	}
	addr = dialable(addr)
	m.mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), statusTimeout)
		defer cancel()
		doc, err := askNamesrv(ctx, addr, boot)
		if err == nil && ctlAddr != "" {
			doc.Controller, err = askController(ctx, ctlAddr, boot)
		}
		if err != nil {
			writeJSON(w, r, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, r, http.StatusOK, doc)
	})
}

// controllerStatus registers a controller node's /status (the node on
// addr).
func (m *metricsServer) controllerStatus(addr string, boot time.Time) {
	if m == nil {
		return
	}
	m.mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), statusTimeout)
		defer cancel()
		doc, err := askController(ctx, addr, boot)
		if err != nil {
			writeJSON(w, r, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, r, http.StatusOK, doc)
	})
}

func askNamesrv(ctx context.Context, addr string, boot time.Time) (*namesrvStatusDoc, error) {
	a, err := client.NewAdmin("", client.WithNameServer(addr), client.WithTimeout(statusTimeout),
		client.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, fmt.Errorf("name server %s: %w", addr, err)
	}
	defer a.Close()
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return nil, fmt.Errorf("name server %s: cluster info: %w", addr, err)
	}
	topics, err := a.NameServerTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("name server %s: %w", addr, err)
	}
	now := time.Now()
	doc := &namesrvStatusDoc{TimestampMs: now.UnixMilli(), ListenAddr: addr, UptimeMs: now.Sub(boot).Milliseconds(),
		Brokers: make([]namesrvBrokerDoc, 0, len(ci.Brokers)), BrokerCount: len(ci.Brokers), TopicCount: len(topics)}
	for _, b := range ci.Brokers {
		doc.Brokers = append(doc.Brokers, namesrvBrokerDoc{ClusterName: b.ClusterName, BrokerName: b.BrokerName, BrokerID: b.BrokerID,
			BrokerAddr: b.BrokerAddr, HAServerAddr: b.HAServerAddr, BrokerRole: b.BrokerRole, Alive: b.Alive,
			LiveSinceMs: b.LiveSinceMs, LastHeartbeatMs: b.LastHeartbeatMs, LeaseMillis: b.LeaseMillis, Topics: b.Topics})
		if b.Alive {
			doc.AliveBrokerCount++
		}
	}
	return doc, nil
}

func askController(ctx context.Context, addr string, boot time.Time) (*controllerStatusDoc, error) {
	addr = dialable(addr)
	nodes, err := client.ControllerNodes(ctx, addr, client.WithTimeout(statusTimeout), client.WithLogger(slog.New(slog.DiscardHandler)))
	if err == nil && len(nodes) == 1 {
		err = nodes[0].Err
	}
	if err != nil {
		return nil, fmt.Errorf("controller %s: %w", addr, err)
	}
	n := nodes[0]
	now := time.Now()
	doc := &controllerStatusDoc{TimestampMs: now.UnixMilli(), ListenAddr: addr, UptimeMs: now.Sub(boot).Milliseconds(),
		IsLeader: n.IsLeader, LeaderAddr: n.LeaderAddr, Term: n.Term, Groups: make([]controllerGroupDoc, 0, len(n.Groups))}
	for _, g := range n.Groups {
		gd := controllerGroupDoc{ClusterName: g.ClusterName, BrokerName: g.BrokerName, MasterID: g.MasterID, MasterAddr: g.MasterAddr,
			MasterEpoch: g.MasterEpoch, SyncStateSet: g.SyncStateSet, SyncStateSetEpoch: g.SyncStateSetEpoch,
			Replicas: make([]controllerRepl, 0, len(g.Replicas))}
		if gd.SyncStateSet == nil {
			gd.SyncStateSet = []int64{}
		}
		for _, r := range g.Replicas {
			gd.Replicas = append(gd.Replicas, controllerRepl{BrokerID: r.BrokerID, BrokerAddr: r.BrokerAddr, Alive: r.Alive})
		}
		doc.Groups = append(doc.Groups, gd)
	}
	return doc, nil
}

// dialable is addr with an unspecified host (0.0.0.0, ::, "") as
// loopback: where this process reaches its own listener.
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
