package rebalance

import (
	"slices"
	"sort"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// timeoutIntervals: a member silent for longer than this many heartbeat
// intervals is removed. It is more than the members' lease, so a member has
// stopped consuming before its queues go to others.
const timeoutIntervals = 3

// Config is what a Coordinator needs from its broker.
type Config struct {
	// Group is the consumer group's name.
	Group string
	// HeartbeatInterval is how often members heartbeat; 0 means 1 s. A
	// member silent for three intervals is removed, and the restart grace
	// lasts two.
	HeartbeatInterval time.Duration
	// Boot is when the broker started: the restart grace runs from it.
	Boot time.Time
	// Queues returns how many queues a topic has now. It is called on every
	// rebalance and Describe, so a change of a topic's queue count takes
	// effect at the next input; the caller resolves topics it has not
	// configured (a group's retry topic has one queue before it exists).
	Queues func(topic string) int32
	// DoubleAssign plants a bug for the simulator to catch: a queue reaches
	// its new owner without waiting for the old owner to release it.
	DoubleAssign bool
}

// Ready is what one input asks the caller to do.
type Ready struct {
	// Assignment answers the heartbeat that produced this Ready (Heartbeat
	// only).
	Assignment protocol.GroupAssignment
	// Notify are the members to send NOTIFY_CONSUMER_IDS_CHANGED, in order,
	// so that they heartbeat now instead of at their next interval. A
	// member can appear more than once (revoked and reassigned in one
	// rebalance); the member being answered never appears.
	Notify []string
	// Timer, if not zero, is when to call Tick. The coordinator keeps one
	// timer armed while it has members and asks for the next one only
	// after Tick.
	Timer time.Time
	// Summary is the group after the input; nil when nothing was
	// recomputed (a Leave of an unknown member). Members == 0 means the
	// group is empty.
	Summary *Summary
	// Joined reports that the heartbeat's member is new.
	Joined bool
	// Left and TimedOut are the members removed by this input; the caller
	// can forget their connections.
	Left, TimedOut []string
	// Moves are the changes of queue owners, for the log.
	Moves []Move
}

// Summary is a group's line in a list of groups.
type Summary struct {
	protocol.GroupSummary
	// Queues are the queues of the group's topics, for the group's lag.
	Queues []protocol.QueueRef
}

// Move is one change of a queue's owner (the member that may consume it).
type Move struct {
	Queue      protocol.QueueRef
	From, To   string // "" while nobody may consume it
	Target     string // who should own it
	Generation int64  // the generation the rebalance publishes
	Grace      bool   // within the restart grace
}

// member is one live member of a group.
type member struct {
	addr     string
	last     time.Time
	info     protocol.ConsumerGroupInfo
	owned    map[protocol.QueueRef]bool
	seenGen  int64 // the generation the member's last heartbeat echoed
	assigned []protocol.QueueRef
}

// Coordinator is one consumer group's RebalanceCoordinator. It is not safe
// for concurrent use.
type Coordinator struct {
	cfg        Config
	members    map[string]*member
	model      string
	strategy   string
	orderly    bool
	owner      map[protocol.QueueRef]string // who may consume the queue now
	target     map[protocol.QueueRef]string // who should
	revokedAt  map[protocol.QueueRef]int64  // generation that took the queue from its owner
	graceUntil time.Time                    // no unowned queue is granted before
	generation int64
	armed      bool
	ready      Ready // being built by the current input
}

// New returns the coordinator of one group, created at now.
func New(cfg Config, now time.Time) *Coordinator {
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = time.Second
	}
	return &Coordinator{
		cfg:     cfg,
		members: map[string]*member{},
		owner:   map[protocol.QueueRef]string{}, target: map[protocol.QueueRef]string{},
		revokedAt: map[protocol.QueueRef]int64{},
		// After a broker restart the coordinator knows nothing of who
		// consumed what. Members keep consuming for a lease of two
		// heartbeat intervals after their last acknowledged heartbeat, so
		// for that long after the broker started it only learns owners from
		// the members' reports and grants nothing else.
		graceUntil: cfg.Boot.Add(leaseIntervals * cfg.HeartbeatInterval),
		// Generations start from the clock, so a coordinator after a
		// restart never reuses a generation members echo from before it.
		generation: now.UnixMilli() * 1000,
	}
}

