package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/protocol"
)

// devConfig is `wharf dev`'s configuration.
type devConfig struct {
	Data string // one sub-directory per broker
	// Controller runs a controller and the brokers in controller mode: it
	// assigns the roles and fails a dead master over to its slave.
	Controller     bool
	ControllerPort int           // the controller's port
	MasterRole     string        // without the controller: SYNC_MASTER or ASYNC_MASTER
	NamesrvPort    int           // the name server's port
	RemotingPort   int           // the name server's port for RocketMQ's clients (0: off); a broker's is its port + 5
	BrokerPort     int           // the first master's port; the others are +10, +20, +30
	LogLevel       string        // every daemon's --log-level
	BrokerArgs     []string      // extra flags for every broker
	StartTimeout   time.Duration // every broker registered within it, or fail
	StopTimeout    time.Duration // after SIGTERM, then SIGKILL
	DashboardPort  int           // the dashboard's port on 127.0.0.1; 0: none
}

func defaultDevConfig() devConfig {
	return devConfig{Data: "./data", Controller: true, ControllerPort: 9878, MasterRole: "SYNC_MASTER", NamesrvPort: 9876, BrokerPort: 10911,
		RemotingPort: 9877, DashboardPort: 8080,
		LogLevel: "info", StartTimeout: 30 * time.Second, StopTimeout: 15 * time.Second}
}

// devDaemon is one child process of `wharf dev`.
type devDaemon struct {
	name   string // "namesrv", "controller", "broker-a-0" (brokerName-index)
	what   string // "name server", "master of broker-a"
	addr   string // where it listens for clients
	dir    string // its store ("" for the name server)
	group  string // a broker's brokerName ("" for the others)
	args   []string
	broker bool
}

const devCluster = "DefaultCluster"

// devRemotingOffset puts a dev broker's remoting port beside its others:
// port + 1 replicates, port + 3 serves metrics.
const devRemotingOffset = 5

