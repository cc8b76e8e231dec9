package main

import (
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// e2eNamesrv is one run of `wharf namesrv`.
type e2eNamesrv struct {
	addr   string
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
}

func startNamesrv(t *testing.T, flags ...string) *e2eNamesrv {
	t.Helper()
	bin := e2eBinary(t)
	port := e2eFreePorts(t, 1)[0]
	n := &e2eNamesrv{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), stderr: &syncBuffer{}, done: make(chan struct{})}
	// metricsPort 0 unless flags say otherwise: listenPort + 3 may be
	// another test's free port.
	args := append([]string{"namesrv", "--bindAddress", "127.0.0.1", "--listenPort", strconv.Itoa(port), "--metricsPort", "0"}, flags...)
	n.cmd = exec.Command(bin, args...)
	n.cmd.Stdout, n.cmd.Stderr = n.stderr, n.stderr
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = n.cmd.Wait(); close(n.done) }()
	t.Cleanup(func() {
		_ = n.cmd.Process.Kill()
		<-n.done
		if t.Failed() {
			t.Logf("name server %s stderr:\n%s", n.addr, n.stderr.String())
		}
	})
	started := `msg="name server started" listen=` + n.addr + " "
	testwait.For(t, testwait.Wall, 15*time.Second, "the name server to listen", func() bool {
		return strings.Contains(n.stderr.String(), started)
	})
	return n
}

// nsPeer is a raw connection to a name server: a fake broker or a client.
type nsPeer struct {
	t      *testing.T
	c      net.Conn
	opaque uint32
	buf    []byte
}

func dialNamesrv(t *testing.T, addr string) *nsPeer {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &nsPeer{t: t, c: c}
}

