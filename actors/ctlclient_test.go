package actors

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wharfmq/wharf/actors/controller"
	"github.com/wharfmq/wharf/actors/ctlagent"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/internal/vtime"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
	"github.com/wharfmq/wharf/storage/vfs"
)

// ctlNet connects brokers to an in-test controller and to each other's
// replication ports on one virtual-time loop. Frames are encoded and
// decoded on the way, as on a socket.
type ctlNet struct {
	mu     sync.Mutex
	ids    uint64
	ends   map[string]Handler // address -> the listener's handler
	mute   map[string]bool    // frames to this address are lost
	hold   map[string]bool    // frames from this address wait until released
	held   map[string][]func()
	silent atomic.Bool // the controller answers nothing
	dials  map[string]int
	// closeOnOpen: this many more dials to the address return a link that
	// closed before the dial returned (its Disconnected already called).
	closeOnOpen map[string]int
}

func newCtlNet() *ctlNet {
	return &ctlNet{ids: 5000, ends: map[string]Handler{}, mute: map[string]bool{}, hold: map[string]bool{}, held: map[string][]func(){},
		dials: map[string]int{}, closeOnOpen: map[string]int{}}
}

func (n *ctlNet) listen(addr string, h Handler) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.ends[addr] = h
}

func (n *ctlNet) unlisten(addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.ends, addr)
}

func (n *ctlNet) dial(addr string, h Handler) (Conn, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.dials[addr]++
	srv := n.ends[addr]
	if srv == nil {
		return nil, fmt.Errorf("dial %s: connection refused", addr)
	}
	n.ids += 2
	client := &pipeLink{net: n, to: addr, from: "client-of-" + addr, id: n.ids, h: h}
	server := &pipeLink{net: n, to: client.from, from: addr, id: n.ids + 1, h: srv, peer: client}
	client.peer = server
	if n.closeOnOpen[addr] > 0 {
		n.closeOnOpen[addr]--
		client.closed.Store(true)
		h.Disconnected(client)
	}
	return client, nil
}

