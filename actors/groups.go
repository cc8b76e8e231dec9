package actors

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/rebalance"
)

// Consumer groups. The groups actor routes group requests to one
// coordinator actor per group (spawned on first use), a shell around the
// group's rebalance.Coordinator: it feeds the coordinator heartbeats,
// leaves and ticks, and runs what each Ready asks (answer the heartbeat,
// notify members, arm the timer, publish the summary). Membership,
// allocation, generations and the hand-over rules are the core's.

// groupReq is a group request from a client.
type groupReq struct {
	*request
	req protocol.Request
}

// memberHB is one group's part of a heartbeat.
type memberHB struct {
	aggID    int64
	clientID string
	conn     Conn
	info     protocol.ConsumerGroupInfo
}

// memberAssign answers a memberHB.
type memberAssign struct {
	aggID int64
	a     protocol.GroupAssignment
}

// memberLeave removes a member at once.
type memberLeave struct{ clientID string }

// groupDescribe asks a coordinator for its state: for request, or, if
// replyTo is set, for the snapshot actor (snapshot.go).
type groupDescribe struct {
	*request
	replyTo *actor.PID
}

// groupChanged keeps the router's summary of a group current.
type groupChanged struct{ sum groupSummary }

type groupSummary struct {
	protocol.GroupSummary
	queues []protocol.QueueRef
}

// fillOffsets asks the offset manager to complete a description or list
// with committed offsets and lag, and answer the client.
type fillOffsets struct {
	*request
	desc    *protocol.ConsumerGroupDescription
	list    []groupSummary
	replyTo *actor.PID // set: desc goes there as a groupSnap, not to a client
}

type groupTick struct{}

// groupRouter routes to the coordinators and joins one heartbeat's
// answers from the groups it names.
type groupRouter struct {
	k *kit
	p *pids
	v *views
	// interval is the configured consumer heartbeat interval (members are
	// told it as is; the coordinators read 0 as 1 s).
	interval time.Duration
	boot     time.Time // when the broker started: the restart grace runs from it
	props    func(func() actor.Actor) *actor.Props
	groups   map[string]*actor.PID
	sums     map[string]groupSummary
	aggs     map[int64]*hbAgg
	nextAgg  int64
	cs       clientSide // the client-coordinated groups (clientgroups.go)
}

type hbAgg struct {
	*request
	left int
	resp protocol.HeartbeatResponse
}

func (r *groupRouter) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		r.groups, r.sums, r.aggs = map[string]*actor.PID{}, map[string]groupSummary{}, map[int64]*hbAgg{}
		r.cs = newClientSide()
	case *groupReq:
		r.handle(ctx, m)
	case *memberAssign:
		agg := r.aggs[m.aggID]
		if agg == nil {
			return
		}
		agg.resp.Assignments = append(agg.resp.Assignments, m.a)
		if agg.left--; agg.left == 0 {
			delete(r.aggs, m.aggID)
			sort.Slice(agg.resp.Assignments, func(i, j int) bool { return agg.resp.Assignments[i].Group < agg.resp.Assignments[j].Group })
			r.k.respond(agg.request, protocol.StatusOK, "", &agg.resp)
		}
	case *snapGroups:
		r.snapshot(ctx, m)
	case *groupChanged:
		if m.sum.Members == 0 {
			delete(r.sums, m.sum.Group)
			delete(r.cs.wharf, m.sum.Group)
		} else {
			r.sums[m.sum.Group] = m.sum
			r.cs.wharf[m.sum.Group] = true
		}
	default:
		r.clientMsg(ctx, m)
	}
}

// snapshot has every coordinator describe its group to the snapshot
// actor, and tells it which groups there are.
func (r *groupRouter) snapshot(ctx actor.Context, m *snapGroups) {
	names := make([]string, 0, len(r.groups))
	for name := range r.groups {
		names = append(names, name)
	}
	sort.Strings(names) // a deterministic order for the simulator
	for _, name := range names {
		ctx.Send(r.groups[name], &groupDescribe{replyTo: m.replyTo})
	}
	ctx.Send(m.replyTo, &groupNames{names: names})
}

func (r *groupRouter) group(ctx actor.Context, name string) *actor.PID {
	if pid, ok := r.groups[name]; ok {
		return pid
	}
	cfg := rebalance.Config{Group: name, HeartbeatInterval: r.interval, Boot: r.boot, Queues: queueCount(r.v, name),
		DoubleAssign: r.k.faults.DoubleAssign}
	pid := ctx.Spawn(r.props(func() actor.Actor { return &coordinator{k: r.k, p: r.p, cfg: cfg} }))
	r.groups[name] = pid
	return pid
}

