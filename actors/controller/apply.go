package controller

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// electRequest is CONTROLLER_ELECT_MASTER: the decision Tick would take,
// asked for now, optionally of one broker; refused while the master lives.
func (c *Core) electRequest(now time.Time, reqID uint64, r *protocol.ElectMasterRequest) {
	g := c.state.groups[groupKey{cluster: r.ClusterName, name: r.BrokerName}]
	switch {
	case g == nil:
		c.reply(reqID, protocol.StatusControllerBrokerMetadataNotExist, fmt.Sprintf("controller: no group %s/%s", r.ClusterName, r.BrokerName), nil)
		return
	case c.masterAlive(g, now) && (r.BrokerID == protocol.NoBroker || r.BrokerID == g.masterID):
		c.reply(reqID, protocol.StatusOK, "", c.liveInfo(g, g.masterID))
		return
	case c.masterAlive(g, now):
		c.reply(reqID, protocol.StatusControllerMasterStillExist, fmt.Sprintf("controller: master %d is alive", g.masterID), nil)
		return
	case !c.mayElect(g, now):
		c.reply(reqID, protocol.StatusControllerElectMasterFailed, "controller: leader for less than the heartbeat timeout; heartbeats not yet known", nil)
		return
	}
	ch := c.choose(g, now)
	if r.BrokerID != protocol.NoBroker {
		ch = c.designate(g, now, r.BrokerID)
	}
	if !ch.ok {
		c.reply(reqID, protocol.StatusControllerElectMasterFailed, fmt.Sprintf("controller: no eligible live replica in %s/%s", r.ClusterName, r.BrokerName), nil)
		return
	}
	c.await(now, reqID, r, electCommand(g, ch))
}

// designate is the choice of broker id if it is eligible: alive, and in
// the set unless the group never had a master or unclean election is on.
func (c *Core) designate(g *group, now time.Time, id int64) choice {
	for _, x := range c.alive(g, now) {
		if x.id != id {
			continue
		}
		inSet := slices.Contains(g.set, id)
		// An operator's choice is taken knowing the broker's log may
		// lack acknowledged messages: it takes the role (and that risk).
		switch {
		case g.masterEpoch == 0 || inSet:
			return choice{id: id, lacking: x.mayLackAcked, ok: true}
		case c.cfg.ElectUnclean:
			return choice{id: id, unclean: true, lacking: x.mayLackAcked, ok: true}
		}
	}
	return choice{}
}

// Applied tells the Core that the entry at index was applied to the State
// with this result (what State.Apply returned). Every node calls it for
// every committed entry; the node whose Core proposed the entry answers the
// request, and the leader tells brokers and name servers of a change.
func (c *Core) Applied(index uint64, cmd []byte, res []byte) {
	if len(cmd) == 0 || len(res) == 0 {
		return
	}
	cm, err := decodeCommand(cmd)
	if err != nil {
		return // Apply refused it already; nobody waits for it
	}
	r, err := decodeResult(res)
	if err != nil {
		return
	}
	if cm.Op == opElect {
		delete(c.electing, cm.key())
		if cm.Origin == c.cfg.Origin {
			c.electResolved(cm.key(), cm.ID)
		}
	}
	if cm.Origin == c.cfg.Origin {
		if w, ok := c.pending[cm.ID]; ok {
			delete(c.pending, cm.ID)
			c.answerApplied(w, r)
		}
	}
	if r.Changed && c.isLeader && r.Info != nil {
		c.notify(r.Info)
	}
}

func (c *Core) answerApplied(w waiter, r *result) {
	if r.Status != protocol.StatusOK || r.Info == nil {
		c.reply(w.reqID, r.Status, r.Remark, nil)
		return
	}
	g := c.state.groups[groupKey{cluster: r.Info.ClusterName, name: r.Info.BrokerName}]
	if g == nil {
		c.reply(w.reqID, r.Status, r.Remark, r.Info)
		return
	}
	// The state may be past this entry already (the shell applies a batch
	// before telling the Core); the answer is the entry's own result, with
	// liveness from this leader.
	info := *r.Info
	live := c.liveInfo(g, info.BrokerID)
	for i := range info.Replicas {
		if j := slices.IndexFunc(live.Replicas, func(x protocol.Replica) bool { return x.BrokerID == info.Replicas[i].BrokerID }); j >= 0 {
			info.Replicas[i].Alive = live.Replicas[j].Alive
		}
	}
	c.reply(w.reqID, protocol.StatusOK, "", &info)
}

