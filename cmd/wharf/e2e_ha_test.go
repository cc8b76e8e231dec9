package main

// End-to-end tests of master/slave replication (issue 5) with real broker
// processes on loopback, built on the harness of e2e_test.go: a SYNC_MASTER
// killed with SIGKILL loses no acknowledged message (its slave serves them
// all), slave and master CommitLogs are byte-identical, slaves killed or
// started late catch up, SYNC_MASTER never acknowledges without a slave copy,
// consumer offsets committed on a slave survive the master's return, and a
// diverged slave is refused without being touched.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// haSmallFlags give 1 MiB CommitLog segments (so loads roll over several
// and the byte comparison crosses segment boundaries) and quick heartbeats.
var haSmallFlags = []string{
	"--mappedFileSizeCommitLog", "1048576",
	"--maxMessageSize", "65536",
	"--haSendHeartbeatInterval", "500",
}

// startHAMaster starts a master (role ASYNC_MASTER or SYNC_MASTER) serving
// slaves on haPort; restart() keeps the port.
func startHAMaster(t *testing.T, dir, role string, haPort int, extra ...string) *e2eBroker {
	t.Helper()
	flags := append([]string{"--brokerRole", role, "--haListenPort", strconv.Itoa(haPort), "--slaveTimeout", "1000"}, haSmallFlags...)
	return startBroker(t, dir, append(flags, extra...)...)
}

// startHASlave starts a slave (brokerId 1) of the master whose haListenPort
// is haPort.
func startHASlave(t *testing.T, dir string, haPort int, extra ...string) *e2eBroker {
	t.Helper()
	flags := append([]string{"--brokerRole", "SLAVE", "--brokerId", "1",
		"--haMasterAddress", "127.0.0.1:" + strconv.Itoa(haPort)}, haSmallFlags...)
	return startBroker(t, dir, append(flags, extra...)...)
}

// haInfo reads a broker's runtime statistics.
func haInfo(addr string) (protocol.BrokerRuntimeInfo, error) {
	a, err := client.NewAdmin(addr, client.WithTimeout(2*time.Second), client.WithDialTimeout(time.Second))
	if err != nil {
		return protocol.BrokerRuntimeInfo{}, err
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return a.RuntimeInfo(ctx)
}

// haWaitCaughtUp waits until the master sees exactly one slave, in sync
// with no lag, and the slave's log ends where the master's does; it
// returns that offset.
func haWaitCaughtUp(t *testing.T, m, s *e2eBroker, d time.Duration) int64 {
	t.Helper()
	var mi, si protocol.BrokerRuntimeInfo
	var err error
	if !testwait.Until(testwait.Wall, d, func() bool {
		m.mustBeAlive("waiting for the slave to catch up")
		s.mustBeAlive("waiting for the slave to catch up")
		mi, err = haInfo(m.addr)
		if err == nil {
			si, err = haInfo(s.addr)
		}
		return err == nil && len(mi.Slaves) == 1 && mi.Slaves[0].InSync && mi.Slaves[0].LagBytes == 0 &&
			si.CommitLogMaxOffset == mi.CommitLogMaxOffset && mi.Slaves[0].AckedOffset == mi.CommitLogMaxOffset
	}) {
		t.Fatalf("the slave did not catch up within %v: err %v\nmaster: max %d slaves %+v\nslave: max %d status %q master max %d",
			d, err, mi.CommitLogMaxOffset, mi.Slaves, si.CommitLogMaxOffset, si.HAStatus, si.MasterMaxOffset)
	}
	return mi.CommitLogMaxOffset
}

// haWaitTopic waits until the broker lists topic (a slave gets topics from
// its master every few seconds).
func haWaitTopic(t *testing.T, addr, topic string, d time.Duration) {
	t.Helper()
	a := e2eAdmin(t, addr)
	var err error
	if !testwait.Until(testwait.Wall, d, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err = a.GetTopic(ctx, topic)
		return err == nil
	}) {
		t.Fatalf("topic %s not on %s within %v: %v", topic, addr, d, err)
	}
}

