package register

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func testConfig(servers ...string) Config {
	return Config{
		Identity:     protocol.BrokerIdentity{ClusterName: "c", BrokerName: "a", BrokerAddr: "h:10911"},
		HAServerAddr: "h:10912", Role: "ASYNC_MASTER", NameServers: servers,
		Version: protocol.DataVersion{Timestamp: 7},
	}
}

func topics(names ...string) []protocol.TopicConfig {
	var out []protocol.TopicConfig
	for _, n := range names {
		out = append(out, protocol.TopicConfig{Topic: n, ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6})
	}
	return out
}

// driver feeds a Registrar and renders its outputs as one line per action:
// "dial A", "A REG v7.0 id0 ASYNC_MASTER [t1 t2]", "A HB v7.0", "A UNREG
// id0", "close A", "done". It remembers each call's opaque so a test
// answers by name server.
type driver struct {
	t     *testing.T
	r     *Registrar
	now   time.Time
	links map[string]uint64
	calls map[string][]uint32 // each call's opaque per name server, in order
	next  uint64
}

func newDriver(t *testing.T, cfg Config) *driver {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &driver{t: t, r: r, now: t0, links: map[string]uint64{}, calls: map[string][]uint32{}}
}

func (d *driver) out() string {
	rd := d.r.Ready()
	var lines []string
	for _, a := range rd.Dials {
		lines = append(lines, "dial "+a)
	}
	for _, c := range rd.Calls {
		d.calls[c.Addr] = append(d.calls[c.Addr], c.Opaque)
		switch req := c.Req.(type) {
		case *protocol.RegisterBrokerRequest:
			var names []string
			for _, tc := range req.Topics {
				names = append(names, tc.Topic)
			}
			lines = append(lines, fmt.Sprintf("%s REG v%d.%d id%d %s %v", c.Addr, req.DataVersion.Timestamp,
				req.DataVersion.Counter, req.BrokerID, req.BrokerRole, names))
		case *protocol.BrokerHeartbeatRequest:
			lines = append(lines, fmt.Sprintf("%s HB v%d.%d", c.Addr, req.DataVersion.Timestamp, req.DataVersion.Counter))
		case *protocol.UnregisterBrokerRequest:
			lines = append(lines, fmt.Sprintf("%s UNREG id%d", c.Addr, req.BrokerID))
		}
	}
	for _, c := range rd.Closes {
		lines = append(lines, "close "+c.Addr)
	}
	if rd.Done {
		lines = append(lines, "done")
	}
	return strings.Join(lines, "; ")
}

// step is one input and the outputs expected from it.
type step struct {
	at   time.Duration // since t0: the clock moves there first
	do   string        // start, up A, fail A, lost A, ok|stale|unknown|refused A [prev], topics x y, role R id, tick, stop
	want string
}

func (d *driver) run(steps []step) {
	for i, s := range steps {
		d.now = t0.Add(s.at)
		f := strings.Fields(s.do)
		arg := func(i int) string {
			if i < len(f) {
				return f[i]
			}
			return ""
		}
		a := arg(1)
		answer := func(resp protocol.RegisterBrokerResponse, st protocol.Status) {
			ops := d.calls[a] // the last call, or with "prev" the one before
			op := ops[len(ops)-1]
			if arg(2) == "prev" {
				op = ops[len(ops)-2]
			}
			d.r.Answer(d.now, a, op, st, &resp)
		}
		switch f[0] {
		case "start":
			d.r.Start(d.now, topics("t1"))
		case "up":
			d.next++
			d.links[a] = d.next
			d.r.Dialed(d.now, a, d.next, nil)
		case "fail":
			d.r.Dialed(d.now, a, 0, errors.New("refused"))
		case "lost":
			d.r.Closed(d.now, a, d.links[a])
		case "ok":
			answer(protocol.RegisterBrokerResponse{LeaseMillis: 5000}, protocol.StatusOK)
		case "stale":
			answer(protocol.RegisterBrokerResponse{Stale: true}, protocol.StatusOK)
		case "unknown":
			answer(protocol.RegisterBrokerResponse{Unknown: true}, protocol.StatusOK)
		case "refused":
			answer(protocol.RegisterBrokerResponse{}, protocol.StatusInvalidParameter)
		case "topics":
			d.r.Topics(d.now, topics(f[1:]...))
		case "role":
			var id int64
			fmt.Sscan(arg(2), &id)
			d.r.Role(d.now, a, id, 0)
		case "tick":
			d.r.Tick(d.now)
		case "stop":
			d.r.Stop(d.now)
		default:
			d.t.Fatalf("step %d: unknown input %q", i, s.do)
		}
		if got := d.out(); got != s.want {
			d.t.Fatalf("step %d (%v %q):\n got %q\nwant %q", i, s.at, s.do, got, s.want)
		}
	}
}