func (r *groupRouter) handle(ctx actor.Context, m *groupReq) {
	switch req := m.req.(type) {
	case *protocol.HeartbeatRequest:
		if r.wharfRefused(m, req) {
			return
		}
		resp := protocol.HeartbeatResponse{HeartbeatIntervalMillis: r.interval.Milliseconds()}
		var groups []protocol.ConsumerGroupInfo
		for _, g := range req.ConsumerGroups {
			if g.Group != "" && !slices.ContainsFunc(groups, func(x protocol.ConsumerGroupInfo) bool { return x.Group == g.Group }) {
				groups = append(groups, g)
			}
		}
		if len(groups) == 0 || req.ClientID == "" {
			r.k.respond(m.request, protocol.StatusOK, "", &resp)
			return
		}
		r.nextAgg++
		r.aggs[r.nextAgg] = &hbAgg{request: m.request, left: len(groups), resp: resp}
		for _, g := range groups {
			ctx.Request(r.group(ctx, g.Group), &memberHB{aggID: r.nextAgg, clientID: req.ClientID, conn: m.conn, info: g})
		}
	case *protocol.UnregisterClientRequest:
		names := make([]string, 0, len(r.groups))
		for name := range r.groups {
			names = append(names, name)
		}
		sort.Strings(names) // a deterministic order for the simulator
		for _, name := range names {
			if req.Group == "" || req.Group == name {
				ctx.Send(r.groups[name], &memberLeave{clientID: req.ClientID})
			}
		}
		r.clientRun(ctx, r.cs.t.Unregister(req.ClientID, req.Group))
		r.k.respond(m.request, protocol.StatusOK, "", nil)
	case *protocol.DescribeConsumerGroupRequest:
		pid, ok := r.groups[req.Group]
		if !ok {
			r.k.respond(m.request, protocol.StatusQueryNotFound, fmt.Sprintf("no consumer group %q on this broker", req.Group), nil)
			return
		}
		ctx.Send(pid, &groupDescribe{request: m.request})
	case *protocol.GetConsumerGroupsRequest:
		list := make([]groupSummary, 0, len(r.sums))
		for _, s := range r.sums {
			list = append(list, s)
		}
		sort.Slice(list, func(i, j int) bool { return list[i].Group < list[j].Group })
		ctx.Send(r.p.offsets, &fillOffsets{request: m.request, list: list})
	case *protocol.ClientHeartbeatRequest:
		r.clientHeartbeat(ctx, m, req)
	default:
		r.clientRequest(m)
	}
}

// queueCount is how many queues a group's topic has, for its coordinator.
func queueCount(v *views, group string) func(string) int32 {
	return func(topic string) int32 {
		if tc, ok := v.topicsSnapshot()[topic]; ok {
			return tc.ReadQueueNums
		}
		if topic == protocol.RetryTopic(group) {
			return 1 // created on demand with one queue
		}
		// Not configured here (a slave before its first metadata sync from
		// the master): the queues the log has are the topic's.
		return v.knownQueues(topic)
	}
}

// coordinator is the shell of one group's rebalance.Coordinator.
type coordinator struct {
	k     *kit
	p     *pids
	cfg   rebalance.Config
	c     *rebalance.Coordinator
	conns map[string]Conn // each member's connection, for notifications
}

func (g *coordinator) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		g.c, g.conns = rebalance.New(g.cfg, g.k.now()), map[string]Conn{}
	case *memberHB:
		now := g.k.now()
		g.conns[m.clientID] = m.conn
		r := g.c.Heartbeat(now, m.clientID, m.info, addrOf(m.conn))
		if r.Joined {
			g.k.log.Info("consumer joined", "group", g.cfg.Group, "client", m.clientID, "addr", addrOf(m.conn), "model", r.Summary.MessageModel)
		}
		g.run(ctx, r)
		ctx.Respond(&memberAssign{aggID: m.aggID, a: r.Assignment})
		g.arm(ctx, now, r)
	case *memberLeave:
		g.run(ctx, g.c.Leave(g.k.now(), m.clientID))
	case *groupTick:
		now := g.k.now()
		r := g.c.Tick(now)
		g.run(ctx, r)
		g.arm(ctx, now, r)
	case *groupDescribe:
		ctx.Send(g.p.offsets, &fillOffsets{request: m.request, desc: g.c.Describe(), replyTo: m.replyTo})
	}
}

// run does what a Ready asks, but for the answer and the timer: logs the
// changes, notifies members (so they heartbeat now instead of at their
// next interval) and keeps the router's summary current.
func (g *coordinator) run(ctx actor.Context, r rebalance.Ready) {
	for _, id := range r.Left {
		g.k.log.Info("consumer left", "group", g.cfg.Group, "client", id)
		delete(g.conns, id)
	}
	for _, id := range r.TimedOut {
		g.k.log.Warn("consumer timed out", "group", g.cfg.Group, "client", id)
		delete(g.conns, id)
	}
	for _, mv := range r.Moves {
		g.k.log.Debug("queue owner", "group", g.cfg.Group, "queue", mv.Queue.Topic+"-"+fmt.Sprint(mv.Queue.QueueID),
			"from", mv.From, "to", mv.To, "target", mv.Target, "gen", mv.Generation, "grace", mv.Grace)
	}
	for _, id := range r.Notify {
		if c := g.conns[id]; c != nil {
			c.Send(&protocol.NotifyConsumerIDsChangedRequest{Group: g.cfg.Group})
		}
	}
	if r.Summary != nil {
		ctx.Send(ctx.Parent(), &groupChanged{sum: groupSummary{GroupSummary: r.Summary.GroupSummary, queues: r.Summary.Queues}})
	}
}

// arm starts the timer a Ready asks for.
func (g *coordinator) arm(ctx actor.Context, now time.Time, r rebalance.Ready) {
	if !r.Timer.IsZero() {
		g.k.after(r.Timer.Sub(now), ctx.Self(), &groupTick{})
	}
}

func addrOf(c Conn) string {
	if c == nil {
		return ""
	}
	return c.RemoteAddr()
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// isGroupTopic reports whether a topic is a group's retry or dead-letter
// topic (created on demand with one queue).
func isGroupTopic(t string) bool {
	return strings.HasPrefix(t, protocol.RetryTopicPrefix) || strings.HasPrefix(t, protocol.DLQTopicPrefix)
}
