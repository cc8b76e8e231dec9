package main

// End-to-end tests of the role as runtime state (UPDATE_BROKER_ROLE through
// `wharf broker role`), with real broker processes on loopback and the
// helpers of e2e_ha_test.go: a slave promoted after its master's SIGKILL
// keeps every acknowledged message and assigns queue offsets where the old
// master stopped, while a consumer keeps consuming; a master demoted under
// load answers NOT_MASTER, and is refused by its new master when its log is
// longer; an empty master demoted to a slave catches up and serves pulls.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
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

// roleSet runs `wharf broker role --json` and returns its report.
func roleSet(t *testing.T, addr string, args ...string) roleJSON {
	t.Helper()
	args = append([]string{"broker", "role", "--broker", addr, "--json"}, args...)
	out, errOut, code := haRun(t, 20*time.Second, args...)
	var rep roleJSON
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("wharf %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return rep
}

// roleSent is where an acknowledged send was stored.
type roleSent struct {
	queue  int32
	offset int64
}

// roleProduce sends n messages one at a time round robin over the topic's
// queues; every send must be OK. It returns their keys' places.
func roleProduce(t *testing.T, ctx context.Context, addr, topic, prefix string, n int, into map[string]roleSent) {
	t.Helper()
	p := e2eProducer(t, addr, client.WithRetries(0))
	for i := range n {
		key := fmt.Sprintf("%s-%d", prefix, i)
		res, err := p.Send(ctx, e2eMessage(topic, key))
		if err != nil || res.Status != protocol.StatusOK {
			t.Fatalf("send %s to %s: %+v, %v", key, addr, res, err)
		}
		into[key] = roleSent{queue: res.QueueID, offset: res.QueueOffset}
	}
}

// roleConsumer is a push consumer recording every key it is handed.
type roleConsumer struct {
	mu   sync.Mutex
	seen map[string]int
	bad  []string
	c    *client.PushConsumer
}

func startRoleConsumer(t *testing.T, masterAddr, slaveAddr, topic, group string) *roleConsumer {
	t.Helper()
	rc := &roleConsumer{seen: map[string]int{}}
	c, err := client.NewPushConsumer(masterAddr, group,
		client.WithSlaveAddrs(slaveAddr),
		client.WithConsumeFrom(client.ConsumeFromFirst),
		client.WithPullSuspend(300*time.Millisecond),
		client.WithMasterRetryInterval(time.Second),
		client.WithHeartbeat(500*time.Millisecond),
		client.WithReconnectBackoff(50*time.Millisecond, 300*time.Millisecond))
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	rc.c = c
	t.Cleanup(func() { c.Close() })
	if err := c.Subscribe(topic, "*", func(_ context.Context, msgs []*protocol.MessageExt) client.ConsumeResult {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		for _, m := range msgs {
			key, err := e2eCheckBody(m.Body)
			if err != nil {
				rc.bad = append(rc.bad, err.Error())
				continue
			}
			rc.seen[key]++
		}
		return client.ConsumeSuccess
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("start consumer: %v", err)
	}
	return rc
}

// waitAll waits until the consumer was handed every key of want.
func (rc *roleConsumer) waitAll(t *testing.T, what string, want map[string]roleSent, d time.Duration) {
	t.Helper()
	missing := func() (int, string) {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		n, example := 0, ""
		for k := range want {
			if rc.seen[k] == 0 {
				n, example = n+1, k
			}
		}
		return n, example
	}
	if !testwait.Until(testwait.Wall, d, func() bool { n, _ := missing(); return n == 0 }) {
		n, example := missing()
		t.Fatalf("%s: the consumer lacks %d of %d messages after %v (e.g. %s)", what, n, len(want), d, example)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.bad) > 0 {
		t.Fatalf("%s: damaged messages: %v", what, rc.bad)
	}
}

// roleCheckStored reads every queue of topic on addr from offset 0 (which
// fails on a gap, a reordering or a duplicate) and checks that every send
// of want is there, at the queue and offset it was acknowledged with, and
// that nothing else is.
func roleCheckStored(t *testing.T, ctx context.Context, addr, topic string, want map[string]roleSent) {
	t.Helper()
	got := e2eReadAll(t, ctx, addr, topic)
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Fatalf("acknowledged %s is not on %s", k, addr)
		}
		if g.queue != w.queue || g.offset != w.offset {
			t.Fatalf("%s acknowledged at queue %d offset %d, stored at %d/%d on %s", k, w.queue, w.offset, g.queue, g.offset, addr)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%s holds %d messages of %s, %d were acknowledged", addr, len(got), topic, len(want))
	}
}

// TestE2ERolePromoteSlave: an ASYNC_MASTER and its caught-up slave; the
// master is killed with SIGKILL and `wharf broker role --set ASYNC_MASTER`
// promotes the slave. It takes writes at once, each queue going on from the
// offset where the old master stopped, and a consumer of the group, failed
// over to the slave, keeps consuming through the promotion. The old master,
// restarted and made a slave of the promoted broker, catches up.
func TestE2ERolePromoteSlave(t *testing.T) {
	t.Parallel()
	const topic, queues = "promote", 4
	haM, haS := haFreePort(t), haFreePort(t)
	m := startHAMaster(t, t.TempDir(), "ASYNC_MASTER", haM)
	s := startHASlave(t, t.TempDir(), haM, "--haListenPort", strconv.Itoa(haS))
	ctx := e2eCtx(t, time.Minute)
	e2eCreateTopic(t, ctx, e2eAdmin(t, m.addr), topic, queues)
	haWaitTopic(t, s.addr, topic, 10*time.Second)

	sent := map[string]roleSent{}
	roleProduce(t, ctx, m.addr, topic, "old", 200, sent)
	rc := startRoleConsumer(t, m.addr, s.addr, topic, "live")
	rc.waitAll(t, "before the failover", sent, 10*time.Second)
	end := haWaitCaughtUp(t, m, s, 10*time.Second)
	next := map[int32]int64{} // per queue, the offset the next send gets
	for _, w := range sent {
		next[w.queue] = max(next[w.queue], w.offset+1)
	}
	m.kill()

	rep := roleSet(t, s.addr, "--set", "ASYNC_MASTER")
	if rep.PreviousRole != "SLAVE" || rep.Role != "ASYNC_MASTER" || rep.BrokerID != 0 || rep.MaxOffset != end || rep.HAStatus != "" {
		t.Fatalf("promotion report %+v; want SLAVE -> ASYNC_MASTER, brokerId 0, log end %d, no replication status", rep, end)
	}
	after := map[string]roleSent{}
	roleProduce(t, ctx, s.addr, topic, "new", 200, after)
	for k, w := range after {
		if w.offset < next[w.queue] {
			t.Fatalf("%s got queue %d offset %d after the promotion; the old master had assigned up to %d", k, w.queue, w.offset, next[w.queue]-1)
		}
		sent[k] = w
	}
	for q := range int32(queues) {
		n := 0
		for _, w := range after {
			if w.queue == q && w.offset == next[q] {
				n++
			}
		}
		if n != 1 {
			t.Errorf("queue %d: %d sends after the promotion got offset %d, where the old master stopped; want 1", q, n, next[q])
		}
	}
	roleCheckStored(t, ctx, s.addr, topic, sent)
	rc.waitAll(t, "after the promotion", sent, 15*time.Second)

	// The old master comes back (as the master its flags say) and is
	// pointed at the promoted broker: its log is a prefix, so it catches up.
	m = m.restart()
	if rep := roleSet(t, m.addr, "--set", "SLAVE", "--master", "127.0.0.1:"+strconv.Itoa(haS)); rep.Role != "SLAVE" || rep.BrokerID != 1 {
		t.Fatalf("demotion of the old master: %+v", rep)
	}
	end = haWaitCaughtUp(t, s, m, 10*time.Second)
	haCompareLogs(t, s.dir, m.dir, 0, end)
	haWaitTopic(t, m.addr, topic, 10*time.Second)
	roleCheckStored(t, ctx, m.addr, topic, sent)
}

// TestE2ERoleDemoteUnderLoad: B, a slave of A, is promoted; then A, an
// ASYNC_MASTER under load, is made a slave of B. A's sends are answered OK
// until the change and NOT_MASTER after it, every OK one is in A's log,
// and B refuses A (A took writes B never saw) with the divergence error,
// shown by `wharf broker status`. An empty master C made a slave of B
// catches up byte for byte and serves pulls as a slave. A, made a master
// again, writes on from its own log.
func TestE2ERoleDemoteUnderLoad(t *testing.T) {
	t.Parallel()
	const topic = "demote"
	haA, haB := haFreePort(t), haFreePort(t)
	a := startHAMaster(t, t.TempDir(), "ASYNC_MASTER", haA)
	bdir := t.TempDir()
	b := startHASlave(t, bdir, haA, "--haListenPort", strconv.Itoa(haB))
	ctx := e2eCtx(t, time.Minute)
	e2eCreateTopic(t, ctx, e2eAdmin(t, a.addr), topic, 4)
	haWaitTopic(t, b.addr, topic, 10*time.Second)
	sent := map[string]roleSent{}
	roleProduce(t, ctx, a.addr, topic, "common", 100, sent)
	haWaitCaughtUp(t, a, b, 10*time.Second)
	if rep := roleSet(t, b.addr, "--set", "ASYNC_MASTER"); rep.Role != "ASYNC_MASTER" {
		t.Fatalf("promotion of B: %+v", rep)
	}

	acked := map[string]bool{}
	for k := range sent {
		acked[k] = true
	}
	load := startHALoad(t, a.addr, topic, "a", acked)
	if !testwait.Until(testwait.Wall, 10*time.Second, func() bool { return load.okN.Load() >= 200 }) {
		load.stop(t)
		t.Fatalf("A acknowledged only %d sends under load (other outcomes %v)", load.okN.Load(), load.other)
	}
	rep := roleSet(t, a.addr, "--set", "SLAVE", "--master", "127.0.0.1:"+strconv.Itoa(haB), "--broker-id", "2")
	if rep.PreviousRole != "ASYNC_MASTER" || rep.Role != "SLAVE" || rep.BrokerID != 2 {
		t.Fatalf("demotion of A: %+v", rep)
	}
	notMaster := func() int {
		load.mu.Lock()
		defer load.mu.Unlock()
		return load.other[protocol.StatusNotMaster.String()]
	}
	okAtDemotion := load.okN.Load()
	if !testwait.Until(testwait.Wall, 10*time.Second, func() bool { return notMaster() >= 20 }) {
		t.Errorf("no NOT_MASTER answers from the demoted broker")
	}
	load.stop(t)
	t.Logf("A under load: %d OK (%d by the demotion), other outcomes %v", load.okN.Load(), okAtDemotion, load.other)
	for k, n := range load.other {
		if k != protocol.StatusNotMaster.String() {
			t.Errorf("%d sends to the demoted broker answered %s; want OK before, NOT_MASTER after", n, k)
		}
	}
	// A keeps what it acknowledged, and serves it as a slave.
	got := e2eReadAll(t, ctx, a.addr, topic)
	for k := range acked {
		if _, ok := got[k]; !ok {
			t.Fatalf("key %s, acknowledged by A, is not in A's log", k)
		}
	}

	// A's log is longer than B's: B refuses it, and A says why.
	var info protocol.BrokerRuntimeInfo
	if !testwait.Until(testwait.Wall, 10*time.Second, func() bool {
		var err error
		info, err = haInfo(a.addr)
		return err == nil && strings.Contains(info.HAStatus, "refused")
	}) {
		t.Fatalf("A not refused by B: status %q", info.HAStatus)
	}
	out, errOut, code := haRun(t, 10*time.Second, "broker", "status", "--broker", a.addr, "--json")
	var st statusJSON
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
		t.Fatalf("broker status: exit %d\n%s%s", code, out, errOut)
	}
	if st.Role != "SLAVE" || !strings.Contains(st.HAStatus, "longer than the master's") || !strings.Contains(st.HAStatus, "diverged") {
		t.Errorf("status of the refused broker: %+v; want role SLAVE and the divergence error", st)
	}
	if bi, err := haInfo(b.addr); err != nil || len(bi.Slaves) != 0 {
		t.Errorf("B lists slaves %+v, %v after refusing A", bi.Slaves, err)
	}

	// An empty master made a slave of B copies B's whole log.
	cdir := t.TempDir()
	c := startHAMaster(t, cdir, "ASYNC_MASTER", haFreePort(t))
	if rep := roleSet(t, c.addr, "--set", "SLAVE", "--master", "127.0.0.1:"+strconv.Itoa(haB)); rep.Role != "SLAVE" || rep.BrokerID != 1 {
		t.Fatalf("demotion of C: %+v", rep)
	}
	end := haWaitCaughtUp(t, b, c, 10*time.Second)
	haCompareLogs(t, bdir, cdir, 0, end)
	haWaitTopic(t, c.addr, topic, 10*time.Second)
	roleCheckStored(t, ctx, c.addr, topic, sent)
	cp := e2eProducer(t, c.addr, client.WithRetries(0))
	if _, err := cp.Send(ctx, e2eMessage(topic, "to-c")); !errorsIsAny(err, client.ErrNotMaster) {
		t.Errorf("send to the demoted empty broker: %v; want NOT_MASTER", err)
	}

	// A, refused, is made a master again: it writes on from its own log.
	if rep := roleSet(t, a.addr, "--set", "ASYNC_MASTER"); rep.Role != "ASYNC_MASTER" || rep.HAStatus != "" {
		t.Fatalf("re-promotion of A: %+v", rep)
	}
	var q0 int64
	for _, g := range got {
		if g.queue == 0 {
			q0++
		}
	}
	ap := e2eProducer(t, a.addr, client.WithRetries(0))
	if res, err := ap.Send(ctx, e2eMessage(topic, "a-again"), client.ToQueue(0)); err != nil || res.QueueOffset != q0 {
		t.Errorf("send to A made a master again: %+v, %v; want queue 0 offset %d", res, err, q0)
	}
}

