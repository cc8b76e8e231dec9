package raftnode

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

func TestElectsOneLeader(t *testing.T) {
	for _, n := range []int{1, 3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			c := newCluster(t, n, 1)
			l := c.mustLeader(time.Second)
			// Stays the leader: heartbeats hold the followers' timers.
			c.run(2*time.Second, func() bool { return false })
			if got := c.leader(); got != l {
				t.Fatalf("leader changed from %d to %v on a quiet network\n%s", l.id, got, c.tail(20))
			}
			for _, m := range c.members {
				if st := m.node.Status(); st.Lead != l.id {
					t.Fatalf("node %d follows %d, want %d", m.id, st.Lead, l.id)
				}
			}
		})
	}
}

func TestProposalsCommitEverywhereInOrder(t *testing.T) {
	c := newCluster(t, 3, 2)
	c.dropRate = 0.05
	for id := uint64(1); id <= 60; id++ {
		l := c.mustLeader(2 * time.Second)
		c.propose(l, id)
		c.step()
	}
	if !c.run(5*time.Second, func() bool { return len(c.acked)+len(c.dropped) == 60 && c.converged() }) {
		t.Fatalf("acked %d dropped %d of 60; converged %v\n%s", len(c.acked), len(c.dropped), c.converged(), c.tail(30))
	}
	if len(c.acked) < 50 {
		t.Fatalf("only %d of 60 proposals committed on a 5%% lossy network (dropped %v)", len(c.acked), c.dropped)
	}
	c.checkAcked()
	// Same order everywhere: c.applied fails at once on any disagreement,
	// and every node applied the same number of entries.
	for _, m := range c.members {
		if m.sm.Applied != c.members[0].sm.Applied {
			t.Fatalf("node %d applied %d, node 1 %d", m.id, m.sm.Applied, c.members[0].sm.Applied)
		}
	}
}

// A leader that crashes loses what it had not persisted; a new leader is
// elected and no acknowledged proposal is lost, before or after the old one
// comes back from its FS.
func TestLeaderCrashLosesNothingCommitted(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			c := newCluster(t, 3, seed)
			c.compactAt = 7
			id := uint64(0)
			for round := 0; round < 3; round++ {
				l := c.mustLeader(2 * time.Second)
				for range 12 {
					id++
					c.propose(l, id)
					c.step()
				}
				c.crash(l.id) // with writes outstanding and messages in flight
				nl := c.mustLeader(2 * time.Second)
				if nl.id == l.id {
					t.Fatalf("crashed node %d still leads", l.id)
				}
				c.checkAckedOnUp()
				c.restart(l.id)
			}
			if !c.run(5*time.Second, c.converged) {
				t.Fatalf("did not converge\n%s", c.tail(30))
			}
			c.checkAcked()
			if len(c.acked) == 0 {
				t.Fatal("nothing was acknowledged: the test checked nothing")
			}
		})
	}
}

// checkAckedOnUp is checkAcked over the live nodes, once they caught up with
// the highest acknowledged index.
func (c *cluster) checkAckedOnUp() {
	c.t.Helper()
	var top uint64
	for _, idx := range c.acked {
		top = max(top, idx)
	}
	up := func() bool {
		for _, m := range c.members {
			if m.up && m.sm.Applied < top {
				return false
			}
		}
		return true
	}
	if !c.run(3*time.Second, up) {
		c.t.Fatalf("live nodes did not reach acknowledged index %d\n%s", top, c.tail(30))
	}
	for id := range c.acked {
		for _, m := range c.members {
			if m.up && m.sm.Data[fmt.Sprintf("k%d", id)] != fmt.Sprintf("v%d", id) {
				c.t.Fatalf("acknowledged %d missing on live node %d", id, m.id)
			}
		}
	}
}

