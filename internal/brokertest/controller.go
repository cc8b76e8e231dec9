package brokertest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/actors/controller"
	"github.com/wharfmq/wharf/actors/raftnode"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/netio"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage/vfs"
)

// Controllers is a raft group of real controller nodes in-process: each an
// actors.Controller on an in-memory FS behind a netio listener on
// loopback, talking raft to the others over real sockets, on the wall
// clock (an election needs the peers' timers to run together, which a
// per-node movable clock would not give).
type Controllers struct {
	t     testing.TB
	nodes []*controllerNode
}

type controllerNode struct {
	id      uint64
	addr    string
	node    *actors.Controller
	srv     *netio.Server
	status  atomic.Pointer[raftnode.Status]
	stopped atomic.Bool
	once    sync.Once
}

// controllerTick and controllerElection are short so a test's first
// election takes a second or two, and one stays leader on a loaded machine.
const (
	controllerTick     = 50 * time.Millisecond
	controllerElection = time.Second
)

// StartControllers starts n controller nodes that form one raft group;
// t.Cleanup stops them. Their ports come from below the ephemeral range
// (a port probed free there is not taken meanwhile by some connection's
// local end).
func StartControllers(t testing.TB, n int) *Controllers {
	t.Helper()
	c := &Controllers{t: t}
	peers := map[uint64]string{}
	for i, p := range FreePorts(t, n) {
		id := uint64(i + 1)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		peers[id] = addr
		c.nodes = append(c.nodes, &controllerNode{id: id, addr: addr})
	}
	t.Cleanup(c.stopAll)
	for _, cn := range c.nodes {
		if err := c.start(cn, peers); err != nil {
			t.Fatalf("brokertest: controller %d: %v", cn.id, err)
		}
	}
	return c
}

func (c *Controllers) start(cn *controllerNode, peers map[uint64]string) error {
	limits := protocol.DefaultLimits()
	quiet := slog.New(slog.DiscardHandler)
	cfg := actors.ControllerConfig{SelfID: cn.id, Peers: peers, FS: vfs.NewMem(), Dir: "controller",
		TickInterval: controllerTick, ElectionTimeout: controllerElection, Seed: rand.Uint64(),
		Core:     controller.Config{HeartbeatTimeout: 2 * time.Second},
		OnStatus: func(st raftnode.Status) { cn.status.Store(&st) }}
	env := actors.Env{Clock: newClock(), Logger: quiet, RunIO: func(fn func()) { go fn() },
		Fatal: func(err error) { c.t.Errorf("brokertest: controller %d fatal: %v", cn.id, err) },
		Dial: func(addr string, h actors.Handler) (actors.Conn, error) {
			return netio.Dial(addr, h, netio.DialOptions{Limits: limits, Logger: quiet})
		}}
	cn.node = actors.NewController(cfg, env, limits)
	if err := cn.node.Start(); err != nil {
		return err
	}
	cn.srv = netio.NewServer(cn.node, netio.Options{Addr: cn.addr, Limits: limits, Logger: quiet})
	if err := cn.srv.Start(); err != nil {
		_ = cn.node.Stop()
		return fmt.Errorf("listen on %s: %w", cn.addr, err)
	}
	return nil
}

// Addrs are the nodes' addresses, node i's at index i.
func (c *Controllers) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, cn := range c.nodes {
		addrs[i] = cn.addr
	}
	return addrs
}

// Leader is the index of a running node that is raft leader and serving,
// or -1 if none is now.
func (c *Controllers) Leader() int {
	for i, cn := range c.nodes {
		if st := cn.status.Load(); st != nil && st.Serving && st.Lead == cn.id && !cn.stopped.Load() {
			return i
		}
	}
	return -1
}

// Term is node i's last known raft term (0 before it reported one).
func (c *Controllers) Term(i int) uint64 {
	if st := c.nodes[i].status.Load(); st != nil {
		return st.Term
	}
	return 0
}

// Stop stops node i (its listener, then its actors); stopping it twice
// does nothing.
func (c *Controllers) Stop(i int) {
	cn := c.nodes[i]
	cn.once.Do(func() {
		if cn.srv == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cn.srv.Stop(ctx); err != nil {
			c.t.Errorf("brokertest: stop controller %d listener: %v", cn.id, err)
		}
		if err := cn.node.Stop(); err != nil {
			c.t.Errorf("brokertest: stop controller %d: %v", cn.id, err)
		}
		cn.stopped.Store(true)
	})
}

func (c *Controllers) stopAll() {
	for i := range c.nodes {
		c.Stop(i)
	}
}

// Join registers a replica of group with the leader and sends it one
// heartbeat, as a broker in controller mode does when it starts; its
// answer is the group's replica info. A leader that changes meanwhile (a
// slow machine's election) is followed, for up to joinWithin.
func (c *Controllers) Join(group protocol.GroupRef, identity, addr string) (protocol.ReplicaInfo, error) {
	var ri protocol.ReplicaInfo
	var err error
	err = errors.New("brokertest: no controller leader")
	testwait.Until(testwait.Wall, joinWithin, func() bool {
		if li := c.Leader(); li >= 0 {
			ri, err = c.join(li, group, identity, addr)
		}
		return err == nil
	})
	return ri, err
}

const joinWithin = 10 * time.Second

func (c *Controllers) join(i int, group protocol.GroupRef, identity, addr string) (protocol.ReplicaInfo, error) {
	var ri protocol.ReplicaInfo
	reg := &protocol.ControllerRegisterBrokerRequest{GroupRef: group, Identity: identity, BrokerAddr: addr}
	st, remark, err := call(c.nodes[i].addr, reg, &ri)
	if err == nil && st != protocol.StatusOK {
		err = fmt.Errorf("brokertest: register %s: %v %s", identity, st, remark)
	}
	if err != nil {
		return ri, err
	}
	var id int64
	for _, r := range ri.Replicas {
		if r.BrokerAddr == addr {
			id = r.BrokerID
		}
	}
	hb := &protocol.ControllerHeartbeatRequest{GroupRef: group, BrokerID: id, BrokerAddr: addr}
	if st, remark, err = call(c.nodes[i].addr, hb, nil); err == nil && st != protocol.StatusOK {
		err = fmt.Errorf("brokertest: heartbeat of %s (brokerId %d): %v %s", identity, id, st, remark)
	}
	return ri, err
}
