package client

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/wharfmq/wharf/internal/brokertest"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// groupRecorder counts deliveries by body, per consumer.
type groupRecorder struct {
	mu     sync.Mutex
	bodies map[string]int
	by     map[string]map[string]int // consumer -> body -> count
	total  int
}

func newGroupRecorder() *groupRecorder {
	return &groupRecorder{bodies: map[string]int{}, by: map[string]map[string]int{}}
}

func (r *groupRecorder) handler(who string) Handler {
	return func(_ context.Context, msgs []*protocol.MessageExt) ConsumeResult {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.by[who] == nil {
			r.by[who] = map[string]int{}
		}
		for _, m := range msgs {
			r.bodies[string(m.Body)]++
			r.by[who][string(m.Body)]++
			r.total++
		}
		return ConsumeSuccess
	}
}

func (r *groupRecorder) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.bodies)
}

func (r *groupRecorder) dups() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for b, n := range r.bodies {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s x%d", b, n))
		}
	}
	slices.Sort(out)
	return out
}

func groupOpts(id string, extra ...Option) []Option {
	return append([]Option{WithClientID(id), WithConsumeFrom(ConsumeFromFirst), WithPullSuspend(300 * time.Millisecond),
		WithCommitInterval(100 * time.Millisecond), WithRetryLaterDelay(20 * time.Millisecond)}, extra...)
}

func startGroupConsumer(t *testing.T, b *brokertest.Broker, group, topic string, h Handler, opts ...Option) *PushConsumer {
	t.Helper()
	c, err := NewPushConsumer(b.Addr(), group, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Subscribe(topic, "*", h); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	return c
}

func sendN(t *testing.T, p *Producer, topic, prefix string, from, n int, opts ...SendOption) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if _, err := p.Send(testCtx(t), msg(topic, prefix+strconv.Itoa(i)), opts...); err != nil {
			t.Fatal(err)
		}
	}
}

// shortDelays makes every delay level 10 ms: a message given back with
// level 0 waits for level 3 + its reconsume times (10 s and more by
// default) before it is redelivered.
func shortDelays() brokertest.Option {
	levels := make([]time.Duration, 18)
	for i := range levels {
		levels[i] = 10 * time.Millisecond
	}
	return brokertest.WithDelayLevels(levels...)
}

func topicQueues(refs []protocol.QueueRef, topic string) int {
	n := 0
	for _, r := range refs {
		if r.Topic == topic {
			n++
		}
	}
	return n
}

// TestGroupSharesQueuesAndHandsOver: three members share an 8-queue topic;
// every message is consumed once; when one member closes, its queues move
// to the others and nothing is lost or repeated.
func TestGroupSharesQueuesAndHandsOver(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithHeartbeatInterval(100*time.Millisecond))
	b.CreateTopic("T", 8)
	p := newProducer(t, b)
	rec := newGroupRecorder()
	var cs []*PushConsumer
	for _, id := range []string{"c1", "c2", "c3"} {
		cs = append(cs, startGroupConsumer(t, b, "G", "T", rec.handler(id), groupOpts(id)...))
	}
	testwait.For(t, testwait.Wall, 5*time.Second, "every member owns queues of T", func() bool {
		sum := 0
		for _, c := range cs {
			n := topicQueues(c.Assignment(), "T")
			if n == 0 {
				return false
			}
			sum += n
		}
		return sum == 8
	})
	sendN(t, p, "T", "a", 0, 400)
	testwait.For(t, testwait.Wall, 5*time.Second, "400 consumed", func() bool { return rec.distinct() == 400 })
	rec.mu.Lock()
	for _, id := range []string{"c1", "c2", "c3"} {
		if len(rec.by[id]) == 0 {
			t.Errorf("%s consumed nothing", id)
		}
	}
	rec.mu.Unlock()

	if err := cs[2].Close(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, testwait.Wall, 3*time.Second, "c1 and c2 own all 8 queues", func() bool {
		return topicQueues(cs[0].Assignment(), "T")+topicQueues(cs[1].Assignment(), "T") == 8
	})
	sendN(t, p, "T", "b", 0, 200)
	testwait.For(t, testwait.Wall, 5*time.Second, "600 consumed", func() bool { return rec.distinct() == 600 })
	// Settled: every queue's pull is held at the end of its queue.
	testwait.For(t, testwait.Wall, 5*time.Second, "every queue's pull held", func() bool { return b.Held("T") == 8 })
	if d := rec.dups(); len(d) > 0 {
		t.Errorf("duplicates: %v", d)
	}
	// Never two owners: the members' owned lists are disjoint.
	seen := map[protocol.QueueRef]string{}
	for id, refs := range b.GroupMembers("G") {
		for _, r := range refs {
			if r.Topic != "T" {
				continue
			}
			if o, ok := seen[r]; ok {
				t.Errorf("%v owned by %s and %s", r, o, id)
			}
			seen[r] = id
		}
	}
}

