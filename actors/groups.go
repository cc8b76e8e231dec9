package actors

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/protocol"
)

// Consumer groups. The groups actor routes group requests to one
// RebalanceCoordinator actor per group (spawned on first use). A
// coordinator owns its group's membership and assignment: members join and
// stay with heartbeats, and the coordinator assigns the subscribed topics'
// queues (and the group's retry queue) among the live members. A queue moves
// in two steps: it leaves its old owner's assignment first and reaches the
// new owner only once the old owner's heartbeat no longer reports holding it
// (or the old owner left or timed out), so no two members consume one queue
// at once in clustering mode.

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

// groupDescribe asks a coordinator for its state.
type groupDescribe struct{ *request }

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
	desc *protocol.ConsumerGroupDescription
	list []groupSummary
}

type groupTick struct{}

// groupRouter routes to the coordinators.
type groupRouter struct {
	b       *Broker
	groups  map[string]*actor.PID
	sums    map[string]groupSummary
	aggs    map[int64]*hbAgg
	nextAgg int64
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
			r.b.respond(agg.request, protocol.StatusOK, "", &agg.resp)
		}
	case *groupChanged:
		if m.sum.Members == 0 {
			delete(r.sums, m.sum.Group)
		} else {
			r.sums[m.sum.Group] = m.sum
		}
	}
}

func (r *groupRouter) group(ctx actor.Context, name string) *actor.PID {
	if pid, ok := r.groups[name]; ok {
		return pid
	}
	pid := ctx.Spawn(r.b.childProps(func() actor.Actor { return &coordinator{b: r.b, name: name} }))
	r.groups[name] = pid
	return pid
}

func (r *groupRouter) handle(ctx actor.Context, m *groupReq) {
	b := r.b
	switch req := m.req.(type) {
	case *protocol.HeartbeatRequest:
		resp := protocol.HeartbeatResponse{HeartbeatIntervalMillis: b.cfg.ConsumerHeartbeatInterval.Milliseconds()}
		var groups []protocol.ConsumerGroupInfo
		for _, g := range req.ConsumerGroups {
			if g.Group != "" && !slices.ContainsFunc(groups, func(x protocol.ConsumerGroupInfo) bool { return x.Group == g.Group }) {
				groups = append(groups, g)
			}
		}
		if len(groups) == 0 || req.ClientID == "" {
			b.respond(m.request, protocol.StatusOK, "", &resp)
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
		b.respond(m.request, protocol.StatusOK, "", nil)
	case *protocol.DescribeConsumerGroupRequest:
		pid, ok := r.groups[req.Group]
		if !ok {
			b.respond(m.request, protocol.StatusQueryNotFound, fmt.Sprintf("no consumer group %q on this broker", req.Group), nil)
			return
		}
		ctx.Send(pid, &groupDescribe{request: m.request})
	case *protocol.GetConsumerGroupsRequest:
		list := make([]groupSummary, 0, len(r.sums))
		for _, s := range r.sums {
			list = append(list, s)
		}
		sort.Slice(list, func(i, j int) bool { return list[i].Group < list[j].Group })
		ctx.Send(b.p.offsets, &fillOffsets{request: m.request, list: list})
	}
}

// member is one live member of a group.
type member struct {
	id       string
	conn     Conn
	last     time.Time
	info     protocol.ConsumerGroupInfo
	owned    map[protocol.QueueRef]bool
	seenGen  int64 // the generation the member's last heartbeat echoed
	assigned []protocol.QueueRef
}

// coordinator is one group's RebalanceCoordinator.
type coordinator struct {
	b          *Broker
	name       string
	members    map[string]*member
	model      string
	strategy   string
	orderly    bool
	owner      map[protocol.QueueRef]string // who may consume the queue now
	target     map[protocol.QueueRef]string // who should
	revokedAt  map[protocol.QueueRef]int64  // generation that took the queue from its owner
	graceUntil time.Time                    // no unowned queue is granted before (see Started)
	generation int64
	armed      bool
}

func (g *coordinator) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		g.members = map[string]*member{}
		g.owner, g.target = map[protocol.QueueRef]string{}, map[protocol.QueueRef]string{}
		g.revokedAt = map[protocol.QueueRef]int64{}
		// After a broker restart the coordinator knows nothing of who
		// consumed what. Members keep consuming for a lease of two
		// heartbeat intervals after their last acknowledged heartbeat, so
		// for that long after the broker started it only learns owners from
		// the members' reports and grants nothing else.
		g.graceUntil = g.b.bootTime.Add(2 * g.interval())
		// Generations start from the clock, so a coordinator after a
		// restart never reuses a generation members echo from before it.
		g.generation = g.b.env.Clock.Now().UnixMilli() * 1000
	case *memberHB:
		g.heartbeat(ctx, m)
	case *memberLeave:
		if _, ok := g.members[m.clientID]; ok {
			g.b.log.Info("consumer left", "group", g.name, "client", m.clientID)
			delete(g.members, m.clientID)
			g.rebalance(ctx, "")
		}
	case *groupTick:
		g.armed = false
		g.expire(ctx)
		g.rebalance(ctx, "") // grants what the grace period or a release held back
	case *groupDescribe:
		ctx.Send(g.b.p.offsets, &fillOffsets{request: m.request, desc: g.describe()})
	}
}