// haSegments lists the CommitLog segments of a store by start offset.
func haSegments(t *testing.T, dir string) map[int64]string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, "commitlog"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]string{}
	for _, e := range ents {
		start, err := strconv.ParseInt(e.Name(), 10, 64)
		if err != nil || e.IsDir() {
			continue
		}
		out[start] = filepath.Join(dir, "commitlog", e.Name())
	}
	return out
}

// haCompareLogs checks that the slave's CommitLog holds exactly the
// master's bytes from the slave's first segment up to upTo, comparing the
// segment files of the same name, and that no slave segment is missing in
// between. It returns the number of bytes compared.
func haCompareLogs(t *testing.T, masterDir, slaveDir string, from, upTo int64) int64 {
	t.Helper()
	ms, ss := haSegments(t, masterDir), haSegments(t, slaveDir)
	var starts []int64
	for start := range ss {
		if start < upTo {
			starts = append(starts, start)
		}
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	if len(starts) == 0 || starts[0] > from {
		t.Fatalf("the slave has no segment holding offset %d (segments %v)", from, starts)
	}
	var compared int64
	for i, start := range starts {
		sb, err := os.ReadFile(ss[start])
		if err != nil {
			t.Fatal(err)
		}
		if i+1 < len(starts) && start+int64(len(sb)) != starts[i+1] {
			t.Fatalf("slave segment %d (%d bytes) is not followed by segment %d", start, len(sb), starts[i+1])
		}
		mpath, ok := ms[start]
		if !ok {
			t.Fatalf("slave segment %d has no master segment of the same name", start)
		}
		mb, err := os.ReadFile(mpath)
		if err != nil {
			t.Fatal(err)
		}
		lo := max(from-start, 0)
		n := min(int64(len(sb)), upTo-start)
		if int64(len(mb)) < n {
			t.Fatalf("master segment %d has %d bytes, the slave's holds %d below %d", start, len(mb), n, upTo)
		}
		if !bytes.Equal(sb[lo:n], mb[lo:n]) {
			i := lo
			for i < n && sb[i] == mb[i] {
				i++
			}
			t.Fatalf("slave and master CommitLogs differ at offset %d (segment %d)", start+i, start)
		}
		compared += n - lo
	}
	if compared != upTo-from {
		t.Fatalf("compared %d bytes, want %d (%d..%d)", compared, upTo-from, from, upTo)
	}
	return compared
}

// haLogHash hashes every CommitLog file of a store.
func haLogHash(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	segs := haSegments(t, dir)
	var starts []int64
	for s := range segs {
		starts = append(starts, s)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	for _, s := range starts {
		b, err := os.ReadFile(segs[s])
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%d:%d:", s, len(b))
		h.Write(b)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// haLoad sends messages to a broker from several goroutines until stopped,
// recording the keys acknowledged with OK and the other outcomes.
type haLoad struct {
	mu     sync.Mutex
	acked  map[string]bool
	other  map[string]int // non-OK outcomes
	okN    atomic.Int64
	cancel context.CancelFunc
	wg     sync.WaitGroup
	p      *client.Producer
}

// startHALoad starts 4 goroutines sending one message at a time and 2
// sending batches of 10, keys prefix-g<G>-<i>-<j>.
func startHALoad(t *testing.T, addr, topic, prefix string, acked map[string]bool) *haLoad {
	t.Helper()
	p, err := client.NewProducer(addr, client.WithRetries(0), client.WithTimeout(3*time.Second),
		client.WithReconnectBackoff(50*time.Millisecond, 200*time.Millisecond))
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &haLoad{acked: acked, other: map[string]int{}, cancel: cancel, p: p}
	for g := range 6 {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				n := 1
				if g >= 4 {
					n = 10
				}
				msgs := make([]*protocol.Message, n)
				for j := range msgs {
					msgs[j] = e2eMessage(topic, fmt.Sprintf("%s-g%d-%d-%d", prefix, g, i, j))
				}
				var st protocol.Status
				var err error
				if n == 1 {
					var res client.SendResult
					res, err = p.Send(ctx, msgs[0])
					st = res.Status
				} else {
					var res client.BatchResult
					res, err = p.SendBatch(ctx, msgs)
					st = res.Status
				}
				l.mu.Lock()
				if err == nil && st == protocol.StatusOK {
					for _, m := range msgs {
						l.acked[m.Keys()[0]] = true
					}
					l.okN.Add(int64(n))
				} else if ctx.Err() == nil {
					k := "error"
					if s, ok := client.StatusFromError(err); ok {
						k = s.String()
					} else if errors.Is(err, client.ErrBrokerUnavailable) {
						k = "unavailable"
					}
					l.other[k]++
				}
				l.mu.Unlock()
				if err != nil && !sleepCtx(ctx, 5*time.Millisecond) {
					return
				}
			}
		}()
	}
	return l
}

// failures counts the sends that did not succeed.
func (l *haLoad) failures() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, v := range l.other {
		n += v
	}
	return n
}

// stop ends the load and waits for its senders.
func (l *haLoad) stop(t *testing.T) {
	t.Helper()
	l.cancel()
	if !testwait.Chan(wgDone(&l.wg), 10*time.Second) {
		t.Fatal("load senders did not stop")
	}
	l.p.Close()
}

// haConsumeAll consumes the whole topic as a new group with a push
// consumer given the (dead) master's address and the slave's, and checks
// that every key of want arrives with its body intact. It returns the
// number of messages received.
func haConsumeAll(t *testing.T, masterAddr, slaveAddr, topic, group string, want map[string]bool) int {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]int{}
	var problems []string
	c, err := client.NewPushConsumer(masterAddr, group,
		client.WithSlaveAddrs(slaveAddr),
		client.WithConsumeFrom(client.ConsumeFromFirst),
		client.WithPullBatchSize(256), client.WithConsumeBatchSize(64),
		client.WithPullSuspend(500*time.Millisecond),
		client.WithReconnectBackoff(50*time.Millisecond, 500*time.Millisecond))
	if err != nil {
		t.Fatalf("consumer of the slave: %v", err)
	}
	defer c.Close()
	if err := c.Subscribe(topic, "*", func(_ context.Context, msgs []*protocol.MessageExt) client.ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			key, err := e2eCheckBody(m.Body)
			if err != nil {
				if len(problems) < 10 {
					problems = append(problems, fmt.Sprintf("%d@%d: %v", m.QueueID, m.QueueOffset, err))
				}
				continue
			}
			seen[key]++
		}
		return client.ConsumeSuccess
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("start consumer on the slave: %v", err)
	}
	missing := func() (int, string) {
		mu.Lock()
		defer mu.Unlock()
		n, example := 0, ""
		for k := range want {
			if seen[k] == 0 {
				n++
				example = k
			}
		}
		return n, example
	}
	if !testwait.Until(testwait.Wall, 15*time.Second, func() bool { n, _ := missing(); return n == 0 }) {
		n, example := missing()
		t.Fatalf("%d acknowledged messages not consumable from the slave (e.g. %s)", n, example)
	}
	// Room for a second delivery to show up (the wait ends early if one
	// does, and the count below fails the test).
	testwait.Until(testwait.Wall, 100*time.Millisecond, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range seen {
			if n > 1 {
				return true
			}
		}
		return false
	})
	if err := c.Close(); err != nil {
		t.Errorf("consumer close: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Fatalf("damaged messages on the slave:\n%s", strings.Join(problems, "\n"))
	}
	total := 0
	for k, n := range seen {
		if n > 1 {
			t.Errorf("key %s delivered %d times", k, n)
		}
		total += n
	}
	return total
}

