package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// clusterBrokerFlags: small segments, replication and registration on a
// short cadence (a 2 s lease at 500 ms heartbeats).
var clusterBrokerFlags = []string{
	"--brokerClusterName", "DefaultCluster",
	"--brokerHeartbeatInterval", "500",
	"--brokerNotActiveTimeoutMillis", "2000",
	"--haSendHeartbeatInterval", "500",
	"--slaveTimeout", "1000",
}

// startClusterBroker starts a broker on fixed ports (a restarted master
// keeps its address, as a restarted machine would), registering with the
// name servers ns.
func startClusterBroker(t *testing.T, dir string, port, haPort int, ns string, flags ...string) *e2eBroker {
	t.Helper()
	b := &e2eBroker{t: t, dir: dir, flags: flags, stderr: &syncBuffer{}, done: make(chan struct{}),
		addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	args := append([]string{"broker", "--storePathRootDir", dir, "--listenPort", strconv.Itoa(port),
		"--haListenPort", strconv.Itoa(haPort), "--namesrvAddr", ns}, e2eBaseFlags...)
	args = append(append(args, clusterBrokerFlags...), flags...)
	b.launch(e2eBinary(t), args)
	if !b.waitReady(15 * time.Second) {
		t.Fatalf("broker %s did not start; stderr:\n%s", b.addr, b.stderr.String())
	}
	return b
}

// clusterSend is one send of a clusterLoad.
type clusterSend struct {
	at   time.Time     // when it began
	took time.Duration // until it returned
	key  string
	err  error  // nil: acknowledged (SEND_OK)
	port string // the port of the broker that stored it (from the message id)
}

// clusterLoad runs senders goroutines, each sending one message per tick
// until stopped, and records every send.
type clusterLoad struct {
	name  string
	p     *client.Producer
	mu    sync.Mutex
	sends []clusterSend
	stop  chan struct{}
	wg    sync.WaitGroup
}

func startClusterLoad(t *testing.T, name, ns, topic string, senders int, every time.Duration, opts ...client.Option) *clusterLoad {
	t.Helper()
	opts = append([]client.Option{client.WithNameServer(ns), client.WithTimeout(2 * time.Second),
		client.WithReconnectBackoff(50*time.Millisecond, 200*time.Millisecond)}, opts...)
	p, err := client.NewProducer("", opts...)
	if err != nil {
		t.Fatalf("producer %s: %v", name, err)
	}
	l := &clusterLoad{name: name, p: p, stop: make(chan struct{})}
	for g := range senders {
		l.wg.Add(1)
		go l.sender(fmt.Sprintf("%s-%d", name, g), topic, every)
	}
	t.Cleanup(func() { l.end(t) })
	return l
}

func (l *clusterLoad) sender(prefix, topic string, every time.Duration) {
	defer l.wg.Done()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		s := clusterSend{at: time.Now(), key: fmt.Sprintf("%s-%d", prefix, i)}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		res, err := l.p.Send(ctx, e2eMessage(topic, s.key))
		cancel()
		s.took, s.err = time.Since(s.at), err
		if err == nil && res.Status != protocol.StatusOK {
			s.err = fmt.Errorf("status %v", res.Status)
		}
		if len(res.MsgID) >= 16 {
			if port, err := strconv.ParseUint(res.MsgID[8:16], 16, 32); err == nil {
				s.port = strconv.FormatUint(port, 10)
			}
		}
		l.mu.Lock()
		l.sends = append(l.sends, s)
		l.mu.Unlock()
	}
}

// end stops the load (once) and closes its producer.
func (l *clusterLoad) end(t *testing.T) {
	select {
	case <-l.stop:
	default:
		close(l.stop)
		if !testwait.Chan(wgDone(&l.wg), 10*time.Second) {
			t.Errorf("load %s did not stop", l.name)
		}
		l.p.Close()
	}
}

// since returns the sends begun at or after from.
func (l *clusterLoad) since(from time.Time) []clusterSend {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []clusterSend
	for _, s := range l.sends {
		if !s.at.Before(from) {
			out = append(out, s)
		}
	}
	return out
}

// clusterCount counts the acknowledged sends among sends, in all and to port.
func clusterCount(sends []clusterSend, port string) (acked, toPort, failed int) {
	for _, s := range sends {
		switch {
		case s.err != nil:
			failed++
		case s.port == port:
			acked++
			toPort++
		default:
			acked++
		}
	}
	return
}

