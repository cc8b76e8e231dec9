package actors

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wharfmq/wharf/actors/controller"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/internal/vtime"
	"github.com/wharfmq/wharf/protocol"
)

// brokerConn is a fake broker's connection to one controller node: it
// keeps the answers by opaque and the notifications with their time.
type brokerConn struct {
	id      uint64
	loop    *vtime.Loop[vtime.None]
	mu      sync.Mutex
	replies map[uint32]Response
	notes   []notified
	closed  atomic.Bool
}

type notified struct {
	at   time.Time
	info protocol.ReplicaInfo
}

func (c *brokerConn) ID() uint64         { return c.id }
func (c *brokerConn) RemoteAddr() string { return fmt.Sprintf("broker-conn-%d", c.id) }
func (c *brokerConn) Close(string)       { c.closed.Store(true) }
func (c *brokerConn) Closed() bool       { return c.closed.Load() }
func (c *brokerConn) Reply(r Response) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.replies[r.Opaque] = r
}
func (c *brokerConn) Send(req protocol.Request) {
	if n, ok := req.(*protocol.NotifyBrokerRoleChangedRequest); ok {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.notes = append(c.notes, notified{at: c.loop.Now(), info: n.ReplicaInfo})
	}
}

func (c *brokerConn) reply(opaque uint32) (Response, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.replies[opaque]
	return r, ok
}

// fakeBroker speaks the controller protocol through Deliver, one
// connection per controller node, heartbeating every node each second
// while beating (followers answer NOT_LEADER; the leader records it).
type fakeBroker struct {
	g              *ctlGroup
	identity, addr string
	id             int64
	conns          map[string]*brokerConn
	opaque         uint32
	beating        bool
	lastBeat       time.Time
}

func (g *ctlGroup) broker(identity, addr string) *fakeBroker {
	return &fakeBroker{g: g, identity: identity, addr: addr, conns: map[string]*brokerConn{}}
}

func (b *fakeBroker) conn(nd *ctlNode) *brokerConn {
	c := b.conns[nd.addr]
	if c == nil {
		c = &brokerConn{id: b.g.conns.Add(1), loop: b.g.loop, replies: map[uint32]Response{}}
		b.conns[nd.addr] = c
	}
	return c
}

// deliver sends req to nd as a decoded frame; it returns the opaque.
func (b *fakeBroker) deliver(nd *ctlNode, req protocol.Request) uint32 {
	b.g.t.Helper()
	b.opaque++
	buf, err := protocol.AppendRequest(nil, b.opaque, 0, req)
	if err != nil {
		b.g.t.Fatal(err)
	}
	f, err := protocol.DecodeFrame(buf, protocol.DefaultLimits())
	if err != nil {
		b.g.t.Fatal(err)
	}
	nd.c.Deliver(&Inbound{Conn: b.conn(nd), Frames: []*protocol.Frame{f}})
	return b.opaque
}

// ask sends req to nd and runs the loop until it is answered.
func (b *fakeBroker) ask(nd *ctlNode, req protocol.Request) Response {
	b.g.t.Helper()
	op := b.deliver(nd, req)
	var r Response
	testwait.For(b.g.t, b.g.loop, 10*time.Second, fmt.Sprintf("%v answered", req.RequestCode()), func() bool {
		var ok bool
		r, ok = b.conn(nd).reply(op)
		return ok
	})
	return r
}

func (b *fakeBroker) register(nd *ctlNode) {
	b.g.t.Helper()
	r := b.ask(nd, &protocol.ControllerRegisterBrokerRequest{GroupRef: ctlGref, Identity: b.identity, BrokerAddr: b.addr})
	info, _ := r.Fields.(*protocol.ReplicaInfo)
	if r.Status != protocol.StatusOK || info == nil {
		b.g.t.Fatalf("register %s: %v %s", b.identity, r.Status, r.Remark)
	}
	b.id = info.BrokerID
}

// note waits for a notification on b's connection to nd that satisfies
// cond, and returns it.
func (b *fakeBroker) note(nd *ctlNode, what string, cond func(protocol.ReplicaInfo) bool) notified {
	b.g.t.Helper()
	var got notified
	testwait.For(b.g.t, b.g.loop, 20*time.Second, what, func() bool {
		c := b.conn(nd)
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, n := range c.notes {
			if cond(n.info) {
				got = n
				return true
			}
		}
		return false
	})
	return got
}

