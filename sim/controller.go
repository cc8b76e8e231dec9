package sim

import (
	"fmt"
	"math/rand"
	"slices"
	"time"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/actors/controller"
	"github.com/wharfmq/wharf/actors/raftnode"
	"github.com/wharfmq/wharf/internal/vtime"
	"github.com/wharfmq/wharf/protocol"
)

// Controller nodes in the simulation: each is the real actors.Controller
// (raft node, State and Core in their actor) on a Node of its own, with its
// own clock drift and its own crashable disk holding the raft log. Brokers
// in controller mode reach every controller over linkEnd pairs (their
// controller client dials each through Env.Dial and Calls on it); the
// controllers reach each other the same way. The simulator keeps, per
// controller node, a shadow controller.State fed every entry the node
// applies (its OnApplied hook), so the checks read the controller's own
// replicated state: who is master, at which epoch, with which SyncStateSet.

// ctlState is what the simulator follows of one controller node.
type ctlState struct {
	idx     int // its index in Sim.ctls
	shadow  *controller.State
	leading bool   // raft leader and serving (its last Status)
	term    uint64 // its last Status's term
}

// newControllerNode builds controller node i (not started).
func newControllerNode(w *World, i int, spec CtlSpec) *Node {
	n := &Node{w: w, name: spec.Name, addr: ctlAddr(i), disk: spec.Disk, sigma: spec.Disk.sigma(), drift: spec.Drift,
		ctl: &ctlState{idx: i}}
	n.mem = newMem(w)
	n.wrapFS()
	return n
}

// isController reports whether n is a controller node.
func (n *Node) isController() bool { return n.ctl != nil }

// startController starts controller node n's actors on its Env, on the
// raft log its disk kept.
func (s *Sim) startController(n *Node) error {
	n.ctl.shadow, n.ctl.leading = &controller.State{}, false
	c := actors.NewController(s.controllerConfig(n), n.env(), protocol.DefaultLimits())
	if err := c.Start(); err != nil {
		return fmt.Errorf("%s: start: %w", n.name, err)
	}
	n.serve, n.up, n.startedAt = c, true, s.w.Now()
	s.w.Tracef("%s start", n.name)
	return nil
}

// ctlPeers is every controller's raft id (1 + its index) and address.
func (s *Sim) ctlPeers() map[uint64]string {
	peers := map[uint64]string{}
	for i := range s.ctls {
		peers[uint64(i+1)] = ctlAddr(i).String()
	}
	return peers
}

// onStatus follows a controller's view of raft's leadership.
func (s *Sim) onStatus(n *Node, st raftnode.Status) {
	leading := st.Lead == uint64(n.ctl.idx+1) && st.Serving
	if leading != n.ctl.leading {
		s.w.Tracef("%s %s (term %d)", n.name, map[bool]string{true: "leads", false: "no longer leads"}[leading], st.Term)
	}
	n.ctl.leading, n.ctl.term = leading, st.Term
}

// leader is the controller node that leads and serves (nil: none).
func (s *Sim) leader() *Node {
	for _, n := range s.ctls {
		if n.up && n.ctl.leading && !n.paused {
			return n
		}
	}
	return nil
}

// ctlIndex is the controller at addr (-1: none).
func (s *Sim) ctlIndex(addr string) int {
	for i, n := range s.ctls {
		if n.addr.String() == addr {
			return i
		}
	}
	return -1
}

// dialCtl links node from (a broker or a controller) to controller k; a
// partition between them, or k being down, refuses it.
func (s *Sim) dialCtl(from *Node, k int, h actors.Handler) (actors.Conn, error) {
	to := s.ctls[k]
	if !to.up || s.cutBetween(from, to) {
		return nil, fmt.Errorf("dial %s: %w", to.name, errRefused)
	}
	return s.link(from, to, h, to.serve, kindCtl), nil
}

// dialHAAddr is a slave's dial in controller mode: the master's
// haListenPort as the controllers announced it.
func (s *Sim) dialHAAddr(from *Node, addr string, h actors.Handler) (actors.Conn, error) {
	to := s.haNode[addr]
	if to == nil || to.g != from.g {
		return nil, fmt.Errorf("dial %s: no such replication port: %w", addr, errRefused)
	}
	if !to.up || to.haServe == nil || s.cutBetween(from, to) {
		return nil, fmt.Errorf("dial %s: %w", to.name, errRefused)
	}
	return s.link(from, to, h, to.haServe, kindHA), nil
}

