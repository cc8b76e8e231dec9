package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/cmd/wharf/brokerconf"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// brokerFlagSet parses args as `wharf broker`'s flags.
func brokerFlagSet(t *testing.T, args []string) *pflag.FlagSet {
	t.Helper()
	fs := pflag.NewFlagSet("broker", pflag.ContinueOnError)
	defaults := brokerconf.Default()
	defaults.RegisterFlags(fs)
	fs.String("log-level", "info", "")
	if err := fs.Parse(args); err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return fs
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestDevPlanController: by default `wharf dev` runs a name server, a
// controller and two groups of two brokers in controller mode (no roles
// of their own), each in its own store, registered with the name server;
// every daemon's flags are valid.
func TestDevPlanController(t *testing.T) {
	c := defaultDevConfig()
	c.Data = "d"
	plan := devPlan(c)
	if len(plan) != 6 || plan[1].name != "controller" || plan[1].addr != "127.0.0.1:9878" {
		t.Fatalf("plan %+v", plan)
	}
	if _, err := parseControllerPeers(plan[1].args[2]); err != nil || plan[1].args[0] != "controller" {
		t.Fatalf("controller: %q: %v", plan[1].args, err)
	}
	for i, name := range []string{"broker-a-0", "broker-a-1", "broker-b-0", "broker-b-1"} {
		d := plan[2+i]
		cfg, _, err := brokerconf.Resolve(brokerFlagSet(t, d.args[1:]), "")
		if err != nil {
			t.Fatalf("%s: %q: %v", d.name, d.args, err)
		}
		if d.name != name || !d.broker || !cfg.EnableControllerMode || cfg.ControllerAddr != "127.0.0.1:9878" ||
			cfg.HAMasterAddress != "" || cfg.NamesrvAddr != "127.0.0.1:9876" || cfg.StorePathRootDir != filepath.Join("d", name) {
			t.Errorf("%s: %+v", d.name, cfg)
		}
	}
}

// TestDevPlan: with --controller=false `wharf dev` runs a name server and
// two groups of a master and a slave on the documented ports, each slave on
// its master's derived HA port, every broker registered with the name
// server, in its own store; and every broker's flags are valid broker flags.
func TestDevPlan(t *testing.T) {
	c := defaultDevConfig()
	c.Data, c.BrokerArgs, c.Controller = "d", []string{"--flushDiskType", "SYNC_FLUSH"}, false
	plan := devPlan(c)
	want := []struct{ name, addr, group, id, role, ha string }{
		{"namesrv", "127.0.0.1:9876", "", "", "", ""},
		{"broker-a-0", "127.0.0.1:10911", "broker-a", "0", "SYNC_MASTER", ""},
		{"broker-a-1", "127.0.0.1:10921", "broker-a", "1", "SLAVE", "127.0.0.1:10912"},
		{"broker-b-0", "127.0.0.1:10931", "broker-b", "0", "SYNC_MASTER", ""},
		{"broker-b-1", "127.0.0.1:10941", "broker-b", "1", "SLAVE", "127.0.0.1:10932"},
	}
	if len(plan) != len(want) {
		t.Fatalf("%d daemons, want %d", len(plan), len(want))
	}
	for i, w := range want {
		d := plan[i]
		if d.name != w.name || d.addr != w.addr {
			t.Errorf("daemon %d: %s on %s, want %s on %s", i, d.name, d.addr, w.name, w.addr)
		}
		if i == 0 {
			if d.args[0] != "namesrv" || d.dir != "" {
				t.Errorf("name server: %q (dir %q)", d.args, d.dir)
			}
			continue
		}
		if d.args[0] != "broker" {
			t.Fatalf("%s: %q", d.name, d.args)
		}
		cfg, _, err := brokerconf.Resolve(brokerFlagSet(t, d.args[1:]), "")
		if err != nil {
			t.Fatalf("%s: %q: %v", d.name, d.args, err)
		}
		if cfg.BrokerName != w.group || cfg.BrokerRole != w.role || cfg.HAMasterAddress != w.ha ||
			cfg.NamesrvAddr != "127.0.0.1:9876" || cfg.BrokerClusterName != "DefaultCluster" ||
			cfg.StorePathRootDir != filepath.Join("d", w.name) || cfg.FlushDiskType != "SYNC_FLUSH" ||
			cfg.EffectiveHAListenPort() != cfg.ListenPort+1 || strings.TrimPrefix(d.addr, "127.0.0.1:") != itoa(cfg.ListenPort) {
			t.Errorf("%s: %+v", d.name, cfg)
		}
		if w.id != itoa(int(cfg.BrokerID)) {
			t.Errorf("%s: brokerId %d", d.name, cfg.BrokerID)
		}
	}
}

// TestDevLog: daemon output is forwarded in whole lines with the daemon's
// name, however it is split into writes, and the last lines are kept for
// error messages.
func TestDevLog(t *testing.T) {
	var out bytes.Buffer
	l := newDevLog("broker-a-0", &out, &sync.Mutex{})
	if got := l.tail(); got != "    (no output)" {
		t.Fatalf("tail of nothing: %q", got)
	}
	for _, w := range []string{"one\ntw", "o\n", "thr"} {
		l.Write([]byte(w))
	}
	if want := "broker-a-0 | one\nbroker-a-0 | two\n"; out.String() != want {
		t.Fatalf("forwarded %q, want %q", out.String(), want)
	}
	if got := l.tail(); got != "    one\n    two\n    thr" {
		t.Fatalf("tail %q", got)
	}
	for range 2 * devTailLines {
		l.Write([]byte("x\n"))
	}
	if n := strings.Count(l.tail(), "\n") + 1; n != devTailLines {
		t.Fatalf("tail keeps %d lines, want %d", n, devTailLines)
	}
}

// devPorts returns a name-server port, a controller port and a broker base
// port whose eight ports (base + 0, 1, 10, 11, 20, 21, 30, 31) were free a
// moment ago.
func devPorts(t *testing.T) (int, int, int) {
	t.Helper()
	free := e2eFreePorts(t, 2)
	ns, ctl := free[0], free[1]
	for attempt := range 50 {
		base := 20000 + (os.Getpid()*7919+attempt*613)%40000
		free := true
		// Each broker's port and +1 (replication) and +5 (remoting), and
		// +39 for the name server's remoting port.
		for _, off := range []int{0, 1, 5, 10, 11, 15, 20, 21, 25, 30, 31, 35, 39} {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(base+off)))
			if err != nil {
				free = false
				break
			}
			l.Close()
		}
		if free && (ns < base || ns > base+39) && (ctl < base || ctl > base+39) {
			return ns, ctl, base
		}
	}
	t.Fatal("no free range of broker ports")
	return 0, 0, 0
}

