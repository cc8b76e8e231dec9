package main

// Jepsen-style tests of controller mode with real processes: a controller
// group of three (`wharf controller`), a name server and one broker group
// of three brokers in controller mode (the controllers make one the master
// and the others its slaves). Every link a node dials goes through
// internal/faultnet: broker -> each controller, broker -> name server,
// controller -> controller, and slave -> master's replication port (one
// link per broker's port, shared by its slaves: a master announces one
// address, brokerIP2 127.0.0.2 with its haListenPort, where the link
// listens). Producers on name-server routes record every
// send (WithRetries(0): a duplicate is the broker's); in each round one
// fault strikes the master under load:
//
//   - kill -9: a new master must be elected and take writes (the time from
//     the kill to the first SEND_OK on the new master is logged, and summed
//     up over the rounds); the old one restarts on its store and rejoins
//     as a slave, truncating what it alone had;
//   - SIGSTOP for longer than its lease (1.5 s) and the controllers'
//     heartbeat timeout (3 s), until a new master took writes, then
//     SIGCONT: the old master must acknowledge no send invoked while it
//     was stopped (it could write none before the pause, and its lease
//     has run out after it), and becomes a slave;
//   - a partition of the master from the controllers and the name server,
//     in even rounds from its slaves too (its clients still reach it: its
//     lease alone must fence it) until a new master took writes, then
//     healed: the old master must acknowledge no send invoked more than a
//     lease after the cut;
//   - the controller leader killed together with the master.
//
// After the fault, once every replica's log ends where the master's does,
// every replica is read from the first offset, and the whole history is
// checked: no lost-write, duplicate, inconsistent-offsets, nonmonotonic;
// and jepsen.CheckMasters over every SEND_OK: the broker that answered
// (the offset message id names the store host) and its master epoch (the
// epoch file's range holding the record's CommitLog offset), so that no two
// brokers acknowledged in one epoch and none acknowledged a send invoked
// after a newer epoch's first ack.

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/internal/faultnet"
	"github.com/wharfmq/wharf/internal/jepsen"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// ctlHeartbeatTimeout is the controllers' (their default); the lease is
// the brief's 1.5 s.
const (
	ctlHeartbeatTimeout = 3 * time.Second
	ctlLease            = 1500 * time.Millisecond
)

// ctlRig is the cluster of one controller-mode test: the classic rig's
// name server, faultnet and history, plus the controllers and three
// brokers whose roles the controllers choose.
type ctlRig struct {
	*jepsenRig
	ctl       *e2eControllers
	ctlAddrs  string // the controllers' own addresses, for the test's questions
	nodes     [3]*jepsenNode
	load      *jepsenLoad       // the round's
	ids       map[string]string // earlier rounds' acks: key -> offset message id
	failovers []time.Duration   // kill -9 of the master to the first SEND_OK on the new one
	directHA  bool              // slaves dial their master's replication port itself, not a link
}

