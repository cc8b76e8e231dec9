package dashboard

import (
	"context"
	"errors"
	"net/http"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/protocol"
)

// groupJSON is one consumer group as one broker group coordinates it:
// each broker's coordinator keeps its own members and lag, so a consumer
// group shows once per broker group it consumes from.
type groupJSON struct {
	BrokerGroup string           `json:"brokerGroup"`
	Addr        string           `json:"addr"`
	Group       string           `json:"group"`
	Model       string           `json:"model"`
	Generation  int64            `json:"generation"`
	Lag         int64            `json:"lag"`
	Members     []memberJSON     `json:"members"`
	Queues      []groupQueueJSON `json:"queues"`
	Error       string           `json:"error,omitempty"`
}

// brokerErr is a broker group that could not be asked.
type brokerErr struct {
	BrokerGroup string `json:"brokerGroup"`
	Addr        string `json:"addr"`
	Error       string `json:"error"`
}

func (s *Server) apiGroups(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	ci, err := s.pool.clusterInfo(ctx)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, apiError{err.Error()})
		return
	}
	groups, errs := s.groups(ctx, ci)
	writeJSON(w, http.StatusOK, struct {
		Groups []groupJSON `json:"groups"`
		Errors []brokerErr `json:"errors"`
	}{groups, errs})
}

// groups describes every consumer group of every broker group, asked of
// its reader (live master, else a live slave).
func (s *Server) groups(ctx context.Context, ci protocol.ClusterInfo) ([]groupJSON, []brokerErr) {
	out, errs := []groupJSON{}, []brokerErr{}
	for _, b := range readers(ci.Brokers) {
		a, err := s.pool.broker(b.BrokerAddr)
		var list []protocol.GroupSummary
		if err == nil {
			list, err = a.ListGroups(ctx)
			s.pool.failed(b.BrokerAddr, err)
		}
		if err != nil {
			errs = append(errs, brokerErr{b.BrokerName, b.BrokerAddr, err.Error()})
			continue
		}
		for _, g := range list {
			gj := groupJSON{BrokerGroup: b.BrokerName, Addr: b.BrokerAddr, Group: g.Group, Model: g.MessageModel, Lag: g.Lag,
				Members: []memberJSON{}, Queues: []groupQueueJSON{}}
			d, err := a.DescribeGroup(ctx, g.Group)
			s.pool.failed(b.BrokerAddr, err)
			switch {
			case errors.Is(err, client.ErrNotFound):
				continue // gone between the list and the describe
			case err != nil:
				gj.Error = err.Error()
			default:
				gj.Generation = d.Generation
				gj.Members, gj.Queues = describedJSON(d)
			}
			out = append(out, gj)
		}
	}
	return out, errs
}

// replJSON is one broker group's replication as its brokers report it.
type replJSON struct {
	Group        string          `json:"group"`
	Master       string          `json:"master"`
	MasterMax    int64           `json:"masterMaxOffset"`
	Replicated   int64           `json:"replicatedOffset"`
	Slaves       []slaveInfoJSON `json:"slaves"`
	SlaveStatus  []slaveJSON     `json:"slaveStatus"`
	Controller   *groupRepl      `json:"controller,omitempty"`
	MasterHealth string          `json:"masterHealth"`
}

// slaveJSON is a slave's own view of its link.
type slaveJSON struct {
	Addr      string `json:"addr"`
	ID        int64  `json:"id"`
	Health    string `json:"health"`
	HAStatus  string `json:"haStatus"`
	MaxOffset int64  `json:"maxOffset"`
	MasterMax int64  `json:"masterMaxOffset"`
	LagBytes  int64  `json:"lagBytes"` // the master's end it heard of minus its own
	Error     string `json:"error,omitempty"`
}

