package actors

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/internal/vtime"
	"github.com/wharfmq/wharf/protocol"
)

// nsHarness drives a NameServer on a virtual-time loop.
type nsHarness struct {
	t    *testing.T
	loop *vtime.Loop[vtime.None]
	ns   *NameServer
	next uint32
}

func startNameServer(t *testing.T) *nsHarness {
	t.Helper()
	loop := vtime.NewFIFO(testEpoch)
	ns := NewNameServer(NameServerConfig{}, loopEnv(loop, Env{}), protocol.DefaultLimits())
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	h := &nsHarness{t: t, loop: loop, ns: ns}
	t.Cleanup(func() {
		ns.stop(func(pid *actor.PID) {
			ns.sys.Root.Poison(pid)
			loop.RunUntil(func() bool { _, ok := ns.sys.ProcessRegistry.GetLocal(pid.Id); return !ok }, time.Minute)
		})
	})
	return h
}

func (h *nsHarness) conn(id uint64) *fakeConn {
	c := newConn(h.loop)
	c.id = id
	return c
}

// call sends req on c and returns its answer (decoded into into, if set).
func (h *nsHarness) call(c *fakeConn, req protocol.Request, into protocol.Fields) *protocol.Frame {
	h.t.Helper()
	h.next++
	buf, err := protocol.AppendRequest(nil, h.next, 0, req)
	if err != nil {
		h.t.Fatal(err)
	}
	f, err := protocol.DecodeFrame(buf, protocol.DefaultLimits())
	if err != nil {
		h.t.Fatal(err)
	}
	h.ns.Deliver(&Inbound{Conn: c, Frames: []*protocol.Frame{f}})
	resp := c.await(h.t, h.next, time.Second)
	if into != nil && resp.Status == protocol.StatusOK {
		if err := protocol.DecodeResponse(resp, protocol.DefaultLimits(), into); err != nil {
			h.t.Fatal(err)
		}
	}
	return resp
}

func nsReg(group string, id int64, addr, role string, topics ...protocol.TopicConfig) *protocol.RegisterBrokerRequest {
	return &protocol.RegisterBrokerRequest{
		BrokerIdentity: protocol.BrokerIdentity{ClusterName: "c1", BrokerName: group, BrokerID: id, BrokerAddr: addr},
		BrokerRole:     role, DataVersion: protocol.DataVersion{Timestamp: 1, Counter: 1}, Topics: topics}
}

// route asks for topic's route and renders its writable queues per group.
func (h *nsHarness) route(c *fakeConn, topic string) (map[string]int32, int64) {
	h.t.Helper()
	var rd protocol.RouteData
	if f := h.call(c, &protocol.GetRouteInfoRequest{Topic: topic}, &rd); f.Status != protocol.StatusOK {
		return nil, 0
	}
	w := map[string]int32{}
	for _, q := range rd.QueueDatas {
		w[q.BrokerName] = q.WriteQueueNums
	}
	return w, rd.Version
}

// TestNameServerLeasesOnTheClock: the actor expires a silent master on its
// own timer (no request needed), a closed connection at once, and every
// route change grows the version.
func TestNameServerLeasesOnTheClock(t *testing.T) {
	h := startNameServer(t)
	ma, sa, mb, client := h.conn(1), h.conn(2), h.conn(3), h.conn(4)
	orders := protocol.TopicConfig{Topic: "orders", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}
	var rr protocol.RegisterBrokerResponse
	h.call(ma, nsReg("a", 0, "h1:10911", "ASYNC_MASTER", orders), &rr)
	if !rr.Changed || rr.LeaseMillis != 5000 {
		t.Fatalf("register: %+v", rr)
	}
	h.call(sa, nsReg("a", 1, "h2:10911", "SLAVE"), &rr)
	if rr.MasterAddr != "h1:10911" {
		t.Fatalf("the slave was not told its master: %+v", rr)
	}
	h.call(mb, nsReg("b", 0, "h3:10911", "ASYNC_MASTER", orders), nil)
	w, v1 := h.route(client, "orders")
	if w["a"] != 4 || w["b"] != 4 {
		t.Fatalf("route %v", w)
	}
	// b and a's slave heartbeat; a's master goes silent.
	for range 6 {
		h.loop.Advance(time.Second)
		for _, c := range []struct {
			conn *fakeConn
			reg  *protocol.RegisterBrokerRequest
		}{{sa, nsReg("a", 1, "h2:10911", "SLAVE")}, {mb, nsReg("b", 0, "h3:10911", "ASYNC_MASTER")}} {
			hb := &protocol.BrokerHeartbeatRequest{BrokerIdentity: c.reg.BrokerIdentity, DataVersion: c.reg.DataVersion}
			if h.call(c.conn, hb, &rr); rr.Unknown {
				t.Fatalf("heartbeat of %s refused", c.reg.BrokerAddr)
			}
		}
	}
	w, v2 := h.route(client, "orders")
	if w["a"] != 0 || w["b"] != 4 || v2 <= v1 {
		t.Fatalf("after a's master went silent: writable %v, version %d -> %d", w, v1, v2)
	}
	h.ns.Disconnected(mb)
	w, v3 := h.route(client, "orders")
	if _, ok := w["b"]; ok || w["a"] != 0 || v3 <= v2 {
		t.Fatalf("after b's connection closed: writable %v, version %d -> %d", w, v2, v3)
	}
	var ci protocol.ClusterInfo
	h.call(client, &protocol.GetBrokerClusterInfoRequest{}, &ci)
	alive := map[string]bool{}
	for _, b := range ci.Brokers {
		alive[b.BrokerAddr] = b.Alive
	}
	if len(ci.Brokers) != 3 || alive["h1:10911"] || !alive["h2:10911"] || alive["h3:10911"] {
		t.Fatalf("cluster info %+v", ci.Brokers)
	}
	if f := h.call(client, &protocol.GetRouteInfoRequest{Topic: "nope"}, nil); f.Status != protocol.StatusTopicNotExist {
		t.Fatalf("unknown topic: %v", f.Status)
	}
	if f := h.call(client, &protocol.PullRequest{Topic: "orders"}, nil); f.Status != protocol.StatusRequestCodeNotSupported {
		t.Fatalf("a broker request: %v", f.Status)
	}
	if f := h.call(client, nsReg("", 0, "x", "SLAVE"), nil); f.Status != protocol.StatusInvalidParameter {
		t.Fatalf("a registration without a group: %v", f.Status)
	}
}
