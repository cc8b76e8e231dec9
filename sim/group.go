package sim

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/rebalance"
)

// A group member is a simulated push consumer in a consumer group. Its
// member side of the protocol (the lease, applying assignments, the
// generation it echoes, when it heartbeats) is the client's own
// rebalance.Member; this file is its owner, as client/group.go is the
// push consumer's: it sends the heartbeats the core asks for over the
// simulated network, feeds it their outcomes, the broker's notifications
// and the clock, and consumes the queues the core starts until it stops
// or drops them (a stopped queue is committed first).

const simGroupG = "simgroup"

type ownedQueue struct {
	next      int64
	started   bool // its start offset is known
	querying  bool
	pulling   bool
	releasing bool // stopped: its commit is on the way
	pulls     int
}

type memberPending struct {
	code   protocol.Code
	queue  protocol.QueueRef
	offset int64
	sentAt time.Time
}

// GroupMember is one member process's part in one broker group: the
// broker's coordinator assigns that group's queues, so a process has a
// member core, a connection and its owned queues per group; a fault
// (leave, crash, partition) hits all parts of a process.
type GroupMember struct {
	s      *Sim
	g      *brokerGroup
	num    int
	name   string // the process's client id
	label  string // name@group, for the trace
	core   *rebalance.Member
	conn   *Conn
	opaque uint32
	pend   map[uint32]*memberPending
	owned  map[protocol.QueueRef]*ownedQueue // started by the core and not yet released
	alive  bool
	cut    bool // partitioned from the broker
	// stopped: the member left (Close); it unregisters once every queue
	// is released.
	stopped      bool
	unregistered bool
	inputs       []func(now time.Time) rebalance.MemberReady
	feeding      bool
	timerAt      time.Time
	cancelTimer  func() bool
}

func (m *GroupMember) clientNum() int { return m.num }

// newMember starts a member process: a member in every broker group.
func (s *Sim) newMember() {
	s.memberSeq++
	name := fmt.Sprintf("m%d", s.memberSeq)
	s.w.Tracef("member %s joins", name)
	for _, g := range s.groups {
		m := &GroupMember{s: s, g: g, num: 100 + s.memberSeq, name: name, label: name + "@" + g.spec.Name,
			pend: map[uint32]*memberPending{}, owned: map[protocol.QueueRef]*ownedQueue{}, alive: true}
		m.core = rebalance.NewMember(rebalance.MemberConfig{Group: simGroupG, Interval: s.cfg.ConsumerHeartbeat,
			Consumes: func(topic string) bool { return topic == simTopic }, KeepRevoked: s.planted.KeepRevoked})
		s.members = append(s.members, m)
		m.input(m.core.Tick) // the joining heartbeat
	}
}

// input feeds the core one input and carries out its Ready. Inputs that
// carrying it out causes (a queue released at once) wait until it is done,
// so Readies are carried out one at a time, in the order of their inputs.
func (m *GroupMember) input(in func(now time.Time) rebalance.MemberReady) {
	m.inputs = append(m.inputs, in)
	if m.feeding {
		return
	}
	m.feeding = true
	for len(m.inputs) > 0 && m.alive {
		in := m.inputs[0]
		m.inputs = m.inputs[1:]
		m.carryOut(in(m.s.w.Now()))
	}
	m.inputs, m.feeding = nil, false
}

