package actors

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/actors/controller"
	"github.com/wharfmq/wharf/actors/raftnode"
	"github.com/wharfmq/wharf/protocol"
)

// The raft actor owns the controller's State and Core with the raft node:
// committed entries go to State.Apply then Core.Applied, confirmed reads to
// Core.ReadDone, dropped ones to Core.Dropped, raft's leader to Core.Leader;
// broker requests from Deliver go to Core.Request, and the Core's output
// (proposals, reads, replies, notifications, its timer) is run here.

// Messages of the raft actor for the Core.
type (
	// ctlBrokerRequest is a decoded broker or admin request.
	ctlBrokerRequest struct {
		r   *request
		req protocol.Request
	}
	ctlCoreTick struct{ gen uint64 }
	ctlConnGone struct{ conn Conn }
)

// coreState is the raft actor's part that serves brokers.
type coreState struct {
	core    *controller.Core
	nextReq uint64
	waiting map[uint64]*request // Core request id -> where to answer
	// brokerConns is, per broker address, the connection its last
	// register or heartbeat came in on: notifications go there.
	brokerConns map[string]Conn
	timer       func() bool
	timerAt     time.Time
}

// coreOrigin is the Core's Origin: unique per Core incarnation, restarts of
// a node included, since every input differs between two incarnations (the
// raft id between nodes; the seed between two processes, random in
// production; the start time and the actor incarnation within one process,
// so a simulated restart with the same seed gets another one too).
func coreOrigin(self, seed uint64, now time.Time, gen uint64) uint64 {
	h := fnv.New64a()
	var b [32]byte
	binary.BigEndian.PutUint64(b[0:], self)
	binary.BigEndian.PutUint64(b[8:], seed)
	binary.BigEndian.PutUint64(b[16:], uint64(now.UnixNano()))
	binary.BigEndian.PutUint64(b[24:], gen)
	_, _ = h.Write(b[:])
	return max(h.Sum64(), 1)
}

func (a *raftActor) newCore(now time.Time) *controller.State {
	cfg := a.cfg.Core
	cfg.Origin = coreOrigin(a.cfg.SelfID, a.cfg.Seed, now, a.gen)
	cfg.Faults.ElectOutsideSyncStateSet = a.k.faults.ElectOutsideSyncStateSet
	cfg.Faults.ElectLackingReplica = a.k.faults.ElectLackingReplica
	st := &controller.State{}
	a.cs.core = controller.NewCore(cfg, st)
	a.cs.waiting = map[uint64]*request{}
	a.cs.brokerConns = map[string]Conn{}
	return st
}

// brokerRequest hands a request to the Core, or answers it when there is
// none yet (the log is still opening) or none at all (a test's own state
// machine).
func (a *raftActor) brokerRequest(now time.Time, m *ctlBrokerRequest) {
	switch {
	case a.cs.core == nil && a.cfg.NewState != nil:
		a.k.respond(m.r, protocol.StatusRequestCodeNotSupported, "controller: no controller state on this node", nil)
		return
	case a.cs.core == nil:
		a.k.respond(m.r, protocol.StatusControllerNotLeader, "", nil)
		return
	}
	switch req := m.req.(type) {
	case *protocol.ControllerRegisterBrokerRequest:
		a.cs.brokerConns[req.BrokerAddr] = m.r.conn
	case *protocol.ControllerHeartbeatRequest:
		a.cs.brokerConns[req.BrokerAddr] = m.r.conn
	}
	a.cs.nextReq++
	a.cs.waiting[a.cs.nextReq] = m.r
	a.cs.core.Request(now, a.cs.nextReq, m.req)
}

// leader tells the Core who leads: this node only while raft says it
// serves (a leader without its quorum takes nothing).
func (a *raftActor) leader(now time.Time, st raftnode.Status) {
	a.term = st.Term
	if a.cs.core == nil {
		return
	}
	addr := a.cfg.Peers[st.Lead]
	if st.Lead == a.cfg.SelfID && !st.Serving {
		addr = ""
	}
	a.cs.core.Leader(now, st.Lead == a.cfg.SelfID && st.Serving, addr)
}

// coreOut runs the Core's output; it reports whether it gave the raft node
// anything (whose own output must then be drained).
func (a *raftActor) coreOut(self *actor.PID, now time.Time) bool {
	if a.cs.core == nil {
		return false
	}
	rd := a.cs.core.Ready()
	for _, p := range rd.Proposals {
		a.node.Propose(p.ID, p.Cmd)
	}
	for _, id := range rd.Reads {
		a.node.ReadIndex(id)
	}
	for _, rp := range rd.Replies {
		if md, ok := rp.Fields.(*protocol.ControllerMetadata); ok {
			md.Term = int64(min(a.term, math.MaxInt64)) // the raft view the Core does not hold
		}
		if r := a.cs.waiting[rp.ReqID]; r != nil {
			delete(a.cs.waiting, rp.ReqID)
			a.k.respond(r, rp.Status, rp.Remark, rp.Fields)
		}
	}
	for _, n := range rd.Notify {
		a.notify(n)
	}
	a.armCore(self, now, rd.Timer)
	return len(rd.Proposals) > 0 || len(rd.Reads) > 0
}

// notify sends a group's change one-way to each of its brokers on the
// connection its last request came in on, if still open; brokers poll too,
// so a lost notification costs only a delay.
func (a *raftActor) notify(n controller.Notification) {
	for _, addr := range n.Brokers {
		conn := a.cs.brokerConns[addr]
		if conn == nil {
			continue
		}
		if closed(conn) {
			delete(a.cs.brokerConns, addr)
			continue
		}
		conn.Send(&protocol.NotifyBrokerRoleChangedRequest{ReplicaInfo: n.Info})
	}
}

// armCore keeps one timer armed for the Core's next Tick. A timer already
// armed for no later than asked is kept: the Core's wanted time moves with
// every input (the scan interval counts from the latest), so re-arming on
// each would let a steady stream of requests put its Tick off forever. An
// early Tick is harmless: the Core says again when it wants the next.
func (a *raftActor) armCore(self *actor.PID, now, at time.Time) {
	if at.IsZero() || a.cs.timer != nil && !at.Before(a.cs.timerAt) {
		return
	}
	if a.cs.timer != nil {
		a.cs.timer()
	}
	a.cs.timerAt = at
	a.cs.timer = a.k.after(max(at.Sub(now), 0), self, &ctlCoreTick{gen: a.gen})
}

func (a *raftActor) coreTick(now time.Time) {
	a.cs.timer, a.cs.timerAt = nil, time.Time{}
	if a.cs.core != nil {
		a.cs.core.Tick(now)
	}
}

func (a *raftActor) connGone(c Conn) {
	for addr, bc := range a.cs.brokerConns {
		if bc == c {
			delete(a.cs.brokerConns, addr)
		}
	}
}