// call sends req and reads its answer, decoding it into into when SUCCESS.
func (p *nsPeer) call(req protocol.Request, into protocol.Fields) *protocol.Frame {
	p.t.Helper()
	p.opaque++
	frame, err := protocol.AppendRequest(nil, p.opaque, 0, req)
	if err != nil {
		p.t.Fatal(err)
	}
	_ = p.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := p.c.Write(frame); err != nil {
		p.t.Fatalf("send %v: %v", req.RequestCode(), err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if n, err := protocol.Split(p.buf, protocol.Limits{}); err != nil {
			p.t.Fatal(err)
		} else if n > 0 {
			f, err := protocol.DecodeFrame(p.buf[:n], protocol.Limits{})
			if err != nil {
				p.t.Fatal(err)
			}
			p.buf = append([]byte(nil), p.buf[n:]...)
			if f.Opaque != p.opaque {
				continue
			}
			if into != nil && f.Status == protocol.StatusOK {
				if err := protocol.DecodeResponse(f, protocol.Limits{}, into); err != nil {
					p.t.Fatal(err)
				}
			}
			return f
		}
		m, err := p.c.Read(chunk)
		if err != nil {
			p.t.Fatalf("read the answer to %v: %v", req.RequestCode(), err)
		}
		p.buf = append(p.buf, chunk[:m]...)
	}
}

func e2eRegistration(group, addr string, queues int32) *protocol.RegisterBrokerRequest {
	return &protocol.RegisterBrokerRequest{
		BrokerIdentity: protocol.BrokerIdentity{ClusterName: "DefaultCluster", BrokerName: group, BrokerID: 0, BrokerAddr: addr},
		HAServerAddr:   addr + "1", BrokerRole: "ASYNC_MASTER",
		DataVersion: protocol.DataVersion{Timestamp: time.Now().UnixMilli(), Counter: 1},
		Topics:      []protocol.TopicConfig{{Topic: "orders", ReadQueueNums: queues, WriteQueueNums: queues, Perm: 6}}}
}

// writable is the writable queues per group of a route.
func writable(rd *protocol.RouteData) map[string]int32 {
	w := map[string]int32{}
	for _, q := range rd.QueueDatas {
		w[q.BrokerName] = q.WriteQueueNums
	}
	return w
}

// TestE2ENameServer: the real binary's name server takes two brokers'
// registrations over the wire, serves routes and cluster info (also through
// the CLI), drops a broker whose lease ran out and, at once, one whose
// connection closed, with a route version that grows at each change; it
// stops cleanly on SIGTERM.
func TestE2ENameServer(t *testing.T) {
	ns := startNamesrv(t, "--brokerNotActiveTimeoutMillis", "1500")
	a, b, cl := dialNamesrv(t, ns.addr), dialNamesrv(t, ns.addr), dialNamesrv(t, ns.addr)
	regA, regB := e2eRegistration("broker-a", "127.0.0.1:20911", 4), e2eRegistration("broker-b", "127.0.0.1:21911", 2)
	var rr protocol.RegisterBrokerResponse
	for _, x := range []struct {
		p   *nsPeer
		reg *protocol.RegisterBrokerRequest
	}{{a, regA}, {b, regB}} {
		if f := x.p.call(x.reg, &rr); f.Status != protocol.StatusOK || !rr.Changed || rr.LeaseMillis != 1500 {
			t.Fatalf("register %s: %v %q %+v", x.reg.BrokerName, f.Status, f.Remark, rr)
		}
	}
	var rd protocol.RouteData
	if f := cl.call(&protocol.GetRouteInfoRequest{Topic: "orders"}, &rd); f.Status != protocol.StatusOK {
		t.Fatalf("route: %v %q", f.Status, f.Remark)
	}
	if w := writable(&rd); w["broker-a"] != 4 || w["broker-b"] != 2 || len(rd.Brokers) != 2 {
		t.Fatalf("route %+v", rd)
	}
	v1 := rd.Version

	out, errOut, code := e2eRun(t, 30*time.Second, "cluster", "list", "--namesrv", "127.0.0.1:1;"+ns.addr, "--json")
	if code != 0 {
		t.Fatalf("cluster list: exit %d\n%s", code, errOut)
	}
	if list := e2eLastJSON(t, out); len(list["brokers"].([]any)) != 2 {
		t.Fatalf("cluster list %v", list)
	}
	out, errOut, code = e2eRun(t, 30*time.Second, "topic", "route", "--namesrv", ns.addr, "--topic", "orders")
	if code != 0 || !strings.Contains(out, "broker-a") || !strings.Contains(out, "broker-b") {
		t.Fatalf("topic route: exit %d\n%s\n%s", code, out, errOut)
	}

	// a goes silent; b heartbeats every 300 ms: a's lease (1.5 s) ends.
	hb := &protocol.BrokerHeartbeatRequest{BrokerIdentity: regB.BrokerIdentity, DataVersion: regB.DataVersion}
	silentSince := time.Now()
	testwait.For(t, testwait.Wall, 10*time.Second, "broker-a to leave the route", func() bool {
		if b.call(hb, &rr); rr.Unknown {
			t.Fatalf("broker-b's heartbeat answered Unknown")
		}
		// b's heartbeat rhythm (a real broker's interval), not a wait for a
		// condition: a's lease must run out while b keeps its own.
		time.Sleep(300 * time.Millisecond)
		rd = protocol.RouteData{}
		cl.call(&protocol.GetRouteInfoRequest{Topic: "orders"}, &rd)
		_, hasA := writable(&rd)["broker-a"]
		return !hasA
	})
	if took := time.Since(silentSince); took < 1200*time.Millisecond {
		t.Fatalf("broker-a left the route %v after its last registration, before its 1.5 s lease", took)
	}
	if w := writable(&rd); w["broker-b"] != 2 || rd.Version <= v1 {
		t.Fatalf("after a's lease: writable %v, version %d -> %d", w, v1, rd.Version)
	}
	v2 := rd.Version

	// b's connection closes: b is out at once, long before its lease.
	b.c.Close()
	closedAt := time.Now()
	testwait.For(t, testwait.Wall, time.Second, "broker-b to leave the route", func() bool {
		return cl.call(&protocol.GetRouteInfoRequest{Topic: "orders"}, nil).Status == protocol.StatusTopicNotExist
	})
	t.Logf("lease expiry after %v; a closed connection out of the routes after %v", time.Since(silentSince).Round(time.Millisecond),
		time.Since(closedAt).Round(time.Millisecond))
	var ci protocol.ClusterInfo
	cl.call(&protocol.GetBrokerClusterInfoRequest{}, &ci)
	if len(ci.Brokers) != 2 || ci.Brokers[0].Alive || ci.Brokers[1].Alive || ci.Version <= v2 {
		t.Fatalf("cluster info after both left: version %d (before %d) %+v", ci.Version, v2, ci.Brokers)
	}

	if err := ns.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !testwait.Chan(ns.done, 10*time.Second) {
		t.Fatal("the name server did not stop within 10 s of SIGTERM")
	}
	if c := ns.cmd.ProcessState.ExitCode(); c != 0 || !strings.Contains(ns.stderr.String(), "name server stopped cleanly") {
		t.Fatalf("exit %d after SIGTERM\n%s", c, ns.stderr.String())
	}
}
