package clientgroups

import (
	"reflect"
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

var t0 = time.Unix(1_700_000_000, 0)

func at(d time.Duration) time.Time { return t0.Add(d) }

func groups(names ...string) []protocol.ConsumerGroupInfo {
	var gs []protocol.ConsumerGroupInfo
	for _, n := range names {
		gs = append(gs, protocol.ConsumerGroupInfo{Group: n, MessageModel: protocol.Clustering,
			Subscriptions: []protocol.Subscription{{Topic: "t", Expression: "*"}}})
	}
	return gs
}

// step is one input and what the table must answer and hold after it.
type step struct {
	name    string
	do      func(t *Table) Ready
	notify  []Notice
	members map[string][]string // group -> client ids after the step
	timer   time.Time
}

func TestTable(t *testing.T) {
	hb := func(d time.Duration, id string, conn uint64, gs ...string) func(*Table) Ready {
		return func(t *Table) Ready { return t.Heartbeat(at(d), id, conn, groups(gs...)) }
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"join, beat, second member, unregister", []step{
			{name: "a joins", do: hb(0, "a", 1, "g"), notify: []Notice{{"g", []uint64{1}}},
				members: map[string][]string{"g": {"a"}}, timer: at(MemberExpiry)},
			{name: "a beats: no change", do: hb(30*time.Second, "a", 1, "g"),
				members: map[string][]string{"g": {"a"}}, timer: at(30*time.Second + MemberExpiry)},
			{name: "b joins: both told", do: hb(40*time.Second, "b", 2, "g"), notify: []Notice{{"g", []uint64{1, 2}}},
				members: map[string][]string{"g": {"a", "b"}}, timer: at(30*time.Second + MemberExpiry)},
			{name: "a leaves: b told", do: func(t *Table) Ready { return t.Unregister("a", "g") }, notify: []Notice{{"g", []uint64{2}}},
				members: map[string][]string{"g": {"b"}}, timer: at(40*time.Second + MemberExpiry)},
			{name: "b leaves every group", do: func(t *Table) Ready { return t.Unregister("b", "") },
				members: map[string][]string{}},
		}},
		{"expiry at 120 s, not before", []step{
			{name: "a joins", do: hb(0, "a", 1, "g"), notify: []Notice{{"g", []uint64{1}}}, members: map[string][]string{"g": {"a"}}, timer: at(MemberExpiry)},
			{name: "b joins later", do: hb(60*time.Second, "b", 2, "g"), notify: []Notice{{"g", []uint64{1, 2}}},
				members: map[string][]string{"g": {"a", "b"}}, timer: at(MemberExpiry)},
			{name: "just before a's expiry", do: func(t *Table) Ready { return t.Expire(at(MemberExpiry - time.Millisecond)) },
				members: map[string][]string{"g": {"a", "b"}}, timer: at(MemberExpiry)},
			{name: "a expires, b told", do: func(t *Table) Ready { return t.Expire(at(MemberExpiry)) }, notify: []Notice{{"g", []uint64{2}}},
				members: map[string][]string{"g": {"b"}}, timer: at(60*time.Second + MemberExpiry)},
		}},
		{"a closed connection removes only the members it carried", []step{
			{name: "a on conn 1 in g and h", do: hb(0, "a", 1, "g", "h"), notify: []Notice{{"g", []uint64{1}}, {"h", []uint64{1}}},
				members: map[string][]string{"g": {"a"}, "h": {"a"}}, timer: at(MemberExpiry)},
			{name: "b on conn 2 in g", do: hb(time.Second, "b", 2, "g"), notify: []Notice{{"g", []uint64{1, 2}}},
				members: map[string][]string{"g": {"a", "b"}, "h": {"a"}}, timer: at(MemberExpiry)},
			{name: "b reconnects on conn 3", do: hb(2*time.Second, "b", 3, "g"),
				members: map[string][]string{"g": {"a", "b"}, "h": {"a"}}, timer: at(MemberExpiry)},
			{name: "conn 2 closes late: nothing", do: func(t *Table) Ready { return t.Closed(2) },
				members: map[string][]string{"g": {"a", "b"}, "h": {"a"}}, timer: at(MemberExpiry)},
			{name: "conn 1 closes: a leaves both, b told", do: func(t *Table) Ready { return t.Closed(1) },
				notify: []Notice{{"g", []uint64{3}}}, members: map[string][]string{"g": {"b"}}, timer: at(2*time.Second + MemberExpiry)},
		}},
		{"unregister names one group", []step{
			{name: "a in g and h", do: hb(0, "a", 1, "g", "h"), notify: []Notice{{"g", []uint64{1}}, {"h", []uint64{1}}},
				members: map[string][]string{"g": {"a"}, "h": {"a"}}, timer: at(MemberExpiry)},
			{name: "a leaves h", do: func(t *Table) Ready { return t.Unregister("a", "h") },
				members: map[string][]string{"g": {"a"}}, timer: at(MemberExpiry)},
			{name: "unknown client: nothing", do: func(t *Table) Ready { return t.Unregister("z", "") },
				members: map[string][]string{"g": {"a"}}, timer: at(MemberExpiry)},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tb := New()
			for _, s := range c.steps {
				r := tb.Heartbeat(time.Time{}, "", 0, nil) // a no-op input changes nothing
				if r.Notify != nil || r.Changes != nil {
					t.Fatalf("%s: an empty heartbeat changed something: %+v", s.name, r)
				}
				r = s.do(tb)
				if !reflect.DeepEqual(r.Notify, s.notify) {
					t.Errorf("%s: notify %v, want %v", s.name, r.Notify, s.notify)
				}
				if !r.Timer.Equal(s.timer) {
					t.Errorf("%s: timer %v, want %v", s.name, r.Timer, s.timer)
				}
				got := map[string][]string{}
				for _, g := range tb.sortedGroups() {
					got[g] = tb.Members(g)
				}
				if !reflect.DeepEqual(got, s.members) {
					t.Errorf("%s: members %v, want %v", s.name, got, s.members)
				}
			}
		})
	}
}