// startCtlRig starts the cluster; with directHA the slaves replicate
// straight from the master's port (the throughput comparison: no proxy
// on the data path).
func startCtlRig(t *testing.T, topic string, directHA bool) *ctlRig {
	t.Helper()
	jr := &jepsenRig{t: t, ctx: e2eCtx(t, 5*time.Minute), topic: topic, net: faultnet.NewNet(), h: &jepsen.History{}}
	t.Cleanup(func() { jr.net.Close() })
	jr.ns = startNamesrv(t, "--brokerNotActiveTimeoutMillis", "2000")
	r := &ctlRig{jepsenRig: jr, ids: map[string]string{}, directHA: directHA}
	r.startControllers()
	ports := e2eFreePorts(t, 6)
	for i := range r.nodes {
		r.nodes[i] = r.ctlNode("b"+strconv.Itoa(i), ports[2*i], ports[2*i+1])
	}
	r.waitMaster(20*time.Second, nil, true)
	admin, err := client.NewAdmin("", client.WithNameServer(r.ns.addr), client.WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	testwait.For(t, testwait.Wall, 10*time.Second, "the master registered with the name server", func() bool {
		ci, err := admin.ClusterInfo(r.ctx)
		if err != nil {
			return false
		}
		for _, b := range ci.Brokers {
			if b.Alive && b.BrokerID == 0 {
				return true
			}
		}
		return false
	})
	if created, err := admin.CreateTopicInCluster(r.ctx, "DefaultCluster", topic, jepsenQueues); err != nil || len(created) != 1 {
		t.Fatalf("create topic in the cluster: %v %v", created, err)
	}
	for _, n := range r.nodes {
		haWaitTopic(t, n.b.addr, topic, 10*time.Second)
	}
	return r
}

// startControllers starts three controller nodes c0..c2; each dials its
// peers through faultnet, so its --controllerPeers names its own address
// and its links to the others (raft ids hash the names, not addresses).
func (r *ctlRig) startControllers() {
	g := &e2eControllers{t: r.t, bin: e2eBinary(r.t), procs: make([]*e2eBroker, 3)}
	for _, p := range e2eFreePorts(r.t, 3) {
		g.addrs = append(g.addrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		g.dirs = append(g.dirs, r.t.TempDir())
	}
	r.ctl, r.ctlAddrs = g, strings.Join(g.addrs, ";")
	for i := range g.addrs {
		r.startController(i)
	}
}

func (r *ctlRig) startController(i int) {
	g := r.ctl
	entries := make([]string, len(g.addrs))
	for j, addr := range g.addrs {
		if j != i {
			addr = r.link(fmt.Sprintf("c%d", i), fmt.Sprintf("c%d", j), addr)
		}
		entries[j] = fmt.Sprintf("n%d-%s", j, addr)
	}
	p := &e2eBroker{t: r.t, dir: g.dirs[i], addr: g.addrs[i], stderr: &syncBuffer{}, done: make(chan struct{})}
	args := append([]string{"controller", "--controllerPeers", strings.Join(entries, ";"), "--controllerSelfId", fmt.Sprintf("n%d", i),
		"--storePathRootDir", g.dirs[i]}, e2eControllerFlags...)
	p.launch(g.bin, args)
	if !p.waitLog(`msg="controller started" listen=`+g.addrs[i]+" ", 10*time.Second) {
		r.t.Fatalf("controller c%d did not start:\n%s", i, p.log())
	}
	g.procs[i] = p
}

// ctlNode starts a broker of the group in controller mode, its links to
// the controllers and the name server through faultnet.
func (r *ctlRig) ctlNode(name string, port, haPort int) *jepsenNode {
	ctls := make([]string, len(r.ctl.addrs))
	for i, a := range r.ctl.addrs {
		ctls[i] = r.link(name, fmt.Sprintf("c%d", i), a)
	}
	n := &jepsenNode{name: name, port: port, haPort: haPort, nsAddr: r.link(name, "ns", r.ns.addr),
		flags: []string{"--brokerName", jepsenGroup, "--enableControllerMode=true", "--controllerAddr", strings.Join(ctls, ";"),
			"--masterLeaseMillis", strconv.Itoa(int(ctlLease.Milliseconds())),
			// Above haMetadataInterval (3 s): an idle master sends
			// nothing more often, and its slaves would redial.
			"--haHousekeepingInterval", "5000"}}
	if !r.directHA {
		// Its replication port as its slaves dial it: brokerIP2
		// announces 127.0.0.2 with the port, where the link listens.
		ha := strconv.Itoa(haPort)
		if _, err := r.net.LinkOn("slaves", name, "127.0.0.2:"+ha, "127.0.0.1:"+ha); err != nil {
			r.t.Fatal(err)
		}
		n.flags = append(n.flags, "--brokerIP2", "127.0.0.2")
	}
	n.b = startClusterBroker(r.t, r.t.TempDir(), port, haPort, n.nsAddr, n.flags...)
	return n
}

// group is the broker group as the controller leader holds it.
func (r *ctlRig) group() (protocol.ReplicaInfo, bool) {
	ctx, cancel := context.WithTimeout(r.ctx, time.Second)
	defer cancel()
	leader, err := client.ControllerMetadata(ctx, r.ctlAddrs, client.WithTimeout(500*time.Millisecond))
	if err != nil || len(leader.Groups) != 1 {
		return protocol.ReplicaInfo{}, false
	}
	return leader.Groups[0], true
}

func (r *ctlRig) nodeAt(addr string) *jepsenNode {
	for _, n := range r.nodes {
		if n.b.addr == addr {
			return n
		}
	}
	return nil
}

// waitMaster waits until the controllers name a master other than not
// (and, with full, one whose SyncStateSet holds all three brokers, every
// one alive); it returns the master and the group.
func (r *ctlRig) waitMaster(within time.Duration, not *jepsenNode, full bool) (*jepsenNode, protocol.ReplicaInfo) {
	r.t.Helper()
	var m *jepsenNode
	var last protocol.ReplicaInfo
	testwait.For(r.t, testwait.Wall, within, "a master elected", func() bool {
		g, ok := r.group()
		if !ok {
			return false
		}
		last, m = g, r.nodeAt(g.MasterAddr)
		if m == nil || m == not {
			return false
		}
		if !full {
			return true
		}
		alive := 0
		for _, rep := range g.Replicas {
			if rep.Alive {
				alive++
			}
		}
		return len(g.SyncStateSet) == len(r.nodes) && alive == len(r.nodes)
	})
	if r.t.Failed() {
		r.t.Logf("last group: %+v", last)
	}
	return m, last
}

// ctlLeader waits for a controller that says it leads and returns its
// address. (e2eControllers.waitLeader compares the leader each node names,
// here the address of its faultnet link.)
func (r *ctlRig) ctlLeader(within time.Duration) string {
	r.t.Helper()
	var addr string
	testwait.For(r.t, testwait.Wall, within, "a controller leader", func() bool {
		ctx, cancel := context.WithTimeout(r.ctx, time.Second)
		defer cancel()
		leader, err := client.ControllerMetadata(ctx, r.ctlAddrs, client.WithTimeout(500*time.Millisecond))
		addr = leader.Addr
		return err == nil
	})
	return addr
}

// ackedBy returns when the first send acknowledged by n after mark
// completed, if one did.
func (r *ctlRig) ackedBy(mark int, n *jepsenNode) (time.Time, bool) {
	ops := r.h.Ops()[mark:]
	r.load.mu.Lock()
	defer r.load.mu.Unlock()
	for _, op := range ops {
		if op.Kind != jepsen.Complete || op.Outcome != jepsen.Acked {
			continue
		}
		if host, _, err := protocol.ParseOffsetMsgID(r.load.ids[op.Key]); err == nil && host.String() == n.b.addr {
			return op.Time, true
		}
	}
	return time.Time{}, false
}

// waitFirstAck waits for a send acknowledged by n after mark and returns
// how long after since it completed.
func (r *ctlRig) waitFirstAck(mark int, n *jepsenNode, since time.Time, within time.Duration) time.Duration {
	r.t.Helper()
	var at time.Time
	testwait.For(r.t, testwait.Wall, within, "a send acknowledged by the new master "+n.name, func() bool {
		t, ok := r.ackedBy(mark, n)
		at = t
		return ok
	})
	return at.Sub(since)
}

// waitSlave waits until the controllers hold n alive and not the master.
func (r *ctlRig) waitSlave(n *jepsenNode, within time.Duration) {
	r.t.Helper()
	testwait.For(r.t, testwait.Wall, within, n.name+" back as a live slave", func() bool {
		g, ok := r.group()
		if !ok || g.MasterAddr == n.b.addr {
			return false
		}
		for _, rep := range g.Replicas {
			if rep.BrokerAddr == n.b.addr {
				return rep.Alive
			}
		}
		return false
	})
}

// checkAfterCtl stops the load, waits for every replica's log to end
// where the others' do, reads every replica and checks the whole history
// (the round's own sends summed up apart), then the masters' epochs.
func (r *ctlRig) checkAfterCtl(round, began int, load *jepsenLoad) {
	r.t.Helper()
	load.end()
	load.mu.Lock()
	for k, id := range load.ids {
		r.ids[k] = id
	}
	load.mu.Unlock()
	var ends []int64
	if !testwait.Until(testwait.Wall, 30*time.Second, func() bool {
		ends = ends[:0]
		for _, n := range r.nodes {
			info, err := haInfo(n.b.addr)
			if err != nil {
				return false
			}
			ends = append(ends, info.CommitLogMaxOffset)
		}
		return ends[0] == ends[1] && ends[1] == ends[2]
	}) {
		g, _ := r.group()
		r.t.Fatalf("round %d: the replicas' logs end at %v, not together; group %+v", round, ends, g)
	}
	prefix := fmt.Sprintf("after%d/", round)
	for _, n := range r.nodes {
		if _, err := r.readReplica(prefix+n.name, n); err != nil {
			r.t.Fatalf("round %d: %v", round, err)
		}
	}
	ops := r.h.Ops()
	keep := func(op jepsen.Op) bool { return strings.HasPrefix(op.Process, prefix) }
	own := jepsen.Check(jepsen.Between(ops, began, len(ops), keep))
	r.t.Logf("round %d: its own sends: %v; they ended: %s", round, own, load.endings())
	r.report(round, "after the fault, every replica, every round's sends", jepsen.Check(jepsen.Between(ops, 0, len(ops), keep)))
	r.checkMasters(round, ops)
}

// checkMasters checks every SEND_OK so far against one master per epoch:
// its broker from its offset message id, its epoch from the master's
// epoch file (the epoch whose range holds the record's CommitLog offset).
func (r *ctlRig) checkMasters(round int, ops []jepsen.Op) {
	r.t.Helper()
	m, _ := r.waitMaster(10*time.Second, nil, false)
	epochs, err := readEpochFile(filepath.Join(m.b.dir, "epochFileCheckpoint"))
	if err != nil {
		r.t.Fatalf("round %d: %v", round, err)
	}
	invoked := map[string]int{}
	var acks []jepsen.Ack
	per := map[string]int{} // "epoch broker" -> acks
	for _, op := range ops {
		switch {
		case op.Kind == jepsen.Invoke:
			invoked[op.Key] = op.Seq
		case op.Kind == jepsen.Complete && op.Outcome == jepsen.Acked:
			host, off, err := protocol.ParseOffsetMsgID(r.ids[op.Key])
			if err != nil {
				r.t.Errorf("round %d: %s acknowledged with message id %q: %v", round, op.Key, r.ids[op.Key], err)
				continue
			}
			a := jepsen.Ack{Key: op.Key, Broker: host.String(), Epoch: epochAt(epochs, off), Invoked: invoked[op.Key], Completed: op.Seq}
			acks = append(acks, a)
			who := a.Broker
			if n := r.nodeAt(a.Broker); n != nil {
				who = n.name
			}
			per[fmt.Sprintf("epoch %d by %s", a.Epoch, who)]++
		}
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range per {
			if !yield(k) {
				return
			}
		}
	})
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s: %d", k, per[k]))
	}
	r.t.Logf("round %d: epochs %v; acks %s", round, epochs, strings.Join(parts, ", "))
	anomalies := jepsen.CheckMasters(acks)
	for i, a := range anomalies {
		if i == 20 {
			r.t.Errorf("... and %d more", len(anomalies)-i)
			break
		}
		r.t.Errorf("round %d, one master per epoch: %v", round, a)
	}
	if len(anomalies) > 0 {
		r.dumpHistory(round)
	}
}