// release delivers what was held from addr, and stops holding.
func (n *ctlNet) release(addr string) {
	n.mu.Lock()
	n.hold[addr] = false
	fns := n.held[addr]
	n.held[addr] = nil
	n.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

func (n *ctlNet) set(m map[string]bool, addr string, v bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	m[addr] = v
}

// pipeLink is one end of an in-memory link carrying requests both ways
// (Call, Send) and answers (Reply); h receives what the peer sends.
type pipeLink struct {
	net      *ctlNet
	to, from string
	id       uint64
	h        Handler
	peer     *pipeLink
	closed   atomic.Bool
}

func (l *pipeLink) ID() uint64         { return l.id }
func (l *pipeLink) RemoteAddr() string { return l.to }
func (l *pipeLink) Closed() bool       { return l.closed.Load() }

func (l *pipeLink) Call(opaque uint32, req protocol.Request) { l.request(opaque, 0, req) }
func (l *pipeLink) Send(req protocol.Request)                { l.request(0, protocol.FlagOneway, req) }

func (l *pipeLink) request(opaque uint32, flags protocol.Flags, req protocol.Request) {
	buf, err := protocol.AppendRequest(nil, opaque, flags, req)
	if err != nil {
		panic(err)
	}
	l.carry(buf)
}

func (l *pipeLink) Reply(r Response) { l.carry(encodeForTest(&r)) }

// carry takes a frame to the peer, unless its destination is muted or
// its source held.
func (l *pipeLink) carry(frame []byte) {
	if l.closed.Load() {
		return
	}
	n := l.net
	n.mu.Lock()
	if n.mute[l.to] {
		n.mu.Unlock()
		return
	}
	if n.hold[l.from] {
		n.held[l.from] = append(n.held[l.from], func() { l.peer.receive(frame) })
		n.mu.Unlock()
		return
	}
	n.mu.Unlock()
	l.peer.receive(frame)
}

func (l *pipeLink) receive(frame []byte) {
	if l.closed.Load() {
		return
	}
	f, err := protocol.DecodeFrame(frame, protocol.DefaultLimits())
	if err != nil {
		panic(err)
	}
	l.h.Deliver(&Inbound{Conn: l, Frames: []*protocol.Frame{f}})
}

func (l *pipeLink) Close(string) {
	if l.closed.Swap(true) {
		return
	}
	l.peer.closed.Store(true)
	l.h.Disconnected(l)
	l.peer.h.Disconnected(l.peer)
}

// testController is a single controller node whose raft is instant: every
// proposal is applied at once and every read confirmed at once (the rig
// of actors/controller's tests), serving the real controller.Core and
// State on the loop's clock.
type testController struct {
	mu      sync.Mutex
	loop    *vtime.Loop[vtime.None]
	net     *ctlNet
	st      *controller.State
	core    *controller.Core
	next    uint64
	waiting map[uint64]ctlPending
	infos   int // GET_REPLICA_INFO requests served
}

type ctlPending struct {
	conn   Conn
	code   protocol.Code
	opaque uint32
}

func newTestController(loop *vtime.Loop[vtime.None], net *ctlNet, addr string) *testController {
	st := &controller.State{}
	c := &testController{loop: loop, net: net, st: st, core: controller.NewCore(controller.Config{Origin: 1}, st),
		waiting: map[uint64]ctlPending{}}
	c.core.Leader(loop.Now(), true, addr)
	net.listen(addr, c)
	return c
}

func (c *testController) Deliver(in *Inbound) {
	if c.net.silent.Load() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.loop.Now()
	c.core.Tick(now) // elections run at ticks: one before each request is enough here
	for _, f := range in.Frames {
		req, err := protocol.DecodeRequest(f, protocol.DefaultLimits())
		if err != nil {
			panic(err)
		}
		c.next++
		if f.Code == protocol.CodeControllerGetReplicaInfo {
			c.infos++
		}
		c.waiting[c.next] = ctlPending{conn: in.Conn, code: f.Code, opaque: f.Opaque}
		c.core.Request(now, c.next, req)
	}
	c.settle()
}

func (c *testController) Disconnected(Conn) {}

// settle applies and confirms until the Core has nothing more to say.
func (c *testController) settle() {
	for {
		rd := c.core.Ready()
		for _, rp := range rd.Replies {
			if w, ok := c.waiting[rp.ReqID]; ok {
				delete(c.waiting, rp.ReqID)
				w.conn.Reply(Response{Code: w.code, Opaque: w.opaque, Status: rp.Status, Remark: rp.Remark, Fields: rp.Fields})
			}
		}
		if len(rd.Proposals) == 0 && len(rd.Reads) == 0 {
			return
		}
		for _, p := range rd.Proposals {
			idx := c.st.Applied() + 1
			c.core.Applied(idx, p.Cmd, c.st.Apply(idx, p.Cmd))
		}
		for _, id := range rd.Reads {
			c.core.ReadDone(id)
		}
	}
}

func (c *testController) reads() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.infos
}

func (c *testController) group() protocol.ReplicaInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	in, _ := c.st.Group("DefaultCluster", "broker-a")
	return in
}

// ctlBroker is the config of broker name in controller mode.
func ctlBroker(name string) Config {
	cfg := DefaultConfig()
	cfg.StoreHost = testStoreConfig().StoreHost
	cfg.FlushIntervalCommitLog = 10 * time.Millisecond
	cfg.FlushIntervalConsumeQueue = 20 * time.Millisecond
	cfg.EnableControllerMode = true
	cfg.ControllerAddr = []string{"ctl:9878"}
	cfg.BrokerAddr = name + ":10911"
	cfg.HAServerAddr = name + ":10912"
	cfg.HASendHeartbeatInterval = 200 * time.Millisecond
	return cfg
}

func (h *harness) runtime() protocol.BrokerRuntimeInfo {
	h.t.Helper()
	var info protocol.BrokerRuntimeInfo
	h.ok(h.send(&protocol.GetBrokerRuntimeInfoRequest{})[0], &info)
	return info
}

// sendNow sends one message and returns its answer.
func (h *harness) sendNow(body string) *protocol.Frame {
	h.t.Helper()
	return h.conn.await(h.t, h.send(sendReq("t", 0, body))[0], 10*time.Second)
}