// haConsumeCLI consumes the topic with `wharf consume --broker master
// --slave slave` and checks every key of want is printed with the length of
// its body. It takes the idle exit (3 s) and a few seconds more; the
// slave redials the master every second at most (haReconnectMaxInterval),
// so it is back within a second of the restart that follows.
func haConsumeCLI(t *testing.T, masterAddr, slaveAddr, topic, group string, want map[string]bool) int {
	t.Helper()
	out, errOut, code := haRun(t, 30*time.Second, "consume", "--broker", masterAddr, "--slave", slaveAddr,
		"--topic", topic, "--group", group, "--print", "--json", "--idle-exit", "3s", "--broker-wait", "10s",
		"--suspend", "500ms", "--pull-batch", "256")
	if code != 0 {
		t.Fatalf("wharf consume --slave exited %d\nstderr:\n%s", code, errOut)
	}
	got := map[string]int{}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	for _, line := range lines[:len(lines)-1] {
		f := strings.Split(line, "\t")
		if len(f) != 5 {
			t.Fatalf("bad --print line %q", line)
		}
		if n, _ := strconv.Atoi(f[4]); n != len(e2eBody(f[2])) {
			t.Errorf("key %s: body of %s bytes, want %d", f[2], f[4], len(e2eBody(f[2])))
		}
		got[f[2]]++
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rep); err != nil {
		t.Fatalf("wharf consume --json: last line %q: %v", lines[len(lines)-1], err)
	}
	if rep["stopped"] != "idle" || rep["duplicates"] != float64(0) {
		t.Errorf("consume report %v", rep)
	}
	for k := range want {
		if got[k] != 1 {
			t.Errorf("acknowledged key %s printed %d times by wharf consume --slave (%d lines, report %v)", k, got[k], len(lines)-1, rep)
			haDiagnose(t, slaveAddr, topic, k, lines[:len(lines)-1])
			t.FailNow()
		}
	}
	return len(lines) - 1
}