// clusterFailures describes the failed sends among sends: each distinct error,
// with how many and when the first began.
func clusterFailures(sends []clusterSend) string {
	type seen struct {
		n     int
		first time.Time
	}
	by := map[string]*seen{}
	var order []string
	for _, s := range sends {
		if s.err == nil {
			continue
		}
		k := s.err.Error()
		if by[k] == nil {
			by[k] = &seen{first: s.at}
			order = append(order, k)
		}
		by[k].n++
	}
	var b strings.Builder
	for _, k := range order {
		fmt.Fprintf(&b, "\n  %d x %q (first at %s)", by[k].n, k, by[k].first.Format("15:04:05.000"))
	}
	return b.String()
}

// clusterAckedKeys lists the acknowledged keys of sends, those stored on port
// apart.
func clusterAckedKeys(sends []clusterSend, port string) (all, onPort []string) {
	for _, s := range sends {
		if s.err == nil {
			all = append(all, s.key)
			if s.port == port {
				onPort = append(onPort, s.key)
			}
		}
	}
	return
}

// clusterP99 is the 99th percentile of the sends' latencies.
func clusterP99(sends []clusterSend) time.Duration {
	if len(sends) == 0 {
		return 0
	}
	d := make([]time.Duration, len(sends))
	for i, s := range sends {
		d[i] = s.took
	}
	slices.Sort(d)
	return d[(len(d)*99)/100]
}

// clusterFailover measures a load after a kill: the time from the kill to the end
// of the last failed send, the failed sends, and the p99 latency of the
// sends in that window, and at least in the second after the kill (a send
// in flight at the kill included).
func clusterFailover(l *clusterLoad, kill time.Time) (last time.Duration, failed int, lat time.Duration, window int) {
	var after []clusterSend
	for _, s := range l.since(kill.Add(-5 * time.Second)) {
		if s.at.Add(s.took).After(kill) {
			after = append(after, s)
		}
	}
	for _, s := range after {
		if s.err != nil {
			failed++
			last = max(last, s.at.Add(s.took).Sub(kill))
		}
	}
	end := kill.Add(max(last, time.Second))
	var in []clusterSend
	for _, s := range after {
		if s.at.Before(end) {
			in = append(in, s)
		}
	}
	return last, failed, clusterP99(in), len(in)
}