// A broker in controller mode needs no role, id or master address: it
// registers with the controller, is made master of epoch 1 (started in its
// epoch file before its first write) and takes writes; a second broker is
// made its slave, joins the SyncStateSet once caught up, and from then on
// a SYNC send waits for its copy; when the controller stops answering,
// the master's lease runs out and it refuses writes, no sooner than the
// lease allows.
func TestControllerMode(t *testing.T) {
	loop := vtime.NewFIFO(testEpoch)
	net := newCtlNet()
	ctl := newTestController(loop, net, "ctl:9878")
	env := Env{Dial: net.dial}

	m := startAt(t, vfs.NewMem(), ctlBroker("b1"), loop, env)
	net.listen("b1:10912", m.b.HAHandler())
	testwait.For(t, loop, 5*time.Second, "b1 master", func() bool { return m.runtime().BrokerRole == RoleSyncMaster })
	if f := m.sendNow("first"); f.Status != protocol.StatusOK {
		t.Fatalf("the master alone: %v %q", f.Status, f.Remark)
	}
	if e, ok := m.store.LastEpoch(); !ok || e != (storage.EpochEntry{Epoch: 1, StartOffset: 0}) {
		t.Fatalf("epoch file: %+v %v, want epoch 1 from 0", e, ok)
	}
	g := ctl.group()
	if g.MasterID != 1 || g.MasterEpoch != 1 || g.MasterHAAddr != "b1:10912" {
		t.Fatalf("controller: %+v", g)
	}
	if info := m.runtime(); info.BrokerID != 0 {
		t.Fatalf("a master is brokerId 0 for clients, not %d", info.BrokerID)
	}
	upd := &protocol.UpdateBrokerRoleRequest{BrokerRole: RoleSlave, HAMasterAddress: "x:1"}
	if f := m.conn.await(t, m.send(upd)[0], time.Second); f.Status != protocol.StatusNoPermission {
		t.Fatalf("UPDATE_BROKER_ROLE in controller mode: %v %q", f.Status, f.Remark)
	}

	s := startAt(t, vfs.NewMem(), ctlBroker("b2"), loop, env)
	net.listen("b2:10912", s.b.HAHandler())
	testwait.For(t, loop, 5*time.Second, "b2 slave of b1", func() bool {
		i := s.runtime()
		return i.BrokerRole == RoleSlave && i.BrokerID == 2
	})
	testwait.For(t, loop, 10*time.Second, "the set {1,2}", func() bool { return slices.Equal(ctl.group().SyncStateSet, []int64{1, 2}) })
	testwait.For(t, loop, time.Second, "the gate waits for 2", func() bool { return slices.Equal(m.b.v.ackSetSnapshot(), []int64{2}) })
	if f := m.sendNow("replicated"); f.Status != protocol.StatusOK {
		t.Fatalf("with the slave in the set: %v %q", f.Status, f.Remark)
	}

	// Hold the master's stream to the slave: a SYNC send is not answered
	// until the slave has it.
	net.set(net.hold, "b1:10912", true)
	op := m.send(sendReq("t", 0, "waits"))[0]
	loop.Advance(300 * time.Millisecond)
	if m.conn.has(op) {
		f := m.conn.await(t, op, 0)
		t.Fatalf("answered %v %q before the set member acknowledged it", f.Status, f.Remark)
	}
	net.release("b1:10912")
	if f := m.conn.await(t, op, 2*time.Second); f.Status != protocol.StatusOK {
		t.Fatalf("after the slave's copy: %v %q", f.Status, f.Remark)
	}
	if cl := s.store.CommitLog(); !bytes.Contains(must(cl.Read(cl.MinOffset(), int(cl.MaxOffset()-cl.MinOffset()))), []byte("waits")) {
		t.Fatal("acknowledged before the slave held the send")
	}

	// The controller falls silent: the lease runs out.
	net.mu.Lock()
	dialsBefore := net.dials["ctl:9878"]
	net.mu.Unlock()
	net.silent.Store(true)
	silent := loop.Now()
	testwait.For(t, loop, 3*time.Second, "writes refused", func() bool {
		return m.sendNow("probe").Status == protocol.StatusServiceNotAvailable
	})
	// The lease counts from the send time of the last answered heartbeat,
	// at most one heartbeat interval before the silence.
	lease, hb := ctlagent.DefaultLease, ctlagent.DefaultHeartbeatInterval
	if d := loop.Now().Sub(silent); d < lease-hb || d > lease+100*time.Millisecond {
		t.Fatalf("refused %v after the controller fell silent, want within [%v, %v]", d, lease-hb, lease+100*time.Millisecond)
	}
	t.Logf("writes refused %v after the controller fell silent", loop.Now().Sub(silent))
	if f := m.sendNow("late"); !strings.Contains(f.Remark, "lease") {
		t.Fatalf("refusal remark %q does not say why", f.Remark)
	}
	// Unanswered requests closed the silent link: the client dials again
	// rather than writing into it for ever.
	testwait.For(t, loop, 3*time.Second, "the silent controller dialled again", func() bool {
		net.mu.Lock()
		defer net.mu.Unlock()
		return net.dials["ctl:9878"] > dialsBefore
	})
}