// TestE2EHAKillMasterRounds: a SYNC_MASTER with one slave under load is
// killed with SIGKILL; every message it acknowledged is consumable from the
// slave. Then the master restarts on its store, the slave reconnects and
// catches up (byte-identical logs), and the next round loads and kills it
// again. Each round checks every round's acknowledged keys.
func TestE2EHAKillMasterRounds(t *testing.T) {
	t.Parallel()
	const topic = "ha"
	haPort := haFreePort(t)
	mdir, sdir := t.TempDir(), t.TempDir()
	m := startHAMaster(t, mdir, "SYNC_MASTER", haPort)
	s := startHASlave(t, sdir, haPort)
	ctx := e2eCtx(t, 2*time.Minute)
	e2eCreateTopic(t, ctx, e2eAdmin(t, m.addr), topic, 4)
	haWaitCaughtUp(t, m, s, 10*time.Second)
	haWaitTopic(t, s.addr, topic, 10*time.Second)
	rng := rand.New(rand.NewPCG(5, 55))

	acked := map[string]bool{}
	for round := 1; round <= 3; round++ {
		load := startHALoad(t, m.addr, topic, fmt.Sprintf("r%d", round), acked)
		// Kill at a random point of the load: after 500-5,000
		// acknowledgements, or 300-700 ms on a machine too loaded to get
		// there.
		target := int64(500 + rng.IntN(4500))
		bound := time.Duration(300+rng.IntN(400)) * time.Millisecond
		loadStart := time.Now()
		testwait.Until(testwait.Wall, bound, func() bool { return load.okN.Load() >= target })
		wait := time.Since(loadStart).Round(time.Millisecond)
		m.kill()
		// Let the senders see the master gone before they are stopped: a
		// failed send per sender (those in flight fail at once).
		failed := load.failures()
		testwait.Until(testwait.Wall, time.Second, func() bool { return load.failures() >= failed+6 })
		load.stop(t)
		if load.okN.Load() == 0 {
			t.Fatalf("round %d: nothing acknowledged in %v (other outcomes %v)", round, wait, load.other)
		}
		var n int
		if round == 1 {
			n = haConsumeCLI(t, m.addr, s.addr, topic, fmt.Sprintf("cli-r%d", round), acked)
		} else {
			n = haConsumeAll(t, m.addr, s.addr, topic, fmt.Sprintf("reader-r%d", round), acked)
		}
		t.Logf("round %d: master killed after %v; %d acknowledged this round (other outcomes %v), %d in all; the slave served %d",
			round, wait, load.okN.Load(), load.other, len(acked), n)

		m = m.restart()
		// The slave redials within haReconnectMaxInterval (1 s): the
		// rest of the wait is for catching up.
		end := haWaitCaughtUp(t, m, s, 10*time.Second)
		haCompareLogs(t, mdir, sdir, 0, end)
	}
	if code, _ := s.stop(syscall.SIGTERM, 15*time.Second); code != 0 {
		t.Errorf("slave exited %d after SIGTERM", code)
	}
}