// link makes a linkEnd pair from node a (handler ha) to node b (hb).
func (s *Sim) link(a, b *Node, ha, hb actors.Handler, kind linkKind) *linkEnd {
	s.conns++
	ea := &linkEnd{s: s, id: s.conns, node: a, epoch: a.epoch, handler: ha, kind: kind}
	eb := &linkEnd{s: s, id: s.conns, node: b, epoch: b.epoch, handler: hb, kind: kind}
	ea.other, eb.other = eb, ea
	if kind == kindHA {
		a.g.links = append(a.g.links, ea)
	} else {
		s.ctlLinks = append(s.ctlLinks, ea)
	}
	s.w.Tracef("link %d: %s -> %s", ea.id, a.name, b.name)
	return ea
}

// pair is an unordered pair of nodes, the key of a partition between them.
type pair struct{ a, b *Node }

func pairOf(a, b *Node) pair {
	if a.name > b.name {
		a, b = b, a
	}
	return pair{a, b}
}

// cutBetween reports whether a partition separates a and b.
func (s *Sim) cutBetween(a, b *Node) bool {
	until, ok := s.pcuts[pairOf(a, b)]
	return ok && s.w.Now().Before(until)
}

// cutUntil is when the partition between a and b ends (zero: none).
func (s *Sim) cutUntil(a, b *Node) time.Time {
	if !s.cutBetween(a, b) {
		return time.Time{}
	}
	return s.pcuts[pairOf(a, b)]
}

// cut partitions a from b for d (both directions): replication links
// between them break silently (see linkEnd.write), links to controllers
// stall until it ends, as TCP does when a partition is shorter than its
// retransmission timeout.
func (s *Sim) cut(a, b *Node, d time.Duration) {
	p := pairOf(a, b)
	s.pcuts[p] = maxTime(s.pcuts[p], s.w.Now().Add(d))
}

// resetCtlLinks closes every controller link with an end on n (n
// crashed): the peer hears of it unless a partition broke the link.
func (s *Sim) resetCtlLinks(n *Node) {
	keep := s.ctlLinks[:0]
	for _, a := range s.ctlLinks {
		if a.node == n || a.other.node == n {
			a.closed, a.other.closed = true, true
			peer := a.other
			if a.other.node == n {
				peer = a
			}
			if !a.severed {
				s.disconnect(peer)
			}
			continue
		}
		if !a.closed {
			keep = append(keep, a)
		}
	}
	s.ctlLinks = keep
}

// pausable is a node's Dispatcher: while the node is paused (a process
// stopped, as by SIGSTOP), its mailbox runs are held, in order, and run
// when it resumes; its timers and I/O completions fire but only post to
// mailboxes, so nothing of the node runs until then.
type pausable struct {
	n *Node
	d *vtime.Dispatcher[owner]
}

func (p pausable) Schedule(fn func()) {
	if p.n.paused {
		p.n.held = append(p.n.held, fn)
		return
	}
	p.d.Schedule(fn)
}

func (p pausable) Throughput() int { return p.d.Throughput() }

// pause stops node n for d; it then runs what it was asked meanwhile.
func (s *Sim) pause(n *Node, d time.Duration) {
	if n.paused || !n.up {
		return
	}
	s.w.Tracef("fault: %s paused for %v", n.name, d)
	n.paused = true
	// A stopped process flushes nothing: the window check resumes a
	// window after it runs again.
	if from := s.w.Now().Add(d + n.windowBound()); n.g != nil && from.After(n.g.windowFrom) {
		n.g.windowFrom = from
	}
	epoch := n.epoch
	s.w.at(s.w.Now().Add(d), owner{}, func() { s.resume(n, epoch) })
}

func (s *Sim) resume(n *Node, epoch int) {
	if !n.paused {
		return
	}
	n.paused = false
	held := n.held
	n.held = nil
	if n.epoch != epoch {
		return // it crashed meanwhile: the held work died with it
	}
	s.w.Tracef("%s resumes (%d mailbox runs held)", n.name, len(held))
	own := n.own()
	for _, fn := range held {
		s.w.loop.Schedule(own, fn)
	}
}

// seededReader is a node's Env.Rand: the broker's controller identity is
// drawn from the seed.
func seededReader(w *World) *rand.Rand { return rand.New(rand.NewSource(w.rng.Int63())) }

// groupInfo is group g as controller n has applied it.
func (s *Sim) groupInfo(n *Node, g *brokerGroup) (protocol.ReplicaInfo, bool) {
	return n.ctl.shadow.Group(g.acfgCluster(), g.spec.Name)
}

// acfgCluster is the brokerClusterName the group's brokers register with.
func (g *brokerGroup) acfgCluster() string { return g.all[0].acfg.BrokerClusterName }