// carryOut does what a Ready asks: drop, stop, start, heartbeat, and arm
// the timer for the next Tick.
func (m *GroupMember) carryOut(r rebalance.MemberReady) {
	for _, ref := range r.Drop {
		m.s.w.Tracef("member %s: lease expired, dropping %v", m.label, ref)
		m.released(ref) // nothing consumed since the lease ended: nothing to commit
	}
	for _, ref := range r.Stop {
		q := m.owned[ref]
		m.s.w.Tracef("member %s releases %v (gen %d)", m.label, ref, r.Generation)
		if q == nil || !q.started {
			m.released(ref) // nothing consumed, nothing to commit
			continue
		}
		q.releasing = true
		if !m.request(&protocol.UpdateConsumerOffsetRequest{ConsumerGroup: simGroupG, Topic: ref.Topic, QueueID: ref.QueueID, CommitOffset: q.next},
			&memberPending{queue: ref, offset: q.next}) {
			m.released(ref) // as the client: a failed commit at release still releases
		}
	}
	for _, ref := range r.Start {
		if m.owned[ref] != nil {
			continue
		}
		m.s.w.Tracef("member %s acquires %v (gen %d)", m.label, ref, r.Generation)
		m.owned[ref] = &ownedQueue{}
		m.query(ref)
	}
	if r.Heartbeat {
		now := m.s.w.Now()
		ok := m.request(&protocol.HeartbeatRequest{ClientID: m.name, ConsumerGroups: []protocol.ConsumerGroupInfo{{Group: simGroupG,
			Subscriptions: []protocol.Subscription{{Topic: simTopic, Expression: "*"}}, Owned: r.Owned, Generation: r.Generation}}}, &memberPending{})
		r = m.core.HeartbeatSent(now)
		if !ok {
			r = m.core.HeartbeatFailed(now) // no connection to send it on
		}
	}
	m.arm(r.Deadline)
}

// released: the member is done with a queue; the core hears it next.
func (m *GroupMember) released(ref protocol.QueueRef) {
	delete(m.owned, ref)
	m.input(func(now time.Time) rebalance.MemberReady { return m.core.Released(now, ref) })
	if m.stopped && len(m.owned) == 0 && !m.unregistered {
		m.unregistered = true
		m.request(&protocol.UnregisterClientRequest{ClientID: m.name, Group: simGroupG}, &memberPending{})
	}
}

// arm sets the timer for the core's next Tick.
func (m *GroupMember) arm(at time.Time) {
	if at.Equal(m.timerAt) {
		return
	}
	if m.cancelTimer != nil {
		m.cancelTimer()
		m.cancelTimer = nil
	}
	m.timerAt = at
	if at.IsZero() {
		return
	}
	m.cancelTimer = m.s.w.at(at, owner{}, func() {
		m.timerAt, m.cancelTimer = time.Time{}, nil
		if m.alive {
			m.input(m.core.Tick)
		}
	})
}

func (m *GroupMember) ensureConn() bool {
	if m.conn != nil && !m.conn.dead() {
		return true
	}
	m.connLost()
	n := m.g.master
	if !n.up {
		return false
	}
	m.s.conns++
	m.conn = &Conn{s: m.s, id: m.s.conns, node: n, epoch: n.epoch, client: m, arrived: map[uint32]time.Time{}}
	return true
}