// TestE2EHASlaveRestartAndLateJoin: an ASYNC_MASTER under load keeps its
// slave's log byte-identical; the slave killed mid-load and restarted
// catches up; an empty slave started late catches up from the master's
// earliest offset.
func TestE2EHASlaveRestartAndLateJoin(t *testing.T) {
	t.Parallel()
	const topic = "late"
	haPort := haFreePort(t)
	mdir, sdir := t.TempDir(), t.TempDir()
	m := startHAMaster(t, mdir, "ASYNC_MASTER", haPort)
	s := startHASlave(t, sdir, haPort)
	ctx := e2eCtx(t, 2*time.Minute)
	e2eCreateTopic(t, ctx, e2eAdmin(t, m.addr), topic, 4)

	acked := map[string]bool{}
	load := startHALoad(t, m.addr, topic, "a", acked)
	// The load's progress is the master's log end: a segment (1 MiB) before
	// the slave is killed, one while it is down, one after its restart, with
	// the restarted slave acknowledging bytes written while it was down.
	ma := e2eAdmin(t, m.addr)
	var mi protocol.BrokerRuntimeInfo
	grown := func(what string, from int64, cond func() bool) int64 {
		t.Helper()
		testwait.For(t, testwait.Wall, 20*time.Second, what, func() bool {
			var err error
			mi, err = ma.RuntimeInfo(ctx)
			return err == nil && mi.CommitLogMaxOffset >= from+1<<20 && cond()
		})
		return mi.CommitLogMaxOffset
	}
	always := func() bool { return true }
	end := grown("a segment written before the slave's kill", 0, always)
	s.kill() // mid-load
	end = grown("a segment written while the slave is down", end, always)
	s = s.restart()
	grown("a segment written after the slave's restart, to it too", end, func() bool {
		return len(mi.Slaves) == 1 && mi.Slaves[0].AckedOffset > end
	})
	load.stop(t)
	if len(load.other) > 0 {
		t.Errorf("ASYNC_MASTER sends failed while the slave was down: %v", load.other)
	}
	end = haWaitCaughtUp(t, m, s, 20*time.Second)
	if end < 3<<20 {
		t.Errorf("the load wrote only %d bytes: want several 1 MiB segments", end)
	}
	n := haCompareLogs(t, mdir, sdir, 0, end)
	t.Logf("restarted slave caught up: %d bytes identical, %d messages acknowledged", n, len(acked))

	// An empty slave joining late copies everything from offset 0.
	if code, _ := s.stop(syscall.SIGTERM, 15*time.Second); code != 0 {
		t.Errorf("slave exited %d after SIGTERM", code)
	}
	late := t.TempDir()
	start := time.Now()
	s2 := startHASlave(t, late, haPort)
	end = haWaitCaughtUp(t, m, s2, 20*time.Second)
	took := time.Since(start)
	n = haCompareLogs(t, mdir, late, 0, end)
	t.Logf("empty slave caught up %d bytes in %v", n, took.Round(time.Millisecond))
	if info, err := haInfo(s2.addr); err != nil || info.CommitLogMinOffset != 0 {
		t.Errorf("late slave min offset %d, %v; want 0 (the master's earliest)", info.CommitLogMinOffset, err)
	}
	haWaitTopic(t, s2.addr, topic, 10*time.Second)
	if got := e2eReadAll(t, ctx, s2.addr, topic); len(got) < len(acked) {
		t.Errorf("late slave serves %d messages, %d were acknowledged", len(got), len(acked))
	} else {
		for k := range acked {
			if _, ok := got[k]; !ok {
				t.Fatalf("late slave lacks acknowledged key %s", k)
			}
		}
	}
}