// Heartbeat is one member's heartbeat for this group at now: it joins the
// member if it is new, records what it holds, and rebalances. addr is the
// member's address, for Describe.
func (c *Coordinator) Heartbeat(now time.Time, id string, info protocol.ConsumerGroupInfo, addr string) Ready {
	mem := c.members[id]
	if mem == nil {
		if len(c.members) == 0 { // the group's first member sets its mode
			c.model = orDefault(info.MessageModel, protocol.Clustering)
			c.strategy = orDefault(info.AllocateStrategy, protocol.AllocateAverage)
			c.orderly = info.ConsumeOrderly
		}
		mem = &member{}
		c.members[id] = mem
		c.ready.Joined = true
	}
	mem.addr, mem.last, mem.info = addr, now, info
	mem.owned = make(map[protocol.QueueRef]bool, len(info.Owned))
	for _, q := range info.Owned {
		mem.owned[q] = true
	}
	mem.seenGen = info.Generation
	c.rebalance(now, id)
	c.ready.Assignment = protocol.GroupAssignment{Group: c.cfg.Group, Generation: c.generation, Queues: slices.Clone(mem.assigned)}
	if !c.armed {
		c.armed = true
		c.ready.Timer = now.Add(c.cfg.HeartbeatInterval)
	}
	return c.take()
}

// Leave removes a member at once (it unregistered).
func (c *Coordinator) Leave(now time.Time, id string) Ready {
	if _, ok := c.members[id]; ok {
		delete(c.members, id)
		c.ready.Left = append(c.ready.Left, id)
		c.rebalance(now, "")
	}
	return c.take()
}

// Tick is the timer Ready.Timer asked for: it removes members silent for
// three heartbeat intervals and grants what the restart grace or a release
// held back.
func (c *Coordinator) Tick(now time.Time) Ready {
	c.armed = false
	changed := false
	for _, id := range c.memberIDs() {
		if now.Sub(c.members[id].last) > timeoutIntervals*c.cfg.HeartbeatInterval {
			delete(c.members, id)
			c.ready.TimedOut = append(c.ready.TimedOut, id)
			changed = true
		}
	}
	if changed {
		c.rebalance(now, "")
	}
	if len(c.members) > 0 {
		c.armed = true
		c.ready.Timer = now.Add(c.cfg.HeartbeatInterval)
	}
	c.rebalance(now, "")
	return c.take()
}