// startDev runs `wharf dev` on free ports with small stores.
func startDev(t *testing.T, extra ...string) (cmd *exec.Cmd, stdout, stderr *syncBuffer, done chan struct{}, nsAddr string, base int) {
	t.Helper()
	ns, ctl, base := devPorts(t)
	args := append([]string{"dev", "--data", t.TempDir(), "--namesrvPort", strconv.Itoa(ns), "--controllerPort", strconv.Itoa(ctl),
		"--brokerPort", strconv.Itoa(base), "--remotingPort", strconv.Itoa(base + 39),
		"--broker-flag=--mappedFileSizeCommitLog=16777216", "--broker-flag=--maxHashSlotNum=50000", "--broker-flag=--maxIndexNum=200000"}, extra...)
	cmd = exec.Command(e2eBinary(t), args...)
	stdout, stderr, done = &syncBuffer{}, &syncBuffer{}, make(chan struct{})
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if !testwait.Chan(done, 30*time.Second) {
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("wharf dev stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
		}
	})
	return cmd, stdout, stderr, done, net.JoinHostPort("127.0.0.1", strconv.Itoa(ns)), base
}

var devStartedRE = regexp.MustCompile(`dev: started (\S+) \(.*, pid (\d+)\)`)

// devPids are the daemons' pids by name, from `wharf dev`'s stderr.
func devPids(stderr string) map[string]int {
	pids := map[string]int{}
	for _, m := range devStartedRE.FindAllStringSubmatch(stderr, -1) {
		pids[m[1]], _ = strconv.Atoi(m[2])
	}
	return pids
}