// TestE2EHASyncMasterWithoutSlave: with its slave gone a SYNC_MASTER
// answers every send SLAVE_NOT_AVAILABLE or FLUSH_SLAVE_TIMEOUT, never OK;
// a slave answers sends NOT_MASTER.
func TestE2EHASyncMasterWithoutSlave(t *testing.T) {
	t.Parallel()
	const topic = "sync"
	haPort := haFreePort(t)
	m := startHAMaster(t, t.TempDir(), "SYNC_MASTER", haPort)
	s := startHASlave(t, t.TempDir(), haPort)
	ctx := e2eCtx(t, time.Minute)
	e2eCreateTopic(t, ctx, e2eAdmin(t, m.addr), topic, 4)
	haWaitCaughtUp(t, m, s, 10*time.Second)
	p := e2eProducer(t, m.addr, client.WithRetries(0))
	for i := range 20 {
		if res, err := p.Send(ctx, e2eMessage(topic, fmt.Sprintf("ok-%d", i))); err != nil || res.Status != protocol.StatusOK {
			t.Fatalf("send with the slave in sync: %+v, %v", res, err)
		}
	}
	haWaitTopic(t, s.addr, topic, 10*time.Second)

	// The slave refuses writes.
	sp := e2eProducer(t, s.addr, client.WithRetries(0))
	for i := range 3 {
		res, err := sp.Send(ctx, e2eMessage(topic, fmt.Sprintf("to-slave-%d", i)))
		if !errors.Is(err, client.ErrNotMaster) || res.Status == protocol.StatusOK {
			t.Fatalf("send to the slave: %+v, %v; want NOT_MASTER", res, err)
		}
	}
	out, _, code := haRun(t, 10*time.Second, "produce", "--broker", s.addr, "--topic", topic, "--count", "1")
	if code == 0 {
		t.Errorf("wharf produce to a slave exited 0:\n%s", out)
	}

	// Sends racing the slave's death, then with no slave at all: the first
	// may time out waiting for the copy, none may be OK.
	s.kill()
	var mu sync.Mutex
	outcomes := map[string]int{}
	var wg sync.WaitGroup
	var next atomic.Int64
	for g := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= 200 {
				res, err := p.Send(ctx, e2eMessage(topic, fmt.Sprintf("noslave-%d-%d", g, next.Load())))
				k := "other: " + fmt.Sprint(err)
				switch {
				case err == nil || res.Status == protocol.StatusOK:
					k = "OK"
				case errors.Is(err, client.ErrSlaveNotAvailable):
					k = "SLAVE_NOT_AVAILABLE"
				case errors.Is(err, client.ErrFlushSlaveTimeout):
					k = "FLUSH_SLAVE_TIMEOUT"
				}
				mu.Lock()
				outcomes[k]++
				mu.Unlock()
			}
		}()
	}
	if !testwait.Chan(wgDone(&wg), 30*time.Second) {
		t.Fatal("sends did not finish")
	}
	t.Logf("200 sends without a slave: %v", outcomes)
	if outcomes["SLAVE_NOT_AVAILABLE"]+outcomes["FLUSH_SLAVE_TIMEOUT"] != 200 {
		t.Fatalf("want every send SLAVE_NOT_AVAILABLE or FLUSH_SLAVE_TIMEOUT, got %v", outcomes)
	}
	// With the slave known to be gone the answer is immediate.
	start := time.Now()
	if _, err := p.Send(ctx, e2eMessage(topic, "late")); !errors.Is(err, client.ErrSlaveNotAvailable) {
		t.Errorf("send long after the slave died: %v", err)
	} else if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("SLAVE_NOT_AVAILABLE took %v", d)
	}
}

