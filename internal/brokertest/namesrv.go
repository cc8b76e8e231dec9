package brokertest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/netio"
	"github.com/wharfmq/wharf/protocol"
)

// NameServer is a real name server in-process: actors.NameServer behind a
// netio listener on loopback, on a Clock of its own. Brokers do not
// register by themselves here: Broker.RegisterWith does it for them.
type NameServer struct {
	t     testing.TB
	ns    *actors.NameServer
	srv   *netio.Server
	rmq   *netio.Server // RocketMQ's remoting listener
	clock *Clock
	once  sync.Once
}

// StartNameServer starts a name server; t.Cleanup stops it.
func StartNameServer(t testing.TB) *NameServer {
	t.Helper()
	limits := protocol.DefaultLimits()
	quiet := slog.New(slog.DiscardHandler)
	n := &NameServer{t: t, clock: newClock()}
	n.ns = actors.NewNameServer(actors.NameServerConfig{}, actors.Env{Clock: n.clock, RunIO: func(fn func()) { go fn() },
		Fatal: func(err error) { t.Errorf("brokertest: name server fatal: %v", err) }}, limits)
	if err := n.ns.Start(); err != nil {
		t.Fatal(err)
	}
	n.srv = netio.NewServer(n.ns, netio.Options{Addr: "127.0.0.1:0", Limits: limits, Logger: quiet})
	if err := n.srv.Start(); err != nil {
		n.ns.Stop()
		t.Fatal(err)
	}
	n.rmq = netio.NewServer(n.ns, netio.Options{Addr: "127.0.0.1:0", Limits: limits, Logger: quiet, Codec: netio.RemotingCodec{}})
	if err := n.rmq.Start(); err != nil {
		n.srv.Stop(context.Background())
		n.ns.Stop()
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	return n
}

// Addr is the address clients and brokers dial.
func (n *NameServer) Addr() string { return n.srv.Addr() }

// RemotingAddr is where RocketMQ's clients ask for routes (its remoting
// listener); the routes name the brokers' RemotingAddr (WithRemoting).
func (n *NameServer) RemotingAddr() string { return n.rmq.Addr() }

// Clock is the name server's clock: Advance it to expire leases.
func (n *NameServer) Clock() *Clock { return n.clock }

// Stop stops the name server (its listener, then the actor). Stopping it
// twice does nothing.
func (n *NameServer) Stop() {
	n.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := errors.Join(n.srv.Stop(ctx), n.rmq.Stop(ctx)); err != nil {
			n.t.Errorf("brokertest: stop name server listeners: %v", err)
		}
		if err := n.ns.Stop(); err != nil {
			n.t.Errorf("brokertest: stop name server: %v", err)
		}
	})
}

// registerLease is the lease a test registration asks for: long enough
// that no test needs heartbeats, so a broker leaves the routes when its
// registration connection closes (Stop) or its lease is expired on
// purpose (NameServer.Clock).
const registerLease = 10 * time.Minute

// RegisterWith registers the broker with ns as a member of cluster's
// group (its brokerId and role from its configuration, its topics as it
// has them now), as a broker process would, on a connection of its own
// that stays open: Stop closes it, and the name server drops the broker
// from the routes at once, as it does when a broker process dies. Call it
// again after a topic change (each call is a newer data version) or a
// Restart.
func (b *Broker) RegisterWith(ns *NameServer, cluster, group string) {
	b.t.Helper()
	b.RegisterAs(ns, cluster, group, b.cfg.BrokerID, b.cfg.BrokerRole, 0)
}

// RegisterAs is RegisterWith under another brokerId, role and master
// epoch than the broker started with: a test's failover (a slave promoted
// with UPDATE_BROKER_ROLE registers as its group's master).
func (b *Broker) RegisterAs(ns *NameServer, cluster, group string, brokerID int64, role string, epoch int32) {
	b.t.Helper()
	var topics protocol.TopicListResponse
	b.ask(&protocol.ListTopicsRequest{}, &topics)
	b.mu.Lock()
	b.regSeq++
	req := &protocol.RegisterBrokerRequest{
		BrokerIdentity: protocol.BrokerIdentity{ClusterName: cluster, BrokerName: group, BrokerID: brokerID, BrokerAddr: b.addr},
		HAServerAddr:   b.haAddr,
		RemotingAddr:   b.rmqAddr,
		BrokerRole:     role,
		DataVersion:    protocol.DataVersion{Timestamp: b.bootMs, Counter: b.regSeq},
		Topics:         topics.Topics,
		MasterEpoch:    epoch,

		HeartbeatTimeoutMillis: registerLease.Milliseconds(),
	}
	b.mu.Unlock()
	nc, err := register(ns.Addr(), req)
	if err != nil {
		b.t.Fatalf("brokertest: register %s with %s: %v", b.addr, ns.Addr(), err)
	}
	b.mu.Lock()
	b.regs = append(b.regs, nc)
	b.mu.Unlock()
}

// register sends req on a new connection to addr and returns the
// connection, open, once the name server took the registration.
func register(addr string, req *protocol.RegisterBrokerRequest) (net.Conn, error) {
	lim := protocol.DefaultLimits()
	nc, err := net.DialTimeout("tcp", addr, callTimeout)
	if err != nil {
		return nil, err
	}
	frame, err := protocol.AppendRequest(nil, 1, 0, req)
	if err == nil {
		_ = nc.SetDeadline(time.Now().Add(callTimeout))
		_, err = nc.Write(frame)
	}
	var buf []byte
	if err == nil {
		buf, err = readFrame(bufio.NewReader(nc), lim)
	}
	var f *protocol.Frame
	if err == nil {
		f, err = protocol.DecodeFrame(buf, lim)
	}
	var resp protocol.RegisterBrokerResponse
	if err == nil && f.Status != protocol.StatusOK {
		err = fmt.Errorf("status %v: %s", f.Status, f.Remark)
	}
	if err == nil {
		err = protocol.DecodeResponse(f, lim, &resp)
	}
	if err == nil && resp.Stale {
		err = fmt.Errorf("registration refused as stale (data version %+v)", req.DataVersion)
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	return nc, nil
}

// closeRegistrations closes the broker's registration connections: the
// name servers drop it from the routes.
func (b *Broker) closeRegistrations() {
	b.mu.Lock()
	regs := b.regs
	b.regs = nil
	b.mu.Unlock()
	for _, nc := range regs {
		nc.Close()
	}
}
