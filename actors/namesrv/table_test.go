package namesrv

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// reg is a registration of group g, brokerId id at addr, data version
// (1, counter), with topics "name:read/write" (perm 6).
func reg(g string, id int64, addr, role string, counter int64, conn uint64, topics ...string) *Registration {
	r := &Registration{Conn: conn}
	r.BrokerIdentity = protocol.BrokerIdentity{ClusterName: "c1", BrokerName: g, BrokerID: id, BrokerAddr: addr}
	r.BrokerRole, r.HAServerAddr = role, addr+"-ha"
	r.DataVersion = protocol.DataVersion{Timestamp: 1, Counter: counter}
	for _, s := range topics {
		var name string
		var rq, wq int32
		fmt.Sscanf(strings.Replace(s, ":", " ", 1), "%s %d/%d", &name, &rq, &wq)
		r.Topics = append(r.Topics, protocol.TopicConfig{Topic: name, ReadQueueNums: rq, WriteQueueNums: wq, Perm: 6})
	}
	return r
}

// step is one input to the table and what must hold after it.
type step struct {
	at      int // ms after t0
	do      func(t *Table, now time.Time) string
	want    string // what do returned ("" to skip the check)
	route   string // route of topic "orders" as routeString gives it ("" to skip)
	bumped  bool   // the version must have grown (else it must not have)
	noCheck bool   // skip the version check
}

func register(r *Registration) func(*Table, time.Time) string {
	return func(t *Table, now time.Time) string {
		resp, err := t.Register(r, now)
		if err != nil {
			return "error: " + err.Error()
		}
		return fmt.Sprintf("changed=%v stale=%v lease=%d master=%s", resp.Changed, resp.Stale, resp.LeaseMillis, resp.MasterAddr)
	}
}

func heartbeat(g string, id int64, addr string, counter int64, conn uint64) func(*Table, time.Time) string {
	return func(t *Table, now time.Time) string {
		hb := &protocol.BrokerHeartbeatRequest{BrokerIdentity: protocol.BrokerIdentity{ClusterName: "c1", BrokerName: g, BrokerID: id, BrokerAddr: addr},
			DataVersion: protocol.DataVersion{Timestamp: 1, Counter: counter}}
		return fmt.Sprintf("unknown=%v", t.Heartbeat(hb, conn, now).Unknown)
	}
}

// expired renders the brokers an expiry returned as "group/id@addr".
func expired(ids []protocol.BrokerIdentity) string {
	var out []string
	for _, id := range ids {
		out = append(out, fmt.Sprintf("%s/%d@%s", id.BrokerName, id.BrokerID, id.BrokerAddr))
	}
	return "[" + strings.Join(out, " ") + "]"
}

func expire(t *Table, now time.Time) string { return expired(t.Expire(now)) }

func closeConn(conn uint64) func(*Table, time.Time) string {
	return func(t *Table, now time.Time) string { return expired(t.ConnClosed(conn, now)) }
}

func unregister(g string, id int64, addr string) func(*Table, time.Time) string {
	return func(t *Table, now time.Time) string {
		return fmt.Sprint(t.Unregister(protocol.BrokerIdentity{ClusterName: "c1", BrokerName: g, BrokerID: id, BrokerAddr: addr}, now))
	}
}

// routeString renders a route as "group:read/write/perm[id=addr+ ...]"
// per group (+ alive, - dead), or "none".
func routeString(t *Table, topic string) string {
	rd, ok := t.Route(topic)
	if !ok {
		return "none"
	}
	var parts []string
	for _, q := range rd.QueueDatas {
		var bs []string
		for _, b := range rd.Brokers {
			if b.BrokerName == q.BrokerName {
				alive := "-"
				if b.Alive {
					alive = "+"
				}
				bs = append(bs, fmt.Sprintf("%d=%s%s", b.BrokerID, b.BrokerAddr, alive))
			}
		}
		parts = append(parts, fmt.Sprintf("%s:%d/%d/%d[%s]", q.BrokerName, q.ReadQueueNums, q.WriteQueueNums, q.Perm, strings.Join(bs, " ")))
	}
	return strings.Join(parts, " ")
}