// An isolated leader stops serving within an election timeout: it refuses
// new proposals and reads, the ones in flight are dropped, not answered, and
// the majority elects another leader. Healed, the old leader follows and
// converges.
func TestPartitionedLeaderCannotCommitOrRead(t *testing.T) {
	c := newCluster(t, 5, 3)
	old := c.mustLeader(time.Second)
	c.propose(old, 1)
	c.run(time.Second, func() bool { return c.acked[1] != 0 })
	c.isolate(old.id, true)
	c.propose(old, 2)
	old.node.ReadIndex(100)
	c.process(old)
	c.run(election+2*tick, func() bool { return false })
	if st := old.node.Status(); st.Serving || st.Lead != 0 {
		t.Fatalf("isolated leader %d after an election timeout: %+v, want a follower of no one", old.id, st)
	}
	if c.dropped[2] != LeadershipLost || c.dropped[100] != NotLeader {
		t.Fatalf("in-flight requests of the isolated leader: dropped %v, want 2 leadership-lost and 100 not-leader", c.dropped)
	}
	c.propose(old, 3)
	old.node.ReadIndex(101)
	c.process(old)
	if c.dropped[3] != NotLeader || c.dropped[101] != NotLeader {
		t.Fatalf("requests to a non-serving leader: dropped %v", c.dropped)
	}
	nl := c.mustLeader(2 * time.Second)
	if nl.id == old.id {
		t.Fatal("the isolated node is the only leader")
	}
	c.propose(nl, 4)
	nl.node.ReadIndex(102)
	c.process(nl)
	c.run(time.Second, func() bool { return c.acked[4] != 0 && c.reads[102] != 0 })
	if c.acked[4] == 0 || c.reads[102] < c.acked[1] {
		t.Fatalf("majority side: acked %v reads %v", c.acked, c.reads)
	}
	if _, ok := c.acked[2]; ok {
		t.Fatal("proposal 2 acknowledged by the isolated leader")
	}
	if _, ok := c.reads[100]; ok {
		t.Fatal("read 100 answered by the isolated leader")
	}
	c.isolate(old.id, false)
	if !c.run(3*time.Second, c.converged) {
		t.Fatalf("did not converge after healing\n%s", c.tail(30))
	}
	if st := old.node.Status(); st.Serving || st.Lead == old.id {
		t.Fatalf("old leader after healing: %+v", st)
	}
	c.checkAcked()
}

// A follower that missed entries the others compacted away catches up from
// a snapshot.
func TestLaggingFollowerCatchesUpBySnapshot(t *testing.T) {
	c := newCluster(t, 3, 4)
	c.compactAt = 5
	l := c.mustLeader(time.Second)
	var lag uint64 = 1
	if lag == l.id {
		lag = 2
	}
	c.isolate(lag, true)
	for id := uint64(1); id <= 30; id++ {
		c.propose(l, id)
		c.step()
	}
	c.run(2*time.Second, func() bool { return len(c.acked) == 30 })
	if first := l.node.snapshotIndex(); first <= c.members[lag-1].sm.Applied {
		t.Fatalf("leader's snapshot at %d does not cover the lagging node's %d; no snapshot needed", first, c.members[lag-1].sm.Applied)
	}
	c.isolate(lag, false)
	if !c.run(3*time.Second, c.converged) {
		t.Fatalf("lagging node did not catch up\n%s", c.tail(30))
	}
	if !slices.ContainsFunc(c.trace, func(s string) bool { return strings.Contains(s, "MsgSnap") }) {
		t.Fatal("caught up without a snapshot")
	}
	c.checkAcked()
	// And its log on disk restarts from the snapshot.
	c.crash(lag)
	c.restart(lag)
	if !c.run(3*time.Second, c.converged) {
		t.Fatalf("no convergence after restarting the lagging node\n%s", c.tail(30))
	}
	c.checkAcked()
}

// runScenario is a fixed workload with crashes, a partition and loss; its
// trace is the test of determinism.
func runScenario(t *testing.T, seed uint64) []string {
	c := newCluster(t, 3, seed)
	c.dropRate = 0.1
	c.compactAt = 10
	for id := uint64(1); id <= 40; id++ {
		if l := c.leader(); l != nil {
			c.propose(l, id)
		}
		c.run(30*time.Millisecond, func() bool { return false })
		switch id {
		case 10:
			c.crash(1)
		case 15:
			c.restart(1)
		case 25:
			c.isolate(2, true)
		case 32:
			c.isolate(2, false)
		}
	}
	c.run(2*time.Second, c.converged)
	c.checkAcked()
	return c.trace
}

