package actors

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/internal/vtime"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage/vfs"
)

// memNet connects brokers' registrars to name servers on one virtual-time
// loop: Env.Dial of an address gives an in-memory link to that name
// server, unless it is down. Frames are encoded and decoded on the way,
// as on a socket.
type memNet struct {
	mu      sync.Mutex
	servers map[string]*NameServer
	down    map[string]bool
	mute    map[string]bool // requests to this name server are lost (a partition)
	links   []*memLink
	ids     uint64
}

func newMemNet() *memNet {
	return &memNet{servers: map[string]*NameServer{}, down: map[string]bool{}, mute: map[string]bool{}, ids: 1000}
}

func (n *memNet) dial(addr string, h Handler) (Conn, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ns := n.servers[addr]
	if ns == nil || n.down[addr] {
		return nil, fmt.Errorf("dial %s: connection refused", addr)
	}
	n.ids += 2
	client := &memLink{net: n, addr: addr, id: n.ids, h: h}
	server := &memLink{net: n, addr: addr, id: n.ids + 1, h: ns, peer: client}
	client.peer = server
	n.links = append(n.links, client)
	return client, nil
}

// crash takes addr down: its links close, and dials fail until it is up.
func (n *memNet) crash(addr string) {
	n.mu.Lock()
	n.down[addr] = true
	links := append([]*memLink(nil), n.links...)
	n.mu.Unlock()
	for _, l := range links {
		if l.addr == addr {
			l.Close("name server crashed")
		}
	}
}

func (n *memNet) set(m map[string]bool, addr string, v bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	m[addr] = v
}

func (n *memNet) muted(addr string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mute[addr]
}

// memLink is one end of an in-memory link; h receives what the peer sends.
type memLink struct {
	net    *memNet
	addr   string
	id     uint64
	h      Handler
	peer   *memLink
	closed atomic.Bool
}

func (l *memLink) ID() uint64            { return l.id }
func (l *memLink) RemoteAddr() string    { return l.addr }
func (l *memLink) Send(protocol.Request) {}
func (l *memLink) Closed() bool          { return l.closed.Load() }

// Call delivers a request to the name server's end.
func (l *memLink) Call(opaque uint32, req protocol.Request) {
	if l.closed.Load() || l.net.muted(l.addr) {
		return
	}
	buf, err := protocol.AppendRequest(nil, opaque, 0, req)
	if err != nil {
		panic(err)
	}
	l.peer.receive(buf)
}

// Reply delivers an answer to the broker's end.
func (l *memLink) Reply(r Response) {
	if !l.closed.Load() {
		l.peer.receive(encodeForTest(&r))
	}
}

// receive hands a frame that came from the peer to this end's handler.
func (l *memLink) receive(frame []byte) {
	f, err := protocol.DecodeFrame(frame, protocol.DefaultLimits())
	if err != nil {
		panic(err)
	}
	l.h.Deliver(&Inbound{Conn: l, Frames: []*protocol.Frame{f}})
}

func (l *memLink) Close(string) {
	if l.closed.Swap(true) {
		return
	}
	l.peer.closed.Store(true)
	l.h.Disconnected(l)
	l.peer.h.Disconnected(l.peer)
}

// addNameServer starts a name server at addr on loop.
func (n *memNet) addNameServer(t *testing.T, loop *vtime.Loop[vtime.None], addr string) *nsHarness {
	t.Helper()
	ns := NewNameServer(NameServerConfig{}, loopEnv(loop, Env{}), protocol.DefaultLimits())
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ns.stop(func(pid *actor.PID) {
			ns.sys.Root.Poison(pid)
			loop.RunUntil(func() bool { _, ok := ns.sys.ProcessRegistry.GetLocal(pid.Id); return !ok }, time.Minute)
		})
	})
	n.mu.Lock()
	n.servers[addr] = ns
	n.mu.Unlock()
	return &nsHarness{t: t, loop: loop, ns: ns}
}

// brokerOn reports the broker at addr as the name server lists it.
func (h *nsHarness) brokerOn(addr string) (protocol.BrokerInfo, bool) {
	h.t.Helper()
	var ci protocol.ClusterInfo
	h.call(h.conn(1), &protocol.GetBrokerClusterInfoRequest{}, &ci)
	for _, b := range ci.Brokers {
		if b.BrokerAddr == addr {
			return b, true
		}
	}
	return protocol.BrokerInfo{}, false
}

func (h *nsHarness) alive(addr string) bool { b, ok := h.brokerOn(addr); return ok && b.Alive }

// writable is the writable queues of topic on group in h's route (0: none).
func (h *nsHarness) writable(topic, group string) int32 {
	w, _ := h.route(h.conn(1), topic)
	return w[group]
}