const (
	ms = time.Millisecond
	s1 = time.Second
)

func TestRegistrar(t *testing.T) {
	for _, tc := range []struct {
		name    string
		servers []string
		steps   []step
	}{
		{"register at start, heartbeat every interval, full registration every period", []string{"A"}, []step{
			{0, "start", "dial A"},
			{10 * ms, "up A", "A REG v7.0 id0 ASYNC_MASTER [t1]"},
			{12 * ms, "ok A", ""},
			{500 * ms, "tick", ""},
			{1010 * ms, "tick", "A HB v7.0"},
			{1012 * ms, "ok A", ""},
			{2010 * ms, "tick", "A HB v7.0"},
			{2011 * ms, "ok A", ""},
			{30010 * ms, "tick", "A REG v7.0 id0 ASYNC_MASTER [t1]; A HB v7.0"},
		}},
		{"a topic change registers at once with a larger version; no change, no registration", []string{"A", "B"}, []step{
			{0, "start", "dial A; dial B"},
			{0, "up A", "A REG v7.0 id0 ASYNC_MASTER [t1]"},
			{0, "up B", "B REG v7.0 id0 ASYNC_MASTER [t1]"},
			{1 * ms, "ok A", ""},
			{1 * ms, "ok B", ""},
			{300 * ms, "topics t2 t1", "A REG v7.1 id0 ASYNC_MASTER [t1 t2]; B REG v7.1 id0 ASYNC_MASTER [t1 t2]"},
			{301 * ms, "topics t1 t2", ""},
			{400 * ms, "topics t1", "A REG v7.2 id0 ASYNC_MASTER [t1]; B REG v7.2 id0 ASYNC_MASTER [t1]"},
		}},
		{"a heartbeat answered Unknown registers at once", []string{"A"}, []step{
			{0, "start", "dial A"},
			{0, "up A", "A REG v7.0 id0 ASYNC_MASTER [t1]"},
			{0, "ok A", ""},
			{1 * s1, "tick", "A HB v7.0"},
			{1*s1 + ms, "unknown A", "A REG v7.0 id0 ASYNC_MASTER [t1]"},
			{1*s1 + 2*ms, "ok A", ""},
			{2 * s1, "tick", "A HB v7.0"},
		}},
		{"Stale at the current version registers again at the next heartbeat time; at an older one it is ignored", []string{"A"}, []step{
			{0, "start", "dial A"},
			{0, "up A", "A REG v7.0 id0 ASYNC_MASTER [t1]"},
			{0, "stale A", ""},
			{1 * s1, "tick", "A REG v7.0 id0 ASYNC_MASTER [t1]"},
			{1*s1 + 2*ms, "topics t9", "A REG v7.1 id0 ASYNC_MASTER [t9]"},
			// v7.0's answer comes after v7.1 went out: Stale, ignored.
			{1*s1 + 3*ms, "stale A prev", ""},
			{1*s1 + 4*ms, "ok A", ""},
			{2 * s1, "tick", "A HB v7.1"},
		}},
		{"a refused registration is retried on the heartbeat's time, not in a loop", []string{"A"}, []step{
			{0, "start", "dial A"},
			{0, "up A", "A REG v7.0 id0 ASYNC_MASTER [t1]"},
			{0, "refused A", ""},
			{500 * ms, "tick", ""},
			{1 * s1, "tick", "A REG v7.0 id0 ASYNC_MASTER [t1]"},
		}},
		{"a dead name server is redialled with a doubling backoff; the other is not delayed", []string{"A", "B"}, []step{
			{0, "start", "dial A; dial B"},
			{0, "fail A", ""},
			{0, "up B", "B REG v7.0 id0 ASYNC_MASTER [t1]"},
			{0, "ok B", ""},
			{100 * ms, "tick", "dial A"},
			{100 * ms, "fail A", ""},
			{250 * ms, "tick", ""},
			{300 * ms, "tick", "dial A"},
			{300 * ms, "fail A", ""},
			{700 * ms, "tick", "dial A"},
			{700 * ms, "fail A", ""},
			{1 * s1, "tick", "B HB v7.0"},
			{1500 * ms, "tick", "dial A"},
			{1500 * ms, "up A", "A REG v7.0 id0 ASYNC_MASTER [t1]"},
			{1501 * ms, "ok A", ""},
			// A lost link that was answering is redialled at once.
			{1600 * ms, "lost A", "dial A"},
			{1600 * ms, "up A", "A REG v7.0 id0 ASYNC_MASTER [t1]"},
		}},
		{"an unanswered request closes the link and it is redialled", []string{"A"}, []step{
			{0, "start", "dial A"},
			{0, "up A", "A REG v7.0 id0 ASYNC_MASTER [t1]"},
			{0, "ok A", ""},
			{1 * s1, "tick", "A HB v7.0"},
			{2 * s1, "tick", ""}, // one heartbeat in flight at a time
			{6 * s1, "tick", "dial A; close A"},
			{6 * s1, "up A", "A REG v7.0 id0 ASYNC_MASTER [t1]"},
		}},
		{"a role change registers at once; a new brokerId unregisters the old one first", []string{"A"}, []step{
			{0, "start", "dial A"},
			{0, "up A", "A REG v7.0 id0 ASYNC_MASTER [t1]"},
			{0, "ok A", ""},
			{100 * ms, "role SYNC_MASTER 0", "A REG v7.0 id0 SYNC_MASTER [t1]"},
			{101 * ms, "ok A", ""},
			{200 * ms, "role SLAVE 1", "A UNREG id0; A REG v7.0 id1 SLAVE [t1]"},
			{201 * ms, "role SLAVE 1", ""},
		}},
		{"a clean stop unregisters from every name server up, done when answered", []string{"A", "B", "C"}, []step{
			{0, "start", "dial A; dial B; dial C"},
			{0, "up A", "A REG v7.0 id0 ASYNC_MASTER [t1]"},
			{0, "up B", "B REG v7.0 id0 ASYNC_MASTER [t1]"},
			{0, "fail C", ""},
			{1 * ms, "stop", "A UNREG id0; B UNREG id0"},
			{2 * ms, "ok A", ""},
			{200 * ms, "tick", ""}, // no dial of C while stopping
			{3 * ms, "ok B", "done"},
		}},
		{"a clean stop is bounded: done after StopTimeout without answers", []string{"A"}, []step{
			{0, "start", "dial A"},
			{0, "up A", "A REG v7.0 id0 ASYNC_MASTER [t1]"},
			{0, "stop", "A UNREG id0"},
			{999 * ms, "tick", ""},
			{1 * s1, "tick", "close A; done"},
		}},
		{"stopping with no name server up is done at once", []string{"A"}, []step{
			{0, "start", "dial A"},
			{0, "stop", "done"},
			{0, "up A", "close A"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { newDriver(t, testConfig(tc.servers...)).run(tc.steps) })
	}
}

func TestRegistrarDeadline(t *testing.T) {
	d := newDriver(t, testConfig("A", "B"))
	d.run([]step{{0, "start", "dial A; dial B"}, {0, "fail A", ""}, {0, "up B", "B REG v7.0 id0 ASYNC_MASTER [t1]"}})
	// A's redial (100 ms) comes before B's answer timeout (5 s) and heartbeat (1 s).
	if dl, ok := d.r.Deadline(); !ok || !dl.Equal(t0.Add(100*ms)) {
		t.Fatalf("deadline %v %v, want +100ms", dl.Sub(t0), ok)
	}
	d.run([]step{{0, "ok B", ""}, {100 * ms, "tick", "dial A"}})
	if dl, _ := d.r.Deadline(); !dl.Equal(t0.Add(s1)) {
		t.Fatalf("deadline %v, want B's heartbeat at +1s", dl.Sub(t0))
	}
	st := d.r.Statuses()
	if len(st) != 2 || st[0].Up || !st[1].Registered || st[1].Lease != 5*s1 {
		t.Fatalf("statuses %+v", st)
	}
}

func TestNewRejects(t *testing.T) {
	for _, cfg := range []Config{
		testConfig(),
		testConfig("A", "A"),
		testConfig(""),
		func() Config { c := testConfig("A"); c.Identity.ClusterName = ""; return c }(),
	} {
		if _, err := New(cfg); !errors.Is(err, ErrInvalid) {
			t.Errorf("New(%+v): %v, want ErrInvalid", cfg, err)
		}
	}
}