// TestE2EHASlaveOffsetsSurvive: consumer offsets committed on the slave
// while the master is down are on the master once it is back.
func TestE2EHASlaveOffsetsSurvive(t *testing.T) {
	t.Parallel()
	const topic, group = "offs", "offs-group"
	haPort := haFreePort(t)
	m := startHAMaster(t, t.TempDir(), "SYNC_MASTER", haPort)
	s := startHASlave(t, t.TempDir(), haPort)
	ctx := e2eCtx(t, time.Minute)
	e2eCreateTopic(t, ctx, e2eAdmin(t, m.addr), topic, 2)
	haWaitCaughtUp(t, m, s, 10*time.Second)
	p := e2eProducer(t, m.addr, client.WithRetries(0))
	for i := range 100 {
		if _, err := p.Send(ctx, e2eMessage(topic, fmt.Sprintf("k-%d", i)), client.ToQueue(int32(i%2))); err != nil {
			t.Fatal(err)
		}
	}
	// An offset committed on the master first, to be overtaken.
	pm := e2ePuller(t, m.addr, group)
	if err := pm.CommitOffset(ctx, topic, 0, 5); err != nil {
		t.Fatal(err)
	}
	haWaitTopic(t, s.addr, topic, 10*time.Second)
	m.kill()

	// The consumer finds the master gone and reads and commits on the slave.
	pc, err := client.NewPullConsumer(m.addr, group, client.WithSlaveAddrs(s.addr))
	if err != nil {
		t.Fatalf("consumer with the master down: %v", err)
	}
	defer pc.Close()
	want := map[int32]int64{0: 37, 1: 50}
	for q, off := range want {
		res, err := pc.Pull(ctx, topic, q, 0, int32(off), client.PullOptions{})
		if err != nil || res.BrokerAddr != s.addr || len(res.Messages) != int(off) {
			t.Fatalf("pull of queue %d with the master down: from %s, %d messages, %v", q, res.BrokerAddr, len(res.Messages), err)
		}
		if err := pc.CommitOffset(ctx, topic, q, res.NextBeginOffset); err != nil {
			t.Fatalf("commit on the slave: %v", err)
		}
	}
	sa := e2eAdmin(t, s.addr)
	for q, off := range want {
		if got, err := sa.QueryConsumerOffset(ctx, group, topic, q); err != nil || got != off {
			t.Fatalf("slave offset of queue %d: %d, %v; want %d", q, got, err, off)
		}
	}

	m = m.restart()
	haWaitCaughtUp(t, m, s, 10*time.Second) // the slave redials within 1 s
	ma := e2eAdmin(t, m.addr)
	var got []int64
	if !testwait.Until(testwait.Wall, 15*time.Second, func() bool {
		ok := true
		got = got[:0]
		for q := range int32(2) {
			off, err := ma.QueryConsumerOffset(ctx, group, topic, q)
			got = append(got, off)
			if err != nil || off < want[q] {
				ok = false
			}
		}
		return ok
	}) {
		t.Fatalf("master offsets %v, want at least %v (committed on the slave)", got, want)
	}
	t.Logf("master offsets after its return: %v", got)
}

