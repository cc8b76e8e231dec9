package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/protocol"
)

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// apiError is the body of an answer that could not be given.
type apiError struct {
	Error string `json:"error"`
}

func (s *Server) reqCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), 4*s.cfg.Timeout)
}

// brokerJSON is one broker of the cluster page.
type brokerJSON struct {
	Cluster         string  `json:"cluster"`
	Group           string  `json:"group"`
	ID              int64   `json:"id"`
	Addr            string  `json:"addr"`
	HAAddr          string  `json:"haAddr"`
	Role            string  `json:"role"`
	Registered      bool    `json:"registered"` // the name server holds a live lease
	Health          string  `json:"health"`     // up, down, unknown (not sampled yet)
	Error           string  `json:"error,omitempty"`
	Version         string  `json:"version,omitempty"`
	Connections     int32   `json:"connections"`
	DiskUsedRatio   float64 `json:"diskUsedRatio"`
	MsgPutTotal     int64   `json:"msgPutTotal"`
	MsgGetTotal     int64   `json:"msgGetTotal"`
	CommitLogMax    int64   `json:"commitLogMaxOffset"`
	BootMs          int64   `json:"bootMs,omitempty"`
	LastHeartbeatMs int64   `json:"lastHeartbeatMs"`
	SampledMs       int64   `json:"sampledMs,omitempty"`
}

type clusterJSON struct {
	NameServer string          `json:"nameServer"`
	Brokers    []brokerJSON    `json:"brokers"`
	Controller *controllerJSON `json:"controller,omitempty"`
}

func (s *Server) apiCluster(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	ci, err := s.pool.clusterInfo(ctx)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, apiError{err.Error()})
		return
	}
	snap := s.snapshot()
	out := clusterJSON{NameServer: s.cfg.NameServer, Brokers: []brokerJSON{}, Controller: s.controller(ctx)}
	for _, b := range ci.Brokers {
		out.Brokers = append(out.Brokers, brokerRow(b, snap[b.BrokerAddr]))
	}
	writeJSON(w, http.StatusOK, out)
}

// brokerRow joins the name server's entry and the last sample.
func brokerRow(b protocol.BrokerInfo, bs brokerSample) brokerJSON {
	row := brokerJSON{Cluster: b.ClusterName, Group: b.BrokerName, ID: b.BrokerID, Addr: b.BrokerAddr,
		HAAddr: b.HAServerAddr, Role: b.BrokerRole, Registered: b.Alive, Health: "unknown", LastHeartbeatMs: b.LastHeartbeatMs}
	switch {
	case bs.Info != nil:
		i := bs.Info
		row.Health, row.Role, row.Version = "up", i.BrokerRole, i.Version
		row.Connections, row.DiskUsedRatio = i.ConnectionCount, i.DiskUsedRatio
		row.MsgPutTotal, row.MsgGetTotal, row.CommitLogMax, row.BootMs = i.MsgPutTotal, i.MsgGetTotal, i.CommitLogMaxOffset, i.BootTimestamp
	case bs.Err != "":
		row.Health, row.Error = "down", bs.Err
	}
	if !bs.At.IsZero() {
		row.SampledMs = bs.At.UnixMilli()
	}
	return row
}

// controllerJSON is the controller leader's view of the groups.
type controllerJSON struct {
	Addr   string      `json:"addr"`
	Leader string      `json:"leader,omitempty"`
	Term   int64       `json:"term,omitempty"`
	Error  string      `json:"error,omitempty"`
	Groups []groupRepl `json:"groups"`
}

type groupRepl struct {
	Group             string        `json:"group"`
	MasterID          int64         `json:"masterId"`
	MasterAddr        string        `json:"masterAddr"`
	MasterEpoch       int32         `json:"masterEpoch"`
	SyncStateSet      []int64       `json:"syncStateSet"`
	SyncStateSetEpoch int32         `json:"syncStateSetEpoch"`
	Replicas          []replicaJSON `json:"replicas"`
}

type replicaJSON struct {
	ID    int64  `json:"id"`
	Addr  string `json:"addr"`
	Alive bool   `json:"alive"`
}

// controller asks the controller, if one is configured (nil if not).
func (s *Server) controller(ctx context.Context) *controllerJSON {
	if s.cfg.ControllerAddr == "" {
		return nil
	}
	out := &controllerJSON{Addr: s.cfg.ControllerAddr, Groups: []groupRepl{}}
	n, err := client.ControllerMetadata(ctx, s.cfg.ControllerAddr, client.WithTimeout(s.cfg.Timeout), client.WithDialTimeout(s.cfg.Timeout))
	if err != nil {
		out.Error = err.Error()
		return out
	}
	out.Leader, out.Term = n.Addr, n.Term
	for _, g := range n.Groups {
		gr := groupRepl{Group: g.BrokerName, MasterID: g.MasterID, MasterAddr: g.MasterAddr, MasterEpoch: g.MasterEpoch,
			SyncStateSet: append([]int64{}, g.SyncStateSet...), SyncStateSetEpoch: g.SyncStateSetEpoch, Replicas: []replicaJSON{}}
		for _, r := range g.Replicas {
			gr.Replicas = append(gr.Replicas, replicaJSON{ID: r.BrokerID, Addr: r.BrokerAddr, Alive: r.Alive})
		}
		out.Groups = append(out.Groups, gr)
	}
	return out
}

// seriesJSON is one broker's chart data.
type seriesJSON struct {
	Addr   string  `json:"addr"`
	Group  string  `json:"group"`
	ID     int64   `json:"id"`
	Role   string  `json:"role"`
	Health string  `json:"health"`
	Points []point `json:"points"`
	// LatencyError says why the latency is unknown, if it is.
	LatencyError string `json:"latencyError,omitempty"`
}

func (s *Server) apiHistory(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	out := struct {
		SampleEveryMs int64        `json:"sampleEveryMs"`
		Brokers       []seriesJSON `json:"brokers"`
	}{SampleEveryMs: s.cfg.SampleEvery.Milliseconds(), Brokers: []seriesJSON{}}
	for addr, bs := range s.latest {
		row := brokerRow(bs.Ref, bs)
		out.Brokers = append(out.Brokers, seriesJSON{Addr: addr, Group: row.Group, ID: row.ID, Role: row.Role,
			Health: row.Health, Points: s.hist.points(addr), LatencyError: bs.MetrErr})
	}
	s.mu.Unlock()
	slices.SortFunc(out.Brokers, func(a, b seriesJSON) int {
		return strings.Compare(a.Group+"\x00"+a.Addr, b.Group+"\x00"+b.Addr)
	})
	writeJSON(w, http.StatusOK, out)
}

// systemTopic: a group's retry or dead-letter topic, the delay topic or
// the auto-create template, hidden unless asked for.
func systemTopic(t string) bool {
	return strings.HasPrefix(t, protocol.RetryTopicPrefix) || strings.HasPrefix(t, protocol.DLQTopicPrefix) ||
		t == protocol.ScheduleTopic || t == protocol.AutoCreateTopic
}
