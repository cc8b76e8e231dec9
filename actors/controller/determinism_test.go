package controller

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// replicas is the in-test harness for determinism: the same log fed to
// several States, each result and each snapshot compared byte for byte.
type replicas struct {
	t     *testing.T
	nodes []*State
}

func (rs *replicas) apply(index uint64, cmd []byte) []byte {
	rs.t.Helper()
	first := rs.nodes[0].Apply(index, cmd)
	for i, n := range rs.nodes[1:] {
		if got := n.Apply(index, cmd); !bytes.Equal(got, first) {
			rs.t.Fatalf("entry %d: node %d result %x, node 0 %x", index, i+1, got, first)
		}
	}
	rs.same()
	return first
}

func (rs *replicas) same() {
	rs.t.Helper()
	first, err := rs.nodes[0].Snapshot()
	if err != nil {
		rs.t.Fatal(err)
	}
	for i, n := range rs.nodes[1:] {
		if got, _ := n.Snapshot(); !bytes.Equal(got, first) {
			rs.t.Fatalf("node %d's snapshot differs at index %d", i+1, n.Applied())
		}
	}
}

// randomLog is a log of n entries over two groups and five identities:
// registrations, set changes and elections with epochs near the current
// ones (so that many apply and many are fenced), and some garbage.
func randomLog(rng *rand.Rand, n int) [][]byte {
	var log [][]byte
	for range n {
		c := &command{Cluster: cl, Group: []string{"g", "h"}[rng.IntN(2)]}
		id := func() int64 { return rng.Int64N(6) }
		epoch := func() int32 { return rng.Int32N(6) }
		switch rng.IntN(5) {
		case 0:
			k := rng.IntN(5)
			c.Op, c.Identity, c.Addr = opRegister, fmt.Sprint("id", k), fmt.Sprint("addr", k, rng.IntN(2))
		case 1:
			c.Op, c.MasterID, c.MasterEpoch, c.SetEpoch = opAlter, id(), epoch(), epoch()
			for range 1 + rng.IntN(3) {
				c.Set = append(c.Set, id())
			}
		case 2, 3:
			c.Op, c.NewMaster, c.MasterEpoch, c.SetEpoch, c.Unclean = opElect, id(), epoch(), epoch(), rng.IntN(4) == 0
		default:
			b := make([]byte, rng.IntN(12))
			for i := range b {
				b[i] = byte(rng.UintN(256))
			}
			log = append(log, b)
			continue
		}
		log = append(log, encodeCommand(c))
	}
	return log
}

func TestDeterministicReplicas(t *testing.T) {
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 1))
		rs := &replicas{t: t, nodes: []*State{{}, {}, {}}}
		log := randomLog(rng, 200)
		applied := 0
		for i, cmd := range log {
			res := rs.apply(uint64(i+1), cmd)
			if r, err := decodeResult(res); err == nil && r.Status == protocol.StatusOK {
				applied++
			}
			// Now and then one node restarts from a snapshot of another.
			if rng.IntN(50) == 0 {
				snap, _ := rs.nodes[1].Snapshot()
				fresh := &State{}
				if err := fresh.Restore(snap); err != nil {
					t.Fatalf("seed %d: restore: %v", seed, err)
				}
				rs.nodes[2] = fresh
				rs.same()
			}
		}
		if applied < 20 {
			t.Fatalf("seed %d: only %d of %d entries applied: the log tests little", seed, applied, len(log))
		}
		checkEpochsOnly(t, rs.nodes[0])
	}
}

// checkEpochsOnly: whatever the log, a group's master is in its set.
func checkEpochsOnly(t *testing.T, s *State) {
	for _, g := range s.Groups() {
		if g.MasterID == protocol.NoBroker {
			continue
		}
		found := false
		for _, id := range g.SyncStateSet {
			found = found || id == g.MasterID
		}
		if !found {
			t.Fatalf("group %s: master %d not in its set %v", g.BrokerName, g.MasterID, g.SyncStateSet)
		}
	}
}

// TestCoreLogReplays: the log a leader's Core writes (registrations, the
// bootstrap election, set changes, a failover) gives three fresh replicas
// the leader's state and results, and its epochs only grow.
func TestCoreLogReplays(t *testing.T) {
	r := cluster3(t, Config{})
	r.now = t0.Add(time.Second)
	r.beat(2, "b", 1, 50, 0)
	r.beat(3, "c", 1, 60, 0)
	r.at(hbTimeout)
	r.settle()
	r.ask(&protocol.AlterSyncStateSetRequest{GroupRef: gref, MasterID: 3, MasterEpoch: 2, SyncStateSetEpoch: 3, SyncStateSet: []int64{2, 3}})
	if g := r.group(); g.MasterID != 3 || g.MasterEpoch != 2 || g.SyncStateSetEpoch != 4 {
		t.Fatalf("%+v", g)
	}
	rs := &replicas{t: t, nodes: []*State{{}, {}, {}}}
	var lastM, lastS int32
	for i, cmd := range r.log {
		if got, want := rs.apply(uint64(i+1), cmd), r.results[i]; !bytes.Equal(got, want) {
			t.Fatalf("entry %d: replica result differs from the leader's", i+1)
		}
		in, _ := rs.nodes[0].Group(cl, grp)
		if in.MasterEpoch < lastM || in.SyncStateSetEpoch < lastS {
			t.Fatalf("epochs went back at entry %d: %+v", i+1, in)
		}
		lastM, lastS = in.MasterEpoch, in.SyncStateSetEpoch
	}
	a, _ := rs.nodes[0].Snapshot()
	b, _ := r.st.Snapshot()
	if len(r.log) != 7 || !bytes.Equal(a, b) {
		t.Fatalf("%d entries; replicas equal to the leader: %v", len(r.log), bytes.Equal(a, b))
	}
}