// onApplied checks every entry a controller applies, on its shadow of the
// controller's State: a group's master epoch only grows; an election
// (after the first) picks a member of the SyncStateSet it replaces; every
// node applies the same master for an epoch. It moves each group's master
// to the newest elected.
func (s *Sim) onApplied(n *Node, index uint64, cmd []byte) {
	before := make([]protocol.ReplicaInfo, len(s.groups))
	for i, g := range s.groups {
		before[i], _ = s.groupInfo(n, g)
	}
	n.ctl.shadow.Apply(index, cmd)
	for i, g := range s.groups {
		after, ok := s.groupInfo(n, g)
		if !ok {
			continue
		}
		s.checkApplied(n, g, before[i], after)
	}
}

func (s *Sim) checkApplied(n *Node, g *brokerGroup, before, after protocol.ReplicaInfo) {
	if g.ids == nil {
		g.ids = map[int64]*Node{}
	}
	for _, r := range after.Replicas {
		if rn := s.nodeAt[r.BrokerAddr]; rn != nil {
			g.ids[r.BrokerID] = rn
		}
	}
	if after.MasterEpoch < before.MasterEpoch || after.SyncStateSetEpoch < before.SyncStateSetEpoch {
		s.w.Violationf("%s: %s's master epoch went from %d to %d, set epoch from %d to %d", n.name, g.spec.Name,
			before.MasterEpoch, after.MasterEpoch, before.SyncStateSetEpoch, after.SyncStateSetEpoch)
	}
	if after.MasterEpoch != before.MasterEpoch && before.MasterEpoch > 0 && !slices.Contains(s.electable(g, before), after.MasterID) {
		s.w.Violationf("%s elected broker %d master of %s (epoch %d) outside the SyncStateSet %v of epoch %d",
			n.name, after.MasterID, g.spec.Name, after.MasterEpoch, before.SyncStateSet, before.MasterEpoch)
	}
	if after.MasterEpoch != before.MasterEpoch {
		if _, ok := s.replacedSet[epochKey{g.idx, after.MasterEpoch}]; !ok {
			s.replacedSet[epochKey{g.idx, after.MasterEpoch}] = slices.Clone(before.SyncStateSet)
		}
	}
	if after.MasterEpoch == before.MasterEpoch {
		if after.SyncStateSetEpoch > g.setEpoch && after.MasterEpoch == g.ctlEpoch {
			g.set, g.setEpoch = slices.Clone(after.SyncStateSet), after.SyncStateSetEpoch
			s.w.Tracef("%s: SyncStateSet %v (set epoch %d) applied", g.spec.Name, g.set, g.setEpoch)
		}
		return
	}
	key := epochKey{g.idx, after.MasterEpoch}
	if prev, ok := s.epochMaster[key]; ok && prev != after.MasterAddr {
		s.w.Violationf("%s applied %s as master of %s epoch %d, another controller %s", n.name, after.MasterAddr, g.spec.Name, after.MasterEpoch, prev)
	}
	s.epochMaster[key] = after.MasterAddr
	if _, ok := s.electedAt[key]; !ok {
		s.electedAt[key] = s.w.Now()
	}
	if after.MasterEpoch <= g.ctlEpoch {
		return
	}
	m := s.nodeAt[after.MasterAddr]
	if m == nil || m.g != g {
		s.w.Violationf("%s elected %q master of %s, not a broker of the group", n.name, after.MasterAddr, g.spec.Name)
		return
	}
	g.ctlEpoch, g.set, g.setEpoch = after.MasterEpoch, slices.Clone(after.SyncStateSet), after.SyncStateSetEpoch
	g.setMaster(m)
	s.w.Tracef("%s: %s master of epoch %d (broker %d, set %v), applied by %s", g.spec.Name, m.name, after.MasterEpoch, after.MasterID, g.set, n.name)
}

// electable is who may succeed the master of before's epoch without
// losing an acknowledged message: a member of its SyncStateSet, or, while
// no write of that epoch (and of the epochs before it, walking back) was
// acknowledged, of the set its election replaced: that master never began
// its epoch, so those members still hold everything acknowledged.
func (s *Sim) electable(g *brokerGroup, before protocol.ReplicaInfo) []int64 {
	out := slices.Clone(before.SyncStateSet)
	for ep := before.MasterEpoch; ep > 1 && s.writes[epochKey{g.idx, ep}] == nil; ep-- {
		out = append(out, s.replacedSet[epochKey{g.idx, ep}]...)
	}
	return out
}

// epochKey is a group's master epoch.
type epochKey struct {
	g     int
	epoch int32
}

// setMaster makes m the group's master (the others its slaves).
func (g *brokerGroup) setMaster(m *Node) {
	g.master = m
	g.slaves = g.slaves[:0]
	for _, n := range g.all {
		if n != m {
			g.slaves = append(g.slaves, n)
		}
	}
}