// ctlEpoch is one line of the epoch file: epoch and start offset.
type ctlEpoch struct {
	Epoch int32
	Start int64
}

// readEpochFile reads a store's epoch file (storage's CheckpointFile
// text: a count, a CRC, then "epoch-startOffset" lines).
func readEpochFile(path string) ([]ctlEpoch, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("epoch file: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 2 {
		return nil, fmt.Errorf("epoch file %s: %q", path, b)
	}
	var out []ctlEpoch
	for _, l := range lines[2:] {
		es, ss, ok := strings.Cut(l, "-")
		e, err1 := strconv.ParseInt(es, 10, 32)
		s, err2 := strconv.ParseInt(ss, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("epoch file %s: line %q", path, l)
		}
		out = append(out, ctlEpoch{int32(e), s})
	}
	if n, err := strconv.Atoi(lines[0]); err != nil || n != len(out) {
		return nil, fmt.Errorf("epoch file %s: %d entries, the header says %q", path, len(out), lines[0])
	}
	return out, nil
}

// epochAt is the epoch holding CommitLog offset off (0: before them all).
func epochAt(epochs []ctlEpoch, off int64) int32 {
	i, _ := slices.BinarySearchFunc(epochs, off+1, func(e ctlEpoch, t int64) int { return cmp.Compare(e.Start, t) })
	if i == 0 {
		return 0
	}
	return epochs[i-1].Epoch
}

