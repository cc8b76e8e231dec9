package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// e2eControllers is a group of `wharf controller` processes on loopback
// ports, each with its own store directory.
type e2eControllers struct {
	t     *testing.T
	bin   string
	peers string   // --controllerPeers
	addrs []string // by node, n0 first
	dirs  []string
	procs []*e2eBroker
}

// fast raft timing keeps the test short; the heartbeat timeout is the
// default's.
// metricsPort 0: the node's port + 3 may be another test's free port.
var e2eControllerFlags = []string{"--electionTimeoutMillis", "300", "--tickIntervalMillis", "50", "--log-level", "info", "--metricsPort", "0"}

func startControllers(t *testing.T, n int) *e2eControllers {
	g := &e2eControllers{t: t, bin: e2eBinary(t)}
	var entries []string
	for i, p := range e2eFreePorts(t, n) {
		g.addrs = append(g.addrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		g.dirs = append(g.dirs, t.TempDir())
		entries = append(entries, fmt.Sprintf("n%d-%s", i, g.addrs[i]))
	}
	g.peers = strings.Join(entries, ";")
	g.procs = make([]*e2eBroker, n)
	for i := range n {
		g.start(i)
	}
	return g
}

func (g *e2eControllers) start(i int) {
	g.t.Helper()
	p := &e2eBroker{t: g.t, dir: g.dirs[i], addr: g.addrs[i], stderr: &syncBuffer{}, done: make(chan struct{})}
	args := append([]string{"controller", "--controllerPeers", g.peers, "--controllerSelfId", fmt.Sprintf("n%d", i),
		"--storePathRootDir", g.dirs[i]}, e2eControllerFlags...)
	p.launch(g.bin, args)
	if !p.waitLog(`msg="controller started" listen=`+g.addrs[i]+" ", 10*time.Second) {
		g.t.Fatalf("controller n%d did not start:\n%s", i, p.log())
	}
	g.procs[i] = p
}

type e2eControllerStatus struct {
	Leader string `json:"leader"`
	Nodes  []struct {
		Address    string `json:"address"`
		Leader     bool   `json:"leader"`
		LeaderAddr string `json:"leader_addr"`
		Term       int64  `json:"term"`
		Groups     int    `json:"groups"`
		Error      string `json:"error"`
	} `json:"nodes"`
}

// status runs `wharf controller status --json` on every node.
func (g *e2eControllers) status() (e2eControllerStatus, error) {
	var st e2eControllerStatus
	out, err := exec.Command(g.bin, "controller", "status", "--json", "--timeout", "500ms",
		"--controllerAddr", strings.Join(g.addrs, ";")).Output()
	if err != nil {
		return st, fmt.Errorf("controller status: %w: %s", err, out)
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return st, fmt.Errorf("controller status output %q: %w", out, err)
	}
	return st, nil
}

// waitLeader waits until exactly one node says it leads, it is not
// excluded, and every other node that answers names it; it returns the
// leader and its term.
func (g *e2eControllers) waitLeader(within time.Duration, not string) (string, int64) {
	g.t.Helper()
	var last e2eControllerStatus
	ok := testwait.Until(testwait.Wall, within, func() bool {
		st, err := g.status()
		last = st
		if err != nil || st.Leader == "" || st.Leader == not {
			return false
		}
		for _, n := range st.Nodes {
			if n.Error == "" && (n.Leader != (n.Address == st.Leader) || n.LeaderAddr != st.Leader) {
				return false
			}
		}
		return true
	})
	if !ok {
		g.t.Fatalf("no single controller leader (other than %q) within %v; last status %+v", not, within, last)
	}
	for _, n := range last.Nodes {
		if n.Leader {
			return last.Leader, n.Term
		}
	}
	return last.Leader, 0
}

func (g *e2eControllers) index(addr string) int {
	for i, a := range g.addrs {
		if a == addr {
			return i
		}
	}
	g.t.Fatalf("%s is no controller of the group", addr)
	return -1
}

// registerBroker registers a broker with the leader and heartbeats it
// once: the group's first master is elected at once.
func registerBroker(t *testing.T, leader string) {
	t.Helper()
	p := dialNamesrv(t, leader)
	ref := protocol.GroupRef{ClusterName: "DefaultCluster", BrokerName: "broker-a"}
	var info protocol.ReplicaInfo
	if f := p.call(&protocol.ControllerRegisterBrokerRequest{GroupRef: ref, Identity: "e2e-a", BrokerAddr: "127.0.0.1:10911"}, &info); f.Status != protocol.StatusOK || info.BrokerID != 1 {
		t.Fatalf("register: %v %s, id %d", f.Status, f.Remark, info.BrokerID)
	}
	if f := p.call(&protocol.ControllerHeartbeatRequest{GroupRef: ref, BrokerID: 1, BrokerAddr: "127.0.0.1:10911"}, nil); f.Status != protocol.StatusOK {
		t.Fatalf("heartbeat: %v %s", f.Status, f.Remark)
	}
}

func TestE2EControllerLeaderFailover(t *testing.T) {
	g := startControllers(t, 3)
	leader, term := g.waitLeader(10*time.Second, "")
	registerBroker(t, leader)
	all := strings.Join(g.addrs, ";")
	testwait.For(t, testwait.Wall, 5*time.Second, "cluster list shows master 1 at epoch 1", func() bool {
		out, err := exec.Command(g.bin, "cluster", "list", "--json", "--controllerAddr", all, "--timeout", "500ms").Output()
		var res struct {
			Controller string                `json:"controller"`
			Groups     []controllerGroupJSON `json:"groups"`
		}
		if err != nil || json.Unmarshal(out, &res) != nil || len(res.Groups) != 1 {
			return false
		}
		gr := res.Groups[0]
		return res.Controller == leader && gr.MasterID == 1 && gr.MasterEpoch == 1 && len(gr.Replicas) == 1 && gr.Replicas[0].Alive
	})

	old := g.index(leader)
	g.procs[old].kill()
	killed := time.Now()
	next, nextTerm := g.waitLeader(5*time.Second, leader)
	if nextTerm <= term || term < 1 {
		t.Fatalf("terms: %d then %d, want them to grow", term, nextTerm)
	}
	t.Logf("new controller leader %s %v after kill -9 of %s", next, time.Since(killed).Round(time.Millisecond), leader)

	// Back on its directory, the old leader rejoins as a follower with the
	// state it had applied.
	g.start(old)
	testwait.For(t, testwait.Wall, 10*time.Second, "the restarted node follows with the group applied", func() bool {
		nodes, err := client.ControllerNodes(e2eCtx(t, 2*time.Second), leader, client.WithTimeout(500*time.Millisecond))
		if err != nil || len(nodes) != 1 || nodes[0].Err != nil {
			return false
		}
		n := nodes[0]
		return !n.IsLeader && n.LeaderAddr == next && len(n.Groups) == 1 && n.Groups[0].MasterID == 1 && n.Groups[0].MasterEpoch == 1
	})
	if got, gotTerm := g.waitLeader(5*time.Second, ""); got != next || gotTerm != nextTerm {
		t.Fatalf("leader %s in term %d after the restart, want %s to keep leading in %d", got, gotTerm, next, nextTerm)
	}
	// SIGTERM stops a node cleanly.
	p := g.procs[old]
	if code, took := p.stop(syscall.SIGTERM, 5*time.Second); code != 0 || !p.waitLog(`msg="controller stopped cleanly"`, time.Second) {
		t.Fatalf("SIGTERM: exit code %d after %v, log:\n%s", code, took, p.log())
	}
}

// TestE2ENamesrvEmbeddedController: `wharf namesrv
// --enableControllerInNamesrv` runs a controller node in the name server's
// process, on its own port (as RocketMQ allows): it elects, serves
// metadata, and stops with the name server.
func TestE2ENamesrvEmbeddedController(t *testing.T) {
	bin := e2eBinary(t)
	ports := e2eFreePorts(t, 2)
	ctl := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))
	p := &e2eBroker{t: t, dir: t.TempDir(), addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), stderr: &syncBuffer{}, done: make(chan struct{})}
	p.launch(bin, []string{"namesrv", "--bindAddress", "127.0.0.1", "--listenPort", strconv.Itoa(ports[0]),
		"--enableControllerInNamesrv", "--controllerPeers", "n0-" + ctl, "--controllerSelfId", "n0", "--storePathRootDir", p.dir, "--metricsPort", "0"})
	if !p.waitLog(`msg="controller started" component=controller listen=`+ctl+" ", 10*time.Second) || !p.waitLog(`msg="name server started"`, time.Second) {
		t.Fatalf("the name server with its controller did not start:\n%s", p.log())
	}
	g := &e2eControllers{t: t, bin: bin, addrs: []string{ctl}}
	leader, _ := g.waitLeader(10*time.Second, "")
	registerBroker(t, leader)
	if code, took := p.stop(syscall.SIGTERM, 5*time.Second); code != 0 || !p.waitLog(`msg="name server stopped cleanly"`, time.Second) {
		t.Fatalf("SIGTERM: exit code %d after %v, log:\n%s", code, took, p.log())
	}
}