func TestTableKeepsSubscriptions(t *testing.T) {
	tb := New()
	tb.Heartbeat(t0, "a", 1, groups("g"))
	info := protocol.ConsumerGroupInfo{Group: "g", MessageModel: protocol.Broadcasting,
		Subscriptions: []protocol.Subscription{{Topic: "u", Expression: "x || y"}}}
	if r := tb.Heartbeat(at(time.Second), "a", 1, []protocol.ConsumerGroupInfo{info}); r.Notify != nil {
		t.Fatalf("a changed subscription is not a member change: %+v", r)
	}
	m := tb.Member("g", "a")
	if m == nil || !reflect.DeepEqual(m.Info, info) || !m.Last.Equal(at(time.Second)) {
		t.Fatalf("member %+v", m)
	}
	if !tb.Has("g") || tb.Has("h") {
		t.Fatal("Has")
	}
}

func TestLocks(t *testing.T) {
	q := func(id int32) protocol.BrokerQueue {
		return protocol.BrokerQueue{Topic: "t", BrokerName: "b", QueueID: id}
	}
	qs := func(ids ...int32) []protocol.BrokerQueue {
		out := []protocol.BrokerQueue{}
		for _, id := range ids {
			out = append(out, q(id))
		}
		return out
	}
	type op struct {
		name   string
		now    time.Duration
		group  string
		client string
		qs     []protocol.BrokerQueue
		unlock bool
		want   []protocol.BrokerQueue // locked (ignored for unlock)
	}
	ops := []op{
		{"a locks 0 and 1", 0, "g", "a", qs(0, 1), false, qs(0, 1)},
		{"b cannot take them, gets 2", time.Second, "g", "b", qs(0, 1, 2), false, qs(2)},
		{"another group is another lock", time.Second, "h", "b", qs(0), false, qs(0)},
		{"a renews 0 at 30 s", 30 * time.Second, "g", "a", qs(0), false, qs(0)},
		{"at 60 s a's 1 expired, 0 not", LockExpiry, "g", "b", qs(0, 1), false, qs(1)},
		{"b unlocks a's 0: nothing", LockExpiry, "g", "b", qs(0), true, nil},
		{"still a's", LockExpiry, "g", "b", qs(0), false, qs()},
		{"a unlocks 0", LockExpiry, "g", "a", qs(0), true, nil},
		{"b takes 0", LockExpiry, "g", "b", qs(0), false, qs(0)},
	}
	tb := New()
	for _, o := range ops {
		if o.unlock {
			tb.Unlock(o.group, o.client, o.qs)
			continue
		}
		if got := tb.Lock(at(o.now), o.group, o.client, o.qs); !reflect.DeepEqual(got, o.want) {
			t.Errorf("%s: locked %v, want %v", o.name, got, o.want)
		}
	}
	tb.Heartbeat(at(LockExpiry), "a", 1, groups("g"))
	tb.Expire(at(LockExpiry + LockExpiry)) // every lock was last taken at 60 s: all expired
	if len(tb.locks) != 0 {
		t.Fatalf("expired locks kept: %v", tb.locks)
	}
}