func (g *coordinator) interval() time.Duration {
	if d := g.b.cfg.ConsumerHeartbeatInterval; d > 0 {
		return d
	}
	return time.Second
}

func (g *coordinator) heartbeat(ctx actor.Context, m *memberHB) {
	now := g.b.env.Clock.Now()
	mem := g.members[m.clientID]
	if mem == nil {
		if len(g.members) == 0 { // the group's first member sets its mode
			g.model = orDefault(m.info.MessageModel, protocol.Clustering)
			g.strategy = orDefault(m.info.AllocateStrategy, protocol.AllocateAverage)
			g.orderly = m.info.ConsumeOrderly
		}
		mem = &member{id: m.clientID}
		g.members[m.clientID] = mem
		g.b.log.Info("consumer joined", "group", g.name, "client", m.clientID, "addr", m.conn.RemoteAddr(), "model", g.model)
	}
	mem.conn, mem.last, mem.info = m.conn, now, m.info
	mem.owned = map[protocol.QueueRef]bool{}
	for _, q := range m.info.Owned {
		mem.owned[q] = true
	}
	mem.seenGen = m.info.Generation
	g.rebalance(ctx, m.clientID)
	ctx.Respond(&memberAssign{aggID: m.aggID, a: protocol.GroupAssignment{Group: g.name, Generation: g.generation, Queues: slices.Clone(mem.assigned)}})
	if !g.armed {
		g.armed = true
		g.b.after(g.interval(), ctx.Self(), &groupTick{})
	}
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// expire removes members silent for three heartbeat intervals.
func (g *coordinator) expire(ctx actor.Context) {
	now := g.b.env.Clock.Now()
	changed := false
	for _, id := range g.memberIDs() {
		if now.Sub(g.members[id].last) > 3*g.interval() {
			g.b.log.Warn("consumer timed out", "group", g.name, "client", id)
			delete(g.members, id)
			changed = true
		}
	}
	if changed {
		g.rebalance(ctx, "")
	}
	if len(g.members) > 0 {
		g.armed = true
		g.b.after(g.interval(), ctx.Self(), &groupTick{})
	}
}

func (g *coordinator) memberIDs() []string {
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// queuesOf lists a topic's queues (the retry topic has one).
func (g *coordinator) queuesOf(topic string) []protocol.QueueRef {
	n := int32(0)
	if tc, ok := g.b.v.topicsSnapshot()[topic]; ok {
		n = tc.ReadQueueNums
	} else if topic == protocol.RetryTopic(g.name) {
		n = 1
	} else {
		// Not configured here (a slave before its first metadata sync from
		// the master): the queues the log has are the topic's.
		n = g.b.v.knownQueues(topic)
	}
	qs := make([]protocol.QueueRef, n)
	for i := range qs {
		qs[i] = protocol.QueueRef{Topic: topic, QueueID: int32(i)}
	}
	return qs
}

// rebalance recomputes the target assignment and hands queues over where
// their old owners released them. self is the member being answered now
// (it needs no notification).
func (g *coordinator) rebalance(ctx actor.Context, self string) {
	ids := g.memberIDs()
	subscribers := map[string][]string{} // topic -> members
	retry := protocol.RetryTopic(g.name)
	for _, id := range ids {
		for _, s := range g.members[id].info.Subscriptions {
			if !slices.Contains(subscribers[s.Topic], id) {
				subscribers[s.Topic] = append(subscribers[s.Topic], id)
			}
		}
		// Members that consume (have subscriptions) also consume the
		// group's retries; a pull-only client that merely heartbeats does not.
		if len(g.members[id].info.Subscriptions) > 0 && !slices.Contains(subscribers[retry], id) {
			subscribers[retry] = append(subscribers[retry], id)
		}
	}
	topics := make([]string, 0, len(subscribers))
	for t := range subscribers {
		topics = append(topics, t)
	}
	sort.Strings(topics)

	assigned := map[string][]protocol.QueueRef{}
	var revoked []string // owners that must hear of the next generation to release
	if g.model == protocol.Broadcasting {
		for _, t := range topics {
			for _, q := range g.queuesOf(t) {
				for _, id := range subscribers[t] {
					assigned[id] = append(assigned[id], q)
				}
			}
		}
		g.owner, g.target = map[protocol.QueueRef]string{}, map[protocol.QueueRef]string{}
	} else {
		target := map[protocol.QueueRef]string{}
		for _, t := range topics {
			for q, id := range allocate(g.strategy, g.queuesOf(t), subscribers[t], g.target) {
				target[q] = id
			}
		}
		g.target = target
		all := map[protocol.QueueRef]bool{}
		for q := range target {
			all[q] = true
		}
		for q := range g.owner {
			all[q] = true
		}
		// Adopt what members report consuming that has no owner here (after
		// a restart, the owners from before).
		for _, id := range ids {
			for q := range g.members[id].owned {
				if g.owner[q] == "" {
					g.owner[q] = id
				}
			}
		}
		grace := g.b.env.Clock.Now().Before(g.graceUntil)
		next := g.generation + 1 // the generation this rebalance publishes, if anything changes
		order := make([]protocol.QueueRef, 0, len(all))
		for q := range all {
			order = append(order, q)
		}
		sortRefs(order) // map order would make notifications, and the simulator, nondeterministic
		for _, q := range order {
			t, o := target[q], g.owner[q]
			if o != "" && g.members[o] == nil {
				o = "" // the owner left or timed out: the queue is free
			}
			if o != "" && o != t {
				rg, ok := g.revokedAt[q]
				if !ok {
					rg = next
					g.revokedAt[q] = rg
					revoked = append(revoked, o) // must see generation next to release
				}
				// Released: the owner's heartbeat answered the revoking
				// generation and no longer lists the queue.
				if mem := g.members[o]; (!mem.owned[q] && mem.seenGen >= rg) || g.b.k.faults.DoubleAssign {
					o = t
				}
			} else if o == "" && !grace {
				o = t
			}
			if o == t {
				delete(g.revokedAt, q)
			}
			if o != g.owner[q] {
				g.b.log.Debug("queue owner", "group", g.name, "queue", q.Topic+"-"+fmt.Sprint(q.QueueID), "from", g.owner[q], "to", o, "target", t, "gen", next, "grace", grace)
			}
			if o == "" {
				delete(g.owner, q)
			} else {
				g.owner[q] = o
			}
			if o != "" && o == t {
				assigned[o] = append(assigned[o], q)
			}
		}
	}
	changed := len(revoked) > 0 // a revocation needs a new generation even if no list changed
	for _, id := range revoked {
		if mem := g.members[id]; mem != nil && id != self {
			g.notify(mem)
		}
	}
	for _, id := range ids {
		mem := g.members[id]
		a := assigned[id]
		sortRefs(a)
		if !slices.Equal(a, mem.assigned) {
			changed = true
			mem.assigned = a
			if id != self {
				g.notify(mem)
			}
		}
	}
	if changed {
		g.generation++
	}
	sum := groupSummary{GroupSummary: protocol.GroupSummary{Group: g.name, MessageModel: g.model, Members: int32(len(ids))}}
	for _, t := range topics {
		sum.Topics = append(sum.Topics, t)
		sum.queues = append(sum.queues, g.queuesOf(t)...)
	}
	ctx.Send(ctx.Parent(), &groupChanged{sum: sum})
}

// notify tells a member its assignment changed, so it heartbeats now
// instead of at its next interval.
func (g *coordinator) notify(mem *member) {
	if mem.conn != nil {
		mem.conn.Send(&protocol.NotifyConsumerIDsChangedRequest{Group: g.name})
	}
}

func (g *coordinator) describe() *protocol.ConsumerGroupDescription {
	d := &protocol.ConsumerGroupDescription{Group: g.name, MessageModel: g.model, AllocateStrategy: g.strategy,
		ConsumeOrderly: g.orderly, Generation: g.generation}
	for _, id := range g.memberIDs() {
		mem := g.members[id]
		d.Members = append(d.Members, protocol.GroupMember{ClientID: id, Address: addrOf(mem.conn),
			LastHeartbeatMs: mem.last.UnixMilli(), Queues: slices.Clone(mem.assigned)})
	}
	seen := map[protocol.QueueRef]bool{}
	var topics []string
	for _, id := range g.memberIDs() {
		for _, s := range g.members[id].info.Subscriptions {
			if !slices.Contains(topics, s.Topic) {
				topics = append(topics, s.Topic)
			}
		}
	}
	topics = append(topics, protocol.RetryTopic(g.name))
	sort.Strings(topics)
	for _, t := range topics {
		for _, q := range g.queuesOf(t) {
			if seen[q] {
				continue
			}
			seen[q] = true
			gq := protocol.GroupQueue{Topic: q.Topic, QueueID: q.QueueID, CommittedOffset: -1}
			if g.model != protocol.Broadcasting {
				gq.Owner = g.owner[q]
				if t := g.target[q]; t != gq.Owner {
					gq.Pending = t
				}
			}
			d.Queues = append(d.Queues, gq)
		}
	}
	return d
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

func sortRefs(a []protocol.QueueRef) {
	sort.Slice(a, func(i, j int) bool {
		if a[i].Topic != a[j].Topic {
			return a[i].Topic < a[j].Topic
		}
		return a[i].QueueID < a[j].QueueID
	})
}