func (c *Core) notify(info *protocol.ReplicaInfo) {
	n := Notification{Info: *info, Brokers: make([]string, 0, len(info.Replicas))}
	n.Info.BrokerID = protocol.NoBroker
	for _, r := range info.Replicas {
		n.Brokers = append(n.Brokers, r.BrokerAddr)
	}
	c.out.Notify = append(c.out.Notify, n)
}

// ReadDone tells the Core that raft confirmed the ReadIndex asked for as
// readID and that the State has applied up to it: the read is answered from
// the State as it is now, which no deposed leader can do.
func (c *Core) ReadDone(readID uint64) {
	w, ok := c.reads[readID]
	if !ok {
		return
	}
	delete(c.reads, readID)
	if hb, ok := w.req.(*protocol.ControllerHeartbeatRequest); ok {
		g := c.state.groups[groupKey{cluster: hb.ClusterName, name: hb.BrokerName}]
		if g == nil { // cannot happen: groups are never removed
			c.reply(w.reqID, protocol.StatusControllerBrokerMetadataNotExist, "controller: group gone", nil)
			return
		}
		if hb.BrokerID == g.masterID && len(c.elects[g.key]) > 0 {
			c.reply(w.reqID, protocol.StatusSystemBusy, "controller: an election for this group is in flight; the master's lease is not renewed", nil)
			return
		}
		c.reply(w.reqID, protocol.StatusOK, "", &protocol.ControllerHeartbeatResponse{MasterEpoch: g.masterEpoch, SyncStateSetEpoch: g.setEpoch})
		return
	}
	r, ok := w.req.(*protocol.GetReplicaInfoRequest)
	if !ok {
		return
	}
	g := c.state.groups[groupKey{cluster: r.ClusterName, name: r.BrokerName}]
	if g == nil {
		c.reply(w.reqID, protocol.StatusControllerBrokerMetadataNotExist, fmt.Sprintf("controller: no group %s/%s", r.ClusterName, r.BrokerName), nil)
		return
	}
	c.reply(w.reqID, protocol.StatusOK, "", c.liveInfo(g, r.BrokerID))
}

func sortedKeys[V any](m map[uint64]V) []uint64 {
	keys := make([]uint64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, cmp.Compare[uint64])
	return keys
}

// Dropped tells the Core that raft will not answer the proposal or read it
// asked for as id. A read, or a proposal that never entered the log
// (outcomeUnknown false: raft's NotLeader), is answered
// CONTROLLER_NOT_LEADER with the leader's address; a proposal in flight when
// leadership was lost may still commit, so it is answered SYSTEM_BUSY with
// the outcome unknown (the broker reads the replica info). An election of
// this leader's that never entered the log may be taken again at once.
func (c *Core) Dropped(id uint64, read, outcomeUnknown bool) {
	if read {
		if w, ok := c.reads[id]; ok {
			delete(c.reads, id)
			c.reply(w.reqID, protocol.StatusControllerNotLeader, c.leaderAddr, nil)
		}
		return
	}
	for k, e := range c.electing {
		if e.id == id && !outcomeUnknown {
			delete(c.electing, k)
		}
	}
	if !outcomeUnknown {
		for k, ids := range c.elects {
			if ids[id] {
				c.electResolved(k, id)
			}
		}
	}
	w, ok := c.pending[id]
	if !ok {
		return
	}
	delete(c.pending, id)
	if outcomeUnknown {
		c.reply(w.reqID, protocol.StatusSystemBusy, "controller: leadership lost with the entry in flight; the outcome is unknown, read the replica info", nil)
		return
	}
	c.reply(w.reqID, protocol.StatusControllerNotLeader, c.leaderAddr, nil)
}
