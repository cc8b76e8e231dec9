package sim

import (
	"bytes"
	"fmt"
	"sort"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// A group member is a simulated push consumer in a consumer group: it
// heartbeats, consumes the queues the broker's RebalanceCoordinator assigns
// it, releases revoked queues (committing first), and holds a lease: it
// stops consuming when its last acknowledged heartbeat was sent more than
// two intervals ago (the broker drops a member after three).

const simGroupG = "simgroup"

type ownedQueue struct {
	next      int64
	querying  bool
	pulling   bool
	releasing bool
	pulls     int
}

type memberPending struct {
	code   protocol.Code
	queue  protocol.QueueRef
	offset int64
	sentAt time.Time
}

// GroupMember is one member.
type GroupMember struct {
	s        *Sim
	num      int
	name     string
	conn     *Conn
	opaque   uint32
	pend     map[uint32]*memberPending
	owned    map[protocol.QueueRef]*ownedQueue
	lastHB   time.Time // send time of the last acknowledged heartbeat
	alive    bool
	cut      bool // partitioned from the broker
	hbArmed  bool
	stopped  bool
	interval time.Duration
	gen      int64 // generation of the last assignment applied
}

func (m *GroupMember) clientNum() int { return m.num }

func (s *Sim) newMember() *GroupMember {
	s.memberSeq++
	m := &GroupMember{s: s, num: 100 + s.memberSeq, name: fmt.Sprintf("m%d", s.memberSeq), pend: map[uint32]*memberPending{},
		owned: map[protocol.QueueRef]*ownedQueue{}, alive: true, interval: s.node.acfg.ConsumerHeartbeatInterval}
	s.members = append(s.members, m)
	s.w.Tracef("member %s joins", m.name)
	m.heartbeat()
	return m
}

func (m *GroupMember) leased() bool {
	return m.alive && !m.lastHB.IsZero() && m.s.w.now.Sub(m.lastHB) < 2*m.interval
}

func (m *GroupMember) ensureConn() bool {
	if m.conn == nil || m.conn.dead() {
		if !m.s.node.up {
			return false
		}
		m.s.conns++
		m.conn = &Conn{s: m.s, id: m.s.conns, node: m.s.node, epoch: m.s.node.epoch, client: m, arrived: map[uint32]time.Time{}}
		m.pend = map[uint32]*memberPending{}
		for _, q := range m.owned {
			q.pulling, q.querying = false, false
		}
	}
	return true
}

func (m *GroupMember) request(req protocol.Request, p *memberPending) {
	if m.cut || !m.ensureConn() {
		return
	}
	m.opaque++
	frame, err := protocol.AppendRequest(nil, m.opaque, 0, req)
	if err != nil {
		m.s.w.Violationf("member %s: encode: %v", m.name, err)
		return
	}
	p.code, p.sentAt = req.RequestCode(), m.s.w.now
	m.pend[m.opaque] = p
	op, conn := m.opaque, m.conn
	m.s.w.at(m.s.w.now.Add(reqTimeout), owner{}, func() {
		if m.pend[op] != nil && conn == m.conn {
			delete(m.pend, op)
			m.conn.closed = true // a silent connection: start over
		}
	})
	conn.send(frame)
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

// heartbeat sends a heartbeat now; the loop sends one every interval.
func (m *GroupMember) heartbeat() {
	if !m.alive || m.stopped {
		return
	}
	m.request(&protocol.HeartbeatRequest{ClientID: m.name, ConsumerGroups: []protocol.ConsumerGroupInfo{{Group: simGroupG,
		Subscriptions: []protocol.Subscription{{Topic: simTopic, Expression: "*"}}, Owned: m.ownedRefs(), Generation: m.gen}}}, &memberPending{})
	if !m.hbArmed {
		m.hbArmed = true
		m.s.w.at(m.s.w.now.Add(m.interval), owner{}, func() {
			m.hbArmed = false
			m.heartbeat()
		})
	}
}

// tick drops everything when the lease ran out.
func (m *GroupMember) tick() {
	if len(m.owned) > 0 && !m.leased() {
		m.s.w.Tracef("member %s: lease expired, dropping %d queues", m.name, len(m.owned))
		m.owned = map[protocol.QueueRef]*ownedQueue{}
	}
}

func (m *GroupMember) onResponse(c *Conn, f *protocol.Frame) {
	// A member that left (Close) acts on nothing any more: an answer to a
	// heartbeat it sent before unregistering must not make it consume.
	if !m.alive || m.cut || m.stopped {
		return
	}
	p := m.pend[f.Opaque]
	if p == nil || c != m.conn {
		if f.Code == protocol.CodeNotifyConsumerIDsChanged && !f.IsResponse() {
			m.heartbeat()
		}
		return
	}
	delete(m.pend, f.Opaque)
	switch p.code {
	case protocol.CodeHeartbeat:
		var r protocol.HeartbeatResponse
		if f.Status != protocol.StatusOK || protocol.DecodeResponse(f, protocol.DefaultLimits(), &r) != nil {
			return
		}
		m.lastHB = p.sentAt
		m.assign(r)
		for _, a := range r.Assignments {
			m.gen = a.Generation
		}
	case protocol.CodeQueryConsumerOffset:
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
		if acked := m.s.groupCommitted[p.queue]; off < acked {
			m.s.w.Violationf("group %s queue %v: committed offset moved backwards: broker says %d, it acknowledged %d", simGroupG, p.queue, off, acked)
		}
		q.next = off
		m.pull(p.queue)
	case protocol.CodeUpdateConsumerOffset:
		if f.Status == protocol.StatusOK && p.offset > m.s.groupCommitted[p.queue] {
			m.s.groupCommitted[p.queue] = p.offset
		}
		if q := m.owned[p.queue]; q != nil && q.releasing {
			delete(m.owned, p.queue) // released: the next heartbeat says so
			m.heartbeat()
		}
	case protocol.CodePullMessage:
		m.onPull(f, p)
	}
}

// assign applies an assignment: release what was revoked (commit first),
// start what is new.
func (m *GroupMember) assign(r protocol.HeartbeatResponse) {
	want := map[protocol.QueueRef]bool{}
	for _, a := range r.Assignments {
		for _, q := range a.Queues {
			if q.Topic == simTopic {
				want[q] = true
			}
		}
	}
	for _, ref := range m.ownedRefs() {
		q := m.owned[ref]
		if !want[ref] && !q.releasing {
			m.s.w.Tracef("member %s releases %v (gen %v)", m.name, ref, r.Assignments[0].Generation)
			q.releasing = true
			if q.querying {
				delete(m.owned, ref)
				continue
			}
			m.request(&protocol.UpdateConsumerOffsetRequest{ConsumerGroup: simGroupG, Topic: ref.Topic, QueueID: ref.QueueID, CommitOffset: q.next},
				&memberPending{queue: ref, offset: q.next})
		}
	}
	refs := make([]protocol.QueueRef, 0, len(want))
	for q := range want {
		refs = append(refs, q)
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].QueueID < refs[j].QueueID })
	for _, ref := range refs {
		if q, ok := m.owned[ref]; ok && !q.pulling && !q.querying && !q.releasing {
			m.pull(ref) // its pull loop died with a connection
		}
		if _, ok := m.owned[ref]; !ok {
			m.s.w.Tracef("member %s acquires %v (gen %v)", m.name, ref, r.Assignments[0].Generation)
			m.owned[ref] = &ownedQueue{querying: true}
			m.request(&protocol.QueryConsumerOffsetRequest{ConsumerGroup: simGroupG, Topic: ref.Topic, QueueID: ref.QueueID}, &memberPending{queue: ref})
		}
	}
}