// ctlTest runs rounds of one fault on a fresh cluster: fault injects it on
// the round's master and heals it; the checks after it are common.
func ctlTest(t *testing.T, topic string, fault func(n int, r *ctlRig, m *jepsenNode)) *ctlRig {
	r := startCtlRig(t, topic, false)
	start, rounds := time.Now(), ctlRounds()
	for n := range rounds {
		began, mark := time.Now(), r.h.Len()
		r.load = r.startLoad(n, 4)
		r.waitAcked(r.h.Len(), 200, 10*time.Second, "before the fault")
		m, _ := r.waitMaster(10*time.Second, nil, true)
		fault(n, r, m)
		r.waitAcked(r.h.Len(), 100, 15*time.Second, "after the fault healed")
		r.checkAfterCtl(n, mark, r.load)
		t.Logf("round %d took %v", n, time.Since(began).Round(time.Millisecond))
		if t.Failed() {
			break
		}
	}
	t.Logf("%d rounds in %v", rounds, time.Since(start).Round(time.Millisecond))
	return r
}

// ctlRounds is -jepsen.rounds when given, else 2: `make test` runs two
// rounds of each fault (the classic tests' default of 3 would cost
// another 20 s), `make jepsen` ROUNDS.
func ctlRounds() int {
	n := 2
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "jepsen.rounds" {
			n = *jepsenRounds
		}
	})
	return max(n, 1)
}