// devPlan lists the daemons of a dev cluster: the name server, the
// controller (in controller mode), then for each group its two brokers.
// Brokers listen on 127.0.0.1 and serve replication on their port + 1 (the
// derived haListenPort). Without the controller the first of a group is
// its master and the second its slave; with it, the controller decides.
func devPlan(c devConfig) []devDaemon {
	ns := net.JoinHostPort("127.0.0.1", strconv.Itoa(c.NamesrvPort))
	plan := []devDaemon{{name: "namesrv", what: "name server", addr: ns,
		args: []string{"namesrv", "--bindAddress", "127.0.0.1", "--listenPort", strconv.Itoa(c.NamesrvPort),
			"--remotingListenPort", strconv.Itoa(c.RemotingPort), "--log-level", c.LogLevel}}}
	ctl := net.JoinHostPort("127.0.0.1", strconv.Itoa(c.ControllerPort))
	if c.Controller {
		plan = append(plan, devDaemon{name: "controller", what: "controller", addr: ctl, dir: filepath.Join(c.Data, "controller"),
			args: []string{"controller", "--controllerPeers", "n0-" + ctl, "--controllerSelfId", "n0",
				"--storePathRootDir", filepath.Join(c.Data, "controller"), "--log-level", c.LogLevel}})
	}
	for g, group := range []string{"broker-a", "broker-b"} {
		masterPort := c.BrokerPort + 20*g
		for id := range 2 {
			port := masterPort + 10*id
			d := devDaemon{name: fmt.Sprintf("%s-%d", group, id), what: "master of " + group, group: group, broker: true,
				addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
			d.dir = filepath.Join(c.Data, d.name)
			d.args = []string{"broker", "--storePathRootDir", d.dir, "--brokerIP1", "127.0.0.1", "--listenPort", strconv.Itoa(port),
				"--brokerClusterName", devCluster, "--brokerName", group, "--namesrvAddr", ns, "--log-level", c.LogLevel}
			if c.RemotingPort != 0 {
				d.args = append(d.args, "--remotingListenPort", strconv.Itoa(port+devRemotingOffset))
			}
			switch {
			case c.Controller:
				d.what = "replica of " + group
				d.args = append(d.args, "--enableControllerMode=true", "--controllerAddr", ctl)
			case id == 0:
				d.args = append(d.args, "--brokerId", "0", "--brokerRole", c.MasterRole)
			default:
				d.what = "slave of " + group
				d.args = append(d.args, "--brokerId", strconv.Itoa(id), "--brokerRole", "SLAVE",
					"--haMasterAddress", net.JoinHostPort("127.0.0.1", strconv.Itoa(masterPort+1)))
			}
			d.args = append(d.args, c.BrokerArgs...)
			plan = append(plan, d)
		}
	}
	return plan
}

// addDevCommand registers `wharf dev`.
func addDevCommand(root *cobra.Command) {
	c := defaultDevConfig()
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a development cluster on loopback: a name server, a controller and two broker groups",
		Long: `Run a development cluster on 127.0.0.1: a name server (port 9876), a
controller (port 9878) and two broker groups, broker-a and broker-b, of two
brokers each (ports 10911 and 10921 for broker-a, 10931 and 10941 for
broker-b; each broker serves replication on its port + 1), in cluster
DefaultCluster, data under --data (one directory per daemon). The controller
makes one broker of each group its master and the other its slave, and when
a master dies it makes the slave master: kill -9 one to watch the failover.
With --controller=false the first broker of each group is its master (of
--brokerRole) and nothing fails over. Every daemon is a child process of this
one, its log lines prefixed with its name. It serves the web dashboard (wharf
dashboard) on 127.0.0.1:8080 too (--dashboardPort). Ctrl-C or SIGTERM stops
them all.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c.Controller && cmd.Flags().Changed("brokerRole") {
				return errors.New("--brokerRole needs --controller=false: under the controller, roles are the controller's and a send is acknowledged once its SyncStateSet has it")
			}
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("find the wharf binary to run the daemons: %w", err)
			}
			return runDev(cmd.Context(), c, self, cmd.OutOrStdout(), os.Stderr)
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.Data, "data", c.Data, "data directory (one sub-directory per broker)")
	f.BoolVar(&c.Controller, "controller", c.Controller, "run a controller: it assigns the roles and fails a dead master over to its slave")
	f.IntVar(&c.ControllerPort, "controllerPort", c.ControllerPort, "the controller's port")
	f.StringVar(&c.MasterRole, "brokerRole", c.MasterRole, "with --controller=false, the masters' role: SYNC_MASTER (an acknowledged message is on the slave too) or ASYNC_MASTER")
	f.IntVar(&c.NamesrvPort, "namesrvPort", c.NamesrvPort, "the name server's port")
	f.IntVar(&c.RemotingPort, "remotingPort", c.RemotingPort,
		"the name server's port for RocketMQ's own clients (remoting protocol; each broker's is its port + 5); 0: off")
	f.IntVar(&c.BrokerPort, "brokerPort", c.BrokerPort, "the first master's port; the others use +10, +20 and +30 (and each its port + 1)")
	f.StringVar(&c.LogLevel, "log-level", c.LogLevel, "the daemons' log level: debug, info, warn, error")
	f.StringArrayVar(&c.BrokerArgs, "broker-flag", nil, "an extra flag for every broker (repeatable): --broker-flag=--flushDiskType=SYNC_FLUSH")
	f.DurationVar(&c.StartTimeout, "start-timeout", c.StartTimeout, "fail unless every broker has registered with the name server within it")
	f.IntVar(&c.DashboardPort, "dashboardPort", c.DashboardPort, "serve the web dashboard on 127.0.0.1:PORT (0: no dashboard)")
	f.DurationVar(&c.StopTimeout, "stop-timeout", c.StopTimeout, "on stop, SIGKILL a daemon still running this long after SIGTERM")
	root.AddCommand(cmd)
}

// devChild is a running daemon.
type devChild struct {
	devDaemon
	cmd  *exec.Cmd
	log  *devLog
	done chan struct{} // closed when the process has exited
	err  error         // cmd.Wait's result, valid after done
}

// devRun is one `wharf dev`: its daemons and where their output goes.
type devRun struct {
	cfg      devConfig
	bin      string
	out, err io.Writer
	mu       *sync.Mutex // one line at a time on err
	children []*devChild
	exited   chan *devChild
	dash     *runningDashboard // nil without one
}

func runDev(ctx context.Context, c devConfig, bin string, stdout, stderr io.Writer) error {
	if c.MasterRole != client.RoleSyncMaster && c.MasterRole != client.RoleAsyncMaster {
		return fmt.Errorf("--brokerRole %q: want %s or %s", c.MasterRole, client.RoleSyncMaster, client.RoleAsyncMaster)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stopSignals := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stopSignals()
	r := &devRun{cfg: c, bin: bin, out: stdout, err: stderr, mu: &sync.Mutex{}, exited: make(chan *devChild, 8)}
	plan := devPlan(c)
	err := r.start(plan)
	if err == nil {
		err = r.waitRegistered(ctx, plan[0].addr)
	}
	if err != nil {
		r.stopAll()
		if ctx.Err() != nil {
			return nil // stopped by a signal while starting
		}
		return err
	}
	dashURL := r.startDashboard(plan[0].addr)
	r.printConnect(plan[0].addr, dashURL)
	for ctx.Err() == nil {
		select {
		case ch := <-r.exited:
			r.reportExit(ch)
		case <-ctx.Done():
		}
	}
	r.say("dev: stopping (%v)", context.Cause(ctx))
	// A second Ctrl-C ends this process at once; the daemons then get
	// SIGTERM from the kernel (Pdeathsig).
	stopSignals()
	if r.dash != nil {
		_ = r.dash.stop()
	}
	r.stopAll()
	return nil
}

// startDashboard serves the dashboard in this process, if asked, and
// returns its URL. A port taken is a warning: the cluster runs without it.
func (r *devRun) startDashboard(ns string) string {
	if r.cfg.DashboardPort == 0 {
		return ""
	}
	c := dashboardConfig{Namesrv: ns, Listen: net.JoinHostPort("127.0.0.1", strconv.Itoa(r.cfg.DashboardPort)), MetricsOffset: 3}
	if r.cfg.Controller {
		c.ControllerAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(r.cfg.ControllerPort))
	}
	log := slog.New(slog.NewTextHandler(newDevLog("dashboard", r.err, r.mu), &slog.HandlerOptions{Level: slog.LevelWarn}))
	d, err := startDashboard(c, log)
	if err != nil {
		r.say("dev: no dashboard: %v (--dashboardPort picks another port, 0 none)", err)
		return ""
	}
	r.dash = d
	return d.url
}

// brokers are the children that are brokers.
func (r *devRun) brokers() []*devChild {
	var out []*devChild
	for _, ch := range r.children {
		if ch.broker {
			out = append(out, ch)
		}
	}
	return out
}

// say writes one line of the dev command's own to stderr.
func (r *devRun) say(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.err, format+"\n", args...)
}

// start starts every daemon of plan.
func (r *devRun) start(plan []devDaemon) error {
	for _, d := range plan {
		if d.dir != "" {
			if err := os.MkdirAll(d.dir, 0o755); err != nil {
				return fmt.Errorf("data directory of %s: %w", d.name, err)
			}
		}
		ch := &devChild{devDaemon: d, log: newDevLog(d.name, r.err, r.mu), done: make(chan struct{})}
		ch.cmd = exec.Command(r.bin, d.args...)
		ch.cmd.Stdout, ch.cmd.Stderr = ch.log, ch.log
		// Its own process group, so that a terminal's Ctrl-C reaches this
		// process only and the stop goes in order; and SIGTERM should this
		// process die, so that no daemon outlives it.
		ch.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
		if err := ch.cmd.Start(); err != nil {
			return fmt.Errorf("start %s: %w", d.name, err)
		}
		r.say("dev: started %s (%s, %s, pid %d)", d.name, d.what, d.addr, ch.cmd.Process.Pid)
		r.children = append(r.children, ch)
		go func() {
			ch.err = ch.cmd.Wait()
			close(ch.done)
			r.exited <- ch
		}()
	}
	return nil
}

// waitRegistered waits until the name server lists every broker alive. A
// daemon that exits meanwhile fails the start at once.
func (r *devRun) waitRegistered(ctx context.Context, nsAddr string) error {
	var admin *client.Admin // made once the name server listens
	defer func() {
		if admin != nil {
			admin.Close()
		}
	}()
	deadline := time.NewTimer(r.cfg.StartTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last := -1
	for {
		if admin == nil {
			admin, _ = client.NewAdmin("", client.WithNameServer(nsAddr), client.WithTimeout(time.Second),
				client.WithDialTimeout(500*time.Millisecond), client.WithReconnectBackoff(50*time.Millisecond, 200*time.Millisecond))
		}
		missing := r.unregistered(ctx, admin)
		if len(missing) == 0 {
			if !r.cfg.Controller || r.inSync(ctx) {
				return nil
			}
			if last != -2 {
				last = -2
				r.say("dev: every broker has its role; waiting for the slaves to join their SyncStateSets")
			}
		} else if n := len(r.brokers()) - len(missing); n != last {
			last = n
			r.say("dev: %d of %d brokers registered with the name server (waiting for %s)", n, len(r.brokers()), strings.Join(names(missing), ", "))
		}
		select {
		case ch := <-r.exited:
			return fmt.Errorf("%s (%s) exited while starting: %v\n%s", ch.name, ch.what, ch.err, ch.log.tail())
		case <-deadline.C:
			return r.notRegistered(missing)
		case <-ctx.Done():
			return fmt.Errorf("stopped while starting: %w", context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// unregistered lists the brokers the name server does not (yet) list
// alive: all of them while it does not answer. (Under the controller a
// broker registers once it has its role.) It names the masters on the way.
func (r *devRun) unregistered(ctx context.Context, admin *client.Admin) []*devChild {
	alive, master := map[string]bool{}, map[string]bool{}
	if admin != nil {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if ci, err := admin.ClusterInfo(cctx); err == nil {
			for _, b := range ci.Brokers {
				ok := b.Alive && b.ClusterName == devCluster
				alive[b.BrokerAddr] = alive[b.BrokerAddr] || ok
				master[b.BrokerAddr] = master[b.BrokerAddr] || ok && b.BrokerID == protocol.MasterID
			}
		}
	}
	var missing []*devChild
	for _, ch := range r.brokers() {
		if !alive[ch.addr] {
			missing = append(missing, ch)
		} else if r.cfg.Controller {
			ch.what = "slave of " + ch.group
			if master[ch.addr] {
				ch.what = "master of " + ch.group
			}
		}
	}
	return missing
}

// inSync reports whether the controller lists every group's SyncStateSet
// with both its brokers: until then a dead master has no slave eligible to
// take over (a first failover tried too early would find none).
func (r *devRun) inSync(ctx context.Context) bool {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	md, err := client.ControllerMetadata(cctx, net.JoinHostPort("127.0.0.1", strconv.Itoa(r.cfg.ControllerPort)))
	if err != nil || len(md.Groups) != 2 {
		return false
	}
	for _, g := range md.Groups {
		if len(g.SyncStateSet) != 2 {
			return false
		}
	}
	return true
}

func (r *devRun) notRegistered(missing []*devChild) error {
	var b strings.Builder
	fmt.Fprintf(&b, "not every broker registered with the name server within %v:", r.cfg.StartTimeout)
	var others []*devChild
	for _, ch := range r.children {
		if !ch.broker {
			others = append(others, ch)
		}
	}
	for _, ch := range append(others, missing...) {
		fmt.Fprintf(&b, "\n%s (%s, %s), its last log lines:\n%s", ch.name, ch.what, ch.addr, ch.log.tail())
	}
	return errors.New(b.String())
}

func names(children []*devChild) []string {
	var s []string
	for _, ch := range children {
		s = append(s, ch.name)
	}
	return s
}

// printConnect tells the user what runs and how to use it.
func (r *devRun) printConnect(ns, dashURL string) {
	var b strings.Builder
	fmt.Fprintf(&b, "\nWharf dev cluster %s is up (Ctrl-C stops it):\n", devCluster)
	for _, ch := range r.children {
		dir := ch.dir
		if dir == "" {
			dir = "(no files)"
		}
		fmt.Fprintf(&b, "  %-11s %-19s %-16s pid %-8d %s\n", ch.name, ch.what, ch.addr, ch.cmd.Process.Pid, dir)
	}
	if dashURL != "" {
		fmt.Fprintf(&b, "\nDashboard: %s\n", dashURL)
	}
	fmt.Fprintf(&b, "\nName server: %s. Try, in another terminal:\n", ns)
	fmt.Fprintf(&b, "  bin/wharf cluster list --namesrv %s\n", ns)
	fmt.Fprintf(&b, "  bin/wharf produce --namesrv %s --topic demo --count 100000 --size 256\n", ns)
	fmt.Fprintf(&b, "  bin/wharf consume --namesrv %s --topic demo --group demo-group --from first --idle-exit 3s\n", ns)
	pid := 0
	for _, ch := range r.brokers() {
		if ch.what == "master of broker-a" {
			pid = ch.cmd.Process.Pid
		}
	}
	if r.cfg.Controller {
		fmt.Fprintf(&b, "  bin/wharf cluster list --controllerAddr 127.0.0.1:%d\n", r.cfg.ControllerPort)
		fmt.Fprintf(&b, "Failover: kill -9 %d (broker-a's master) while producing: the controller makes its\n", pid)
		fmt.Fprintf(&b, "slave master within seconds; sends go to broker-b meanwhile, none acknowledged is lost.\n\n")
	} else {
		fmt.Fprintf(&b, "Failover: kill -9 %d (broker-a's master) while producing: sends go to broker-b,\n", pid)
		fmt.Fprintf(&b, "consumers read broker-a's messages from its slave.\n\n")
	}
	if r.cfg.RemotingPort != 0 {
		fmt.Fprintf(&b, "RocketMQ clients: name server 127.0.0.1:%d (RocketMQ's remoting protocol; brokers on their port + %d).\n\n",
			r.cfg.RemotingPort, devRemotingOffset)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprint(r.out, b.String())
}

// reportExit says that a daemon died, and how to start it again; the others
// keep running.
func (r *devRun) reportExit(ch *devChild) {
	r.say("dev: %s (%s, %s, pid %d) exited: %v; the others keep running. To start it again:\n  %s %s",
		ch.name, ch.what, ch.addr, ch.cmd.Process.Pid, ch.err, r.bin, strings.Join(ch.args, " "))
}

// stopAll stops the brokers, then the controller and the name server (so
// that the brokers can unregister): SIGTERM, and SIGKILL after StopTimeout.
func (r *devRun) stopAll() {
	var others []*devChild
	for _, ch := range r.children {
		if !ch.broker {
			others = append(others, ch)
		}
	}
	r.stop(r.brokers())
	slices.Reverse(others) // the name server last
	r.stop(others)
}

func (r *devRun) stop(children []*devChild) {
	for _, ch := range children {
		_ = ch.cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.NewTimer(r.cfg.StopTimeout)
	defer deadline.Stop()
	for _, ch := range children {
		select {
		case <-ch.done:
			continue
		case <-deadline.C:
		}
		r.say("dev: %s did not stop within %v of SIGTERM: SIGKILL", ch.name, r.cfg.StopTimeout)
		_ = ch.cmd.Process.Kill()
		<-ch.done
	}
}

// devLog forwards a daemon's output line by line, prefixed with its name,
// and keeps its last lines for error messages.
type devLog struct {
	prefix string
	out    io.Writer
	mu     *sync.Mutex // shared by every daemon's log: whole lines only
	part   []byte      // an unfinished line
	last   []string    // the last devTailLines lines
}

const devTailLines = 20

func newDevLog(name string, out io.Writer, mu *sync.Mutex) *devLog {
	return &devLog{prefix: fmt.Sprintf("%-10s | ", name), out: out, mu: mu}
}

func (l *devLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.part = append(l.part, p...)
	for {
		i := bytes.IndexByte(l.part, '\n')
		if i < 0 {
			break
		}
		line := string(l.part[:i])
		l.part = l.part[i+1:]
		fmt.Fprintf(l.out, "%s%s\n", l.prefix, line)
		if l.last = append(l.last, line); len(l.last) > devTailLines {
			l.last = l.last[1:]
		}
	}
	return len(p), nil
}

// tail returns the last lines, indented.
func (l *devLog) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := append(append([]string(nil), l.last...), string(l.part))
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) == 0 {
		return "    (no output)"
	}
	return "    " + strings.Join(lines, "\n    ")
}
