package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/actors/clientgroups"
	"github.com/wharfmq/wharf/protocol"
)

// Client-coordinated groups (clientgroups.Table): the groups of clients
// that allocate queues themselves (RocketMQ's, over the remoting
// listener). The groups router owns the table beside its coordinators, so
// that one actor decides whether a group is coordinated by the broker
// (Wharf clients) or by its clients, and refuses a newcomer of the other
// kind.

// connClosed tells the router a connection closed: its client-coordinated
// members leave at once.
type connClosed struct{ id uint64 }

// clientTick runs the table's expiry.
type clientTick struct{}

// clientSide is the router's part for client-coordinated groups.
type clientSide struct {
	t     *clientgroups.Table
	conns map[uint64]Conn // the connections members heartbeat on, for notices
	wharf map[string]bool // groups with Wharf members (or a Wharf heartbeat on its way)
	armed time.Time       // when the expiry timer fires; zero: none armed
}

func newClientSide() clientSide {
	return clientSide{t: clientgroups.New(), conns: map[uint64]Conn{}, wharf: map[string]bool{}}
}

// clientHeartbeat takes a client-coordinated heartbeat, unless one of its
// groups is coordinated by the broker: then nothing of it is taken.
func (r *groupRouter) clientHeartbeat(ctx actor.Context, m *groupReq, req *protocol.ClientHeartbeatRequest) {
	for _, g := range req.ConsumerGroups {
		if r.cs.wharf[g.Group] {
			r.k.respond(m.request, protocol.StatusInvalidParameter, fmt.Sprintf(
				"consumer group %q is coordinated by the broker (it has members using Wharf's client); "+
					"a client that allocates queues itself cannot join it: use another group name", g.Group), nil)
			return
		}
	}
	var groups []protocol.ConsumerGroupInfo
	for _, g := range req.ConsumerGroups {
		if g.Group != "" {
			groups = append(groups, g)
		}
	}
	if len(groups) == 0 || req.ClientID == "" || m.conn == nil {
		r.k.respond(m.request, protocol.StatusOK, "", nil)
		return
	}
	r.cs.conns[m.conn.ID()] = m.conn
	rd := r.cs.t.Heartbeat(r.k.now(), req.ClientID, m.conn.ID(), groups)
	r.k.respond(m.request, protocol.StatusOK, "", nil) // answered before the notices
	r.clientRun(ctx, rd)
}

// wharfRefused answers a Wharf heartbeat that names a client-coordinated
// group, and reports whether it did.
func (r *groupRouter) wharfRefused(m *groupReq, req *protocol.HeartbeatRequest) bool {
	for _, g := range req.ConsumerGroups {
		if r.cs.t.Has(g.Group) {
			r.k.respond(m.request, protocol.StatusInvalidParameter, fmt.Sprintf(
				"consumer group %q is coordinated by its clients (it has RocketMQ members, which allocate queues "+
					"themselves); Wharf's client cannot join it: use another group name", g.Group), nil)
			return true
		}
	}
	for _, g := range req.ConsumerGroups {
		if g.Group != "" && req.ClientID != "" { // as the coordinators take them
			r.cs.wharf[g.Group] = true
		}
	}
	return false
}

// clientRequest answers the requests of client-coordinated groups but the
// heartbeat.
func (r *groupRouter) clientRequest(m *groupReq) {
	switch req := m.req.(type) {
	case *protocol.GetConsumerListRequest:
		r.k.respond(m.request, protocol.StatusOK, "", &protocol.ConsumerListResponse{ClientIDs: r.cs.t.Members(req.Group)})
	case *protocol.LockBatchRequest:
		if req.Unlock {
			r.cs.t.Unlock(req.Group, req.ClientID, req.Queues)
			r.k.respond(m.request, protocol.StatusOK, "", nil)
			return
		}
		locked := r.cs.t.Lock(r.k.now(), req.Group, req.ClientID, req.Queues)
		r.k.respond(m.request, protocol.StatusOK, "", &protocol.LockBatchResponse{Locked: locked})
	}
}

// clientRun does what the table asks: log, notify the members, arm the
// expiry timer.
func (r *groupRouter) clientRun(ctx actor.Context, rd clientgroups.Ready) {
	for _, c := range rd.Changes {
		switch {
		case c.Joined:
			r.k.log.Info("consumer joined", "group", c.Group, "client", c.ClientID, "coordinated", "client")
		case c.Expired:
			r.k.log.Warn("consumer timed out", "group", c.Group, "client", c.ClientID, "coordinated", "client")
		default:
			r.k.log.Info("consumer left", "group", c.Group, "client", c.ClientID, "coordinated", "client")
		}
	}
	for _, n := range rd.Notify {
		for _, id := range n.Conns {
			if c := r.cs.conns[id]; c != nil {
				c.Send(&protocol.NotifyConsumerIDsChangedRequest{Group: n.Group})
			}
		}
	}
	if !rd.Timer.IsZero() && (r.cs.armed.IsZero() || rd.Timer.Before(r.cs.armed)) {
		r.cs.armed = rd.Timer
		r.k.after(rd.Timer.Sub(r.k.now()), ctx.Self(), &clientTick{})
	}
}

// clientMsg handles the router's own messages for client-coordinated
// groups; false if m is not one.
func (r *groupRouter) clientMsg(ctx actor.Context, m any) bool {
	switch m := m.(type) {
	case *connClosed:
		if _, ok := r.cs.conns[m.id]; ok {
			delete(r.cs.conns, m.id)
			r.clientRun(ctx, r.cs.t.Closed(m.id))
		}
	case *clientTick:
		now := r.k.now()
		if !r.cs.armed.IsZero() && now.Before(r.cs.armed) {
			return true // an earlier timer's tick: the armed one comes
		}
		r.cs.armed = time.Time{}
		r.clientRun(ctx, r.cs.t.Expire(now))
	default:
		return false
	}
	return true
}