// rejoined waits until the old master m is a live slave again and
// replicating, and logs how its log rejoined the new master's. A log that
// goes on past the point it shares with the new master (bytes no slave
// acknowledged) is cut there: the broker records the cut and restarts
// itself on its store (actors.Env.Restart), and Open makes the cut.
func (r *ctlRig) rejoined(round int, m *jepsenNode) {
	r.t.Helper()
	r.waitSlave(m, 15*time.Second)
	const selfRestart = "restarting the broker on its store to cut its log"
	master, _ := r.waitMaster(10*time.Second, m, false)
	target, err := haInfo(master.b.addr)
	if err != nil {
		r.t.Fatalf("round %d: the master's end: %v", round, err)
	}
	testwait.For(r.t, testwait.Wall, 20*time.Second, m.name+" replicating again", func() bool {
		info, err := haInfo(m.b.addr)
		return err == nil && info.CommitLogMaxOffset >= target.CommitLogMaxOffset
	})
	how := "its log was a prefix of the new master's"
	switch log := m.b.log(); {
	case strings.Contains(log, selfRestart):
		cuts := regexp.MustCompile(`requested_cut=-?[0-9]+`).FindAllString(log, -1)
		how = "it recorded the cut of its log to the point it shares with the new master and restarted itself on its store to make it: " +
			strings.Join(cuts, ", ")
	case strings.Contains(log, "cutting it to the last common point"):
		how = "it cut its log to the point it shares with the new master"
	}
	r.t.Logf("round %d: %s rejoined as a slave; %s", round, m.name, how)
}