// connLost: the member's connection is gone with the requests on it. The
// heartbeat in flight failed; a release whose commit was lost is done (as
// a failed commit); pulls and offset queries start again after the next
// heartbeat answer.
func (m *GroupMember) connLost() {
	ops := make([]uint32, 0, len(m.pend))
	for op := range m.pend {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	pend := m.pend
	m.pend = map[uint32]*memberPending{}
	for _, op := range ops {
		p := pend[op]
		q := m.owned[p.queue]
		switch {
		case p.code == protocol.CodeHeartbeat:
			m.input(m.core.ConnectionLost)
		case q == nil:
		case p.code == protocol.CodeUpdateConsumerOffset && q.releasing:
			m.released(p.queue)
		case p.code == protocol.CodePullMessage:
			q.pulling = false
		case p.code == protocol.CodeQueryConsumerOffset:
			q.querying = false
		}
	}
}

// reset: the broker's kernel reset conn (its process died).
func (m *GroupMember) reset(conn *Conn) {
	if m.alive && conn == m.conn {
		conn.closed = true
		m.connLost()
	}
}

// request sends a request; false if the member has no connection for it.
func (m *GroupMember) request(req protocol.Request, p *memberPending) bool {
	if m.cut || !m.ensureConn() {
		return false
	}
	m.opaque++
	frame, err := protocol.AppendRequest(nil, m.opaque, 0, req)
	if err != nil {
		m.s.w.Violationf("member %s: encode: %v", m.name, err)
		return false
	}
	p.code, p.sentAt = req.RequestCode(), m.s.w.Now()
	m.pend[m.opaque] = p
	op, conn := m.opaque, m.conn
	m.s.w.at(m.s.w.Now().Add(reqTimeout), owner{}, func() {
		if m.alive && m.pend[op] != nil && conn == m.conn {
			m.conn.closed = true // a silent connection: start over
			m.connLost()
		}
	})
	conn.send(frame)
	return true
}

func (m *GroupMember) ownedRefs() []protocol.QueueRef {
	refs := make([]protocol.QueueRef, 0, len(m.owned))
	for q := range m.owned {
		refs = append(refs, q)
	}
	sort.Slice(refs, func(i, j int) bool {
		if refs[i].Topic != refs[j].Topic {
			return refs[i].Topic < refs[j].Topic
		}
		return refs[i].QueueID < refs[j].QueueID
	})
	return refs
}

func (m *GroupMember) onResponse(c *Conn, f *protocol.Frame) {
	if !m.alive || m.cut {
		return
	}
	p := m.pend[f.Opaque]
	if p == nil || c != m.conn {
		if f.Code == protocol.CodeNotifyConsumerIDsChanged && !f.IsResponse() {
			m.input(m.core.Notified)
		}
		return
	}
	delete(m.pend, f.Opaque)
	switch p.code {
	case protocol.CodeHeartbeat:
		var r protocol.HeartbeatResponse
		if f.Status != protocol.StatusOK || protocol.DecodeResponse(f, protocol.DefaultLimits(), &r) != nil {
			m.input(m.core.HeartbeatFailed)
			return
		}
		m.input(func(now time.Time) rebalance.MemberReady { return m.core.HeartbeatAnswered(now, p.sentAt, r) })
		m.revive()
	case protocol.CodeQueryConsumerOffset:
		m.onQuery(f, p)
	case protocol.CodeUpdateConsumerOffset:
		if mq := (memberQueue{m.g.idx, p.queue}); f.Status == protocol.StatusOK && p.offset > m.s.groupCommitted[mq] {
			m.s.groupCommitted[mq] = p.offset
		}
		if q := m.owned[p.queue]; q != nil && q.releasing {
			m.released(p.queue) // committed (or failed to): the core reports the release
		}
	case protocol.CodePullMessage:
		m.onPull(f, p)
	}
}

// revive restarts the pull loops and offset queries a lost connection
// ended.
func (m *GroupMember) revive() {
	for _, ref := range m.ownedRefs() {
		q := m.owned[ref]
		switch {
		case q == nil || q.releasing || q.pulling || q.querying:
		case q.started:
			m.pull(ref)
		default:
			m.query(ref)
		}
	}
}

func (m *GroupMember) query(ref protocol.QueueRef) {
	if q := m.owned[ref]; q != nil {
		q.querying = m.request(&protocol.QueryConsumerOffsetRequest{ConsumerGroup: simGroupG, Topic: ref.Topic, QueueID: ref.QueueID},
			&memberPending{queue: ref})
	}
}

func (m *GroupMember) onQuery(f *protocol.Frame, p *memberPending) {
	q := m.owned[p.queue]
	if q == nil || !q.querying {
		return
	}
	q.querying = false
	var off int64
	if f.Status == protocol.StatusOK {
		var r protocol.OffsetResponse
		if protocol.DecodeResponse(f, protocol.DefaultLimits(), &r) == nil {
			off = r.Offset
		}
	}
	if acked := m.s.groupCommitted[memberQueue{m.g.idx, p.queue}]; off < acked {
		m.s.w.Violationf("group %s on %s queue %v: committed offset moved backwards: broker says %d, it acknowledged %d", simGroupG, m.g.spec.Name, p.queue, off, acked)
	}
	q.next, q.started = off, true
	m.pull(p.queue)
}

func (m *GroupMember) pull(ref protocol.QueueRef) {
	q := m.owned[ref]
	if !m.alive || q == nil || q.pulling || q.releasing || !q.started {
		return
	}
	q.pulling = m.request(&protocol.PullRequest{ConsumerGroup: simGroupG, Topic: ref.Topic, QueueID: ref.QueueID, QueueOffset: q.next,
		MaxMsgNums: 16, SuspendTimeoutMillis: (m.s.cfg.ConsumerHeartbeat / 2).Milliseconds()}, &memberPending{queue: ref, offset: q.next})
}

func (m *GroupMember) onPull(f *protocol.Frame, p *memberPending) {
	if q := m.owned[p.queue]; q != nil {
		q.pulling = false
	}
	// The lease first: an answer that comes after it ended is not consumed.
	m.input(m.core.Tick)
	q := m.owned[p.queue]
	if q == nil || q.releasing || p.offset != q.next {
		return // no longer ours, or stale: do not consume
	}
	if f.Status == protocol.StatusOK {
		var r protocol.PullResponse
		if err := protocol.DecodeResponse(f, protocol.DefaultLimits(), &r); err != nil {
			m.s.w.Violationf("member %s: bad pull response: %v", m.label, err)
			return
		}
		for i := range r.Messages {
			msg := &r.Messages[i]
			key := msg.Property(protocol.PropertyKeys)
			if sm := m.s.sent[key]; sm == nil || !sm.storedIn(m.g, msg.QueueID) || !bytes.Equal(sm.body, msg.Body) {
				m.s.w.Violationf("member %s: queue %v offset %d: message %q not as sent", m.label, p.queue, msg.QueueOffset, key)
			}
			m.s.res.Consumed++
			m.s.groupConsumed[key] = true
		}
		q.next = r.NextBeginOffset
		if q.pulls++; q.pulls%3 == 0 {
			m.request(&protocol.UpdateConsumerOffsetRequest{ConsumerGroup: simGroupG, Topic: p.queue.Topic, QueueID: p.queue.QueueID, CommitOffset: q.next},
				&memberPending{queue: p.queue, offset: q.next})
		}
	}
	m.s.w.at(m.s.w.Now().Add(time.Duration(m.s.w.rng.Intn(500))*time.Microsecond), owner{}, func() { m.pull(p.queue) })
}

// rebalanceWait is a member's departure whose queues are not yet taken over.
type rebalanceWait struct {
	at     time.Time
	g      int
	queues []protocol.QueueRef
	who    string
}

func (m *GroupMember) departed() {
	if len(m.owned) > 0 {
		m.s.waits = append(m.s.waits, rebalanceWait{at: m.s.w.Now(), g: m.g.idx, queues: m.ownedRefs(), who: m.name})
	}
}

// leave: the member closes: it stops every queue (commit, then release)
// and then unregisters.
func (m *GroupMember) leave() {
	m.s.w.Tracef("member %s leaves", m.label)
	m.departed()
	m.stopped = true
	m.input(m.core.Close)
	if len(m.owned) == 0 && !m.unregistered {
		m.unregistered = true
		m.request(&protocol.UnregisterClientRequest{ClientID: m.name, Group: simGroupG}, &memberPending{})
	}
}

// crash: the member's process dies; the broker finds out by its silence.
func (m *GroupMember) crash() {
	m.s.w.Tracef("member %s crashes", m.label)
	m.departed()
	m.alive = false
	m.owned = map[protocol.QueueRef]*ownedQueue{}
	m.arm(time.Time{})
	if m.conn != nil {
		m.conn.closed = true
	}
}

// checkOwners: in clustering mode no queue of a broker group has two
// consuming owners. It also times rebalances: from a member's departure
// until every queue it held is consumed by another member again.
func (s *Sim) checkOwners() {
	if len(s.members) == 0 {
		return
	}
	defer s.timeRebalances()
	clear(s.ownerSeen)
	for _, m := range s.members {
		// What the member's core has started and not stopped or dropped
		// is consumed: the lease is the core's to enforce, not the
		// checker's to assume.
		for ref, q := range m.owned {
			if q.releasing {
				continue
			}
			mq := memberQueue{m.g.idx, ref}
			if other, ok := s.ownerSeen[mq]; ok {
				s.w.Violationf("%s queue %v consumed by two members at once: %s and %s", m.g.spec.Name, ref, other, m.name)
				continue
			}
			s.ownerSeen[mq] = m.name
		}
	}
}

func (s *Sim) timeRebalances() {
	if len(s.waits) == 0 {
		return
	}
	consuming := map[memberQueue]string{}
	for _, m := range s.members {
		for ref, q := range m.owned {
			if !q.releasing && !q.querying {
				consuming[memberQueue{m.g.idx, ref}] = m.name
			}
		}
	}
	keep := s.waits[:0]
	for _, wt := range s.waits {
		done := true
		for _, q := range wt.queues {
			if who, ok := consuming[memberQueue{wt.g, q}]; !ok || who == wt.who {
				done = false
				break
			}
		}
		if done {
			s.res.Rebalance.RecordValue(max(1, s.w.Now().Sub(wt.at).Milliseconds()))
			continue
		}
		keep = append(keep, wt)
	}
	s.waits = keep
}

// liveMember reports whether group g has a member that is alive, has not
// left and can reach the broker.
func (s *Sim) liveMember(g *brokerGroup) bool {
	for _, m := range s.members {
		if m.g == g && m.alive && !m.stopped && !m.cut {
			return true
		}
	}
	return false
}

// unconsumed is how many acknowledged messages the group has not consumed
// (none may be lost in a rebalance), and the first few of them.
func (s *Sim) unconsumed() (int, []string) {
	var missing []string
	for k, sm := range s.sent {
		if sm.acked && !sm.lost && !s.groupConsumed[k] && s.liveMember(sm.g) && sm.g.master.up {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	var first []string
	for _, k := range missing[:min(3, len(missing))] {
		sm := s.sent[k]
		first = append(first, fmt.Sprintf("%q (%s queue %d offset %d)", k, sm.g.spec.Name, sm.queue, sm.qo))
	}
	return len(missing), first
}

// injectGroupFault changes the group: a member process joins, leaves,
// crashes or is partitioned from the brokers for a while.
func (s *Sim) injectGroupFault(kind string) {
	w := s.w
	var live []string
	parts := map[string][]*GroupMember{}
	for _, m := range s.members {
		if m.alive && !m.stopped && !m.cut {
			if parts[m.name] == nil {
				live = append(live, m.name)
			}
			parts[m.name] = append(parts[m.name], m)
		}
	}
	if kind == "join" || len(live) == 0 {
		s.newMember()
		return
	}
	proc := parts[live[w.rng.Intn(len(live))]]
	switch kind {
	case "leave":
		for _, m := range proc {
			m.leave()
		}
	case "crash":
		for _, m := range proc {
			m.crash()
		}
	case "partition":
		d := time.Duration(300+w.rng.Intn(1500)) * time.Millisecond
		w.Tracef("member %s partitioned for %v", proc[0].name, d)
		for _, m := range proc {
			m.cut = true
			if m.conn != nil {
				m.reset(m.conn)
			}
		}
		w.at(w.Now().Add(d), owner{}, func() { s.reconnect(proc) })
	}
}

// reconnect ends a member process's partition: its next heartbeats go
// through.
func (s *Sim) reconnect(proc []*GroupMember) {
	if !proc[0].cut {
		return
	}
	s.w.Tracef("member %s reconnects", proc[0].name)
	for _, m := range proc {
		m.cut = false
	}
}