// TestE2EHADivergedSlaveRefused: a slave whose log is not a prefix of its
// master's (different bytes at the same offsets, or longer) is refused with
// a clear reason shown by `wharf broker status`, and its log is untouched.
func TestE2EHADivergedSlaveRefused(t *testing.T) {
	t.Parallel()
	const topic = "div"
	ctx := e2eCtx(t, time.Minute)
	produce := func(addr, prefix string, n int) {
		a := e2eAdmin(t, addr)
		if _, err := a.GetTopic(ctx, topic); err != nil {
			e2eCreateTopic(t, ctx, a, topic, 2)
		}
		p := e2eProducer(t, addr)
		for i := range n {
			if _, err := p.Send(ctx, e2eMessage(topic, fmt.Sprintf("%s-%d", prefix, i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	portA, portB, portC := haFreePort(t), haFreePort(t), haFreePort(t)
	a := startHAMaster(t, t.TempDir(), "ASYNC_MASTER", portA)
	sdir := t.TempDir()
	s := startHASlave(t, sdir, portA)
	produce(a.addr, "a", 50)
	end := haWaitCaughtUp(t, a, s, 10*time.Second)
	if code, _ := s.stop(syscall.SIGTERM, 15*time.Second); code != 0 {
		t.Fatalf("slave exited %d", code)
	}
	before := haLogHash(t, sdir)

	b := startHAMaster(t, t.TempDir(), "ASYNC_MASTER", portB)
	produce(b.addr, "b", 200)                                 // longer than the slave's log, other bytes
	c := startHAMaster(t, t.TempDir(), "ASYNC_MASTER", portC) // empty: shorter

	cases := []struct {
		master *e2eBroker
		port   int
		reason string
	}{
		{b, portB, "differ from the master's"},
		{c, portC, "longer than the master's"},
	}
	for _, tc := range cases {
		s := startHASlave(t, sdir, tc.port)
		var info protocol.BrokerRuntimeInfo
		var err error
		if !testwait.Until(testwait.Wall, 10*time.Second, func() bool {
			info, err = haInfo(s.addr)
			return err == nil && strings.Contains(info.HAStatus, "refused")
		}) {
			t.Fatalf("slave not refused by the master on port %d: status %q, %v", tc.port, info.HAStatus, err)
		}
		if !strings.Contains(info.HAStatus, tc.reason) || !strings.Contains(info.HAStatus, "diverged") {
			t.Errorf("refusal %q lacks %q / \"diverged\"", info.HAStatus, tc.reason)
		}
		out, errOut, code := haRun(t, 10*time.Second, "broker", "status", "--broker", s.addr, "--json")
		var st statusJSON
		if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
			t.Fatalf("broker status: exit %d\n%s%s", code, out, errOut)
		}
		if st.Role != "SLAVE" || !strings.Contains(st.HAStatus, tc.reason) || st.MaxOffset != end {
			t.Errorf("broker status of the refused slave: %+v (want role SLAVE, max %d, reason %q)", st, end, tc.reason)
		}
		if mi, err := haInfo(tc.master.addr); err != nil || len(mi.Slaves) != 0 {
			t.Errorf("master on port %d lists slaves %+v, %v after refusing", tc.port, mi.Slaves, err)
		}
		// It must not retry: its first retry would dial the master again
		// 1 s after the refusal (and log it). The wait ends early if it
		// does.
		const dialed = `msg="connected to master"`
		if n := strings.Count(s.log(), dialed); testwait.Until(testwait.Wall, 1500*time.Millisecond, func() bool {
			return strings.Count(s.log(), dialed) > n
		}) {
			t.Errorf("the refused slave connected to the master again")
		}
		if !strings.Contains(s.log(), "refused") {
			t.Errorf("slave log does not mention the refusal:\n%s", s.log())
		}
		if code, _ := s.stop(syscall.SIGTERM, 15*time.Second); code != 0 {
			t.Errorf("refused slave exited %d after SIGTERM", code)
		}
		if after := haLogHash(t, sdir); after != before {
			t.Fatalf("the refused slave's CommitLog changed")
		}
	}
}

// haRun runs the wharf binary with args and returns stdout, stderr and the
// exit code.
func haRun(t *testing.T, timeout time.Duration, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, e2eBinary(t), args...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("wharf %s: no exit within %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), timeout, out.String(), errOut.String())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), errOut.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("wharf %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), 0
}

// haFreePort returns a loopback port that was free a moment ago (a
// master's haListenPort, kept across its restarts).
func haFreePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// haDiagnose logs where key is on the broker and how far the printed lines
// got in each queue.
func haDiagnose(t *testing.T, addr, topic, key string, lines []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a, err := client.NewAdmin(addr)
	if err != nil {
		t.Logf("diagnose: %v", err)
		return
	}
	defer a.Close()
	found, err := a.QueryByKey(ctx, topic, key, time.Time{}, time.Time{}, 4)
	for _, m := range found {
		t.Logf("diagnose: %s is on %s at queue %d offset %d (commit log %d)", key, addr, m.QueueID, m.QueueOffset, m.CommitLogOffset)
	}
	if err != nil || len(found) == 0 {
		t.Logf("diagnose: %s not found on %s: %v", key, addr, err)
	}
	printed := map[string]int{}
	for _, l := range lines {
		f := strings.Split(l, "\t")
		printed[f[0]]++
	}
	for q := range int32(8) {
		mx, err := a.GetMaxOffset(ctx, topic, q)
		if err != nil {
			break
		}
		t.Logf("diagnose: queue %d: max offset %d on %s, %d printed", q, mx, addr, printed[strconv.Itoa(int(q))])
	}
	if info, err := a.RuntimeInfo(ctx); err == nil {
		t.Logf("diagnose: %s max %d status %q", addr, info.CommitLogMaxOffset, info.HAStatus)
	}
}