// TestRegistrarWithNameServers runs a broker and two real name servers on
// one virtual-time loop: registration at start while one name server is
// down, a topic in the routes at once, leases kept by heartbeats, the
// down name server catching up when it comes up, a silent broker expired
// after its lease, a name server that restarted learning the broker again,
// and a clean stop removing the broker at once.
func TestRegistrarWithNameServers(t *testing.T) {
	loop := vtime.NewFIFO(testEpoch)
	net := newMemNet()
	nsA := net.addNameServer(t, loop, "ns-a:9876")
	nsB := net.addNameServer(t, loop, "ns-b:9876")
	net.set(net.down, "ns-b:9876", true)
	const self = "127.0.0.1:10911"
	h := startAt(t, vfs.NewMem(), brokerWithNameServers("ns-a:9876", "ns-b:9876"), loop, Env{Dial: net.dial})

	// Registered with A at start, however long B refuses.
	testwait.For(t, loop, 100*time.Millisecond, "the broker alive on A", func() bool { return nsA.alive(self) })
	if _, ok := nsB.brokerOn(self); ok {
		t.Fatal("registered on a name server that is down")
	}
	var info protocol.BrokerRuntimeInfo
	h.ok(h.send(&protocol.GetBrokerRuntimeInfoRequest{})[0], &info)
	if got, want := info.Extra["namesrv"], "ns-a:9876 registered, ns-b:9876 unreachable"; got != want {
		t.Fatalf("runtime info namesrv %q, want %q", got, want)
	}

	// A topic created is in A's route at once, not at a heartbeat.
	created := loop.Now()
	h.ok(h.send(&protocol.CreateTopicRequest{TopicConfig: protocol.TopicConfig{Topic: "orders", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}})[0], nil)
	testwait.For(t, loop, 100*time.Millisecond, "orders in A's route", func() bool { return nsA.writable("orders", "broker-a") == 4 })
	if d := loop.Now().Sub(created); d >= 50*time.Millisecond {
		t.Fatalf("the route took %v: not the registration at the change", d)
	}

	// Heartbeats keep the lease (5 s) for many leases; B comes up and is
	// registered with within the backoff's cap.
	loop.Advance(20 * time.Second)
	if !nsA.alive(self) {
		t.Fatal("the lease on A lapsed although the broker heartbeats")
	}
	net.set(net.down, "ns-b:9876", false)
	testwait.For(t, loop, 4*time.Second, "orders in B's route", func() bool { return nsB.writable("orders", "broker-a") == 4 })

	// Silent towards A (its requests are lost, the link stays open): out
	// of A's routes within the lease, still on B.
	net.set(net.mute, "ns-a:9876", true)
	silent := loop.Now()
	testwait.For(t, loop, 6*time.Second, "the silent broker expired on A", func() bool { return !nsA.alive(self) })
	if d := loop.Now().Sub(silent); d < 4*time.Second || d > 5100*time.Millisecond {
		t.Fatalf("expired %v after going silent, want within the 5 s lease and not much before", d)
	}
	if !nsB.alive(self) {
		t.Fatal("B lost the broker while only A was cut off")
	}
	net.set(net.mute, "ns-a:9876", false)
	testwait.For(t, loop, 10*time.Second, "the broker back on A", func() bool { return nsA.writable("orders", "broker-a") == 4 })

	// B crashes and comes back empty: the broker registers there again.
	net.crash("ns-b:9876")
	restartNameServer(t, loop, net, "ns-b:9876", nsB)
	net.set(net.down, "ns-b:9876", false)
	testwait.For(t, loop, 4*time.Second, "orders in the restarted B's route", func() bool { return nsB.writable("orders", "broker-a") == 4 })

	// A clean stop unregisters: gone from both at once.
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	loop.RunUntil(func() bool { return false }, 10*time.Millisecond)
	for name, ns := range map[string]*nsHarness{"A": nsA, "B": nsB} {
		if _, ok := ns.brokerOn(self); ok {
			t.Errorf("%s still lists the broker after a clean stop", name)
		}
	}
}

func brokerWithNameServers(addrs ...string) Config {
	cfg := DefaultConfig()
	cfg.StoreHost = testStoreConfig().StoreHost
	cfg.FlushIntervalCommitLog = 10 * time.Millisecond
	cfg.FlushIntervalConsumeQueue = 20 * time.Millisecond
	cfg.NamesrvAddr = addrs
	cfg.HAServerAddr = "127.0.0.1:10912"
	return cfg
}

// restartNameServer replaces the name server at addr by a new one (an
// empty table), keeping h pointing at it.
func restartNameServer(t *testing.T, loop *vtime.Loop[vtime.None], net *memNet, addr string, h *nsHarness) {
	t.Helper()
	fresh := net.addNameServer(t, loop, addr)
	h.ns = fresh.ns
}