// logHolds waits until the CommitLog of s holds body (read raw: a slave
// serves no sends, and its log is its master's copy), and returns the log.
func logHolds(t *testing.T, s *harness, body string) []byte {
	t.Helper()
	var out []byte
	testwait.For(t, s.loop, 2*time.Second, "the log holding "+body, func() bool {
		cl := s.store.CommitLog()
		b, err := cl.Read(cl.MinOffset(), int(cl.MaxOffset()-cl.MinOffset()))
		out = b
		return err == nil && bytes.Contains(b, []byte(body))
	})
	return out
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// The identity is drawn once and kept in the store: the same on a
// restart, another on another store.
// A link to the controller that closes before the broker hears it opened
// (its Disconnected comes before the dial's result, and is dropped) is
// not written into: the broker's first request dials again at once
// instead of waiting out the request timeout on the dead link.
func TestControllerLinkClosedAsItOpened(t *testing.T) {
	loop := vtime.NewFIFO(testEpoch)
	net := newCtlNet()
	newTestController(loop, net, "ctl:9878")
	net.closeOnOpen["ctl:9878"] = 1
	start := loop.Now()
	m := startAt(t, vfs.NewMem(), ctlBroker("b1"), loop, Env{Dial: net.dial})
	testwait.For(t, loop, 5*time.Second, "b1 master", func() bool { return m.runtime().BrokerRole == RoleSyncMaster })
	if took := loop.Now().Sub(start); took >= ctlagent.DefaultRequestTimeout {
		t.Fatalf("the broker became master %v after its start: it waited on the dead link (request timeout %v)", took, ctlagent.DefaultRequestTimeout)
	}
	net.mu.Lock()
	defer net.mu.Unlock()
	if net.dials["ctl:9878"] < 2 {
		t.Fatalf("%d dials to the controller, want a second after the first link closed", net.dials["ctl:9878"])
	}
}

func TestControllerIdentity(t *testing.T) {
	fsys := vfs.NewMem()
	open := func(fs vfs.FS) *storage.Store {
		st, _, err := storage.Open(fs, testStoreConfig())
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := open(fsys)
	a, err := loadIdentity(st, strings.NewReader(strings.Repeat("a", 16)))
	if err != nil || a != strings.Repeat("61", 16) {
		t.Fatalf("identity %q %v", a, err)
	}
	again, err := loadIdentity(st, strings.NewReader(strings.Repeat("b", 16)))
	if err != nil || again != a {
		t.Fatalf("identity after a restart %q %v, want %q", again, err, a)
	}
	_ = st.Close()
	other, err := loadIdentity(open(vfs.NewMem()), strings.NewReader(strings.Repeat("c", 16)))
	if err != nil || other == a {
		t.Fatalf("another store's identity %q %v", other, err)
	}
}

// In controller mode the registrar waits for the controller's role (no
// brokerId before), then registers a master as brokerId 0 and a slave
// with the id the controller assigned; a NOTIFY_BROKER_ROLE_CHANGED on the
// broker's port makes it read the replica info at once.
func TestControllerModeRegistration(t *testing.T) {
	loop := vtime.NewFIFO(testEpoch)
	net := newCtlNet()
	ctl := newTestController(loop, net, "ctl:9878")
	nsNet := newMemNet()
	ns := nsNet.addNameServer(t, loop, "ns:9876")
	dial := func(addr string, h Handler) (Conn, error) {
		if addr == "ns:9876" {
			return nsNet.dial(addr, h)
		}
		return net.dial(addr, h)
	}
	withNS := func(name string) Config {
		cfg := ctlBroker(name)
		cfg.NamesrvAddr = []string{"ns:9876"}
		return cfg
	}
	net.silent.Store(true) // no role yet
	m := startAt(t, vfs.NewMem(), withNS("b1"), loop, Env{Dial: dial})
	net.listen("b1:10912", m.b.HAHandler())
	loop.Advance(2 * time.Second)
	if b, ok := ns.brokerOn("b1:10911"); ok {
		t.Fatalf("registered before the controller assigned a role: %+v", b)
	}
	net.silent.Store(false)
	testwait.For(t, loop, 5*time.Second, "b1 on the name server as master", func() bool {
		b, ok := ns.brokerOn("b1:10911")
		return ok && b.BrokerID == 0 && b.BrokerRole == RoleSyncMaster
	})

	s := startAt(t, vfs.NewMem(), withNS("b2"), loop, Env{Dial: dial})
	net.listen("b2:10912", s.b.HAHandler())
	testwait.For(t, loop, 5*time.Second, "b2 on the name server as slave 2", func() bool {
		b, ok := ns.brokerOn("b2:10911")
		return ok && b.BrokerID == 2 && b.BrokerRole == RoleSlave
	})

	// A notification makes the broker read the info at once, not at its
	// next heartbeat.
	before := ctl.reads()
	m.send(&protocol.NotifyBrokerRoleChangedRequest{})
	loop.Advance(10 * time.Millisecond)
	if ctl.reads() == before {
		t.Fatal("a notification did not make the broker read its replica info")
	}
}

// A master's death: the controller elects the slave of its SyncStateSet,
// which becomes master of epoch 2 without a restart (its epoch file
// starts epoch 2 at its log's end), holds every acknowledged message, and
// takes writes.
func TestControllerModeFailover(t *testing.T) {
	loop := vtime.NewFIFO(testEpoch)
	net := newCtlNet()
	ctl := newTestController(loop, net, "ctl:9878")
	env := Env{Dial: net.dial}
	m := startAt(t, vfs.NewMem(), ctlBroker("b1"), loop, env)
	net.listen("b1:10912", m.b.HAHandler())
	testwait.For(t, loop, 5*time.Second, "b1 master", func() bool { return m.runtime().BrokerRole == RoleSyncMaster })
	s := startAt(t, vfs.NewMem(), ctlBroker("b2"), loop, env)
	net.listen("b2:10912", s.b.HAHandler())
	testwait.For(t, loop, 10*time.Second, "the set {1,2}", func() bool { return slices.Equal(ctl.group().SyncStateSet, []int64{1, 2}) })
	var acked []string
	for i := range 5 {
		body := fmt.Sprintf("acked-%d", i)
		if f := m.sendNow(body); f.Status != protocol.StatusOK {
			t.Fatalf("send %d: %v %q", i, f.Status, f.Remark)
		}
		acked = append(acked, body)
	}

	net.unlisten("b1:10912")
	if err := m.stop(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, loop, 10*time.Second, "b2 master", func() bool { return s.runtime().BrokerRole == RoleSyncMaster })
	if g := ctl.group(); g.MasterID != 2 || g.MasterEpoch != 2 {
		t.Fatalf("controller after the failover: %+v", g)
	}
	end := s.store.CommitLog().MaxOffset()
	if e, ok := s.store.LastEpoch(); !ok || e != (storage.EpochEntry{Epoch: 2, StartOffset: end}) {
		t.Fatalf("b2's last epoch %+v %v, want 2 from its log's end %d", e, ok, end)
	}
	for _, body := range acked {
		logHolds(t, s, body)
	}
	if f := s.sendNow("after"); f.Status != protocol.StatusOK {
		t.Fatalf("the new master: %v %q", f.Status, f.Remark)
	}
}

// TestSlaveProgressCountsFsyncedUnderSyncFlush: under SYNC_FLUSH a slave
// joins the SyncStateSet on what it has fsynced, not on what it received.
func TestSlaveProgressCountsFsyncedUnderSyncFlush(t *testing.T) {
	ss := []protocol.SlaveInfo{{BrokerID: 2, AckedOffset: 500, FlushedOffset: 300}}
	if got := slaveProgress(ss, true)[0].Acked; got != 300 {
		t.Errorf("SYNC_FLUSH: held %d, want the fsynced 300", got)
	}
	if got := slaveProgress(ss, false)[0].Acked; got != 500 {
		t.Errorf("ASYNC_FLUSH: held %d, want the received 500", got)
	}
}