func runSteps(t *testing.T, steps []step) *Table {
	t.Helper()
	tb := New(Config{})
	for i, s := range steps {
		before := tb.Version()
		got := s.do(tb, at(s.at))
		if s.want != "" && got != s.want {
			t.Errorf("step %d: got %q, want %q", i, got, s.want)
		}
		if s.route != "" {
			if r := routeString(tb, "orders"); r != s.route {
				t.Errorf("step %d: route %q, want %q", i, r, s.route)
			}
		}
		if !s.noCheck && (tb.Version() > before) != s.bumped {
			t.Errorf("step %d: version %d -> %d, bumped want %v", i, before, tb.Version(), s.bumped)
		}
		if tb.Version() < before {
			t.Fatalf("step %d: version went back from %d to %d", i, before, tb.Version())
		}
	}
	return tb
}

func TestRegistration(t *testing.T) {
	cases := []struct {
		name  string
		steps []step
	}{
		{"a master registers its topics", []step{
			{do: register(reg("a", 0, "h1", "ASYNC_MASTER", 1, 1, "orders:8/8", "x:1/1")), want: "changed=true stale=false lease=5000 master=h1",
				route: "a:8/8/6[0=h1+]", bumped: true},
		}},
		{"an unchanged registration is a heartbeat", []step{
			{do: register(reg("a", 0, "h1", "ASYNC_MASTER", 1, 1, "orders:8/8")), bumped: true},
			{at: 1000, do: register(reg("a", 0, "h1", "ASYNC_MASTER", 1, 1, "orders:8/8")), want: "changed=false stale=false lease=5000 master=h1"},
		}},
		{"topics at an unchanged data version are not taken", []step{
			{do: register(reg("a", 0, "h1", "ASYNC_MASTER", 1, 1, "orders:8/8")), bumped: true},
			{do: register(reg("a", 0, "h1", "ASYNC_MASTER", 1, 1, "orders:2/2")), route: "a:8/8/6[0=h1+]"},
			{do: register(reg("a", 0, "h1", "ASYNC_MASTER", 2, 1, "orders:2/2")), route: "a:2/2/6[0=h1+]", bumped: true},
		}},
		{"an older data version is ignored", []step{
			{do: register(reg("a", 0, "h1", "ASYNC_MASTER", 5, 1, "orders:8/8")), bumped: true},
			{do: register(reg("a", 0, "h1", "ASYNC_MASTER", 4, 1, "orders:1/1")), want: "changed=false stale=true lease=5000 master=h1",
				route: "a:8/8/6[0=h1+]"},
			{do: register(reg("a", 0, "h9", "ASYNC_MASTER", 4, 2, "orders:1/1")), want: "changed=false stale=true lease=5000 master=h1",
				route: "a:8/8/6[0=h1+]"},
		}},
		{"a slave's topics are not taken", []step{
			{do: register(reg("a", 1, "h2", "SLAVE", 1, 1, "orders:8/8")), want: "changed=true stale=false lease=5000 master=", route: "none", bumped: true},
			{do: register(reg("a", 0, "h1", "ASYNC_MASTER", 1, 2, "orders:4/4")), route: "a:4/4/6[0=h1+ 1=h2+]", bumped: true},
		}},
		{"a re-registration at a new address replaces the entry", []step{
			{do: register(reg("a", 0, "h1", "ASYNC_MASTER", 1, 1, "orders:8/8")), bumped: true},
			{at: 10, do: register(reg("a", 0, "h1b", "ASYNC_MASTER", 2, 2, "orders:8/8")), want: "changed=true stale=false lease=5000 master=h1b",
				route: "a:8/8/6[0=h1b+]", bumped: true},
			// The old connection closing does not touch the new entry.
			{at: 20, do: closeConn(1), want: "[]", route: "a:8/8/6[0=h1b+]"},
			// Nor does a late UNREGISTER from the old address.
			{at: 30, do: unregister("a", 0, "h1"), want: "false", route: "a:8/8/6[0=h1b+]"},
		}},
		{"invalid registrations are refused", []step{
			{do: register(reg("", 0, "h1", "ASYNC_MASTER", 1, 1)), want: "error: namesrv: invalid registration: brokerName missing"},
			{do: register(reg("a", -1, "h1", "ASYNC_MASTER", 1, 1)), want: "error: namesrv: invalid registration: brokerId -1 is negative"},
			{do: register(reg("a", 0, "h1", "ASYNC_MASTER", 1, 1, "bad!x:1/1")), want: `error: namesrv: invalid registration: protocol: message illegal: topic "bad!x": character '!' not allowed (use A-Z a-z 0-9 _ - % |)`},
			{do: register(reg("a", 0, "h1", "ASYNC_MASTER", 1, 1, "orders:2000/1")), want: `error: namesrv: invalid registration: topic "orders": 2000 read and 1 write queues, want 0..1024`},
			{do: register(reg("a", 0, "h1", "ASYNC_MASTER", 1, 1, "%RETRY%g:1/1")), want: "changed=true stale=false lease=5000 master=h1", bumped: true},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runSteps(t, c.steps) })
	}
}