func TestSameSeedSameTrace(t *testing.T) {
	a, b := runScenario(t, 11), runScenario(t, 11)
	if !slices.Equal(a, b) {
		for i := range min(len(a), len(b)) {
			if a[i] != b[i] {
				t.Fatalf("traces of one seed differ at line %d:\n%s\n%s", i, a[i], b[i])
			}
		}
		t.Fatalf("traces of one seed differ in length: %d and %d", len(a), len(b))
	}
	if len(a) < 100 {
		t.Fatalf("trace of %d lines: the scenario did little", len(a))
	}
	if slices.Equal(a, runScenario(t, 12)) {
		t.Fatal("seeds 11 and 12 gave the same trace: the seed does not reach the timers or the network")
	}
}

// A leader that can send but not receive must give way: were it to keep
// heartbeating, no follower's timer would ever fire.
func TestLeaderThatCannotHearStepsDown(t *testing.T) {
	c := newCluster(t, 3, 5)
	old := c.mustLeader(time.Second)
	for _, o := range c.members {
		if o.id != old.id {
			c.cut[[2]uint64{o.id, old.id}] = true
		}
	}
	ok := c.run(3*time.Second, func() bool { l := c.leader(); return l != nil && l.id != old.id })
	if !ok {
		t.Fatalf("no new leader under an asymmetric partition of leader %d\n%s", old.id, c.tail(30))
	}
	c.propose(c.leader(), 1)
	if !c.run(time.Second, func() bool { return c.acked[1] != 0 }) {
		t.Fatal("the new leader does not commit")
	}
}

// A follower cut off while nothing was written rejoins with a log as long
// as anyone's. PreVote keeps its term from growing while it campaigns in
// vain (else it would ignore the leader's lower-term messages for good), and
// the vote lease keeps its campaigns from deposing the leader.
func TestRejoiningFollowerDoesNotDepose(t *testing.T) {
	c := newCluster(t, 3, 6)
	l := c.mustLeader(time.Second)
	term := l.node.Status().Term
	f := uint64(1)
	if f == l.id {
		f = 2
	}
	c.isolate(f, true)
	c.run(time.Second, func() bool { return false }) // it campaigns in vain
	c.isolate(f, false)
	c.run(2*time.Second, func() bool { return false })
	if got := c.leader(); got != l || l.node.Status().Term != term {
		t.Fatalf("after follower %d rejoined: leader %v term %d, want %d in term %d\n%s",
			f, got, l.node.Status().Term, l.id, term, c.tail(20))
	}
	if st := c.members[f-1].node.Status(); st.Lead != l.id || st.Term != term {
		t.Fatalf("rejoined follower %d: %+v, want to follow %d in term %d", f, st, l.id, term)
	}
}

// The vote lease itself: a follower that heard from its leader within the
// election timeout ignores a pre-vote from an up-to-date peer (PreVote alone
// would grant it), and grants it once the leader has been silent that long.
func TestVoteLease(t *testing.T) {
	c := newCluster(t, 3, 6)
	l := c.mustLeader(time.Second)
	followed := func() bool {
		for _, m := range c.members {
			if m.node.Status().Lead != l.id {
				return false
			}
		}
		return true
	}
	if !c.run(time.Second, followed) {
		t.Fatal("followers never heard from the leader")
	}
	var f, g *member
	for _, m := range c.members {
		switch {
		case m == l:
		case f == nil:
			f = m
		default:
			g = m
		}
	}
	preVote := func() *pb.Message {
		for g.pending != nil {
			c.persist(g) // so that the answer is not held behind a write
		}
		last, _ := g.node.ms.LastIndex()
		lastTerm, _ := g.node.ms.Term(last)
		m := &pb.Message{Type: pb.MsgPreVote.Enum(), From: new(f.id), To: new(g.id),
			Term: new(l.node.Status().Term + 1), Index: new(last), LogTerm: new(lastTerm)}
		if err := g.node.Step(c.now, m); err != nil {
			t.Fatal(err)
		}
		for _, m := range g.node.Ready().Messages {
			if m.GetType() == pb.MsgPreVoteResp {
				return m
			}
		}
		return nil
	}
	if resp := preVote(); resp != nil {
		t.Fatalf("follower answered a pre-vote while its leader is live: %v", resp)
	}
	c.now = c.now.Add(election) // the leader went quiet; no tick, so g does not campaign
	if resp := preVote(); resp == nil || resp.GetReject() {
		t.Fatalf("follower did not grant a pre-vote after an election timeout of silence: %v", resp)
	}
}
