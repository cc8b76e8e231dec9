package actors

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/wharfmq/wharf/actors/controller"
	"github.com/wharfmq/wharf/actors/raftnode"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/internal/vtime"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage/vfs"
)

// listState is a trivial ControllerStateMachine: the commands in order.
type listState struct{ cmds []string }

func (s *listState) Apply(_ uint64, cmd []byte) []byte {
	s.cmds = append(s.cmds, string(cmd))
	return []byte("ok " + string(cmd))
}
func (s *listState) Snapshot() ([]byte, error) { return json.Marshal(s.cmds) }
func (s *listState) Restore(b []byte) error {
	s.cmds = nil
	if len(b) == 0 {
		return nil
	}
	return json.Unmarshal(b, &s.cmds)
}

// ctlNode is one controller of the test group and what its hooks saw.
type ctlNode struct {
	id     uint64
	addr   string
	fs     *vfs.Mem
	c      *Controller
	state  *listState
	status raftnode.Status
	// servingSince is when this node last began to serve as leader.
	servingSince time.Time
	acked        map[uint64]string // proposal id -> result
	reads        map[uint64]int    // read id -> commands applied when it was served
	drops        map[uint64]raftnode.DropReason
}

// ctlGroup runs controllers on one virtual-time loop, linked by in-memory
// connections that carry encoded frames.
type ctlGroup struct {
	t     *testing.T
	loop  *vtime.Loop[vtime.None]
	nodes map[string]*ctlNode
	peers map[uint64]string
	conns atomic.Uint64
	// core, if set, runs the controller's own state and Core (else a
	// listState without one).
	core *controller.Config
}

func newCtlGroup(t *testing.T, n int) *ctlGroup { return newCtlGroupWith(t, n, nil) }

func newCtlGroupWith(t *testing.T, n int, core *controller.Config) *ctlGroup {
	g := &ctlGroup{t: t, loop: vtime.NewFIFO(testEpoch), nodes: map[string]*ctlNode{}, peers: map[uint64]string{}, core: core}
	for i := 1; i <= n; i++ {
		g.peers[uint64(i)] = fmt.Sprintf("127.0.0.1:%d", 9878-10*(i-1))
	}
	for id, addr := range g.peers {
		g.nodes[addr] = &ctlNode{id: id, addr: addr, fs: vfs.NewMem()}
	}
	for _, id := range slices.Sorted(mapsKeys(g.peers)) {
		g.start(g.nodes[g.peers[id]])
	}
	t.Cleanup(func() {
		for _, nd := range g.nodes {
			g.stop(nd)
		}
	})
	return g
}