func TestLeases(t *testing.T) {
	cases := []struct {
		name  string
		steps []step
	}{
		{"a lease ends without heartbeats", []step{
			{do: register(reg("a", 0, "h1", "ASYNC_MASTER", 1, 1, "orders:8/8")), bumped: true},
			{at: 4999, do: expire, want: "[]", route: "a:8/8/6[0=h1+]"},
			{at: 5000, do: expire, want: "[a/0@h1]", route: "none", bumped: true},
		}},
		{"heartbeats renew the lease", []step{
			{do: register(reg("a", 0, "h1", "ASYNC_MASTER", 1, 1, "orders:8/8")), bumped: true},
			{at: 4000, do: heartbeat("a", 0, "h1", 1, 1), want: "unknown=false"},
			{at: 8999, do: expire, want: "[]"},
			{at: 9000, do: expire, want: "[a/0@h1]", bumped: true},
			// An expired broker's heartbeat is refused: it must register.
			{at: 9001, do: heartbeat("a", 0, "h1", 1, 1), want: "unknown=true"},
			{at: 9002, do: register(reg("a", 0, "h1", "ASYNC_MASTER", 1, 1, "orders:8/8")), want: "changed=true stale=false lease=5000 master=h1",
				route: "a:8/8/6[0=h1+]", bumped: true},
		}},
		{"a heartbeat at another data version asks for a registration", []step{
			{do: register(reg("a", 0, "h1", "ASYNC_MASTER", 1, 1, "orders:8/8")), bumped: true},
			{do: heartbeat("a", 0, "h1", 2, 1), want: "unknown=true"},
			{do: heartbeat("b", 0, "h1", 1, 1), want: "unknown=true"},
		}},
		{"the broker's own lease", []step{
			{do: func(t *Table, now time.Time) string {
				r := reg("a", 0, "h1", "ASYNC_MASTER", 1, 1, "orders:8/8")
				r.HeartbeatTimeoutMillis = 1500
				return register(r)(t, now)
			}, want: "changed=true stale=false lease=1500 master=h1", bumped: true},
			{at: 1500, do: expire, want: "[a/0@h1]", route: "none", bumped: true},
		}},
		{"a huge lease is capped", []step{
			{do: func(t *Table, now time.Time) string {
				r := reg("a", 0, "h1", "ASYNC_MASTER", 1, 1, "orders:8/8")
				r.HeartbeatTimeoutMillis = 1 << 62
				return register(r)(t, now)
			}, want: "changed=true stale=false lease=600000 master=h1", bumped: true},
			{at: 599999, do: expire, want: "[]"},
			{at: 600000, do: expire, want: "[a/0@h1]", route: "none", bumped: true},
		}},
		{"a closed connection expires at once", []step{
			{do: register(reg("a", 0, "h1", "ASYNC_MASTER", 1, 7, "orders:8/8")), bumped: true},
			{do: register(reg("b", 0, "h2", "ASYNC_MASTER", 1, 8, "orders:4/4")), bumped: true},
			{at: 1, do: closeConn(7), want: "[a/0@h1]", route: "b:4/4/6[0=h2+]", bumped: true},
			{at: 2, do: closeConn(7), want: "[]"},
		}},
		{"unregister removes the broker, and its empty group", []step{
			{do: register(reg("a", 0, "h1", "ASYNC_MASTER", 1, 1, "orders:8/8")), bumped: true},
			{do: register(reg("a", 1, "h2", "SLAVE", 1, 2)), bumped: true},
			{at: 1, do: unregister("a", 0, "h1"), want: "true", route: "a:8/0/4[1=h2+]", bumped: true},
			{at: 2, do: unregister("a", 1, "h2"), want: "true", route: "none", bumped: true},
			{at: 3, do: unregister("a", 1, "h2"), want: "false"},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runSteps(t, c.steps) })
	}
}