// TestRegistrarNeedsDial: name servers without Env.Dial is a startup error,
// not a broker that silently stays unregistered.
func TestRegistrarNeedsDial(t *testing.T) {
	b := New(brokerWithNameServers("ns:9876"), loopEnv(vtime.NewFIFO(testEpoch), Env{}), nil, protocol.DefaultLimits())
	if err := b.Start(); err == nil || !strings.Contains(err.Error(), "needs Env.Dial") {
		t.Fatalf("Start without Dial: %v, want the missing Dial named", err)
	}
	b.sys.Shutdown()
}

// TestRegistrarRoleChange: a demotion and a promotion re-register at
// once, and the brokerId left behind is unregistered rather than kept
// alive until its lease ends (a demoted master would stay writable).
func TestRegistrarRoleChange(t *testing.T) {
	loop := vtime.NewFIFO(testEpoch)
	net := newMemNet()
	ns := net.addNameServer(t, loop, "ns:9876")
	cfg := brokerWithNameServers("ns:9876")
	cfg.HASendHeartbeatInterval = time.Hour // the demoted broker's master is nowhere
	h := startAt(t, vfs.NewMem(), cfg, loop, Env{Dial: net.dial})
	h.ok(h.send(&protocol.CreateTopicRequest{TopicConfig: protocol.TopicConfig{Topic: "orders", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}})[0], nil)
	testwait.For(t, loop, 100*time.Millisecond, "orders writable", func() bool { return ns.writable("orders", "broker-a") == 4 })

	role := func(req *protocol.UpdateBrokerRoleRequest, wantID int64, wantRole string, wantWritable int32) {
		t.Helper()
		changed := loop.Now()
		h.ok(h.send(req)[0], nil)
		testwait.For(t, loop, 100*time.Millisecond, "the new role on the name server", func() bool {
			b, ok := ns.brokerOn("127.0.0.1:10911")
			return ok && b.Alive && b.BrokerID == wantID && b.BrokerRole == wantRole
		})
		if d := loop.Now().Sub(changed); d >= 50*time.Millisecond {
			t.Fatalf("the role reached the name server after %v: not at the change", d)
		}
		var ci protocol.ClusterInfo
		ns.call(ns.conn(1), &protocol.GetBrokerClusterInfoRequest{}, &ci)
		if len(ci.Brokers) != 1 {
			t.Fatalf("the old brokerId is still listed: %+v", ci.Brokers)
		}
		if w := ns.writable("orders", "broker-a"); w != wantWritable {
			t.Fatalf("writable queues %d, want %d", w, wantWritable)
		}
	}
	role(&protocol.UpdateBrokerRoleRequest{BrokerRole: RoleSlave, HAMasterAddress: "elsewhere:10912", BrokerID: 2}, 2, RoleSlave, 0)
	role(&protocol.UpdateBrokerRoleRequest{BrokerRole: RoleSyncMaster}, 0, RoleSyncMaster, 4)
}

// TestRegistrarFirstRegistrationHasTopics: a broker restarting over its
// store registers its topics in its first registration (data version
// counter 0), so its routes never go empty for a moment; the new process
// registers with a newer data version than the old one.
func TestRegistrarFirstRegistrationHasTopics(t *testing.T) {
	loop := vtime.NewFIFO(testEpoch)
	net := newMemNet()
	ns := net.addNameServer(t, loop, "ns:9876")
	fsys := vfs.NewMem()
	h := startAt(t, fsys, brokerWithNameServers("ns:9876"), loop, Env{Dial: net.dial})
	h.ok(h.send(&protocol.CreateTopicRequest{TopicConfig: protocol.TopicConfig{Topic: "orders", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}})[0], nil)
	testwait.For(t, loop, 100*time.Millisecond, "orders writable", func() bool { return ns.writable("orders", "broker-a") == 4 })
	before, _ := ns.brokerOn("127.0.0.1:10911")
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	loop.Advance(time.Second)

	startAt(t, fsys, brokerWithNameServers("ns:9876"), loop, Env{Dial: net.dial})
	var first protocol.BrokerInfo
	testwait.For(t, loop, 100*time.Millisecond, "the restarted broker registered", func() bool {
		b, ok := ns.brokerOn("127.0.0.1:10911")
		first = b
		return ok && b.Alive
	})
	if first.DataVersion.Counter != 0 || first.Topics == 0 {
		t.Fatalf("first registration: version %+v with %d topics, want counter 0 with the topics", first.DataVersion, first.Topics)
	}
	if first.DataVersion.Compare(before.DataVersion) <= 0 {
		t.Fatalf("restarted with version %+v, not newer than %+v", first.DataVersion, before.DataVersion)
	}
}