// newMaster waits for a master other than m to be elected and to take a
// write, and returns it and the time from since to its first SEND_OK.
func (r *ctlRig) newMaster(round, mark int, m *jepsenNode, since time.Time, within time.Duration) (*jepsenNode, time.Duration) {
	r.t.Helper()
	nm, g := r.waitMaster(within, m, false)
	took := r.waitFirstAck(mark, nm, since, within)
	r.t.Logf("round %d: %s master in epoch %d (SyncStateSet %v), its first SEND_OK %v after the fault on %s",
		round, nm.name, g.MasterEpoch, g.SyncStateSet, took.Round(time.Millisecond), m.name)
	return nm, took
}

// TestJepsenCtlKillMaster: kill -9 of the master under load; a new master
// is elected and takes writes; the old one restarts on its store and
// ports and rejoins as a slave.
func TestJepsenCtlKillMaster(t *testing.T) {
	r := ctlTest(t, "jepsen-ctl-kill", func(n int, r *ctlRig, m *jepsenNode) {
		mark, killed := r.h.Len(), time.Now()
		m.b.kill()
		_, took := r.newMaster(n, mark, m, killed, 15*time.Second)
		r.failovers = append(r.failovers, took)
		r.restart(m)
		r.rejoined(n, m)
	})
	if len(r.failovers) > 0 {
		xs := slices.Sorted(slices.Values(r.failovers))
		t.Logf("failover (kill -9 of the master to the first SEND_OK on the new one) over %d rounds: p50 %v, max %v",
			len(xs), xs[len(xs)/2].Round(time.Millisecond), xs[len(xs)-1].Round(time.Millisecond))
	}
}

// TestJepsenCtlPauseMaster: SIGSTOP of the master for longer than its
// lease and the controllers' heartbeat timeout, until another master took
// writes; then SIGCONT. A send invoked once the master was stopped cannot
// have been written before the pause, and the lease has run out when the
// pause ends: the old master must acknowledge none of them. It rejoins as
// a slave.
func TestJepsenCtlPauseMaster(t *testing.T) {
	ctlTest(t, "jepsen-ctl-pause", func(n int, r *ctlRig, m *jepsenNode) {
		p := m.b.cmd.Process
		mark, stopping := r.h.Len(), time.Now()
		if err := p.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		testwait.For(t, testwait.Wall, 5*time.Second, "the master stopped", func() bool { return jepsenStopped(p.Pid) })
		stopped := time.Now()
		r.newMaster(n, mark, m, stopping, 15*time.Second)
		if paused := time.Since(stopped); paused < ctlLease {
			t.Fatalf("round %d: the pause lasted %v, not longer than the lease", n, paused)
		}
		if err := p.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		r.rejoined(n, m)
		r.checkFenced(n, m, mark, stopped, "invoked while it was stopped")
	})
}

// checkFenced: n acknowledged no send of the round (from mark on)
// invoked after the instant after, by which its lease had run out or it
// could no longer write before its lease did.
func (r *ctlRig) checkFenced(round int, n *jepsenNode, mark int, after time.Time, what string) {
	r.t.Helper()
	late := map[string]bool{}
	bad := 0
	ops := r.h.Ops()[mark:]
	r.load.mu.Lock()
	defer r.load.mu.Unlock()
	for _, op := range ops {
		switch {
		case op.Kind == jepsen.Invoke && op.Time.After(after):
			late[op.Key] = true
		case op.Kind == jepsen.Complete && op.Outcome == jepsen.Acked && late[op.Key]:
			host, _, err := protocol.ParseOffsetMsgID(r.load.ids[op.Key])
			if err != nil || host.String() != n.b.addr {
				continue
			}
			if bad++; bad <= 5 {
				r.t.Errorf("round %d: %s, deposed, acknowledged %s (completed %v), %s", round, n.name, op.Key, op.Time.Format(time.StampMilli), what)
			}
		}
	}
	r.t.Logf("round %d: %d sends invoked after %v (%s); %d of them acknowledged by %s", round, len(late), after.Format(time.StampMilli), what, bad, n.name)
}