func (m *GroupMember) pull(ref protocol.QueueRef) {
	q := m.owned[ref]
	if q == nil || q.pulling || q.releasing || q.querying || !m.leased() {
		return
	}
	q.pulling = true
	m.request(&protocol.PullRequest{ConsumerGroup: simGroupG, Topic: ref.Topic, QueueID: ref.QueueID, QueueOffset: q.next,
		MaxMsgNums: 16, SuspendTimeoutMillis: (m.interval / 2).Milliseconds()}, &memberPending{queue: ref, offset: q.next})
}

func (m *GroupMember) onPull(f *protocol.Frame, p *memberPending) {
	q := m.owned[p.queue]
	if q == nil {
		return
	}
	q.pulling = false
	if q.releasing || !m.leased() || p.offset != q.next {
		return // no longer ours, or stale: do not consume
	}
	if f.Status == protocol.StatusOK {
		var r protocol.PullResponse
		if err := protocol.DecodeResponse(f, protocol.DefaultLimits(), &r); err != nil {
			m.s.w.Violationf("member %s: bad pull response: %v", m.name, err)
			return
		}
		for i := range r.Messages {
			msg := &r.Messages[i]
			key := msg.Property(protocol.PropertyKeys)
			if sm := m.s.sent[key]; sm == nil || !bytes.Equal(sm.body, msg.Body) {
				m.s.w.Violationf("member %s: queue %v offset %d: message %q not as sent", m.name, p.queue, msg.QueueOffset, key)
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
	m.s.w.at(m.s.w.now.Add(time.Duration(m.s.w.rng.Intn(500))*time.Microsecond), owner{}, func() { m.pull(p.queue) })
}

// rebalanceWait is a member's departure whose queues are not yet taken over.
type rebalanceWait struct {
	at     time.Time
	queues []protocol.QueueRef
	who    string
}

func (m *GroupMember) departed() {
	if len(m.owned) > 0 {
		m.s.waits = append(m.s.waits, rebalanceWait{at: m.s.w.now, queues: m.ownedRefs(), who: m.name})
	}
}

// leave: the member releases everything and unregisters (a clean Close).
func (m *GroupMember) leave() {
	m.s.w.Tracef("member %s leaves", m.name)
	m.departed()
	m.request(&protocol.UnregisterClientRequest{ClientID: m.name, Group: simGroupG}, &memberPending{})
	m.owned = map[protocol.QueueRef]*ownedQueue{}
	m.stopped = true
}

// crash: the member's process dies; the broker finds out by its silence.
func (m *GroupMember) crash() {
	m.s.w.Tracef("member %s crashes", m.name)
	m.departed()
	m.alive = false
	m.owned = map[protocol.QueueRef]*ownedQueue{}
	if m.conn != nil {
		m.conn.closed = true
	}
}

// checkOwners: in clustering mode no queue has two consuming owners. It
// also times rebalances: from a member's departure until every queue it
// held is consumed by another member again.
func (s *Sim) checkOwners() {
	if len(s.members) == 0 {
		return
	}
	defer s.timeRebalances()
	seen := map[protocol.QueueRef]string{}
	for _, m := range s.members {
		m.tick()
		if !m.leased() {
			continue
		}
		for ref, q := range m.owned {
			if q.releasing {
				continue
			}
			if other, ok := seen[ref]; ok {
				s.w.Violationf("queue %v consumed by two members at once: %s and %s", ref, other, m.name)
				continue
			}
			seen[ref] = m.name
		}
	}
}

func (s *Sim) timeRebalances() {
	if len(s.waits) == 0 {
		return
	}
	consuming := map[protocol.QueueRef]string{}
	for _, m := range s.members {
		if !m.leased() {
			continue
		}
		for ref, q := range m.owned {
			if !q.releasing && !q.querying {
				consuming[ref] = m.name
			}
		}
	}
	keep := s.waits[:0]
	for _, wt := range s.waits {
		done := true
		for _, q := range wt.queues {
			if who, ok := consuming[q]; !ok || who == wt.who {
				done = false
				break
			}
		}
		if done {
			s.res.Rebalance.RecordValue(max(1, s.w.now.Sub(wt.at).Milliseconds()))
			continue
		}
		keep = append(keep, wt)
	}
	s.waits = keep
}

// checkGroupConsumedAll: with a live member at the end, every acknowledged
// message was consumed by the group (none lost in a rebalance).
func (s *Sim) checkGroupConsumedAll() {
	live := false
	for _, m := range s.members {
		live = live || (m.alive && !m.stopped && !m.cut)
	}
	if !live || !s.node.up {
		return
	}
	missing := 0
	for _, k := range sortedSent(s.sent) {
		sm := s.sent[k]
		if sm.acked && !sm.lost && !s.groupConsumed[k] {
			if missing++; missing <= 3 {
				s.w.Violationf("acknowledged message %q (queue %d offset %d) never consumed by the group", k, sm.queue, sm.qo)
			}
		}
	}
}

// injectGroupFault changes the group: a member joins, leaves, crashes or is
// partitioned from the broker for a while.
func (s *Sim) injectGroupFault(kind string) {
	w := s.w
	var live []*GroupMember
	for _, m := range s.members {
		if m.alive && !m.stopped && !m.cut {
			live = append(live, m)
		}
	}
	switch {
	case kind == "join" || len(live) == 0:
		s.newMember()
	case kind == "leave":
		live[w.rng.Intn(len(live))].leave()
	case kind == "crash":
		live[w.rng.Intn(len(live))].crash()
	case kind == "partition":
		m := live[w.rng.Intn(len(live))]
		d := time.Duration(300+w.rng.Intn(1500)) * time.Millisecond
		w.Tracef("member %s partitioned for %v", m.name, d)
		m.cut = true
		if m.conn != nil {
			m.conn.closed = true
		}
		w.at(w.now.Add(d), owner{}, func() {
			m.cut = false
			w.Tracef("member %s reconnects", m.name)
			m.heartbeat()
		})
	}
}