// TestE2ERoleDemoteSyncMasterWaiters: a SYNC_MASTER whose slave is stalled
// (SIGSTOP) holds its sends waiting for the copy; demoting it answers them
// at once FLUSH_SLAVE_TIMEOUT, saying the role changed, long before
// slaveTimeout. They stay stored in its log, and later sends are NOT_MASTER.
func TestE2ERoleDemoteSyncMasterWaiters(t *testing.T) {
	t.Parallel()
	const topic, waiters = "waiters", 8
	haA := haFreePort(t)
	a := startHAMaster(t, t.TempDir(), "SYNC_MASTER", haA, "--slaveTimeout", "8000")
	s := startHASlave(t, t.TempDir(), haA)
	ctx := e2eCtx(t, time.Minute)
	e2eCreateTopic(t, ctx, e2eAdmin(t, a.addr), topic, 2)
	haWaitCaughtUp(t, a, s, 10*time.Second)
	sent := map[string]roleSent{}
	roleProduce(t, ctx, a.addr, topic, "copied", 20, sent)
	haWaitCaughtUp(t, a, s, 10*time.Second)

	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.cmd.Process.Signal(syscall.SIGCONT) })
	// kill(2) returns before the target has stopped: on a loaded machine
	// the slave could still take and acknowledge the next sends' bytes.
	if !testwait.Until(testwait.Wall, 5*time.Second, func() bool { return processStopped(s.cmd.Process.Pid) }) {
		t.Fatal("the slave did not stop within 5 s of SIGSTOP")
	}
	before, err := haInfo(a.addr)
	if err != nil {
		t.Fatal(err)
	}
	p := e2eProducer(t, a.addr, client.WithRetries(0), client.WithTimeout(20*time.Second), client.WithSendCoalescing(false))
	start := time.Now()
	errs := make([]error, waiters)
	results := make([]client.SendResult, waiters)
	var wg sync.WaitGroup
	for i := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = p.Send(ctx, e2eMessage(topic, fmt.Sprintf("waiting-%d", i)))
		}()
	}
	// Stored means waiting for the stalled slave's copy.
	if !testwait.Until(testwait.Wall, 5*time.Second, func() bool {
		info, err := haInfo(a.addr)
		return err == nil && info.MsgPutTotal >= before.MsgPutTotal+waiters
	}) {
		t.Fatalf("the %d sends were not stored within 5 s", waiters)
	}
	rep := roleSet(t, a.addr, "--set", "SLAVE", "--master", "127.0.0.1:"+strconv.Itoa(haFreePort(t)))
	if rep.Role != "SLAVE" {
		t.Fatalf("demotion: %+v", rep)
	}
	if !testwait.Chan(wgDone(&wg), 5*time.Second) {
		t.Fatal("the waiting sends were not answered within 5 s of the demotion")
	}
	if d := time.Since(start); d >= 8*time.Second {
		t.Errorf("the waiting sends took %v: answered by slaveTimeout, not by the demotion", d)
	}
	for i, err := range errs {
		if !errorsIsAny(err, client.ErrFlushSlaveTimeout) || results[i].Status != protocol.StatusFlushSlaveTimeout ||
			!strings.Contains(err.Error(), "role changed to SLAVE before") {
			t.Errorf("waiting send %d: %+v, %v; want FLUSH_SLAVE_TIMEOUT, role changed to SLAVE", i, results[i], err)
		}
	}
	if _, err := p.Send(ctx, e2eMessage(topic, "after")); !errorsIsAny(err, client.ErrNotMaster) {
		t.Errorf("send after the demotion: %v; want NOT_MASTER", err)
	}
	got := e2eReadAll(t, ctx, a.addr, topic)
	for i := range waiters {
		if _, ok := got[fmt.Sprintf("waiting-%d", i)]; !ok {
			t.Errorf("waiting-%d, answered FLUSH_SLAVE_TIMEOUT (stored, unconfirmed), is not in the log", i)
		}
	}
	if len(got) != len(sent)+waiters {
		t.Errorf("the demoted broker holds %d messages, want %d", len(got), len(sent)+waiters)
	}
}