// TestJepsenCtlPartitionMaster: the master cut off from the three
// controllers and the name server, and in even rounds from its slaves too
// (their links to its replication port), until a new master took writes;
// then healed. Its producers still reach it: its lease alone must fence
// it. Its last answered heartbeat was sent before the cut, so its lease
// ends within ctlLease of it: it must acknowledge no send invoked later.
func TestJepsenCtlPartitionMaster(t *testing.T) {
	ctlTest(t, "jepsen-ctl-partition", func(n int, r *ctlRig, m *jepsenNode) {
		peers := []string{"c0", "c1", "c2", "ns"}
		if n%2 == 0 {
			peers = append(peers, "slaves")
		}
		mark, cutting := r.h.Len(), time.Now()
		for _, peer := range peers {
			if r.net.Partition(m.name, peer) != 1 {
				t.Fatalf("no link between %s and %s", m.name, peer)
			}
		}
		cut := time.Now()
		r.t.Logf("round %d: %s cut off from %v", n, m.name, peers)
		r.newMaster(n, mark, m, cutting, 15*time.Second)
		time.Sleep(500 * time.Millisecond) // the old master keeps its clients meanwhile: the lease must hold
		r.checkFenced(n, m, mark, cut.Add(ctlLease), "invoked after its lease")
		r.net.HealAll()
		r.rejoined(n, m)
	})
}

// TestJepsenCtlKillLeaderAndMaster: kill -9 of the controller leader and
// of the master together; the two other controllers elect a leader, which
// waits a heartbeat timeout and elects a new master from the SyncStateSet.
// Both restart: the controller rejoins as a follower, the broker as a slave.
func TestJepsenCtlKillLeaderAndMaster(t *testing.T) {
	ctlTest(t, "jepsen-ctl-leader", func(n int, r *ctlRig, m *jepsenNode) {
		li := r.ctl.index(r.ctlLeader(5 * time.Second))
		mark, killed := r.h.Len(), time.Now()
		r.ctl.procs[li].kill()
		m.b.kill()
		r.newMaster(n, mark, m, killed, 20*time.Second)
		r.startController(li)
		r.restart(m)
		r.rejoined(n, m)
	})
}

var (
	ctlBench       = flag.Bool("jepsen.bench", false, "TestJepsenCtlThroughput: run the throughput comparison")
	ctlBenchRounds = flag.Int("jepsen.benchrounds", 4, "TestJepsenCtlThroughput: rounds, each measuring every group, rotating their order")
	ctlBenchFor    = flag.Duration("jepsen.benchtime", 3*time.Second, "TestJepsenCtlThroughput: measured time of each group in each round")
)

// TestJepsenCtlThroughput (with -jepsen.bench) compares a SYNC group of
// three under controller mode (the SyncStateSet: every slave acknowledges)
// with a classic SYNC_MASTER and two slaves, on the same machine in one
// run: 16 producers on name-server routes each sending 1 KiB messages one
// at a time, -jepsen.benchtime per group per round, the order rotating
// by round. It logs each group's msgs/s and the median of the per-round
// ratios (controller over classic), for both classic settings of
// inSyncReplicas: 2 (the default: one slave's ack) and 3 (both, as the
// SyncStateSet of three asks).
func TestJepsenCtlThroughput(t *testing.T) {
	if !*ctlBench {
		t.Skip("a benchmark: run with -jepsen.bench")
	}
	ctl := startCtlRig(t, "bench-ctl", true)
	ctl.waitMaster(20*time.Second, nil, true)
	groups := []struct {
		name string
		ns   string
	}{{"controller", ctl.ns.addr}, {"classic-isr2", startClassicGroup(t, "bench-isr2", 2)}, {"classic-isr3", startClassicGroup(t, "bench-isr3", 3)}}
	topics := map[string]string{"controller": "bench-ctl", "classic-isr2": "bench-isr2", "classic-isr3": "bench-isr3"}
	rates := map[string][]float64{}
	for round := range max(*ctlBenchRounds, 1) {
		// Each group in turn goes first, then the order reverses, so
		// that none always runs first, last or in the middle.
		k := round % len(groups)
		order := append(slices.Clone(groups[k:]), groups[:k]...)
		if (round/len(groups))%2 == 1 {
			slices.Reverse(order)
		}
		for _, g := range order {
			rate, errs := ctlSyncLoad(t, g.ns, topics[g.name], 16, *ctlBenchFor)
			rates[g.name] = append(rates[g.name], rate)
			t.Logf("round %d: %s: %.0f msgs/s (%d errors)", round, g.name, rate, errs)
		}
	}
	for _, g := range groups {
		t.Logf("%s: median %.0f msgs/s over %d rounds %v", g.name, ctlMedian(rates[g.name]), len(rates[g.name]), ctlRound(rates[g.name]))
	}
	for _, classic := range []string{"classic-isr2", "classic-isr3"} {
		var ratios []float64
		var each []string
		for i := range rates["controller"] {
			ratios = append(ratios, rates["controller"][i]/rates[classic][i])
			each = append(each, fmt.Sprintf("%.2f", ratios[i]))
		}
		t.Logf("controller over %s: median ratio %.2f (rounds %s)", classic, ctlMedian(ratios), strings.Join(each, ", "))
	}
}

