package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/protocol"
)

// queueJSON is one queue of a topic on one broker group.
type queueJSON struct {
	BrokerGroup string           `json:"brokerGroup"`
	Addr        string           `json:"addr"` // the broker asked
	QueueID     int32            `json:"queueId"`
	Min         int64            `json:"min"`
	Max         int64            `json:"max"`
	Lag         map[string]int64 `json:"lag"` // by consumer group, from DESCRIBE
	Error       string           `json:"error,omitempty"`
}

type topicJSON struct {
	Topic  string      `json:"topic"`
	Perm   int32       `json:"perm"`
	Queues []queueJSON `json:"queues"`
	Error  string      `json:"error,omitempty"`
}

// lagKey names a queue of a broker group.
type lagKey struct {
	group, topic string
	queue        int32
}

func (s *Server) apiTopics(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	ci, err := s.pool.clusterInfo(ctx)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, apiError{err.Error()})
		return
	}
	ns, err := s.pool.names()
	var names []string
	if err == nil {
		names, err = ns.NameServerTopics(ctx)
		s.pool.failed("", err)
	}
	if err != nil {
		writeJSON(w, http.StatusBadGateway, apiError{err.Error()})
		return
	}
	lags := map[lagKey]map[string]int64{}
	groups, _ := s.groups(ctx, ci)
	for _, g := range groups {
		for _, q := range g.Queues {
			k := lagKey{g.BrokerGroup, q.Topic, q.QueueID}
			if lags[k] == nil {
				lags[k] = map[string]int64{}
			}
			lags[k][g.Group] = q.Lag
		}
	}
	all := r.URL.Query().Get("all") == "1"
	out := []topicJSON{}
	for _, t := range names {
		if !all && systemTopic(t) {
			continue
		}
		out = append(out, s.topic(ctx, ci, t, lags))
	}
	writeJSON(w, http.StatusOK, struct {
		Topics []topicJSON `json:"topics"`
	}{out})
}

// topic gathers one topic's queues: its route, then each queue's bounds
// from its broker group's reader. A broker that fails is asked no more for
// this topic: its queues carry the error.
func (s *Server) topic(ctx context.Context, ci protocol.ClusterInfo, t string, lags map[lagKey]map[string]int64) topicJSON {
	tj := topicJSON{Topic: t, Queues: []queueJSON{}}
	ns, err := s.pool.names()
	var rd protocol.RouteData
	if err == nil {
		rd, err = ns.TopicRoute(ctx, t)
	}
	if err != nil {
		tj.Error = err.Error()
		return tj
	}
	reader := map[string]string{}
	for _, b := range readers(ci.Brokers) {
		reader[b.BrokerName] = b.BrokerAddr
	}
	slices.SortFunc(rd.QueueDatas, func(a, b protocol.QueueData) int { return cmpString(a.BrokerName, b.BrokerName) })
	for _, qd := range rd.QueueDatas {
		tj.Perm |= qd.Perm
		addr := reader[qd.BrokerName]
		var failed error
		if addr == "" {
			failed = fmt.Errorf("broker group %s has no live broker", qd.BrokerName)
		}
		for q := range qd.ReadQueueNums {
			qj := queueJSON{BrokerGroup: qd.BrokerName, Addr: addr, QueueID: q, Lag: lags[lagKey{qd.BrokerName, t, q}]}
			if qj.Lag == nil {
				qj.Lag = map[string]int64{}
			}
			if failed == nil {
				qj.Min, qj.Max, failed = s.bounds(ctx, addr, t, q)
			}
			if failed != nil {
				qj.Error = failed.Error()
			}
			tj.Queues = append(tj.Queues, qj)
		}
	}
	return tj
}

// bounds asks addr for a queue's min and max offsets.
func (s *Server) bounds(ctx context.Context, addr, topic string, q int32) (lo, hi int64, err error) {
	a, err := s.pool.broker(addr)
	if err != nil {
		return 0, 0, err
	}
	if lo, err = a.GetMinOffset(ctx, topic, q); err == nil {
		hi, err = a.GetMaxOffset(ctx, topic, q)
	}
	s.pool.failed(addr, err)
	return lo, hi, err
}

// mutating refuses a request a cross-origin page could have sent.
func mutating(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get("X-Wharf-Dashboard") == "" {
		writeJSON(w, http.StatusForbidden, apiError{"missing X-Wharf-Dashboard header"})
		return false
	}
	return true
}

// createReq is the body of POST /api/topics.
type createReq struct {
	Topic   string `json:"topic"`
	Queues  int32  `json:"queues"`
	Cluster string `json:"cluster"` // "": the cluster of the first broker listed
}

func (s *Server) apiCreateTopic(w http.ResponseWriter, r *http.Request) {
	if !mutating(w, r) {
		return
	}
	var req createReq
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{fmt.Sprintf("body: %v", err)})
		return
	}
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	cluster, err := s.cluster(ctx, req.Cluster)
	var done []string
	if err == nil {
		var ns *client.Admin
		if ns, err = s.pool.names(); err == nil {
			done, err = ns.CreateTopicInCluster(ctx, cluster, req.Topic, req.Queues)
		}
	}
	status := http.StatusOK
	switch {
	case errors.Is(err, client.ErrInvalidParameter):
		status = http.StatusBadRequest
	case err != nil:
		status = http.StatusBadGateway
	}
	s.log.Info("dashboard: create topic", "topic", req.Topic, "cluster", cluster, "masters", done, "err", err)
	writeJSON(w, status, mutationJSON{Topic: req.Topic, Cluster: cluster, Brokers: nonNil(done), Error: errString(err)})
}

// mutationJSON answers a topic create or delete.
type mutationJSON struct {
	Topic   string   `json:"topic"`
	Cluster string   `json:"cluster"`
	Brokers []string `json:"brokers"` // the masters that did it
	Error   string   `json:"error,omitempty"`
}

// cluster is name, or without one the cluster of the first broker listed.
func (s *Server) cluster(ctx context.Context, name string) (string, error) {
	if name != "" {
		return name, nil
	}
	ci, err := s.pool.clusterInfo(ctx)
	if err != nil {
		return "", err
	}
	if len(ci.Brokers) == 0 {
		return "", fmt.Errorf("%w: the name server lists no broker", client.ErrBrokerUnavailable)
	}
	return ci.Brokers[0].ClusterName, nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