// TestGroupNotifyRebalancesBeforeTheInterval: with a long heartbeat
// interval, a new member still gets its share at once: the broker's
// NOTIFY_CONSUMER_IDS_CHANGED makes the old member heartbeat and release,
// and the release notification makes the new one heartbeat.
func TestGroupNotifyRebalancesBeforeTheInterval(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithHeartbeatInterval(3*time.Second))
	b.CreateTopic("T", 4)
	rec := newGroupRecorder()
	var revoked []protocol.QueueRef
	var mu sync.Mutex
	c1 := startGroupConsumer(t, b, "G", "T", rec.handler("c1"), groupOpts("c1", WithRebalanceListener(func(_, r []protocol.QueueRef) {
		mu.Lock()
		revoked = append(revoked, r...)
		mu.Unlock()
	}))...)
	testwait.For(t, testwait.Wall, 2*time.Second, "c1 owns 4 queues", func() bool { return topicQueues(c1.Assignment(), "T") == 4 })
	start := time.Now()
	c2 := startGroupConsumer(t, b, "G", "T", rec.handler("c2"), groupOpts("c2")...)
	testwait.For(t, testwait.Wall, 2*time.Second, "c2 owns queues", func() bool {
		return topicQueues(c2.Assignment(), "T") > 0 && topicQueues(c1.Assignment(), "T") < 4
	})
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Errorf("rebalance took %v with a 3 s interval", d)
	}
	mu.Lock()
	if len(revoked) == 0 {
		t.Error("no revoked queues reported to the listener")
	}
	mu.Unlock()
}

// TestGroupRetryLaterSendsBackUntilDLQ: RetryLater gives the message back
// (delay level 0); it comes back through the retry topic under its own
// topic with a growing reconsume count, and after maxReconsumeTimes it is
// in the dead-letter topic.
func TestGroupRetryLaterSendsBackUntilDLQ(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithHeartbeatInterval(100*time.Millisecond), shortDelays())
	b.CreateTopic("T", 2)
	var mu sync.Mutex
	var badSeen []int32
	good := 0
	h := func(_ context.Context, msgs []*protocol.MessageExt) ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		m := msgs[0]
		if m.Topic != "T" {
			t.Errorf("message under topic %q", m.Topic)
		}
		if string(m.Body) == "bad" {
			badSeen = append(badSeen, m.ReconsumeTimes)
			return ConsumeRetryLater
		}
		good++
		return ConsumeSuccess
	}
	startGroupConsumer(t, b, "G", "T", h, groupOpts("c1", WithMaxReconsumeTimes(2))...)
	p := newProducer(t, b)
	sendN(t, p, "T", "g", 0, 5)
	if _, err := p.Send(testCtx(t), msg("T", "bad")); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, testwait.Wall, 5*time.Second, "the bad message in the DLQ", func() bool { return b.Total(protocol.DLQTopic("G")) == 1 })
	// Settled: the pulls of T and of the retry topic are held at their ends.
	testwait.For(t, testwait.Wall, 5*time.Second, "every queue's pull held", func() bool {
		return b.Held("T") == 2 && b.Held(protocol.RetryTopic("G")) == b.QueueCount(protocol.RetryTopic("G"))
	})
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(badSeen, []int32{0, 1, 2}) {
		t.Errorf("bad message seen with reconsume times %v, want [0 1 2]", badSeen)
	}
	if good != 5 {
		t.Errorf("%d good deliveries, want 5", good)
	}
	sb := b.SendBacks()
	if len(sb) != 3 || sb[0].DelayLevel != 0 || sb[0].MaxReconsumeTimes != 2 {
		t.Errorf("send-backs %+v", sb)
	}
	// Two retries went through the retry topic, the third to the DLQ.
	if n := b.Total(protocol.RetryTopic("G")); n != 2 {
		t.Errorf("%d messages in the retry topic, want 2", n)
	}
}