var ctlGref = protocol.GroupRef{ClusterName: "c1", BrokerName: "g1"}

// beat starts the brokers' heartbeats: every second, each beating broker
// heartbeats every running controller node.
func (g *ctlGroup) beat(brokers ...*fakeBroker) { g.beatEvery(time.Second, brokers...) }

func (g *ctlGroup) beatEvery(every time.Duration, brokers ...*fakeBroker) {
	var tick func()
	tick = func() {
		for _, b := range brokers {
			if !b.beating {
				continue
			}
			b.lastBeat = g.loop.Now()
			for _, nd := range g.nodes {
				if nd.c != nil {
					b.deliver(nd, &protocol.ControllerHeartbeatRequest{GroupRef: ctlGref, BrokerID: b.id, BrokerAddr: b.addr})
				}
			}
		}
		g.loop.At(g.loop.Now().Add(every), vtime.None{}, tick)
	}
	for _, b := range brokers {
		b.beating = true
	}
	tick()
}

func (g *ctlGroup) follower() *ctlNode {
	for _, id := range slices.Sorted(mapsKeys(g.peers)) {
		if nd := g.nodes[g.peers[id]]; nd.c != nil && !nd.status.Serving {
			return nd
		}
	}
	return nil
}

func TestControllerGroupElectsMastersAndFailsOver(t *testing.T) {
	const hb = 3 * time.Second
	g := newCtlGroupWith(t, 3, &controller.Config{HeartbeatTimeout: hb})
	l := g.waitLeader("a first controller leader")
	bs := []*fakeBroker{g.broker("id-a", "10.0.0.1:10911"), g.broker("id-b", "10.0.0.2:10911"), g.broker("id-c", "10.0.0.3:10911")}
	for i, b := range bs {
		if b.register(l); b.id != int64(i+1) {
			t.Fatalf("broker %s got id %d, want %d", b.identity, b.id, i+1)
		}
	}
	g.beat(bs...)
	// The group's first master: all caught up alike, so the lowest id.
	for _, b := range bs {
		b.note(l, "master 1 at epoch 1 notified", func(in protocol.ReplicaInfo) bool { return in.MasterID == 1 && in.MasterEpoch == 1 })
	}
	if r := bs[0].ask(l, &protocol.AlterSyncStateSetRequest{GroupRef: ctlGref, MasterID: 1, MasterEpoch: 1, SyncStateSetEpoch: 1, SyncStateSet: []int64{1, 2, 3}}); r.Status != protocol.StatusOK {
		t.Fatalf("alter to {1,2,3}: %v %s", r.Status, r.Remark)
	}
	// A follower sends brokers to the leader.
	f := g.follower()
	if r := bs[1].ask(f, &protocol.GetReplicaInfoRequest{GroupRef: ctlGref}); r.Status != protocol.StatusControllerNotLeader || r.Remark != l.addr {
		t.Fatalf("follower's answer: %v %q, want NOT_LEADER %q", r.Status, r.Remark, l.addr)
	}
	// The master goes silent: after the timeout a set member takes over.
	bs[0].beating = false
	n := bs[1].note(l, "master 2 at epoch 2", func(in protocol.ReplicaInfo) bool { return in.MasterEpoch == 2 })
	if n.info.MasterID != 2 || !slices.Equal(n.info.SyncStateSet, []int64{2}) {
		t.Fatalf("after the master's silence: %+v", n.info)
	}
	if gap := n.at.Sub(bs[0].lastBeat); gap < hb || gap > hb+time.Second {
		t.Fatalf("elected %v after the master's last heartbeat, want within [%v, %v]", gap, hb, hb+time.Second)
	}
	if r := bs[1].ask(l, &protocol.AlterSyncStateSetRequest{GroupRef: ctlGref, MasterID: 2, MasterEpoch: 2, SyncStateSetEpoch: 3, SyncStateSet: []int64{2, 3}}); r.Status != protocol.StatusOK {
		t.Fatalf("alter to {2,3}: %v %s", r.Status, r.Remark)
	}
	// The controller leader dies with the master: the new leader has heard
	// no heartbeats, so it waits a full timeout before it elects anyone.
	bs[1].beating = false
	g.stop(l)
	nl := g.waitLeader("a controller leader after the first died")
	n = bs[2].note(nl, "master 3 at epoch 3", func(in protocol.ReplicaInfo) bool { return in.MasterEpoch == 3 })
	if n.info.MasterID != 3 {
		t.Fatalf("after the second failover: %+v", n.info)
	}
	if wait := n.at.Sub(nl.servingSince); wait < hb {
		t.Fatalf("the new leader elected %v after it began to lead, before a heartbeat timeout (%v)", wait, hb)
	}
	checkFollowerMetadata(t, g, bs[2], nl)
}

