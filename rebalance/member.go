package rebalance

import (
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// leaseIntervals: a member consumes its queues only while its last answered
// heartbeat was sent at most this many heartbeat intervals ago. The
// coordinator waits as long after a broker restart before it grants a queue
// nobody reports, and removes a silent member only after timeoutIntervals,
// so a member stops before its queues move.
const leaseIntervals = 2

// MemberConfig is what a Member needs from its consumer.
type MemberConfig struct {
	// Group is the consumer group's name: the heartbeat answer's assignment
	// for this group is the one applied.
	Group string
	// Interval is the heartbeat interval until the broker's first answer
	// says otherwise; 0 means 1 s. The lease is two intervals.
	Interval time.Duration
	// Consumes reports whether the member consumes a topic's queues (its
	// subscriptions and the group's retry topic); an assigned queue of
	// another topic is listed in MemberReady.Ignored and never started.
	// nil consumes every topic.
	Consumes func(topic string) bool
	// KeepRevoked plants a bug for the simulator to catch: a revoked queue
	// is reported released at once (it leaves Owned) but never stopped, so
	// the member keeps consuming it while its next owner starts.
	KeepRevoked bool
}

// MemberReady is what one input asks the member's owner to do. The owner
// carries out Drop, Stop and Start, in that order, before the next input.
type MemberReady struct {
	// Start are queues newly granted: consume each from its committed
	// offset.
	Start []protocol.QueueRef
	// Stop are queues revoked (or, after Close, every queue): stop pulling,
	// let the handler calls in flight finish (bounded), commit the queue's
	// offset, then call Released. The queue stays in Owned until then, so
	// the broker keeps it from its next owner.
	Stop []protocol.QueueRef
	// Drop are queues whose lease ran out: stop consuming them at once
	// (the broker may give them to another member an interval later), then
	// call Released. Any commit now is best effort.
	Drop []protocol.QueueRef
	// Ignored are assigned queues of topics the member does not consume.
	Ignored []protocol.QueueRef
	// Heartbeat asks to send a heartbeat now, listing Owned and echoing
	// Generation, and to call HeartbeatSent (then HeartbeatFailed if it
	// could not be sent) before any other input. The member waits for the
	// heartbeat's end: the owner must report HeartbeatAnswered,
	// HeartbeatFailed (its timeout included) or ConnectionLost.
	Heartbeat bool
	// Owned are the queues the member holds (consuming, stopping or
	// dropping): the heartbeat's ConsumerGroupInfo.Owned. Set with
	// Heartbeat.
	Owned []protocol.QueueRef
	// Generation is that of the last assignment applied: the heartbeat's
	// ConsumerGroupInfo.Generation, and the generation Start belongs to.
	Generation int64
	// Deadline, if not zero, is when to call Tick: the next heartbeat, or
	// the first instant the lease is over while the member consumes. Each
	// Ready's Deadline replaces the one before.
	Deadline time.Time
}

// queueState is where a held queue is in its life.
type queueState uint8

const (
	consuming queueState = iota
	stopping             // revoked or closing: committing, until Released
	dropping             // lease lost: stopping at once, until Released
	kept                 // KeepRevoked: revoked, hidden from Owned, still consuming
)

// Member is one consumer's side of the group protocol: its lease, the
// assignments it applies, the generation it echoes and when it heartbeats.
// It is not safe for concurrent use.
type Member struct {
	cfg      MemberConfig
	interval time.Duration
	queues   map[protocol.QueueRef]queueState
	gen      int64
	lastOK   time.Time // send time of the last answered heartbeat
	inFlight bool      // one heartbeat at a time, so answers come in order
	sentAt   time.Time // of the heartbeat in flight
	next     time.Time // the next regular heartbeat (zero: at once)
	wanted   bool      // heartbeat as soon as none is in flight
	closed   bool
	ready    MemberReady // being built by the current input
}

// NewMember returns a member that has not joined yet: its first Tick asks
// for the joining heartbeat.
func NewMember(cfg MemberConfig) *Member {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	return &Member{cfg: cfg, interval: cfg.Interval, queues: map[protocol.QueueRef]queueState{}}
}

// Generation returns the generation of the last assignment applied (0
// before the first).
func (m *Member) Generation() int64 { return m.gen }

// Tick is the timer MemberReady.Deadline asked for (calling it at other
// times is harmless): it drops every queue when the lease ran out and asks
// for the regular heartbeat when it is due.
func (m *Member) Tick(now time.Time) MemberReady { return m.take(now) }

// Notified: the broker sent NOTIFY_CONSUMER_IDS_CHANGED; heartbeat now (or
// as soon as the one in flight is answered) to learn the new assignment.
func (m *Member) Notified(now time.Time) MemberReady {
	if !m.closed {
		m.wanted = true
	}
	return m.take(now)
}

// HeartbeatSent records that the heartbeat MemberReady.Heartbeat asked for
// left at now: the lease of its answer counts from now.
func (m *Member) HeartbeatSent(now time.Time) MemberReady {
	if !m.closed {
		m.inFlight, m.sentAt, m.wanted = true, now, false
	}
	return m.take(now)
}

// HeartbeatFailed: the heartbeat in flight got an error or no answer. The
// queues keep going until the lease runs out; the next heartbeat follows an
// interval later.
func (m *Member) HeartbeatFailed(now time.Time) MemberReady {
	if m.inFlight && !m.closed {
		m.inFlight = false
		m.next = now.Add(m.interval)
	}
	return m.take(now)
}

// ConnectionLost: the connection the heartbeat in flight went over is gone,
// so its answer will never come. The member heartbeats again at once, on a
// new connection (where the broker sends its notifications from then on);
// if that cannot be sent either, HeartbeatFailed puts the next an interval
// later. The queues keep their lease.
func (m *Member) ConnectionLost(now time.Time) MemberReady {
	if m.inFlight && !m.closed {
		m.inFlight, m.wanted = false, true
	}
	return m.take(now)
}

// HeartbeatAnswered applies the answer to the heartbeat sent at sentAt: it
// renews the lease from sentAt, adopts the broker's interval and applies
// the group's assignment (no assignment for the group revokes every
// queue). An answer to a heartbeat not in flight (failed, lost with its
// connection, or sent before Close) changes nothing.
func (m *Member) HeartbeatAnswered(now, sentAt time.Time, resp protocol.HeartbeatResponse) MemberReady {
	if !m.inFlight || m.closed || !sentAt.Equal(m.sentAt) {
		return m.take(now)
	}
	m.inFlight = false
	m.lastOK = sentAt
	if resp.HeartbeatIntervalMillis > 0 {
		m.interval = time.Duration(resp.HeartbeatIntervalMillis) * time.Millisecond
	}
	m.next = now.Add(m.interval)
	var target []protocol.QueueRef
	for _, a := range resp.Assignments {
		if a.Group == m.cfg.Group {
			m.gen, target = a.Generation, a.Queues
		}
	}
	m.apply(now, target)
	return m.take(now)
}

// apply makes the held queues follow an assignment: revoked queues stop,
// new ones start. A queue still stopping is not restarted: it comes back in
// an answer after its release.
func (m *Member) apply(now time.Time, target []protocol.QueueRef) {
	want := make(map[protocol.QueueRef]bool, len(target))
	for _, q := range target {
		if m.cfg.Consumes != nil && !m.cfg.Consumes(q.Topic) {
			m.ready.Ignored = append(m.ready.Ignored, q)
			continue
		}
		want[q] = true
	}
	for q, st := range m.queues {
		switch {
		case st == consuming && !want[q] && m.cfg.KeepRevoked:
			m.queues[q] = kept
		case st == consuming && !want[q]:
			m.queues[q] = stopping
			m.ready.Stop = append(m.ready.Stop, q)
		case st == kept && want[q]:
			m.queues[q] = consuming // it never stopped
		}
	}
	// An answer to a heartbeat sent more than a lease ago grants nothing:
	// the lease it would start under is already over.
	if m.expired(now) {
		return
	}
	for q := range want {
		if _, held := m.queues[q]; !held {
			m.queues[q] = consuming
			m.ready.Start = append(m.ready.Start, q)
		}
	}
}

// Released: the owner finished stopping q (Stop or Drop). A revoked queue's
// release is reported at once with a heartbeat, so that the broker can give
// it to its next owner.
func (m *Member) Released(now time.Time, q protocol.QueueRef) MemberReady {
	switch st, ok := m.queues[q]; {
	case ok && st == stopping:
		delete(m.queues, q)
		if !m.closed {
			m.wanted = true
		}
	case ok && st == dropping:
		delete(m.queues, q)
	}
	return m.take(now)
}

// Close: the member leaves. Every queue it consumes stops (commit, then
// Released); afterwards it asks for no heartbeat and applies no answer. The
// owner then unregisters from the group.
func (m *Member) Close(now time.Time) MemberReady {
	if !m.closed {
		m.closed = true
		for q, st := range m.queues {
			if st == consuming || st == kept {
				m.queues[q] = stopping
				m.ready.Stop = append(m.ready.Stop, q)
			}
		}
	}
	return m.take(now)
}

// expired reports that the lease is over: the last answered heartbeat was
// sent more than leaseIntervals intervals before now.
func (m *Member) expired(now time.Time) bool {
	return !m.lastOK.IsZero() && now.Sub(m.lastOK) > leaseIntervals*m.interval
}

// take finishes the current input: the lease check (every input makes it,
// so an owner that ticks late still drops in time), the heartbeat if due,
// and the next deadline.
func (m *Member) take(now time.Time) MemberReady {
	busy := false
	if !m.closed {
		for q, st := range m.queues {
			if st != consuming && st != kept {
				continue
			}
			if m.expired(now) {
				m.queues[q] = dropping
				m.ready.Drop = append(m.ready.Drop, q)
			} else {
				busy = true
			}
		}
	}
	r := m.ready
	m.ready = MemberReady{}
	r.Generation = m.gen
	if !m.closed && !m.inFlight && (m.wanted || !now.Before(m.next)) {
		r.Heartbeat = true
		r.Owned = m.owned()
	}
	r.Deadline = m.deadline(busy, r.Heartbeat)
	sortRefs(r.Start)
	sortRefs(r.Stop)
	sortRefs(r.Drop)
	sortRefs(r.Ignored)
	return r
}

// deadline is the next instant Tick has something to do: the regular
// heartbeat (unless one is in flight or asked for now: HeartbeatSent will
// tell) and, while the member consumes, the first instant past the lease.
func (m *Member) deadline(busy, heartbeat bool) time.Time {
	if m.closed {
		return time.Time{}
	}
	var d time.Time
	if !m.inFlight && !heartbeat {
		d = m.next
	}
	if busy {
		end := m.lastOK.Add(leaseIntervals*m.interval + time.Nanosecond)
		if d.IsZero() || end.Before(d) {
			d = end
		}
	}
	return d
}

// owned lists the queues the member holds, for the heartbeat. A kept queue
// (KeepRevoked) is the bug: consumed, yet reported released.
func (m *Member) owned() []protocol.QueueRef {
	out := make([]protocol.QueueRef, 0, len(m.queues))
	for q, st := range m.queues {
		if st != kept {
			out = append(out, q)
		}
	}
	sortRefs(out)
	return out
}