func (s *Server) apiReplication(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	ctl := s.controller(ctx)
	byGroup := map[string]*replJSON{}
	var order []string
	get := func(g string) *replJSON {
		if byGroup[g] == nil {
			byGroup[g] = &replJSON{Group: g, Slaves: []slaveInfoJSON{}, SlaveStatus: []slaveJSON{}, MasterHealth: "unknown"}
			order = append(order, g)
		}
		return byGroup[g]
	}
	for _, bs := range sortedSamples(s.snapshot()) {
		rj := get(bs.Ref.BrokerName)
		row := brokerRow(bs.Ref, bs)
		if bs.Info != nil && bs.Info.BrokerRole != client.RoleSlave {
			rj.Master, rj.MasterHealth = row.Addr, "up"
			rj.MasterMax, rj.Replicated = bs.Info.CommitLogMaxOffset, bs.Info.ReplicatedOffset
			for _, si := range bs.Info.Slaves {
				rj.Slaves = append(rj.Slaves, slaveInfoJSON(si))
			}
			continue
		}
		sj := slaveJSON{Addr: row.Addr, ID: row.ID, Health: row.Health, Error: row.Error}
		if bs.Info != nil {
			sj.HAStatus, sj.MaxOffset, sj.MasterMax = bs.Info.HAStatus, bs.Info.CommitLogMaxOffset, bs.Info.MasterMaxOffset
			sj.LagBytes = max(0, sj.MasterMax-sj.MaxOffset)
		}
		rj.SlaveStatus = append(rj.SlaveStatus, sj)
	}
	if ctl != nil {
		for i := range ctl.Groups {
			get(ctl.Groups[i].Group).Controller = &ctl.Groups[i]
		}
	}
	out := struct {
		Groups          []replJSON `json:"groups"`
		ControllerError string     `json:"controllerError,omitempty"`
	}{Groups: []replJSON{}}
	if ctl != nil {
		out.ControllerError = ctl.Error
	}
	for _, g := range order {
		out.Groups = append(out.Groups, *byGroup[g])
	}
	writeJSON(w, http.StatusOK, out)
}

// memberJSON is protocol.GroupMember with JSON names.
type memberJSON struct {
	ClientID        string         `json:"clientId"`
	Address         string         `json:"address"`
	LastHeartbeatMs int64          `json:"lastHeartbeatMs"`
	Queues          []queueRefJSON `json:"queues"`
}

type queueRefJSON struct {
	Topic   string `json:"topic"`
	QueueID int32  `json:"queueId"`
}

// groupQueueJSON is protocol.GroupQueue with JSON names.
type groupQueueJSON struct {
	Topic           string `json:"topic"`
	QueueID         int32  `json:"queueId"`
	Owner           string `json:"owner"`
	Pending         string `json:"pending,omitempty"`
	CommittedOffset int64  `json:"committedOffset"`
	MaxOffset       int64  `json:"maxOffset"`
	Lag             int64  `json:"lag"`
}

// slaveInfoJSON is protocol.SlaveInfo with JSON names.
type slaveInfoJSON struct {
	Address       string `json:"address"`
	BrokerID      int64  `json:"brokerId"`
	AckedOffset   int64  `json:"ackedOffset"`
	FlushedOffset int64  `json:"flushedOffset"`
	LagBytes      int64  `json:"lagBytes"`
	InSync        bool   `json:"inSync"`
}

func describedJSON(d protocol.ConsumerGroupDescription) ([]memberJSON, []groupQueueJSON) {
	members, queues := []memberJSON{}, []groupQueueJSON{}
	for _, m := range d.Members {
		mj := memberJSON{ClientID: m.ClientID, Address: m.Address, LastHeartbeatMs: m.LastHeartbeatMs, Queues: []queueRefJSON{}}
		for _, q := range m.Queues {
			mj.Queues = append(mj.Queues, queueRefJSON(q))
		}
		members = append(members, mj)
	}
	for _, q := range d.Queues {
		queues = append(queues, groupQueueJSON(q))
	}
	return members, queues
}