func ctlMedian(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	switch n := len(s); {
	case n == 0:
		return 0
	case n%2 == 0:
		return (s[n/2-1] + s[n/2]) / 2
	default:
		return s[n/2]
	}
}

func ctlRound(xs []float64) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x)
	}
	return out
}

// startClassicGroup starts a name server and a classic group (a
// SYNC_MASTER with inSyncReplicas isr and two slaves replicating
// directly), creates topic on it, and returns the name server's address.
func startClassicGroup(t *testing.T, topic string, isr int) string {
	ns := startNamesrv(t, "--brokerNotActiveTimeoutMillis", "2000")
	ports := e2eFreePorts(t, 6)
	startClusterBroker(t, t.TempDir(), ports[0], ports[1], ns.addr, "--brokerName", topic, "--brokerRole", "SYNC_MASTER",
		"--inSyncReplicas", strconv.Itoa(isr), "--haHousekeepingInterval", "5000")
	var slaves []*e2eBroker
	for i := 1; i <= 2; i++ {
		slaves = append(slaves, startClusterBroker(t, t.TempDir(), ports[2*i], ports[2*i+1], ns.addr, "--brokerName", topic,
			"--brokerRole", "SLAVE", "--brokerId", strconv.Itoa(i), "--haMasterAddress", "127.0.0.1:"+strconv.Itoa(ports[1]),
			"--haHousekeepingInterval", "5000"))
	}
	admin, err := client.NewAdmin("", client.WithNameServer(ns.addr), client.WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx := e2eCtx(t, time.Minute)
	testwait.For(t, testwait.Wall, 10*time.Second, "the classic group registered", func() bool {
		ci, err := admin.ClusterInfo(ctx)
		return err == nil && len(ci.Brokers) == 3
	})
	if created, err := admin.CreateTopicInCluster(ctx, "DefaultCluster", topic, jepsenQueues); err != nil || len(created) != 1 {
		t.Fatalf("create topic in the cluster: %v %v", created, err)
	}
	for _, s := range slaves {
		haWaitTopic(t, s.addr, topic, 10*time.Second)
	}
	return ns.addr
}

// ctlSyncLoad runs senders producers on ns's routes, each sending 1 KiB
// messages one at a time, for a second of warm-up and then d; it returns
// the acknowledged sends per second of d and the errors.
func ctlSyncLoad(t *testing.T, ns, topic string, senders int, d time.Duration) (float64, int) {
	p, err := client.NewProducer("", client.WithNameServer(ns), client.WithTimeout(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	body := make([]byte, 1024)
	warm := time.Now().Add(time.Second)
	end := warm.Add(d)
	var mu sync.Mutex
	acked, errs := 0, 0
	var wg sync.WaitGroup
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				_, err := p.Send(ctx, &protocol.Message{Topic: topic, Body: body})
				cancel()
				if now := time.Now(); now.After(warm) && now.Before(end) {
					mu.Lock()
					if err == nil {
						acked++
					} else {
						errs++
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return float64(acked) / d.Seconds(), errs
}
