package main

// End-to-end tests of consumer groups against the real broker: the
// RebalanceCoordinator sharing and handing over queues, broadcasting,
// retries with growing delays and the dead-letter topic, ack timeouts,
// ordered consumption across a rebalance, delay levels and absolute times
// across a restart, and the group CLI. The brokers run with a 200 ms
// consumer heartbeat and short delay levels.

import (
	"context"
	"fmt"
	"os/exec"
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

// e2eGroupDelayLevels: levels 3, 4, 5 (the first three automatic retries)
// wait 1 s, 2 s and 3 s.
const e2eGroupDelayLevels = "1s 1s 1s 2s 3s 4s 5s 6s 7s 8s 9s 10s 20s 30s 1m 2m 3m 4m"

func e2eGroupBroker(t *testing.T) *e2eBroker {
	t.Helper()
	return startBroker(t, t.TempDir(), "--consumerHeartbeatInterval", "200", "--messageDelayLevel", e2eGroupDelayLevels)
}

// e2eMember starts a push consumer of group on topic.
func e2eMember(t *testing.T, addr, group, topic, id string, h client.Handler, opts ...client.Option) *client.PushConsumer {
	t.Helper()
	all := append([]client.Option{client.WithLogger(e2eClientLogger(t)), client.WithClientID(id), client.WithConsumeFrom(client.ConsumeFromFirst),
		client.WithPullSuspend(time.Second), client.WithCommitInterval(200 * time.Millisecond),
		client.WithRetryLaterDelay(50 * time.Millisecond)}, opts...)
	c, err := client.NewPushConsumer(addr, group, all...)
	if err != nil {
		t.Fatalf("consumer %s: %v", id, err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Subscribe(topic, "*", h); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(e2eCtx(t, 10*time.Second)); err != nil {
		t.Fatalf("consumer %s: start: %v", id, err)
	}
	return c
}

func e2eTopicQueues(refs []protocol.QueueRef, topic string) []int32 {
	var out []int32
	for _, r := range refs {
		if r.Topic == topic {
			out = append(out, r.QueueID)
		}
	}
	return out
}

// e2eDeliveries records deliveries by message key and by member.
type e2eDeliveries struct {
	mu    sync.Mutex
	count map[string]int
	by    map[string]int
}

func newE2EDeliveries() *e2eDeliveries {
	return &e2eDeliveries{count: map[string]int{}, by: map[string]int{}}
}

func (d *e2eDeliveries) handler(t *testing.T, who string) client.Handler {
	return func(_ context.Context, msgs []*protocol.MessageExt) client.ConsumeResult {
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, m := range msgs {
			key, err := e2eCheckBody(m.Body)
			if err != nil {
				t.Errorf("%s: damaged body: %v", who, err)
				continue
			}
			d.count[key]++
			d.by[who]++
		}
		return client.ConsumeSuccess
	}
}

func (d *e2eDeliveries) has(keys []string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, k := range keys {
		if d.count[k] == 0 {
			return false
		}
	}
	return true
}

func (d *e2eDeliveries) dups() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for k, n := range d.count {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s x%d", k, n))
		}
	}
	slices.Sort(out)
	return out
}

func e2eSendKeys(t *testing.T, p *client.Producer, topic, prefix string, n int) []string {
	t.Helper()
	ctx := e2eCtx(t, 30*time.Second)
	keys := make([]string, n)
	for i := range n {
		keys[i] = prefix + strconv.Itoa(i)
		if _, err := p.Send(ctx, &protocol.Message{Topic: topic, Body: e2eBody(keys[i])}); err != nil {
			t.Fatalf("send %s: %v", keys[i], err)
		}
	}
	return keys
}

// TestE2EGroupSharesAndHandsOver: 3 members of a group on an 8-queue
// topic share it (every member some queues, every message once); when one
// stops mid-run its queues move to the others within seconds and nothing
// is lost.
func TestE2EGroupSharesAndHandsOver(t *testing.T) {
	t.Parallel()
	b := e2eGroupBroker(t)
	ctx := e2eCtx(t, 60*time.Second)
	e2eCreateTopic(t, ctx, e2eAdmin(t, b.addr), "GT", 8)
	p := e2eProducer(t, b.addr)
	d := newE2EDeliveries()
	var cs []*client.PushConsumer
	for _, id := range []string{"m1", "m2", "m3"} {
		cs = append(cs, e2eMember(t, b.addr, "G", "GT", id, d.handler(t, id)))
	}
	testwait.For(t, testwait.Wall, 5*time.Second, "the 3 members to hold all 8 queues, each some", func() bool {
		seen := map[int32]bool{}
		for _, c := range cs {
			qs := e2eTopicQueues(c.Assignment(), "GT")
			if len(qs) == 0 {
				return false
			}
			for _, q := range qs {
				if seen[q] {
					return false
				}
				seen[q] = true
			}
		}
		return len(seen) == 8
	})
	keys := e2eSendKeys(t, p, "GT", "a", 800)
	testwait.For(t, testwait.Wall, 10*time.Second, "800 messages consumed", func() bool { return d.has(keys) })
	// Room for a second delivery to show up (the wait ends early if one does).
	testwait.Until(testwait.Wall, 300*time.Millisecond, func() bool { return len(d.dups()) > 0 })
	if dups := d.dups(); len(dups) > 0 {
		t.Errorf("steady state: delivered more than once: %v", dups)
	}
	d.mu.Lock()
	for _, id := range []string{"m1", "m2", "m3"} {
		if d.by[id] == 0 {
			t.Errorf("%s consumed nothing", id)
		}
	}
	d.mu.Unlock()

	// Stop m3 while messages keep coming: sent before it stops, while its
	// queues move (from a goroutine, until the move is seen) and after.
	more := e2eSendKeys(t, p, "GT", "b", 200)
	moved := time.Now()
	if err := cs[2].Close(); err != nil {
		t.Errorf("close m3: %v", err)
	}
	handedOver := make(chan struct{})
	during := make(chan []string, 1)
	go func() {
		var keys []string
		defer func() { during <- keys }()
		for i := 0; ; i++ {
			select {
			case <-handedOver:
				return
			default:
			}
			key := "c" + strconv.Itoa(i)
			if _, err := p.Send(ctx, &protocol.Message{Topic: "GT", Body: e2eBody(key)}); err != nil {
				t.Errorf("send %s: %v", key, err)
				return
			}
			keys = append(keys, key)
		}
	}()
	testwait.For(t, testwait.Wall, 5*time.Second, "m1 and m2 to hold all 8 queues", func() bool {
		return len(e2eTopicQueues(cs[0].Assignment(), "GT"))+len(e2eTopicQueues(cs[1].Assignment(), "GT")) == 8
	})
	t.Logf("queues moved %v after m3 closed", time.Since(moved).Round(time.Millisecond))
	close(handedOver)
	c := <-during
	t.Logf("%d messages sent while the queues moved", len(c))
	more = append(more, c...)
	more = append(more, e2eSendKeys(t, p, "GT", "d", 200)...)
	testwait.For(t, testwait.Wall, 10*time.Second, "every message after the handover consumed", func() bool { return d.has(more) })
	testwait.Until(testwait.Wall, 300*time.Millisecond, func() bool { return len(d.dups()) > 0 })
	if dups := d.dups(); len(dups) > 0 {
		t.Errorf("delivered more than once across the handover: %v", dups)
	}
	desc, err := e2eAdmin(t, b.addr).DescribeGroup(ctx, "G")
	if err != nil {
		t.Fatal(err)
	}
	if len(desc.Members) != 2 {
		t.Errorf("describe: %d members, want 2: %+v", len(desc.Members), desc.Members)
	}
}

// TestE2EGroupBroadcasting: two broadcasting members each get every message.
func TestE2EGroupBroadcasting(t *testing.T) {
	t.Parallel()
	b := e2eGroupBroker(t)
	ctx := e2eCtx(t, 30*time.Second)
	e2eCreateTopic(t, ctx, e2eAdmin(t, b.addr), "BT", 4)
	d1, d2 := newE2EDeliveries(), newE2EDeliveries()
	c1 := e2eMember(t, b.addr, "BG", "BT", "b1", d1.handler(t, "b1"), client.WithMessageModel(client.Broadcasting))
	c2 := e2eMember(t, b.addr, "BG", "BT", "b2", d2.handler(t, "b2"), client.WithMessageModel(client.Broadcasting))
	testwait.For(t, testwait.Wall, 5*time.Second, "both members to hold the 4 queues", func() bool {
		return len(e2eTopicQueues(c1.Assignment(), "BT")) == 4 && len(e2eTopicQueues(c2.Assignment(), "BT")) == 4
	})
	keys := e2eSendKeys(t, e2eProducer(t, b.addr), "BT", "x", 200)
	testwait.For(t, testwait.Wall, 10*time.Second, "each member to get the 200 messages", func() bool { return d1.has(keys) && d2.has(keys) })
	for i, d := range []*e2eDeliveries{d1, d2} {
		if dups := d.dups(); len(dups) > 0 {
			t.Errorf("member %d: duplicates %v", i+1, dups)
		}
	}
	// Offsets are the members' own.
	a := e2eAdmin(t, b.addr)
	testwait.For(t, testwait.Wall, 5*time.Second, "per-member offsets committed", func() bool {
		for _, g := range []string{"BG#b1", "BG#b2"} {
			sum := int64(0)
			for q := int32(0); q < 4; q++ {
				off, err := a.QueryConsumerOffset(ctx, g, "BT", q)
				if err != nil {
					return false
				}
				sum += off
			}
			if sum != 200 {
				return false
			}
		}
		return true
	})
}

// TestE2EGroupRedeliveryAndDLQ: a message its handler always fails is
// delivered again maxReconsumeTimes times with growing delays (1 s, 2 s,
// 3 s with these levels), then it is in %DLQ%<group>; the other messages
// are delivered once.
func TestE2EGroupRedeliveryAndDLQ(t *testing.T) {
	t.Parallel()
	b := e2eGroupBroker(t)
	ctx := e2eCtx(t, 40*time.Second)
	e2eCreateTopic(t, ctx, e2eAdmin(t, b.addr), "RT", 2)
	var mu sync.Mutex
	var badAt []time.Time
	var badTimes []int32
	good := map[string]int{}
	h := func(_ context.Context, msgs []*protocol.MessageExt) client.ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		m := msgs[0]
		if m.Topic != "RT" {
			t.Errorf("delivered under topic %q", m.Topic)
		}
		if string(m.Body) == "bad" {
			badAt = append(badAt, time.Now())
			badTimes = append(badTimes, m.ReconsumeTimes)
			return client.ConsumeRetryLater
		}
		good[string(m.Body)]++
		return client.ConsumeSuccess
	}
	e2eMember(t, b.addr, "RG", "RT", "r1", h, client.WithMaxReconsumeTimes(3))
	p := e2eProducer(t, b.addr)
	for i := range 10 {
		if _, err := p.Send(ctx, &protocol.Message{Topic: "RT", Body: []byte("g" + strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Send(ctx, &protocol.Message{Topic: "RT", Body: []byte("bad")}); err != nil {
		t.Fatal(err)
	}
	dlq := e2ePuller(t, b.addr, "dlq-reader")
	var dead []protocol.MessageExt
	testwait.For(t, testwait.Wall, 20*time.Second, "the failing message in the dead-letter topic", func() bool {
		res, err := dlq.Pull(ctx, protocol.DLQTopic("RG"), 0, 0, 10, client.PullOptions{})
		if err != nil || res.Status != protocol.PullFound {
			return false
		}
		dead = res.Messages
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	if len(dead) != 1 || string(dead[0].Body) != "bad" {
		t.Errorf("dead-letter topic holds %d messages", len(dead))
	} else if dead[0].Property(protocol.PropertyRetryTopic) != "RT" {
		t.Errorf("dead letter properties %v", dead[0].Properties)
	}
	if !slices.Equal(badTimes, []int32{0, 1, 2, 3}) {
		t.Errorf("failing message delivered with reconsume times %v, want [0 1 2 3]", badTimes)
	}
	if len(badAt) == 4 {
		var gaps []time.Duration
		for i := 1; i < 4; i++ {
			gaps = append(gaps, badAt[i].Sub(badAt[i-1]))
		}
		t.Logf("redelivery gaps %v", gaps)
		for i, want := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second} {
			if gaps[i] < want-200*time.Millisecond || gaps[i] > want+2*time.Second {
				t.Errorf("gap %d is %v, want about %v", i+1, gaps[i], want)
			}
		}
	}
	for i := range 10 {
		if n := good["g"+strconv.Itoa(i)]; n != 1 {
			t.Errorf("g%d delivered %d times", i, n)
		}
	}
}

// TestE2EGroupAckTimeout: a message whose handler outlives the ack timeout
// is redelivered; the messages after it are not, and the committed offset
// moves past it.
func TestE2EGroupAckTimeout(t *testing.T) {
	t.Parallel()
	b := e2eGroupBroker(t)
	ctx := e2eCtx(t, 30*time.Second)
	a := e2eAdmin(t, b.addr)
	e2eCreateTopic(t, ctx, a, "AT", 1)
	var mu sync.Mutex
	seen := map[string][]int32{}
	h := func(hctx context.Context, msgs []*protocol.MessageExt) client.ConsumeResult {
		m := msgs[0]
		mu.Lock()
		seen[string(m.Body)] = append(seen[string(m.Body)], m.ReconsumeTimes)
		mu.Unlock()
		if string(m.Body) == "slow" && m.ReconsumeTimes == 0 {
			select {
			case <-hctx.Done():
			case <-time.After(20 * time.Second):
			}
		}
		return client.ConsumeSuccess
	}
	e2eMember(t, b.addr, "AG", "AT", "a1", h, client.WithAckTimeout(500*time.Millisecond))
	p := e2eProducer(t, b.addr)
	for _, body := range []string{"m0", "m1", "slow", "m3", "m4", "m5"} {
		if _, err := p.Send(ctx, &protocol.Message{Topic: "AT", Body: []byte(body)}); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, testwait.Wall, 10*time.Second, "the slow message redelivered and the offset past it", func() bool {
		mu.Lock()
		n := len(seen["slow"])
		mu.Unlock()
		off, err := a.QueryConsumerOffset(ctx, "AG", "AT", 0)
		return n >= 2 && err == nil && off == 6
	})
	// Room for a further delivery to show up (the wait ends early if one
	// does): the slow message twice and the others once are 7.
	testwait.Until(testwait.Wall, 300*time.Millisecond, func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, r := range seen {
			n += len(r)
		}
		return n > 7
	})
	mu.Lock()
	defer mu.Unlock()
	if got := seen["slow"]; !slices.Equal(got, []int32{0, 1}) {
		t.Errorf("slow message reconsume times %v, want [0 1]", got)
	}
	for _, body := range []string{"m0", "m1", "m3", "m4", "m5"} {
		if len(seen[body]) != 1 {
			t.Errorf("%s delivered %d times", body, len(seen[body]))
		}
	}
}

// TestE2EGroupOrderly: ordered consumption keeps each queue's order across
// a failing message (retried in place) and a rebalance (a second member
// joins mid-run).
func TestE2EGroupOrderly(t *testing.T) {
	t.Parallel()
	b := e2eGroupBroker(t)
	ctx := e2eCtx(t, 40*time.Second)
	e2eCreateTopic(t, ctx, e2eAdmin(t, b.addr), "OT", 4)
	type delivery struct {
		who    string
		queue  int32
		offset int64
		ok     bool
	}
	var mu sync.Mutex
	var log []delivery
	failed := map[string]int{}
	handler := func(who string) client.Handler {
		return func(_ context.Context, msgs []*protocol.MessageExt) client.ConsumeResult {
			m := msgs[0]
			mu.Lock()
			defer mu.Unlock()
			body := string(m.Body)
			// Every 25th message fails twice before it succeeds.
			if n, _ := strconv.Atoi(strings.TrimPrefix(body, "o")); n%25 == 7 && failed[body] < 2 {
				failed[body]++
				log = append(log, delivery{who, m.QueueID, m.QueueOffset, false})
				return client.ConsumeRetryLater
			}
			log = append(log, delivery{who, m.QueueID, m.QueueOffset, true})
			return client.ConsumeSuccess
		}
	}
	c1 := e2eMember(t, b.addr, "OG", "OT", "o1", handler("o1"), client.WithConsumeOrderly(true))
	testwait.For(t, testwait.Wall, 5*time.Second, "o1 to hold the 4 queues", func() bool { return len(e2eTopicQueues(c1.Assignment(), "OT")) == 4 })
	p := e2eProducer(t, b.addr)
	const n = 400
	send := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := p.Send(ctx, &protocol.Message{Topic: "OT", Body: []byte("o" + strconv.Itoa(i))}, client.ToQueue(int32(i%4))); err != nil {
				t.Errorf("send: %v", err)
				return
			}
		}
	}
	consumed := func() int {
		mu.Lock()
		defer mu.Unlock()
		ok := 0
		for _, d := range log {
			if d.ok {
				ok++
			}
		}
		return ok
	}
	// o2 joins mid-run: o1 has consumed some of the first half (each
	// queue's failing messages, retried in place, hold the rest back), and
	// the second half is sent meanwhile.
	send(0, n/2)
	testwait.For(t, testwait.Wall, 10*time.Second, "o1 consuming", func() bool { return consumed() >= n/8 })
	done := make(chan struct{})
	go func() {
		defer close(done)
		send(n/2, n)
	}()
	c2 := e2eMember(t, b.addr, "OG", "OT", "o2", handler("o2"), client.WithConsumeOrderly(true))
	<-done
	testwait.For(t, testwait.Wall, 15*time.Second, "every message consumed", func() bool { return consumed() >= n })
	if len(e2eTopicQueues(c2.Assignment(), "OT")) == 0 {
		t.Errorf("o2 got no queue")
	}
	mu.Lock()
	defer mu.Unlock()
	byQueue := map[int32][]delivery{}
	members := map[int32]map[string]bool{}
	for _, d := range log {
		byQueue[d.queue] = append(byQueue[d.queue], d)
		if members[d.queue] == nil {
			members[d.queue] = map[string]bool{}
		}
		members[d.queue][d.who] = true
	}
	moved := 0
	for q, ds := range byQueue {
		next := int64(0)
		for i, d := range ds {
			if d.offset != next {
				t.Errorf("queue %d: delivery %d (%s) has offset %d, want %d", q, i, d.who, d.offset, next)
				break
			}
			if d.ok {
				next++
			}
		}
		if next != n/4 {
			t.Errorf("queue %d: %d messages consumed, want %d", q, next, n/4)
		}
		if len(members[q]) > 1 {
			moved++
		}
	}
	t.Logf("%d queues changed member mid-run", moved)
}

// TestE2EDelayAndDeliverAtSurviveRestart: delayed messages (a delay level
// and absolute times) are invisible until due, are delivered close to their
// time, and survive a broker restart in between.
func TestE2EDelayAndDeliverAtSurviveRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := startBroker(t, dir, "--consumerHeartbeatInterval", "200", "--messageDelayLevel", e2eGroupDelayLevels)
	ctx := e2eCtx(t, 40*time.Second)
	e2eCreateTopic(t, ctx, e2eAdmin(t, b.addr), "DT", 2)
	p := e2eProducer(t, b.addr)
	start := time.Now()
	due := map[string]time.Time{}
	send := func(body string, at time.Time, opt client.SendOption) {
		if _, err := p.Send(ctx, &protocol.Message{Topic: "DT", Body: []byte(body)}, opt); err != nil {
			t.Fatalf("send %s: %v", body, err)
		}
		due[body] = at
	}
	send("level5", start.Add(3*time.Second), client.WithDelayLevel(5)) // 3 s with these levels
	send("at4s", start.Add(4*time.Second), client.WithDeliverAt(start.Add(4*time.Second)))
	send("at5s", start.Add(5*time.Second), client.WithDeliverAt(start.Add(5*time.Second)))
	send("past", start, client.WithDeliverAt(start.Add(-time.Minute)))
	send("level1", start.Add(time.Second), client.WithDelayLevel(1))
	p.Close()
	if code, _ := b.stop(syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Fatalf("broker exit code %d", code)
	}
	b = b.restart()
	var mu sync.Mutex
	got := map[string]time.Time{}
	e2eMember(t, b.addr, "DG", "DT", "d1", func(_ context.Context, msgs []*protocol.MessageExt) client.ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			got[string(m.Body)] = time.Now()
		}
		return client.ConsumeSuccess
	})
	testwait.For(t, testwait.Wall, 15*time.Second, "every delayed message", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == len(due)
	})
	mu.Lock()
	defer mu.Unlock()
	for body, at := range due {
		d := got[body].Sub(at)
		t.Logf("%s: delivered %v after its time (restart included)", body, d.Round(time.Millisecond))
		if d < -100*time.Millisecond {
			t.Errorf("%s delivered %v before its time", body, -d)
		}
		if body != "past" && body != "level1" && d > 2*time.Second {
			t.Errorf("%s delivered %v late", body, d)
		}
	}
}