// TestMasterLossAndReturn: a group whose master is gone stays readable
// (its slave serves reads) and leaves the writable queues; the master's
// return restores them, and every change grows the version.
func TestMasterLossAndReturn(t *testing.T) {
	tb := runSteps(t, []step{
		{do: register(reg("a", 0, "h1", "SYNC_MASTER", 1, 1, "orders:8/8")), bumped: true},
		{do: register(reg("a", 1, "h2", "SLAVE", 1, 2)), want: "changed=true stale=false lease=5000 master=h1", bumped: true},
		{do: register(reg("b", 0, "h3", "ASYNC_MASTER", 1, 3, "orders:4/4")), bumped: true},
		{at: 1000, do: heartbeat("a", 1, "h2", 1, 2), want: "unknown=false"},
		{at: 1000, do: heartbeat("b", 0, "h3", 1, 3), want: "unknown=false"},
		{at: 5000, do: expire, want: "[a/0@h1]", route: "a:8/0/4[0=h1- 1=h2+] b:4/4/6[0=h3+]", bumped: true},
		{at: 5001, do: register(reg("a", 0, "h1", "SYNC_MASTER", 1, 4, "orders:8/8")), want: "changed=true stale=false lease=5000 master=h1",
			route: "a:8/8/6[0=h1+ 1=h2+] b:4/4/6[0=h3+]", bumped: true},
		// A master demoted to a slave (role SLAVE at brokerId 0) is no master.
		{at: 5002, do: register(reg("a", 0, "h1", "SLAVE", 2, 4)), route: "a:8/0/4[0=h1+ 1=h2+] b:4/4/6[0=h3+]", bumped: true},
	})
	if rd, _ := tb.Route("orders"); rd.QueueDatas[0].WriteQueueNums != 0 {
		t.Errorf("a demoted master's group is writable: %+v", rd.QueueDatas[0])
	}
}

func TestDeleteTopic(t *testing.T) {
	tb := runSteps(t, []step{
		{do: register(reg("a", 0, "h1", "ASYNC_MASTER", 1, 1, "orders:8/8", "keep:1/1")), bumped: true},
		{do: register(reg("b", 0, "h2", "ASYNC_MASTER", 1, 2, "orders:4/4")), bumped: true},
		{at: 1, do: func(t *Table, now time.Time) string { return fmt.Sprint(t.DeleteTopic("orders", "other", now)) }, want: "false"},
		{at: 2, do: func(t *Table, now time.Time) string { return fmt.Sprint(t.DeleteTopic("orders", "", now)) }, want: "true", route: "none", bumped: true},
		// A heartbeat at the same data version does not bring it back...
		{at: 3, do: register(reg("a", 0, "h1", "ASYNC_MASTER", 1, 1, "orders:8/8", "keep:1/1")), route: "none"},
		// ...a master that still has it at a newer version does.
		{at: 4, do: register(reg("a", 0, "h1", "ASYNC_MASTER", 2, 1, "orders:8/8", "keep:1/1")), route: "a:8/8/6[0=h1+]", bumped: true},
	})
	if got := tb.Topics(); !slices.Equal(got, []string{"keep", "orders"}) {
		t.Errorf("topics %v", got)
	}
}

// TestVersionMonotonic: the version grows at each change and never goes
// back, even when the clock does, and a new table started later begins
// above an older table's versions (a restarted name server).
func TestVersionMonotonic(t *testing.T) {
	tb := New(Config{})
	var last int64
	for i, ms := range []int{100, 50, 50, 0, 200} {
		if _, err := tb.Register(reg("a", 0, fmt.Sprintf("h%d", i), "ASYNC_MASTER", int64(i+1), 1, "orders:1/1"), at(ms)); err != nil {
			t.Fatal(err)
		}
		if tb.Version() <= last {
			t.Fatalf("register %d at %d ms: version %d after %d", i, ms, tb.Version(), last)
		}
		last = tb.Version()
	}
	restarted := New(Config{})
	if _, err := restarted.Register(reg("a", 0, "h", "ASYNC_MASTER", 1, 1, "orders:1/1"), at(1000)); err != nil {
		t.Fatal(err)
	}
	if restarted.Version() <= last {
		t.Fatalf("restarted table's version %d not above %d", restarted.Version(), last)
	}
	rd, _ := restarted.Route("orders")
	if rd.Version != restarted.Version() {
		t.Fatalf("route version %d, table %d", rd.Version, restarted.Version())
	}
}