// TestE2ERoleEmptyMasterJoinsMidLog: a new, empty master made a slave of a
// master that streams from its last segment (haSlaveCatchUpFromLastSegment)
// starts its log there, catches up, and its store opens again after a stop
// (the segment it had prepared at offset 0 must not stay behind).
func TestE2ERoleEmptyMasterJoinsMidLog(t *testing.T) {
	t.Parallel()
	haM := haFreePort(t)
	m := startHAMaster(t, t.TempDir(), "ASYNC_MASTER", haM, "--haSlaveCatchUpFromLastSegment=true")
	ctx := e2eCtx(t, time.Minute)
	e2eCreateTopic(t, ctx, e2eAdmin(t, m.addr), "big", 1)
	p := e2eProducer(t, m.addr, client.WithRetries(0))
	body := make([]byte, 32<<10)
	for i := 0; ; i++ {
		if _, err := p.Send(ctx, &protocol.Message{Topic: "big", Body: body}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if info, err := haInfo(m.addr); err == nil && info.CommitLogMaxOffset > 1<<20+64<<10 {
			break
		} else if i > 100 {
			t.Fatalf("the log did not pass 1 MiB after %d sends: %+v, %v", i, info, err)
		}
	}
	c := startHAMaster(t, t.TempDir(), "ASYNC_MASTER", haFreePort(t))
	if rep := roleSet(t, c.addr, "--set", "SLAVE", "--master", "127.0.0.1:"+strconv.Itoa(haM)); rep.Role != "SLAVE" {
		t.Fatalf("demotion: %+v", rep)
	}
	end := haWaitCaughtUp(t, m, c, 10*time.Second)
	if info, err := haInfo(c.addr); err != nil || info.CommitLogMinOffset != 1<<20 {
		t.Fatalf("slave log starts at %d, %v; want 1 MiB (the master's last segment)", info.CommitLogMinOffset, err)
	}
	haWaitTopic(t, c.addr, "big", 10*time.Second)
	want, err := e2eAdmin(t, m.addr).GetMaxOffset(ctx, "big", 0)
	if err != nil {
		t.Fatal(err)
	}
	roleReadTail(t, ctx, c.addr, "big", want)
	if code, _ := c.stop(syscall.SIGTERM, 15*time.Second); code != 0 {
		t.Fatalf("slave exited %d after SIGTERM", code)
	}
	c = c.restart()
	if info, err := haInfo(c.addr); err != nil || info.CommitLogMinOffset != 1<<20 || info.CommitLogMaxOffset != end {
		t.Fatalf("restarted: log [%d, %d), %v; want [%d, %d)", info.CommitLogMinOffset, info.CommitLogMaxOffset, err, 1<<20, end)
	}
	roleReadTail(t, ctx, c.addr, "big", want)
}

// roleReadTail pulls queue 0 of topic on addr from its min offset, which
// must be above 0 (the log starts mid-way), to max: every offset once.
func roleReadTail(t *testing.T, ctx context.Context, addr, topic string, max int64) {
	t.Helper()
	a := e2eAdmin(t, addr)
	var from int64
	if !testwait.Until(testwait.Wall, 10*time.Second, func() bool {
		var err error
		from, err = a.GetMinOffset(ctx, topic, 0)
		return err == nil && from > 0
	}) {
		t.Fatalf("%s: queue 0 of %s has min offset %d; want > 0", addr, topic, from)
	}
	pc := e2ePuller(t, addr, "tail-reader")
	for off := from; off < max; {
		res, err := pc.Pull(ctx, topic, 0, off, 32, client.PullOptions{})
		if err != nil || res.Status != protocol.PullFound || len(res.Messages) == 0 {
			t.Fatalf("%s: pull %s[0] at %d (queue [%d, %d)): %+v, %v", addr, topic, off, from, max, res.Status, err)
		}
		for _, m := range res.Messages {
			if m.QueueOffset != off {
				t.Fatalf("%s: pull %s[0]: offset %d, want %d", addr, topic, m.QueueOffset, off)
			}
			off++
		}
	}
}

// processStopped reports whether a process is in the stopped state
// (/proc/PID/stat's third field is T).
func processStopped(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'T'
}