// checkFollowerMetadata asks a follower for the metadata: it names the
// leader and holds the applied groups.
func checkFollowerMetadata(t *testing.T, g *ctlGroup, b *fakeBroker, leader *ctlNode) {
	t.Helper()
	f := g.follower()
	r := b.ask(f, &protocol.GetControllerMetadataRequest{})
	md, _ := r.Fields.(*protocol.ControllerMetadata)
	testwait.For(t, g.loop, 5*time.Second, "the follower applied the last election", func() bool {
		r = b.ask(f, &protocol.GetControllerMetadataRequest{})
		md, _ = r.Fields.(*protocol.ControllerMetadata)
		return md != nil && len(md.Groups) == 1 && md.Groups[0].MasterEpoch == 3
	})
	if md.IsLeader || md.LeaderAddr != leader.addr || md.Term != int64(leader.status.Term) || md.Term < 2 || md.Groups[0].MasterID != 3 || !slices.Equal(md.Groups[0].SyncStateSet, []int64{3}) {
		t.Fatalf("follower's metadata: %+v %+v", md, md.Groups)
	}
	if r := b.ask(f, &protocol.ElectMasterRequest{GroupRef: ctlGref}); r.Status != protocol.StatusControllerNotLeader || r.Remark != leader.addr {
		t.Fatalf("follower's answer to an election: %v %q", r.Status, r.Remark)
	}
}

// Requests arriving more often than the Core's scan interval must not put
// its Tick off: each one moves the time the Core asks for.
func TestControllerElectsUnderAStreamOfRequests(t *testing.T) {
	g := newCtlGroupWith(t, 1, &controller.Config{})
	l := g.waitLeader("the single node leads")
	b := g.broker("id-a", "10.0.0.1:10911")
	b.register(l)
	g.beatEvery(100*time.Millisecond, b)
	start := g.loop.Now()
	n := b.note(l, "the first master", func(in protocol.ReplicaInfo) bool { return in.MasterEpoch == 1 })
	if d := n.at.Sub(start); d > 2*controller.DefaultScanInterval {
		t.Fatalf("first master elected %v after the heartbeats began, want within %v", d, 2*controller.DefaultScanInterval)
	}
}

// TestNewLeaderServesReadsWithoutProposals: a new controller leader's
// empty entry reaches no state machine, and a read's index is the commit
// index, that entry's. With nothing proposed after the leader change (the
// master keeps heartbeating, so nobody is elected), reads must still be
// answered: once, they waited for an applied command at that index that
// never came, and every broker's request timed out.
func TestNewLeaderServesReadsWithoutProposals(t *testing.T) {
	g := newCtlGroupWith(t, 3, &controller.Config{HeartbeatTimeout: 3 * time.Second})
	l := g.waitLeader("a first controller leader")
	b := g.broker("id-a", "10.0.0.1:10911")
	b.register(l)
	g.stop(l)
	nl := g.waitLeader("a controller leader after the first died")
	r := b.ask(nl, &protocol.GetReplicaInfoRequest{GroupRef: ctlGref, BrokerID: b.id})
	if info, _ := r.Fields.(*protocol.ReplicaInfo); r.Status != protocol.StatusOK || info == nil || info.BrokerID != b.id {
		t.Fatalf("read on the new leader: %v %s %+v", r.Status, r.Remark, r.Fields)
	}
}