func TestDeadlineAndCluster(t *testing.T) {
	tb := New(Config{Lease: 2 * time.Second})
	if _, ok := tb.Deadline(); ok {
		t.Fatal("deadline with no broker")
	}
	tb.Register(reg("b", 0, "h2", "ASYNC_MASTER", 1, 1, "orders:1/1"), at(0))
	tb.Register(reg("a", 1, "h1s", "SLAVE", 1, 2), at(500))
	tb.Register(reg("a", 0, "h1", "ASYNC_MASTER", 1, 3, "orders:1/1", "y:1/1"), at(700))
	if d, ok := tb.Deadline(); !ok || !d.Equal(at(2000)) {
		t.Fatalf("deadline %v %v", d, ok)
	}
	tb.Expire(at(2000))
	if d, ok := tb.Deadline(); !ok || !d.Equal(at(2500)) {
		t.Fatalf("deadline after expiry %v %v", d, ok)
	}
	var rows []string
	for _, b := range tb.Cluster().Brokers {
		rows = append(rows, fmt.Sprintf("%s/%s/%d %s alive=%v since=%d topics=%d", b.ClusterName, b.BrokerName, b.BrokerID, b.BrokerAddr,
			b.Alive, b.LiveSinceMs-t0.UnixMilli(), b.Topics))
	}
	want := []string{"c1/a/0 h1 alive=true since=700 topics=2", "c1/a/1 h1s alive=true since=500 topics=0", "c1/b/0 h2 alive=false since=0 topics=1"}
	if !slices.Equal(rows, want) {
		t.Errorf("cluster\n%s\nwant\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
	if _, err := tb.Register(reg("a", 0, "", "ASYNC_MASTER", 1, 1), at(1)); !errors.Is(err, ErrInvalid) {
		t.Errorf("no address: %v", err)
	}
}

func TestDataVersionOrder(t *testing.T) {
	cases := []struct {
		a, b protocol.DataVersion
		want int
	}{
		{protocol.DataVersion{Timestamp: 1, Counter: 5}, protocol.DataVersion{Timestamp: 1, Counter: 5}, 0},
		{protocol.DataVersion{Timestamp: 1, Counter: 4}, protocol.DataVersion{Timestamp: 1, Counter: 5}, -1},
		{protocol.DataVersion{Timestamp: 2, Counter: 0}, protocol.DataVersion{Timestamp: 1, Counter: 9}, 1}, // a restart wins
	}
	for _, c := range cases {
		if got := c.a.Compare(c.b); got != c.want {
			t.Errorf("%v vs %v: %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// TestNewerMasterEpochWins is RocketMQ #6316: after a failover in controller
// mode, the deposed master may still be alive (its lease ran out, its
// controllers unreachable) and its process may have started later than
// the new master's, so its data version is the newer one. The newer master
// epoch's claim to brokerId 0 wins anyway, and the old one's comes back
// Stale, not over it.
func TestNewerMasterEpochWins(t *testing.T) {
	epoch := func(r *Registration, e int32, ts int64) *Registration {
		r.MasterEpoch, r.DataVersion.Timestamp = e, ts
		return r
	}
	runSteps(t, []step{
		{do: register(epoch(reg("a", 0, "old", "SYNC_MASTER", 1, 1, "orders:8/8"), 1, 900)), bumped: true},
		{at: 10, do: register(epoch(reg("a", 0, "new", "SYNC_MASTER", 1, 2, "orders:8/8"), 2, 100)),
			want: "changed=true stale=false lease=5000 master=new", route: "a:8/8/6[0=new+]", bumped: true},
		{at: 20, do: register(epoch(reg("a", 0, "old", "SYNC_MASTER", 5, 1, "orders:8/8"), 1, 900)),
			want: "changed=false stale=true lease=5000 master=new", route: "a:8/8/6[0=new+]"},
		{at: 30, do: heartbeat("a", 0, "old", 1, 1), want: "unknown=true"},
	})
}
