package clientgroups

import (
	"slices"
	"sort"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

const (
	// MemberExpiry is how long a member lives without a heartbeat
	// (RocketMQ's channelExpiredTimeout: four of its clients' 30 s beats).
	MemberExpiry = 120 * time.Second
	// LockExpiry is how long a queue lock lives without being renewed
	// (RocketMQ's REBALANCE_LOCK_MAX_LIVE_TIME; its clients renew every 20 s).
	LockExpiry = 60 * time.Second
)

// Member is one live member of a group.
type Member struct {
	ClientID string
	Conn     uint64 // the connection of its last heartbeat
	Info     protocol.ConsumerGroupInfo
	Last     time.Time // its last heartbeat
}

// Notice asks that NOTIFY_CONSUMER_IDS_CHANGED for Group be sent to Conns.
type Notice struct {
	Group string
	Conns []uint64
}

// Change is a member that joined or left (for logs).
type Change struct {
	Group, ClientID string
	Joined          bool
	Expired         bool // left by MemberExpiry, not by leave or close
}

// Ready is what a Table asks of its owner after an input.
type Ready struct {
	Notify  []Notice
	Changes []Change
	// Timer is when Expire should run next (the earliest member expiry);
	// zero when there are no members.
	Timer time.Time
}

type lockKey struct {
	group string
	q     protocol.BrokerQueue
}

type lockHolder struct {
	clientID string
	at       time.Time
}

// Table holds the client-coordinated groups of one broker.
type Table struct {
	groups map[string]map[string]*Member // group -> client id -> member
	locks  map[lockKey]lockHolder
}

// New returns an empty table.
func New() *Table {
	return &Table{groups: map[string]map[string]*Member{}, locks: map[lockKey]lockHolder{}}
}

// Has reports whether group has a live member here.
func (t *Table) Has(group string) bool { return len(t.groups[group]) > 0 }

// Members returns the client ids of group's members, sorted.
func (t *Table) Members(group string) []string {
	ids := make([]string, 0, len(t.groups[group]))
	for id := range t.groups[group] {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Member returns one member (nil if not a member).
func (t *Table) Member(group, clientID string) *Member { return t.groups[group][clientID] }

// Heartbeat records that clientID, on connection conn, is a member of
// each of groups. A group it newly joins is a change.
func (t *Table) Heartbeat(now time.Time, clientID string, conn uint64, groups []protocol.ConsumerGroupInfo) Ready {
	var r Ready
	for _, g := range groups {
		ms := t.groups[g.Group]
		if ms == nil {
			ms = map[string]*Member{}
			t.groups[g.Group] = ms
		}
		m, ok := ms[clientID]
		if !ok {
			m = &Member{ClientID: clientID}
			ms[clientID] = m
			r.Changes = append(r.Changes, Change{Group: g.Group, ClientID: clientID, Joined: true})
		}
		m.Conn, m.Info, m.Last = conn, g, now
	}
	return t.finish(r)
}

// Unregister removes clientID from group at once (from every group if
// group is empty).
func (t *Table) Unregister(clientID, group string) Ready {
	return t.remove(func(g string, m *Member) bool {
		return m.ClientID == clientID && (group == "" || g == group)
	}, false)
}

// Closed removes the members whose last heartbeat came on conn.
func (t *Table) Closed(conn uint64) Ready {
	return t.remove(func(_ string, m *Member) bool { return m.Conn == conn }, false)
}

// Expire removes the members whose last heartbeat is MemberExpiry old,
// and forgets locks past LockExpiry.
func (t *Table) Expire(now time.Time) Ready {
	for k, h := range t.locks {
		if !now.Before(h.at.Add(LockExpiry)) {
			delete(t.locks, k)
		}
	}
	return t.remove(func(_ string, m *Member) bool { return !now.Before(m.Last.Add(MemberExpiry)) }, true)
}

// remove drops the members gone says are gone, in a deterministic order.
func (t *Table) remove(gone func(group string, m *Member) bool, expired bool) Ready {
	var r Ready
	for _, g := range t.sortedGroups() {
		ms := t.groups[g]
		for _, id := range t.Members(g) {
			if gone(g, ms[id]) {
				delete(ms, id)
				r.Changes = append(r.Changes, Change{Group: g, ClientID: id, Expired: expired})
			}
		}
		if len(ms) == 0 {
			delete(t.groups, g)
		}
	}
	return t.finish(r)
}

// finish adds the notices for the groups that changed and the timer.
func (t *Table) finish(r Ready) Ready {
	var changed []string
	for _, c := range r.Changes {
		if !slices.Contains(changed, c.Group) {
			changed = append(changed, c.Group)
		}
	}
	for _, g := range changed {
		var conns []uint64
		for _, id := range t.Members(g) {
			if c := t.groups[g][id].Conn; !slices.Contains(conns, c) {
				conns = append(conns, c)
			}
		}
		if len(conns) > 0 {
			r.Notify = append(r.Notify, Notice{Group: g, Conns: conns})
		}
	}
	for _, ms := range t.groups {
		for _, m := range ms {
			if at := m.Last.Add(MemberExpiry); r.Timer.IsZero() || at.Before(r.Timer) {
				r.Timer = at
			}
		}
	}
	return r
}

func (t *Table) sortedGroups() []string {
	gs := make([]string, 0, len(t.groups))
	for g := range t.groups {
		gs = append(gs, g)
	}
	sort.Strings(gs)
	return gs
}

// Lock locks for clientID each queue of qs in group that is free, expired,
// or already its own (renewed), and returns those it now holds, in the
// order asked.
func (t *Table) Lock(now time.Time, group, clientID string, qs []protocol.BrokerQueue) []protocol.BrokerQueue {
	held := []protocol.BrokerQueue{}
	for _, q := range qs {
		k := lockKey{group: group, q: q}
		h, ok := t.locks[k]
		if ok && h.clientID != clientID && now.Before(h.at.Add(LockExpiry)) {
			continue // another client's, still live
		}
		t.locks[k] = lockHolder{clientID: clientID, at: now}
		held = append(held, q)
	}
	return held
}

// Unlock releases the queues of qs that clientID holds in group.
func (t *Table) Unlock(group, clientID string, qs []protocol.BrokerQueue) {
	for _, q := range qs {
		k := lockKey{group: group, q: q}
		if h, ok := t.locks[k]; ok && h.clientID == clientID {
			delete(t.locks, k)
		}
	}
}