// startClusterConsumer starts a push consumer of group on name-server
// routes, from the first message.
func startClusterConsumer(t *testing.T, ctx context.Context, ns, topic, group string) (*client.PushConsumer, *e2eDeliveries) {
	t.Helper()
	d := newE2EDeliveries()
	c, err := client.NewPushConsumer("", group, client.WithNameServer(ns),
		client.WithConsumeFrom(client.ConsumeFromFirst), client.WithPullSuspend(200*time.Millisecond),
		client.WithCommitInterval(100*time.Millisecond), client.WithMasterRetryInterval(200*time.Millisecond),
		client.WithReconnectBackoff(50*time.Millisecond, 200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Subscribe(topic, "*", d.handler(t, group)); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatalf("consumer %s: %v", group, err)
	}
	return c, d
}

// failoverRounds: how many masters TestE2EClusterFailover kills and
// restarts, broker-a's and broker-b's in turn (1 in `make test`; 10 for the
// figure in docs/BENCHMARKS.md).
var failoverRounds = flag.Int("failover.rounds", 1, "TestE2EClusterFailover: kill -9 and restart rounds")

// clusterRig is the cluster of TestE2EClusterFailover and its clients.
type clusterRig struct {
	t                *testing.T
	ctx              context.Context
	topic, nsList    string
	ns               [2]*e2eNamesrv
	ports            []int // per group: master, master HA, slave, slave HA
	masters, slaves  [2]*e2eBroker
	admin            *client.Admin
	retrying, single *clusterLoad
	live, lateD      *e2eDeliveries
	late             *client.PushConsumer // the consumer group started after the first kill
	start            time.Time
}

// masterPort is the client port of group g's master.
func (c *clusterRig) masterPort(g int) string { return strconv.Itoa(c.ports[4*g]) }

func startClusterRig(t *testing.T, topic string) *clusterRig {
	c := &clusterRig{t: t, ctx: e2eCtx(t, 10*time.Minute), topic: topic, ports: e2eFreePorts(t, 8)}
	c.ns[0], c.ns[1] = startNamesrv(t, "--brokerNotActiveTimeoutMillis", "2000"), startNamesrv(t, "--brokerNotActiveTimeoutMillis", "2000")
	c.nsList = c.ns[0].addr + ";" + c.ns[1].addr
	for g, name := range []string{"broker-a", "broker-b"} {
		mp, mha, sp, sha := c.ports[4*g], c.ports[4*g+1], c.ports[4*g+2], c.ports[4*g+3]
		c.masters[g] = startClusterBroker(t, t.TempDir(), mp, mha, c.nsList, "--brokerName", name, "--brokerRole", "SYNC_MASTER")
		c.slaves[g] = startClusterBroker(t, t.TempDir(), sp, sha, c.nsList, "--brokerName", name, "--brokerRole", "SLAVE",
			"--brokerId", "1", "--haMasterAddress", "127.0.0.1:"+strconv.Itoa(mha))
	}
	var err error
	if c.admin, err = client.NewAdmin("", client.WithNameServer(c.nsList), client.WithTimeout(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.admin.Close() })
	testwait.For(t, testwait.Wall, 10*time.Second, "every broker registered", func() bool {
		ci, err := c.admin.ClusterInfo(c.ctx)
		alive := 0
		for _, b := range ci.Brokers {
			if b.Alive {
				alive++
			}
		}
		return err == nil && alive == 4
	})
	if created, err := c.admin.CreateTopicInCluster(c.ctx, "DefaultCluster", topic, 4); err != nil || len(created) != 2 {
		t.Fatalf("create topic in the cluster: %v %v", created, err)
	}
	testwait.For(t, testwait.Wall, 10*time.Second, "the topic writable in both groups", c.writableIn(2))
	return c
}

// writableIn: the route has want groups with 4 writable queues.
func (c *clusterRig) writableIn(want int) func() bool {
	return func() bool {
		rd, err := c.admin.TopicRoute(c.ctx, c.topic)
		n := 0
		for _, q := range rd.QueueDatas {
			if q.WriteQueueNums == 4 {
				n++
			}
		}
		return err == nil && n == want
	}
}

// bothGroupsAck waits until n sends begun at or after from went to each
// group, counted on the retrying producer.
func (c *clusterRig) bothGroupsAck(from time.Time, n int, what string) {
	c.t.Helper()
	testwait.For(c.t, testwait.Wall, 10*time.Second, what, func() bool {
		acked, toA, _ := clusterCount(c.retrying.since(from), c.masterPort(0))
		return toA >= n && acked-toA >= n
	})
}

// ackedOn lists the keys both producers have had acknowledged since the
// start, and those stored by group g's master apart.
func (c *clusterRig) ackedOn(g int) (all, onG []string) {
	return clusterAckedKeys(append(c.retrying.since(c.start), c.single.since(c.start)...), c.masterPort(g))
}

// roundFigures are one kill's measurements.
type roundFigures struct {
	routes                 time.Duration // until the name server took the group out of the writable routes
	failedR, failedS       int           // failed sends with and without retries
	lastR, lastS           time.Duration // kill to the end of the last failed send
	p99R, p99S             time.Duration
	windowR, windowS, dead int           // sends in the window; messages the victim had acknowledged
	slaveBack              time.Duration // restart to its slave in sync
	unconfirmed            int           // SLAVE_NOT_AVAILABLE answers meanwhile (both producers)
}

// round kills group g's master under load and measures the failover; the
// dead master's acknowledged messages are read from its slave, by the live
// consumer and by a new consumer group (in the first round); then the
// master restarts on its ports and takes sends again, none failing once
// its slave is back.
func (c *clusterRig) round(g int, first bool) roundFigures {
	t := c.t
	t.Helper()
	var f roundFigures
	killed := time.Now()
	c.masters[g].kill()
	testwait.For(t, testwait.Wall, 5*time.Second, "the dead group out of the writable routes", c.writableIn(1))
	f.routes = time.Since(killed)
	testwait.For(t, testwait.Wall, 5*time.Second, "100 sends of each producer acknowledged after the kill", func() bool {
		a, _, _ := clusterCount(c.retrying.since(killed), c.masterPort(g))
		b, _, _ := clusterCount(c.single.since(killed), c.masterPort(g))
		return a >= 100 && b >= 100
	})
	_, deadKeys := c.ackedOn(g)
	f.dead = len(deadKeys)
	readers := map[string]*e2eDeliveries{"live": c.live}
	if first {
		c.late, c.lateD = startClusterConsumer(t, c.ctx, c.nsList, c.topic, "late-readers")
	}
	if c.late != nil {
		readers["late"] = c.lateD
	}
	for name, d := range readers {
		testwait.For(t, testwait.Wall, 10*time.Second, fmt.Sprintf("the %s consumer to read the %d messages the dead master acknowledged", name, len(deadKeys)),
			func() bool { return d.has(deadKeys) })
	}
	// The measured window is at least the second after the kill: measure
	// once both loads have begun sends after it.
	testwait.For(t, testwait.Wall, 10*time.Second, "sends begun a second after the kill", func() bool {
		later := killed.Add(time.Second)
		return len(c.retrying.since(later)) > 0 && len(c.single.since(later)) > 0
	})
	f.lastR, f.failedR, f.p99R, f.windowR = clusterFailover(c.retrying, killed)
	f.lastS, f.failedS, f.p99S, f.windowS = clusterFailover(c.single, killed)
	// The bound the client promises: a broker that failed is skipped for
	// WithRouteRefresh (2 s) + 1 s, and a refresh drops it.
	if f.lastR > 3*time.Second || f.lastS > 3*time.Second {
		t.Errorf("sends failed until %v (retrying) and %v (single) after the kill, beyond the 3 s bound", f.lastR, f.lastS)
	}

	m := c.masters[g]
	c.masters[g] = startClusterBroker(t, m.dir, c.ports[4*g], c.ports[4*g+1], c.nsList, m.flags...)
	restarted := time.Now()
	// A restarted SYNC_MASTER registers at once, but confirms no send before
	// its slave is back (the slave redials within haReconnectMaxInterval,
	// 1 s): until then, sends to it may answer SLAVE_NOT_AVAILABLE (stored
	// on the master, not retried). Those are counted; any other failure, or
	// any failure once the slave is in sync, fails the test.
	testwait.For(t, testwait.Wall, 8*time.Second, "the restarted master's slave in sync", func() bool {
		mi, err := haInfo(c.masters[g].addr)
		return err == nil && len(mi.Slaves) == 1 && mi.Slaves[0].InSync
	})
	inSync := time.Now()
	f.slaveBack = inSync.Sub(restarted)
	c.bothGroupsAck(inSync, 20, "sends acknowledged by both groups after the restart")
	for _, l := range []*clusterLoad{c.retrying, c.single} {
		for _, s := range l.since(restarted) {
			switch {
			case s.err == nil:
			case s.at.Before(inSync) && errors.Is(s.err, client.ErrSlaveNotAvailable):
				f.unconfirmed++
			default:
				t.Errorf("producer %s: a send failed after the master restarted (+%v; its slave was in sync after %v): %v",
					l.name, s.at.Sub(restarted).Round(time.Millisecond), f.slaveBack.Round(time.Millisecond), s.err)
			}
		}
	}
	return f
}

// TestE2EClusterFailover: two name servers, two broker groups (a
// SYNC_MASTER and its slave each), all real processes. Two producers on
// name-server routes send at a steady rate (3 senders of 200 messages/s
// each), one with the client's default retries and one without; a push
// consumer on name-server routes reads. In each round (-failover.rounds,
// default 1) kill -9 of a master: the producers move to the other group
// (failed sends counted, the failover time and p99 latency logged), and
// the consumers read the dead master's acknowledged messages from its
// slave; the master restarts and sends reach it again (until its slave is
// back, only SLAVE_NOT_AVAILABLE answers are allowed). Then one name
// server stops: no send fails. At the end every acknowledged message has
// been consumed by both consumer groups, each owning every queue.
func TestE2EClusterFailover(t *testing.T) {
	c := startClusterRig(t, "failover")
	var consumer *client.PushConsumer
	consumer, c.live = startClusterConsumer(t, c.ctx, c.nsList, c.topic, "live-readers")
	c.retrying = startClusterLoad(t, "retrying", c.nsList, c.topic, 3, 5*time.Millisecond)
	c.single = startClusterLoad(t, "single", c.nsList, c.topic, 3, 5*time.Millisecond, client.WithRetries(0))
	c.start = time.Now()
	// The slaves have the topic (a slave takes its master's topics every
	// few seconds), and each group has acknowledged some sends.
	haWaitTopic(t, c.slaves[0].addr, c.topic, 10*time.Second)
	haWaitTopic(t, c.slaves[1].addr, c.topic, 10*time.Second)
	c.bothGroupsAck(c.start, 50, "sends acknowledged by both groups")
	if _, _, failed := clusterCount(c.retrying.since(c.start), ""); failed > 0 {
		t.Fatalf("%d sends failed before any fault:%s", failed, clusterFailures(c.retrying.since(c.start)))
	}

	var rounds []roundFigures
	for r := range max(*failoverRounds, 1) {
		f := c.round(r%2, r == 0)
		rounds = append(rounds, f)
		t.Logf("round %d, kill -9 of broker-%c's master: out of the writable routes after %v; failed sends %d with retries, %d without "+
			"(the last ended %v after the kill); p99 send latency %v (%d sends) with retries, %v (%d sends) without, "+
			"from the kill to max(last failure, 1 s); %d messages it had acknowledged read from its slave; "+
			"restarted, its slave in sync after %v, %d sends answered SLAVE_NOT_AVAILABLE meanwhile",
			r, 'a'+r%2, f.routes.Round(time.Millisecond), f.failedR, f.failedS, max(f.lastR, f.lastS).Round(time.Millisecond),
			f.p99R.Round(time.Millisecond), f.windowR, f.p99S.Round(time.Millisecond), f.windowS, f.dead,
			f.slaveBack.Round(time.Millisecond), f.unconfirmed)
		c.bothGroupsAck(time.Now(), 50, "sends acknowledged by both groups before the next round")
	}
	logFailoverSummary(t, rounds)

	c.ns[0].cmd.Process.Signal(syscall.SIGTERM)
	if !testwait.Chan(c.ns[0].done, 10*time.Second) {
		t.Fatal("name server 1 did not stop")
	}
	nsStopped := time.Now()
	c.bothGroupsAck(nsStopped, 50, "sends acknowledged by both groups after a name server stopped")
	for _, l := range []*clusterLoad{c.retrying, c.single} {
		if _, _, failed := clusterCount(l.since(nsStopped), ""); failed > 0 {
			t.Errorf("producer %s: %d sends failed after a name server stopped:%s", l.name, failed, clusterFailures(l.since(nsStopped)))
		}
		l.end(t)
	}

	all, _ := c.ackedOn(0)
	c.checkConverged(consumer, all)
	_, _, failedR := clusterCount(c.retrying.since(c.start), "")
	_, _, failedS := clusterCount(c.single.since(c.start), "")
	t.Logf("%d acknowledged messages all consumed by both consumer groups (%d and %d duplicates); failed sends: %d with retries, %d without; took %v",
		len(all), len(c.live.dups()), len(c.lateD.dups()), failedR, failedS, time.Since(c.start).Round(time.Millisecond))
}

// checkConverged: every acknowledged message consumed, by the live consumer
// and by the late one, and each consumer owning the 4 queues of each group.
func (c *clusterRig) checkConverged(live *client.PushConsumer, all []string) {
	t := c.t
	t.Helper()
	for _, x := range []struct {
		c *client.PushConsumer
		d *e2eDeliveries
	}{{live, c.live}, {c.late, c.lateD}} {
		testwait.For(t, testwait.Wall, 10*time.Second, fmt.Sprintf("consumer %s to read all %d acknowledged messages", x.c.Group(), len(all)),
			func() bool { return x.d.has(all) })
		testwait.For(t, testwait.Wall, 10*time.Second, "consumer "+x.c.Group()+" owning the 4 queues of each group", func() bool {
			groups := x.c.BrokerGroups()
			for _, name := range []string{"broker-a", "broker-b"} {
				if groups[name] == nil || len(e2eTopicQueues(groups[name].Assignment(), c.topic)) != 4 {
					return false
				}
			}
			return true
		})
	}
}

// clusterMedMax returns the median (the upper one of an even count) and the
// maximum of xs.
func clusterMedMax[T cmp.Ordered](xs []T) (T, T) {
	xs = slices.Clone(xs)
	slices.Sort(xs)
	return xs[len(xs)/2], xs[len(xs)-1]
}

// logFailoverSummary logs the median and the maximum of each figure over
// the rounds.
func logFailoverSummary(t *testing.T, rounds []roundFigures) {
	var routes, last, p99R, p99S []time.Duration
	var failedR, failedS, unconfirmed []int
	var slaveBack []time.Duration
	for _, r := range rounds {
		slaveBack, unconfirmed = append(slaveBack, r.slaveBack), append(unconfirmed, r.unconfirmed)
		routes, last = append(routes, r.routes), append(last, max(r.lastR, r.lastS))
		p99R, p99S = append(p99R, r.p99R), append(p99S, r.p99S)
		failedR, failedS = append(failedR, r.failedR), append(failedS, r.failedS)
	}
	d := func(xs []time.Duration) string {
		m, x := clusterMedMax(xs)
		return fmt.Sprintf("median %v max %v", m.Round(time.Millisecond), x.Round(time.Millisecond))
	}
	n := func(xs []int) string {
		m, x := clusterMedMax(xs)
		return fmt.Sprintf("median %d max %d", m, x)
	}
	t.Logf("failover over %d rounds: out of the writable routes %s; failed sends with retries %s, without %s; "+
		"last failed send after the kill %s; p99 send latency with retries %s, without %s; "+
		"after a restart: slave in sync %s, SLAVE_NOT_AVAILABLE answers %s",
		len(rounds), d(routes), n(failedR), n(failedS), d(last), d(p99R), d(p99S), d(slaveBack), n(unconfirmed))
}