// TestGroupAckTimeout: a handler call that outlives the ack timeout is
// given back; the queue's committed offset moves past it, and the later
// messages are not delivered again.
func TestGroupAckTimeout(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithHeartbeatInterval(100*time.Millisecond), shortDelays())
	b.CreateTopic("T", 1)
	var mu sync.Mutex
	seen := map[string]int{}
	h := func(ctx context.Context, msgs []*protocol.MessageExt) ConsumeResult {
		body := string(msgs[0].Body)
		mu.Lock()
		seen[body]++
		mu.Unlock()
		if body == "m2" && msgs[0].ReconsumeTimes == 0 {
			select { // slow: until the ack timeout cancels it
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
			}
			return ConsumeSuccess
		}
		return ConsumeSuccess
	}
	startGroupConsumer(t, b, "G", "T", h, groupOpts("c1", WithAckTimeout(300*time.Millisecond))...)
	p := newProducer(t, b)
	sendN(t, p, "T", "m", 0, 10)
	testwait.For(t, testwait.Wall, 5*time.Second, "m2 redelivered and the offset past it", func() bool {
		mu.Lock()
		n := seen["m2"]
		mu.Unlock()
		off, ok := b.CommittedOffset("G", "T", 0)
		return n == 2 && ok && off == 10
	})
	mu.Lock()
	defer mu.Unlock()
	for i := range 10 {
		body := "m" + strconv.Itoa(i)
		if want := 1 + btoi(body == "m2"); seen[body] != want {
			t.Errorf("%s seen %d times, want %d", body, seen[body], want)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestGroupOrderly: one message at a time in order; a RetryLater blocks the
// queue and redelivers the same message; after maxReconsumeTimes it goes to
// the DLQ (delay level -1) and the queue moves on.
func TestGroupOrderly(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithHeartbeatInterval(100*time.Millisecond))
	b.CreateTopic("T", 1)
	var mu sync.Mutex
	var seen []string
	inFlight := 0
	h := func(_ context.Context, msgs []*protocol.MessageExt) ConsumeResult {
		mu.Lock()
		inFlight++
		if inFlight > 1 || len(msgs) != 1 {
			t.Errorf("%d calls in flight with %d messages", inFlight, len(msgs))
		}
		body := string(msgs[0].Body)
		seen = append(seen, body)
		mu.Unlock()
		for range 100 { // room for an overlapping call to show
			runtime.Gosched()
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
		switch {
		case body == "o3" && msgs[0].ReconsumeTimes < 2:
			return ConsumeRetryLater
		case body == "o5":
			return ConsumeRetryLater
		}
		return ConsumeSuccess
	}
	startGroupConsumer(t, b, "G", "T", h, groupOpts("c1", WithConsumeOrderly(true), WithMaxReconsumeTimes(3),
		WithConsumeConcurrency(4), WithConsumeBatchSize(4))...)
	p := newProducer(t, b)
	sendN(t, p, "T", "o", 0, 8)
	testwait.For(t, testwait.Wall, 5*time.Second, "all consumed", func() bool {
		off, ok := b.CommittedOffset("G", "T", 0)
		return ok && off == 8
	})
	mu.Lock()
	defer mu.Unlock()
	want := []string{"o0", "o1", "o2", "o3", "o3", "o3", "o4", "o5", "o5", "o5", "o5", "o6", "o7"}
	if !slices.Equal(seen, want) {
		t.Errorf("deliveries %v\nwant %v", seen, want)
	}
	if n := b.Total(protocol.DLQTopic("G")); n != 1 {
		t.Errorf("%d messages in the DLQ, want 1", n)
	}
	if sb := b.SendBacks(); len(sb) != 1 || sb[0].DelayLevel != -1 {
		t.Errorf("send-backs %+v", sb)
	}
}

// TestGroupBroadcasting: every member gets every message; offsets are kept
// per member.
func TestGroupBroadcasting(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithHeartbeatInterval(100*time.Millisecond))
	b.CreateTopic("T", 4)
	rec := newGroupRecorder()
	c1 := startGroupConsumer(t, b, "G", "T", rec.handler("b1"), groupOpts("b1", WithMessageModel(Broadcasting))...)
	c2 := startGroupConsumer(t, b, "G", "T", rec.handler("b2"), groupOpts("b2", WithMessageModel(Broadcasting))...)
	testwait.For(t, testwait.Wall, 3*time.Second, "both own all 4 queues", func() bool {
		return topicQueues(c1.Assignment(), "T") == 4 && topicQueues(c2.Assignment(), "T") == 4
	})
	p := newProducer(t, b)
	sendN(t, p, "T", "x", 0, 40)
	testwait.For(t, testwait.Wall, 5*time.Second, "each got 40", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.by["b1"]) == 40 && len(rec.by["b2"]) == 40 && rec.total == 80
	})
	testwait.For(t, testwait.Wall, 3*time.Second, "offsets per member", func() bool {
		sum := int64(0)
		for q := int32(0); q < 4; q++ {
			o1, ok1 := b.CommittedOffset("G#b1", "T", q)
			o2, ok2 := b.CommittedOffset("G#b2", "T", q)
			if !ok1 || !ok2 || o1 != o2 {
				return false
			}
			sum += o1
		}
		return sum == 40
	})
	if _, ok := b.CommittedOffset("G", "T", 0); ok {
		t.Error("a broadcasting member committed under the group's own name")
	}
}