// TestE2EDev: `wharf dev` starts a name server, a controller and four
// brokers as its children, says so once every broker has its role and is
// registered, and names each group's master. A master killed with kill -9
// is reported while the others keep serving, and the controller makes the
// group's other broker master: the name server's routes name it and sends
// reach both groups again. On SIGTERM it stops the rest cleanly and exits 0.
func TestE2EDev(t *testing.T) {
	cmd, stdout, stderr, done, ns, base := startDev(t)
	testwait.For(t, testwait.Wall, 30*time.Second, "wharf dev to say the cluster is up", func() bool {
		select {
		case <-done:
			t.Fatalf("wharf dev exited: %v", cmd.ProcessState)
		default:
		}
		return strings.Contains(stdout.String(), "is up")
	})
	out := stdout.String()
	if !strings.Contains(out, "--namesrv "+ns) || !strings.Contains(out, "127.0.0.1:"+strconv.Itoa(base+30)) ||
		strings.Count(out, "master of broker-") != 2 || strings.Count(out, "slave of broker-") != 2 ||
		!strings.Contains(out, "RocketMQ clients: name server 127.0.0.1:"+strconv.Itoa(base+39)) {
		t.Fatalf("connection help:\n%s", out)
	}
	pids := devPids(stderr.String())
	if len(pids) != 6 || pids["controller"] == 0 {
		t.Fatalf("daemons %v", pids)
	}
	m := regexp.MustCompile(`(broker-a-\d)\s+master of broker-a\s+(\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no master of broker-a in:\n%s", out)
	}
	master, masterAddr := m[1], m[2]
	admin, err := client.NewAdmin("", client.WithNameServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	groupMaster := func(group string) (addr string, alive int) {
		ci, _ := admin.ClusterInfo(context.Background())
		for _, b := range ci.Brokers {
			if b.Alive {
				alive++
				if b.BrokerName == group && b.BrokerID == protocol.MasterID {
					addr = b.BrokerAddr
				}
			}
		}
		return addr, alive
	}
	if addr, n := groupMaster("broker-a"); n != 4 || addr != masterAddr {
		t.Fatalf("%d brokers alive, broker-a's master %s, want 4 and %s", n, addr, masterAddr)
	}
	firstSendCreatesTopic(t, ns)

	if err := syscall.Kill(pids[master], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	report := fmt.Sprintf("dev: %s (master of broker-a, %s, pid %d) exited: signal: killed", master, masterAddr, pids[master])
	testwait.For(t, testwait.Wall, 20*time.Second, "the death reported, and the controller to make the other broker master", func() bool {
		addr, n := groupMaster("broker-a")
		return strings.Contains(stderr.String(), report) && n == 3 && addr != "" && addr != masterAddr
	})
	sendReachesBothGroups(t, ns, "dev-after-failover")
	select {
	case <-done:
		t.Fatal("wharf dev exited when one of its brokers died")
	default:
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !testwait.Chan(done, 30*time.Second) {
		t.Fatal("wharf dev did not exit within 30 s of SIGTERM")
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
	errs := stderr.String()
	if n := strings.Count(errs, `msg="broker stopped cleanly"`); n != 3 || !strings.Contains(errs, "name server stopped cleanly") ||
		!strings.Contains(errs, "controller stopped cleanly") {
		t.Fatalf("%d brokers stopped cleanly, want 3, and the name server and the controller", n)
	}
}

// TestE2EDevClassic: with --controller=false the first broker of each group
// is its master (--brokerRole) and the second its slave, on the documented
// ports, and the cluster takes sends.
func TestE2EDevClassic(t *testing.T) {
	cmd, stdout, _, done, ns, _ := startDev(t, "--controller=false", "--brokerRole", "ASYNC_MASTER")
	testwait.For(t, testwait.Wall, 30*time.Second, "wharf dev to say the cluster is up", func() bool {
		select {
		case <-done:
			t.Fatalf("wharf dev exited: %v", cmd.ProcessState)
		default:
		}
		return strings.Contains(stdout.String(), "is up")
	})
	out := stdout.String()
	if !regexp.MustCompile(`broker-a-0\s+master of broker-a`).MatchString(out) || !regexp.MustCompile(`broker-b-1\s+slave of broker-b`).MatchString(out) ||
		strings.Contains(out, "controller") {
		t.Fatalf("connection help:\n%s", out)
	}
	sendReachesBothGroups(t, ns, "dev-classic")
}

// sendReachesBothGroups sends to topic (auto-created) through the name
// server until both groups stored some.
func sendReachesBothGroups(t *testing.T, ns, topic string) {
	t.Helper()
	p, err := client.NewProducer("", client.WithNameServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	hosts := map[string]bool{}
	for i := 0; i < 200 && len(hosts) < 2; i++ {
		r, err := p.Send(context.Background(), &protocol.Message{Topic: topic, Body: []byte(strconv.Itoa(i))})
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if host, _, err := protocol.ParseOffsetMsgID(r.MsgID); err == nil {
			hosts[host.String()] = true
		}
	}
	if len(hosts) != 2 {
		t.Fatalf("sends to %s reached %d masters, want both groups'", topic, len(hosts))
	}
}

// TestE2EDevStartFails: a daemon that cannot start (its port is taken)
// fails `wharf dev` at once, naming it with its last log lines, and the
// others are stopped.
func TestE2EDevStartFails(t *testing.T) {
	ns, ctl, base := devPorts(t)
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(base+30)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, errOut, code := e2eRun(t, 60*time.Second, "dev", "--data", t.TempDir(), "--namesrvPort", strconv.Itoa(ns),
		"--controllerPort", strconv.Itoa(ctl), "--brokerPort", strconv.Itoa(base), "--broker-flag=--mappedFileSizeCommitLog=16777216")
	if code != 1 || !strings.Contains(errOut, "broker-b-1 (replica of broker-b) exited while starting") ||
		!strings.Contains(errOut, "address already in use") {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	for name, pid := range devPids(errOut) {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("%s (pid %d) still runs", name, pid)
		}
	}
}

// firstSendCreatesTopic is the README's first run: a producer on the name
// server sends to a topic nobody created; the brokers create it on first
// send (through the AutoCreateTopic route they register) and register it,
// and the topic's own route then spans both groups.
func firstSendCreatesTopic(t *testing.T, ns string) {
	t.Helper()
	p, err := client.NewProducer("", client.WithNameServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	groups := map[string]bool{}
	for i := range 64 {
		r, err := p.Send(context.Background(), &protocol.Message{Topic: "dev-first-run", Body: []byte(strconv.Itoa(i))})
		if err != nil {
			t.Fatalf("send %d to a topic nobody created: %v", i, err)
		}
		host, _, err := protocol.ParseOffsetMsgID(r.MsgID)
		if err != nil {
			t.Fatalf("send %d: message id %q: %v", i, r.MsgID, err)
		}
		groups[host.String()] = true // the master that stored it
	}
	admin, err := client.NewAdmin("", client.WithNameServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	testwait.For(t, testwait.Wall, 5*time.Second, "the created topic's route on both groups", func() bool {
		rd, err := admin.TopicRoute(context.Background(), "dev-first-run")
		return err == nil && len(rd.QueueDatas) == 2
	})
	if len(groups) != 2 {
		t.Fatalf("64 sends reached %d masters, want both groups", len(groups))
	}
}