// TestE2EGroupCLI: two `wharf consume` processes of one group share a
// topic; `wharf group list|describe` show them; produce --delay-level and
// --deliver-at are accepted.
func TestE2EGroupCLI(t *testing.T) {
	t.Parallel()
	b := e2eGroupBroker(t)
	ctx := e2eCtx(t, 60*time.Second)
	e2eCreateTopic(t, ctx, e2eAdmin(t, b.addr), "CT", 4)
	type run struct {
		out, errOut strings.Builder
		cmd         *exec.Cmd
		done        chan error
	}
	var runs []*run
	for _, id := range []string{"cli-a", "cli-b"} {
		r := &run{done: make(chan error, 1)}
		r.cmd = exec.Command(e2eBinary(t), "consume", "--broker", b.addr, "--topic", "CT", "--group", "CG",
			"--client-id", id, "--idle-exit", "3s", "--suspend", "1s", "--json")
		r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.errOut
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { r.done <- r.cmd.Wait() }()
		t.Cleanup(func() { _ = r.cmd.Process.Kill() })
		runs = append(runs, r)
	}
	a := e2eAdmin(t, b.addr)
	testwait.For(t, testwait.Wall, 10*time.Second, "two members holding the 4 queues", func() bool {
		d, err := a.DescribeGroup(ctx, "CG")
		if err != nil || len(d.Members) != 2 {
			return false
		}
		held := 0
		for _, q := range d.Queues {
			if q.Topic == "CT" && q.Owner != "" && q.Pending == "" {
				held++
			}
		}
		return held == 4 && len(e2eTopicQueues(d.Members[0].Queues, "CT")) > 0 && len(e2eTopicQueues(d.Members[1].Queues, "CT")) > 0
	})
	out, errOut, code := e2eRun(t, 20*time.Second, "produce", "--broker", b.addr, "--topic", "CT", "--count", "300", "--json")
	if code != 0 {
		t.Fatalf("produce: exit %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code = e2eRun(t, 10*time.Second, "group", "list", "--broker", b.addr, "--json")
	if code != 0 {
		t.Fatalf("group list: exit %d\n%s", code, errOut)
	}
	list := e2eLastJSON(t, out)
	groups, _ := list["groups"].([]any)
	if len(groups) != 1 || groups[0].(map[string]any)["group"] != "CG" || groups[0].(map[string]any)["members"] != 2.0 {
		t.Errorf("group list: %s", out)
	}
	out, errOut, code = e2eRun(t, 10*time.Second, "group", "describe", "--broker", b.addr, "--group", "CG")
	if code != 0 || !strings.Contains(out, "cli-a") || !strings.Contains(out, "cli-b") || !strings.Contains(out, "COMMITTED") {
		t.Errorf("group describe: exit %d\n%s\n%s", code, out, errOut)
	}
	out, _, code = e2eRun(t, 10*time.Second, "group", "describe", "--broker", b.addr, "--group", "CG", "--json")
	if v := e2eLastJSON(t, out); code != 0 || len(v["members"].([]any)) != 2 {
		t.Errorf("group describe --json: %s", out)
	}
	total := 0.0
	for i, r := range runs {
		select {
		case <-r.done:
		case <-time.After(20 * time.Second):
			t.Fatalf("consume %d did not exit", i)
		}
		rep := e2eLastJSON(t, r.out.String())
		got := e2eNum(t, rep, "received")
		t.Logf("consume %d: received %v, duplicates %v", i, got, rep["duplicates"])
		if got == 0 {
			t.Errorf("consume %d received nothing\n%s", i, r.errOut.String())
		}
		if e2eNum(t, rep, "duplicates") != 0 {
			t.Errorf("consume %d: duplicates", i)
		}
		total += got
	}
	if total != 300 {
		t.Errorf("the two consumers received %v messages, want 300", total)
	}
	for _, args := range [][]string{{"--delay-level", "1"}, {"--deliver-at", "+1s"}, {"--deliver-at", time.Now().Add(time.Second).Format(time.RFC3339)}} {
		out, errOut, code = e2eRun(t, 10*time.Second, append([]string{"produce", "--broker", b.addr, "--topic", "CT", "--count", "2", "--json"}, args...)...)
		if code != 0 || e2eNum(t, e2eLastJSON(t, out), "acked") != 2 {
			t.Errorf("produce %v: exit %d\n%s\n%s", args, code, out, errOut)
		}
	}
	if _, _, code := e2eRun(t, 10*time.Second, "produce", "--broker", b.addr, "--topic", "CT", "--delay-level", "19"); code == 0 {
		t.Error("produce --delay-level 19 succeeded")
	}
}
