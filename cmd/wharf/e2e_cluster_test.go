package main

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
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
	b.cmd = exec.Command(e2eBinary(t), args...)
	b.cmd.Stdout, b.cmd.Stderr = b.stderr, b.stderr
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("start broker: %v", err)
	}
	go func() {
		b.err = b.cmd.Wait()
		close(b.done)
	}()
	t.Cleanup(func() {
		if b.alive() {
			_ = b.cmd.Process.Kill()
			<-b.done
		}
		if t.Failed() {
			t.Logf("broker %s (store %s) stderr:\n%s", b.addr, b.dir, b.stderr.String())
		}
	})
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

// count counts the acknowledged sends among sends, in all and to port.
func count(sends []clusterSend, port string) (acked, toPort, failed int) {
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

// ackedKeys lists the acknowledged keys of sends, those stored on port
// apart.
func ackedKeys(sends []clusterSend, port string) (all, onPort []string) {
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

// p99 is the 99th percentile of the sends' latencies.
func p99(sends []clusterSend) time.Duration {
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

// failover measures a load after a kill: the time from the kill to the end
// of the last failed send, the failed sends, and the p99 latency of the
// sends in that window, and at least in the second after the kill (a send
// in flight at the kill included).
func failover(l *clusterLoad, kill time.Time) (last time.Duration, failed int, lat time.Duration, window int) {
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
	return last, failed, p99(in), len(in)
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

// TestE2EClusterFailover: two name servers, two broker groups (a
// SYNC_MASTER and its slave each), all real processes. Two producers on
// name-server routes send at a steady rate (3 senders of 200 messages/s
// each), one with the client's default retries and one without; a push consumer on name-server routes reads.
// kill -9 of broker-a's master: the producers move to broker-b (failed
// sends counted, the failover time and p99 latency logged), and the
// consumer reads broker-a's acknowledged messages from its slave. The
// master restarts: sends reach it again, and the consumer owns every queue
// of both groups. One name server stops: no send fails. At the end every
// acknowledged message has been consumed.
func TestE2EClusterFailover(t *testing.T) {
	const topic = "failover"
	ns1, ns2 := startNamesrv(t, "--brokerNotActiveTimeoutMillis", "2000"), startNamesrv(t, "--brokerNotActiveTimeoutMillis", "2000")
	nsList := ns1.addr + ";" + ns2.addr
	ports := e2eFreePorts(t, 8)
	var masters, slaves [2]*e2eBroker
	for g, name := range []string{"broker-a", "broker-b"} {
		mp, mha, sp, sha := ports[4*g], ports[4*g+1], ports[4*g+2], ports[4*g+3]
		masters[g] = startClusterBroker(t, t.TempDir(), mp, mha, nsList, "--brokerName", name, "--brokerRole", "SYNC_MASTER")
		slaves[g] = startClusterBroker(t, t.TempDir(), sp, sha, nsList, "--brokerName", name, "--brokerRole", "SLAVE",
			"--brokerId", "1", "--haMasterAddress", "127.0.0.1:"+strconv.Itoa(mha))
	}
	deadPort := strconv.Itoa(ports[0])

	admin, err := client.NewAdmin("", client.WithNameServer(nsList), client.WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx := e2eCtx(t, 60*time.Second)
	testwait.For(t, testwait.Wall, 10*time.Second, "every broker registered", func() bool {
		ci, err := admin.ClusterInfo(ctx)
		alive := 0
		for _, b := range ci.Brokers {
			if b.Alive {
				alive++
			}
		}
		return err == nil && alive == 4
	})
	if created, err := admin.CreateTopicInCluster(ctx, "DefaultCluster", topic, 4); err != nil || len(created) != 2 {
		t.Fatalf("create topic in the cluster: %v %v", created, err)
	}
	writableIn := func(want int) func() bool {
		return func() bool {
			rd, err := admin.TopicRoute(ctx, topic)
			n := 0
			for _, q := range rd.QueueDatas {
				if q.WriteQueueNums == 4 {
					n++
				}
			}
			return err == nil && n == want
		}
	}
	testwait.For(t, testwait.Wall, 10*time.Second, "the topic writable in both groups", writableIn(2))

	consumer, deliveries := startClusterConsumer(t, ctx, nsList, topic, "live-readers")
	retrying := startClusterLoad(t, "retrying", nsList, topic, 3, 5*time.Millisecond)
	single := startClusterLoad(t, "single", nsList, topic, 3, 5*time.Millisecond, client.WithRetries(0))
	start := time.Now()
	// The slaves have the topic (a slave takes its master's topics every
	// few seconds), and each group has acknowledged some sends.
	haWaitTopic(t, slaves[0].addr, topic, 10*time.Second)
	haWaitTopic(t, slaves[1].addr, topic, 10*time.Second)
	testwait.For(t, testwait.Wall, 10*time.Second, "sends acknowledged by both groups", func() bool {
		acked, toA, _ := count(retrying.since(start), deadPort)
		return toA >= 50 && acked-toA >= 50
	})
	if _, _, failed := count(retrying.since(start), deadPort); failed > 0 {
		t.Fatalf("%d sends failed before any fault", failed)
	}

	killed := time.Now()
	masters[0].kill()
	testwait.For(t, testwait.Wall, 5*time.Second, "broker-a out of the writable routes", writableIn(1))
	t.Logf("broker-a out of the name server's writable routes %v after kill -9", time.Since(killed).Round(time.Millisecond))
	testwait.For(t, testwait.Wall, 5*time.Second, "100 sends of each producer acknowledged after the kill", func() bool {
		a, _, _ := count(retrying.since(killed), deadPort)
		b, _, _ := count(single.since(killed), deadPort)
		return a >= 100 && b >= 100
	})
	// Everything acknowledged by broker-a before its death is on its slave:
	// the live consumer has it, and a consumer group that starts now reads
	// it from there (the master is gone).
	_, deadKeys := ackedKeys(append(retrying.since(start), single.since(start)...), deadPort)
	late, lateDeliveries := startClusterConsumer(t, ctx, nsList, topic, "late-readers")
	for name, d := range map[string]*e2eDeliveries{"live": deliveries, "late": lateDeliveries} {
		testwait.For(t, testwait.Wall, 10*time.Second, fmt.Sprintf("the %s consumer to read the %d messages broker-a acknowledged", name, len(deadKeys)),
			func() bool { return d.has(deadKeys) })
	}
	for _, l := range []*clusterLoad{retrying, single} {
		last, failed, lat, n := failover(l, killed)
		t.Logf("failover of producer %s: %d failed sends, the last ended %v after kill -9; p99 send latency %v over the %d sends from the kill to max(that, 1 s)",
			l.name, failed, last.Round(time.Millisecond), lat.Round(time.Millisecond), n)
		// The bound the client promises: a broker that failed is skipped
		// for WithRouteRefresh (2 s) + 1 s, and a refresh drops it.
		if last > 3*time.Second {
			t.Errorf("producer %s: sends failed until %v after the kill, beyond the 3 s bound", l.name, last)
		}
	}

	masters[0] = startClusterBroker(t, masters[0].dir, ports[0], ports[1], nsList, masters[0].flags...)
	restarted := time.Now()
	testwait.For(t, testwait.Wall, 10*time.Second, "sends acknowledged by the restarted broker-a", func() bool {
		_, toA, _ := count(retrying.since(restarted), deadPort)
		return toA >= 20
	})

	ns1.cmd.Process.Signal(syscall.SIGTERM)
	if !testwait.Chan(ns1.done, 10*time.Second) {
		t.Fatal("name server 1 did not stop")
	}
	nsStopped := time.Now()
	testwait.For(t, testwait.Wall, 10*time.Second, "sends acknowledged by both groups after a name server stopped", func() bool {
		acked, toA, _ := count(retrying.since(nsStopped), deadPort)
		return toA >= 50 && acked-toA >= 50
	})
	for _, l := range []*clusterLoad{retrying, single} {
		if _, _, failed := count(l.since(nsStopped), deadPort); failed > 0 {
			t.Errorf("producer %s: %d sends failed after a name server stopped", l.name, failed)
		}
		l.end(t)
	}
	for _, l := range []*clusterLoad{retrying, single} {
		if _, _, failed := count(l.since(restarted), deadPort); failed > 0 {
			t.Errorf("producer %s: %d sends failed after broker-a restarted", l.name, failed)
		}
	}

	all, _ := ackedKeys(append(retrying.since(start), single.since(start)...), deadPort)
	for name, d := range map[string]*e2eDeliveries{"live": deliveries, "late": lateDeliveries} {
		testwait.For(t, testwait.Wall, 10*time.Second, fmt.Sprintf("the %s consumer to read all %d acknowledged messages", name, len(all)),
			func() bool { return d.has(all) })
	}
	for _, c := range []*client.PushConsumer{consumer, late} {
		testwait.For(t, testwait.Wall, 10*time.Second, "consumer "+c.Group()+" owning the 4 queues of each group", func() bool {
			groups := c.BrokerGroups()
			for _, name := range []string{"broker-a", "broker-b"} {
				if groups[name] == nil || len(e2eTopicQueues(groups[name].Assignment(), topic)) != 4 {
					return false
				}
			}
			return true
		})
	}
	_, _, failedR := count(retrying.since(start), deadPort)
	_, _, failedS := count(single.since(start), deadPort)
	t.Logf("%d acknowledged messages all consumed by both groups (%d and %d duplicates); failed sends: %d with retries, %d without; took %v",
		len(all), len(deliveries.dups()), len(lateDeliveries.dups()), failedR, failedS, time.Since(start).Round(time.Millisecond))
}