func mapsKeys(m map[uint64]string) func(func(uint64) bool) {
	return func(yield func(uint64) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func (g *ctlGroup) start(nd *ctlNode) {
	g.t.Helper()
	nd.acked, nd.reads, nd.drops = map[uint64]string{}, map[uint64]int{}, map[uint64]raftnode.DropReason{}
	nd.status = raftnode.Status{}
	cfg := ControllerConfig{SelfID: nd.id, Peers: g.peers, FS: nd.fs, Dir: "/store/raft", Seed: 42, SnapshotEvery: 8,
		NewState: func() ControllerStateMachine { nd.state = &listState{}; return nd.state },
		OnApplied: func(_ uint64, _, result []byte, id uint64) {
			if id != 0 {
				nd.acked[id] = string(result)
			}
		},
		OnStatus: func(st raftnode.Status) {
			if st.Serving && !nd.status.Serving {
				nd.servingSince = g.loop.Now()
			}
			nd.status = st
		},
		OnRead: func(id uint64) {
			if nd.state != nil {
				nd.reads[id] = len(nd.state.cmds)
			}
		},
		OnDropped: func(d raftnode.Dropped) { nd.drops[d.ID] = d.Reason },
	}
	if g.core != nil {
		cfg.NewState, cfg.Core = nil, *g.core
	}
	nd.c = NewController(cfg, loopEnv(g.loop, Env{Dial: g.dialer(nd.addr)}), protocol.DefaultLimits())
	if err := nd.c.Start(); err != nil {
		g.t.Fatal(err)
	}
}

func (g *ctlGroup) stop(nd *ctlNode) {
	if nd.c == nil {
		return
	}
	c := nd.c
	nd.c = nil
	c.stop(func(pid *actor.PID) {
		c.sys.Root.Poison(pid)
		g.loop.RunUntil(func() bool { _, ok := c.sys.ProcessRegistry.GetLocal(pid.Id); return !ok }, time.Minute)
	})
}

func (g *ctlGroup) dialer(from string) func(addr string, h Handler) (Conn, error) {
	return func(addr string, h Handler) (Conn, error) {
		if nd := g.nodes[addr]; nd == nil || nd.c == nil {
			return nil, errors.New("connection refused")
		}
		return &pipeConn{g: g, id: g.conns.Add(1), from: from, to: addr}, nil
	}
}

// pipeConn is an outbound link: Send encodes the request as a frame and
// delivers it to the controller listening at to (while it runs).
type pipeConn struct {
	g        *ctlGroup
	id       uint64
	from, to string
	closed   atomic.Bool
}

func (c *pipeConn) ID() uint64         { return c.id }
func (c *pipeConn) RemoteAddr() string { return c.to }
func (c *pipeConn) Reply(Response)     {}
func (c *pipeConn) Close(string)       { c.closed.Store(true) }
func (c *pipeConn) Closed() bool       { return c.closed.Load() }
func (c *pipeConn) Send(req protocol.Request) {
	nd := c.g.nodes[c.to]
	if c.closed.Load() || nd == nil || nd.c == nil {
		c.closed.Store(true)
		return
	}
	buf, err := protocol.AppendRequest(nil, 0, protocol.FlagOneway, req)
	if err != nil {
		c.g.t.Fatal(err)
	}
	f, err := protocol.DecodeFrame(buf, protocol.DefaultLimits())
	if err != nil {
		c.g.t.Fatal(err)
	}
	nd.c.Deliver(&Inbound{Conn: &pipeConn{g: c.g, id: c.id, from: c.to, to: c.from}, Frames: []*protocol.Frame{f}})
}

func (g *ctlGroup) leader() *ctlNode {
	var l *ctlNode
	for _, nd := range g.nodes {
		if nd.c != nil && nd.status.Serving {
			if l != nil {
				return nil
			}
			l = nd
		}
	}
	return l
}

func (g *ctlGroup) waitLeader(what string) *ctlNode {
	g.t.Helper()
	testwait.For(g.t, g.loop, 20*time.Second, what, func() bool { return g.leader() != nil })
	return g.leader()
}

// waitApplied waits until every running node has applied want, in order.
func (g *ctlGroup) waitApplied(want []string) {
	g.t.Helper()
	testwait.For(g.t, g.loop, 20*time.Second, fmt.Sprintf("%d commands applied everywhere", len(want)), func() bool {
		for _, nd := range g.nodes {
			if nd.c != nil && (nd.state == nil || !slices.Equal(nd.state.cmds, want)) {
				return false
			}
		}
		return true
	})
}

func TestControllerGroupReplicatesAndSurvivesLeaderLoss(t *testing.T) {
	g := newCtlGroup(t, 3)
	l := g.waitLeader("a first leader")
	var want []string
	for i := uint64(1); i <= 20; i++ {
		cmd := fmt.Sprintf("cmd-%d", i)
		l.c.Propose(i, []byte(cmd))
		want = append(want, cmd)
	}
	g.waitApplied(want)
	if len(l.acked) != 20 || l.acked[7] != "ok cmd-7" {
		t.Fatalf("leader's results: %d of 20, #7 %q", len(l.acked), l.acked[7])
	}
	// A read on the leader sees every acknowledged command; a follower
	// refuses.
	l.c.ReadIndex(100)
	testwait.For(t, g.loop, 5*time.Second, "read 100 served", func() bool { _, ok := l.reads[100]; return ok })
	if l.reads[100] != 20 {
		t.Fatalf("read served with %d commands applied, want 20", l.reads[100])
	}
	for _, nd := range g.nodes {
		if nd != l {
			nd.c.ReadIndex(101)
			testwait.For(t, g.loop, 5*time.Second, "read 101 dropped", func() bool { return nd.drops[101] == raftnode.NotLeader })
			break
		}
	}
	// The leader dies; its disk keeps what it synced.
	g.stop(l)
	l.fs = l.fs.Crash(1, vfs.CrashOptions{})
	nl := g.waitLeader("a leader after the first one died")
	if nl == l {
		t.Fatal("the stopped node still leads")
	}
	for i := uint64(21); i <= 25; i++ {
		cmd := fmt.Sprintf("cmd-%d", i)
		nl.c.Propose(i, []byte(cmd))
		want = append(want, cmd)
	}
	g.waitApplied(want)
	// Back from its FS, the old leader recovers and catches up.
	g.start(l)
	g.waitApplied(want)
	if l.state == nil || len(l.state.cmds) != 25 {
		t.Fatalf("restarted node applied %v", l.state)
	}
}

func TestControllerRefusesBadPeerFrames(t *testing.T) {
	g := newCtlGroup(t, 3)
	nd := g.nodes[g.peers[1]]
	c := newConn(g.loop)
	for _, data := range [][]byte{{0xff, 0xff}, raftnode.EncodeMessage(sampleFromStranger())} {
		buf, err := protocol.AppendRequest(nil, 1, protocol.FlagOneway, &protocol.ControllerRaftMessageRequest{Data: data})
		if err != nil {
			t.Fatal(err)
		}
		f, err := protocol.DecodeFrame(buf, protocol.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		c.closed.Store(false)
		nd.c.Deliver(&Inbound{Conn: c, Frames: []*protocol.Frame{f}})
		if !c.closed.Load() {
			t.Fatalf("a bad raft message (%x) left the connection open", data)
		}
	}
}

func sampleFromStranger() *pb.Message {
	return &pb.Message{Type: pb.MsgHeartbeat.Enum(), From: new(uint64(9)), To: new(uint64(1)), Term: new(uint64(1))}
}