func (c *Coordinator) take() Ready {
	r := c.ready
	c.ready = Ready{}
	return r
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func (c *Coordinator) memberIDs() []string {
	ids := make([]string, 0, len(c.members))
	for id := range c.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// queuesOf lists a topic's queues.
func (c *Coordinator) queuesOf(topic string) []protocol.QueueRef {
	n := int32(0)
	if c.cfg.Queues != nil {
		n = c.cfg.Queues(topic)
	}
	qs := make([]protocol.QueueRef, max(n, 0))
	for i := range qs {
		qs[i] = protocol.QueueRef{Topic: topic, QueueID: int32(i)}
	}
	return qs
}

// subscriptions returns the subscribed topics (sorted) and each topic's
// subscribers (sorted, as ids is).
func (c *Coordinator) subscriptions(ids []string) ([]string, map[string][]string) {
	subscribers := map[string][]string{}
	retry := protocol.RetryTopic(c.cfg.Group)
	for _, id := range ids {
		subs := c.members[id].info.Subscriptions
		for _, s := range subs {
			if !slices.Contains(subscribers[s.Topic], id) {
				subscribers[s.Topic] = append(subscribers[s.Topic], id)
			}
		}
		// Members that consume (have subscriptions) also consume the
		// group's retries; a pull-only client that merely heartbeats does not.
		if len(subs) > 0 && !slices.Contains(subscribers[retry], id) {
			subscribers[retry] = append(subscribers[retry], id)
		}
	}
	topics := make([]string, 0, len(subscribers))
	for t := range subscribers {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	return topics, subscribers
}

// rebalance recomputes the target assignment, hands queues over where their
// old owners released them, and publishes the result. self is the member
// being answered now (it needs no notification).
func (c *Coordinator) rebalance(now time.Time, self string) {
	ids := c.memberIDs()
	topics, subscribers := c.subscriptions(ids)
	var assigned map[string][]protocol.QueueRef
	var revoked []string // owners that must hear of the next generation to release
	if c.model == protocol.Broadcasting {
		assigned = c.broadcast(topics, subscribers)
	} else {
		assigned, revoked = c.cluster(now, ids, topics, subscribers)
	}
	c.publish(ids, self, assigned, revoked)
	sum := &Summary{GroupSummary: protocol.GroupSummary{Group: c.cfg.Group, MessageModel: c.model, Members: int32(len(ids))}}
	for _, t := range topics {
		sum.Topics = append(sum.Topics, t)
		sum.Queues = append(sum.Queues, c.queuesOf(t)...)
	}
	c.ready.Summary = sum
}

// broadcast assigns every queue of a topic to each of its subscribers;
// nobody owns a queue exclusively.
func (c *Coordinator) broadcast(topics []string, subscribers map[string][]string) map[string][]protocol.QueueRef {
	assigned := map[string][]protocol.QueueRef{}
	for _, t := range topics {
		for _, q := range c.queuesOf(t) {
			for _, id := range subscribers[t] {
				assigned[id] = append(assigned[id], q)
			}
		}
	}
	c.owner, c.target = map[protocol.QueueRef]string{}, map[protocol.QueueRef]string{}
	return assigned
}

// cluster allocates each queue to one member and moves the owners towards
// the targets, one hand-over step at a time. It returns each member's
// assignment and the owners that lost a queue in this step.
func (c *Coordinator) cluster(now time.Time, ids, topics []string, subscribers map[string][]string) (map[string][]protocol.QueueRef, []string) {
	target := map[protocol.QueueRef]string{}
	for _, t := range topics {
		for q, id := range allocate(c.strategy, c.queuesOf(t), subscribers[t], c.target) {
			target[q] = id
		}
	}
	c.target = target
	// The queues considered: those targeted or owned before this
	// heartbeat's reports are adopted.
	order := make([]protocol.QueueRef, 0, len(target)+len(c.owner))
	for q := range target {
		order = append(order, q)
	}
	for q := range c.owner {
		if _, ok := target[q]; !ok {
			order = append(order, q)
		}
	}
	sortRefs(order) // map order would make notifications, and the simulator, nondeterministic
	grace := now.Before(c.graceUntil)
	next := c.generation + 1 // the generation this rebalance publishes, if anything changes
	// Adopt what members report consuming that has no owner here (after
	// a restart, the owners from before).
	for _, id := range ids {
		for _, q := range c.members[id].info.Owned {
			if c.owner[q] == "" {
				c.owner[q] = id
				c.ready.Moves = append(c.ready.Moves, Move{Queue: q, To: id, Target: target[q], Generation: next, Grace: grace})
			}
		}
	}
	assigned := map[string][]protocol.QueueRef{}
	var revoked []string
	for _, q := range order {
		t := target[q]
		o, lost := c.handOver(q, t, next, grace)
		if lost != "" {
			revoked = append(revoked, lost)
		}
		if o != c.owner[q] {
			c.ready.Moves = append(c.ready.Moves, Move{Queue: q, From: c.owner[q], To: o, Target: t, Generation: next, Grace: grace})
		}
		if o == "" {
			delete(c.owner, q)
		} else {
			c.owner[q] = o
		}
		if o != "" && o == t {
			assigned[o] = append(assigned[o], q)
		}
	}
	return assigned, revoked
}

// handOver decides who may consume q now, given its target t. lost is the
// owner that loses q in this step: it must see generation next to release.
func (c *Coordinator) handOver(q protocol.QueueRef, t string, next int64, grace bool) (o, lost string) {
	o = c.owner[q]
	if o != "" && c.members[o] == nil {
		o = "" // the owner left or timed out: the queue is free
	}
	if o != "" && o != t {
		rg, ok := c.revokedAt[q]
		if !ok {
			rg = next
			c.revokedAt[q] = rg
			lost = o
		}
		// Released: the owner's heartbeat answered the revoking generation
		// and no longer lists the queue.
		if mem := c.members[o]; (!mem.owned[q] && mem.seenGen >= rg) || c.cfg.DoubleAssign {
			o = t
		}
	} else if o == "" && !grace {
		o = t
	}
	if o == t {
		delete(c.revokedAt, q)
	}
	return o, lost
}

// publish stores the members' new assignments, lists whom to notify, and
// starts a new generation if any assignment changed or a queue was revoked
// (a revocation needs a new generation even if no list changed).
func (c *Coordinator) publish(ids []string, self string, assigned map[string][]protocol.QueueRef, revoked []string) {
	changed := len(revoked) > 0
	for _, id := range revoked {
		if c.members[id] != nil && id != self {
			c.ready.Notify = append(c.ready.Notify, id)
		}
	}
	for _, id := range ids {
		mem := c.members[id]
		a := assigned[id]
		sortRefs(a)
		if !slices.Equal(a, mem.assigned) {
			changed = true
			mem.assigned = a
			if id != self {
				c.ready.Notify = append(c.ready.Notify, id)
			}
		}
	}
	if changed {
		c.generation++
	}
}

// Describe returns the group's state: mode, generation, members with their
// assignments, and every queue of its topics with its owner and the owner
// waiting for it. Offsets are the caller's to fill in (CommittedOffset is
// -1).
func (c *Coordinator) Describe() *protocol.ConsumerGroupDescription {
	d := &protocol.ConsumerGroupDescription{Group: c.cfg.Group, MessageModel: c.model, AllocateStrategy: c.strategy,
		ConsumeOrderly: c.orderly, Generation: c.generation}
	ids := c.memberIDs()
	topics := []string{protocol.RetryTopic(c.cfg.Group)}
	for _, id := range ids {
		mem := c.members[id]
		d.Members = append(d.Members, protocol.GroupMember{ClientID: id, Address: mem.addr,
			LastHeartbeatMs: mem.last.UnixMilli(), Queues: slices.Clone(mem.assigned)})
		for _, s := range mem.info.Subscriptions {
			if !slices.Contains(topics, s.Topic) {
				topics = append(topics, s.Topic)
			}
		}
	}
	sort.Strings(topics)
	for _, t := range topics {
		for _, q := range c.queuesOf(t) {
			gq := protocol.GroupQueue{Topic: q.Topic, QueueID: q.QueueID, CommittedOffset: -1}
			if c.model != protocol.Broadcasting {
				gq.Owner = c.owner[q]
				if t := c.target[q]; t != gq.Owner {
					gq.Pending = t
				}
			}
			d.Queues = append(d.Queues, gq)
		}
	}
	return d
}

func sortRefs(a []protocol.QueueRef) {
	sort.Slice(a, func(i, j int) bool {
		if a[i].Topic != a[j].Topic {
			return a[i].Topic < a[j].Topic
		}
		return a[i].QueueID < a[j].QueueID
	})
}