// TestGroupCloseReleasesPromptly: Close with handler calls in flight and
// long polls held at the broker waits for the calls (bounded), commits,
// unregisters and leaves no goroutine behind.
func TestGroupCloseReleasesPromptly(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithHeartbeatInterval(100*time.Millisecond))
	b.CreateTopic("T", 4)
	base := clientGoroutines()
	release := make(chan struct{})
	var mu sync.Mutex
	done := 0
	h := func(ctx context.Context, msgs []*protocol.MessageExt) ConsumeResult {
		if string(msgs[0].Body) == "slow" {
			select {
			case <-release:
			case <-ctx.Done():
				return ConsumeRetryLater
			}
		}
		mu.Lock()
		done++
		mu.Unlock()
		return ConsumeSuccess
	}
	c, err := NewPushConsumer(b.Addr(), "G", groupOpts("c1", WithPullSuspend(10*time.Second), WithReleaseTimeout(300*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe("T", "*", h); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	p, err := NewProducer(b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := p.Send(testCtx(t), msg("T", strconv.Itoa(i)), ToQueue(int32(i%4))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Send(testCtx(t), msg("T", "slow"), ToQueue(0)); err != nil {
		t.Fatal(err)
	}
	p.Close()
	testwait.For(t, testwait.Wall, 5*time.Second, "20 consumed", func() bool { mu.Lock(); defer mu.Unlock(); return done == 20 })
	testwait.For(t, testwait.Wall, 5*time.Second, "every queue's pull held", func() bool { return b.Held("T") == 4 })
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %v", d)
	}
	// The slow message (offset 5 of queue 0) was not done: the offset stops there.
	if off, ok := b.CommittedOffset("G", "T", 0); !ok || off != 5 {
		t.Errorf("queue 0 committed %d, %v; want 5", off, ok)
	}
	for q := int32(1); q < 4; q++ {
		if off, ok := b.CommittedOffset("G", "T", q); !ok || off != 5 {
			t.Errorf("queue %d committed %d, %v; want 5", q, off, ok)
		}
	}
	if m := b.GroupMembers("G"); len(m) != 0 {
		t.Errorf("members after Close: %v", m)
	}
	close(release)
	testwait.For(t, testwait.Wall, 5*time.Second, fmt.Sprintf("client goroutines back to %d", base), func() bool {
		return clientGoroutines() <= base
	})
}

func TestGroupAdmin(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithHeartbeatInterval(100*time.Millisecond))
	b.CreateTopic("T", 2)
	p := newProducer(t, b)
	sendN(t, p, "T", "x", 0, 6)
	rec := newGroupRecorder()
	startGroupConsumer(t, b, "G", "T", rec.handler("c1"), groupOpts("c1")...)
	testwait.For(t, testwait.Wall, 5*time.Second, "consumed", func() bool { return rec.distinct() == 6 })
	a := newAdmin(t, b)
	testwait.For(t, testwait.Wall, 5*time.Second, "lag 0", func() bool {
		gs, err := a.ListGroups(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		return len(gs) == 1 && gs[0].Group == "G" && gs[0].Members == 1 && gs[0].Lag == 0
	})
	d, err := a.DescribeGroup(testCtx(t), "G")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Members) != 1 || d.Members[0].ClientID != "c1" || len(d.Queues) != 3 {
		t.Errorf("description %+v", d)
	}
	if _, err := a.DescribeGroup(testCtx(t), "nope"); err == nil {
		t.Error("describing an unknown group succeeded")
	}
}

// TestDelaySendOptions: a message with a delay level or a delivery time
// waits in the broker's schedule topic (queue level-1, or the last one
// for a time) and reaches its topic when due on the broker's clock.
func TestDelaySendOptions(t *testing.T) {
	b := brokertest.Start(t)
	b.CreateTopic("T", 1)
	p := newProducer(t, b)
	at := time.UnixMilli(1_900_000_000_000)
	if _, err := p.Send(testCtx(t), msg("T", "a"), WithDelayLevel(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(testCtx(t), msg("T", "b"), WithDeliverAt(at)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(testCtx(t), msg("T", "c"), WithDelayLevel(19)); err == nil {
		t.Error("delay level 19 accepted")
	}
	if n := b.Total("T"); n != 0 {
		t.Errorf("%d messages in T before they are due", n)
	}
	level := b.Messages(protocol.ScheduleTopic, 2)
	if len(level) != 1 || string(level[0].Body) != "a" || level[0].Property(protocol.PropertyDelay) != "3" {
		t.Errorf("waiting for level 3: %v", level)
	}
	timed := b.Messages(protocol.ScheduleTopic, 18)
	if len(timed) != 1 || string(timed[0].Body) != "b" || timed[0].Property(protocol.PropertyTimerDeliverMs) != "1900000000000" {
		t.Errorf("waiting for a time: %v", timed)
	}
	b.Clock().Advance(10 * time.Second) // level 3
	testwait.For(t, testwait.Wall, 5*time.Second, "the level-3 message in T", func() bool { return b.Total("T") == 1 })
	if ms := b.Messages("T", 0); len(ms) != 1 || string(ms[0].Body) != "a" {
		t.Errorf("delivered %v, want a", ms)
	}
}

func TestGroupOptionValidation(t *testing.T) {
	b := brokertest.Start(t)
	for _, o := range []Option{WithConsumeConcurrency(-1), WithMaxReconsumeTimes(-1), WithAckTimeout(-time.Second),
		WithAllocateStrategy("RANDOM"), WithMessageModel(7)} {
		if c, err := NewPushConsumer(b.Addr(), "G", o); err == nil {
			c.Close()
			t.Errorf("option accepted")
		}
	}
}

// TestGroupLeaseExpiry: when heartbeats go unanswered for 2 intervals the
// member stops consuming every queue (the broker would give them to others
// soon); when they are answered again it gets them back.
func TestGroupLeaseExpiry(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithHeartbeatInterval(100*time.Millisecond))
	b.CreateTopic("T", 2)
	rec := newGroupRecorder()
	c := startGroupConsumer(t, b, "G", "T", rec.handler("c1"), groupOpts("c1", WithTimeout(300*time.Millisecond))...)
	testwait.For(t, testwait.Wall, 3*time.Second, "2 queues", func() bool { return topicQueues(c.Assignment(), "T") == 2 })
	b.SetStall(protocol.CodeHeartbeat, true)
	start := time.Now()
	testwait.For(t, testwait.Wall, 3*time.Second, "every queue released", func() bool { return len(c.Assignment()) == 0 })
	if d := time.Since(start); d > time.Second {
		t.Errorf("released after %v", d)
	}
	b.SetStall(protocol.CodeHeartbeat, false)
	testwait.For(t, testwait.Wall, 5*time.Second, "queues back", func() bool { return topicQueues(c.Assignment(), "T") == 2 })
	sendN(t, newProducer(t, b), "T", "x", 0, 10)
	testwait.For(t, testwait.Wall, 5*time.Second, "consumed", func() bool { return rec.distinct() == 10 })
}
