package actors

import (
	"strconv"
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage/vfs"
)

func qs(topic string, n int) []protocol.QueueRef {
	out := make([]protocol.QueueRef, n)
	for i := range out {
		out[i] = protocol.QueueRef{Topic: topic, QueueID: int32(i)}
	}
	return out
}

func count(a map[protocol.QueueRef]string) map[string]int {
	c := map[string]int{}
	for _, m := range a {
		c[m]++
	}
	return c
}

// TestAllocateAverageIsStickyAndBalanced: shares differ by at most one, and
// a member joining or leaving moves only the queues that must move.
func TestAllocateAverageIsStickyAndBalanced(t *testing.T) {
	queues := qs("t", 8)
	a := allocate(protocol.AllocateAverage, queues, []string{"a", "b", "c"}, nil)
	if c := count(a); c["a"] != 3 || c["b"] != 3 || c["c"] != 2 {
		t.Fatalf("shares %v", c)
	}
	b := allocate(protocol.AllocateAverage, queues, []string{"a", "b"}, a) // c left
	moved := 0
	for q, m := range b {
		if a[q] != m {
			moved++
		}
	}
	if c := count(b); c["a"] != 4 || c["b"] != 4 || moved != 2 {
		t.Fatalf("after c left: shares %v, %d queues moved (want only c's 2)", c, moved)
	}
	d := allocate(protocol.AllocateAverage, queues, []string{"a", "b", "d"}, b) // d joined
	moved = 0
	for q, m := range d {
		if b[q] != m {
			moved++
			if m != "d" {
				t.Fatalf("queue %v moved to %s, not to the new member", q, m)
			}
		}
	}
	if c := count(d); moved != 2 || c["d"] != 2 {
		t.Fatalf("after d joined: shares %v, %d moved", c, moved)
	}
	h := allocate(protocol.AllocateConsistentHash, queues, []string{"a", "b", "c"}, nil)
	if len(h) != 8 {
		t.Fatalf("consistent hash assigned %d of 8", len(h))
	}
}

func (h *harness) heartbeat(client string, owned []protocol.QueueRef, mut func(*protocol.ConsumerGroupInfo)) protocol.GroupAssignment {
	h.t.Helper()
	if h.gens == nil {
		h.gens = map[string]int64{}
	}
	info := protocol.ConsumerGroupInfo{Group: "g", Subscriptions: []protocol.Subscription{{Topic: "t", Expression: "*"}}, Owned: owned,
		Generation: h.gens[client]}
	if mut != nil {
		mut(&info)
	}
	var r protocol.HeartbeatResponse
	h.ok(h.send(&protocol.HeartbeatRequest{ClientID: client, ConsumerGroups: []protocol.ConsumerGroupInfo{info}})[0], &r)
	if len(r.Assignments) != 1 {
		h.t.Fatalf("heartbeat of %s: %d assignments", client, len(r.Assignments))
	}
	h.gens[client] = r.Assignments[0].Generation
	return r.Assignments[0]
}

func onlyTopic(a []protocol.QueueRef, topic string) []protocol.QueueRef {
	var out []protocol.QueueRef
	for _, q := range a {
		if q.Topic == topic {
			out = append(out, q)
		}
	}
	return out
}

// TestCoordinatorHandoff: a queue reaches its new owner only after the old
// owner stops reporting it.
func TestCoordinatorHandoff(t *testing.T) {
	h := startBroker(t, vfs.NewMem(), func(c *Config) { c.ConsumerHeartbeatInterval = 100 * time.Millisecond })
	time.Sleep(250 * time.Millisecond) // past the restart grace: owners from before a restart time out
	h.ok(h.send(&protocol.CreateTopicRequest{TopicConfig: protocol.TopicConfig{Topic: "t", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}})[0], nil)
	a1 := h.heartbeat("c1", nil, nil)
	if n := len(onlyTopic(a1.Queues, "t")); n != 4 {
		t.Fatalf("sole member got %d of 4 queues", n)
	}
	owned1 := a1.Queues
	h.heartbeat("c1", owned1, nil) // c1 now consumes them
	a2 := h.heartbeat("c2", nil, nil)
	if n := len(onlyTopic(a2.Queues, "t")); n != 0 {
		t.Fatalf("new member got %d queues while c1 still holds them", n)
	}
	a1 = h.heartbeat("c1", owned1, nil) // c1 learns it must give up two
	if n := len(onlyTopic(a1.Queues, "t")); n != 2 {
		t.Fatalf("c1 keeps %d queues, want 2", n)
	}
	a2 = h.heartbeat("c2", nil, nil)
	if n := len(onlyTopic(a2.Queues, "t")); n != 0 {
		t.Fatalf("c2 got %d queues before c1 released them", n)
	}
	a1 = h.heartbeat("c1", a1.Queues, nil) // released
	a2 = h.heartbeat("c2", nil, nil)
	if n := len(onlyTopic(a2.Queues, "t")); n != 2 {
		t.Fatalf("c2 got %d queues after the release, want 2", n)
	}
	for _, q := range onlyTopic(a1.Queues, "t") {
		for _, p := range a2.Queues {
			if p == q {
				t.Fatalf("queue %v assigned to both", q)
			}
		}
	}
	// c2 leaves: c1 gets everything back at once.
	h.ok(h.send(&protocol.UnregisterClientRequest{ClientID: "c2", Group: "g"})[0], nil)
	time.Sleep(10 * time.Millisecond)
	a1 = h.heartbeat("c1", a1.Queues, nil)
	if n := len(onlyTopic(a1.Queues, "t")); n != 4 {
		t.Fatalf("after c2 left c1 has %d queues", n)
	}
	var d protocol.ConsumerGroupDescription
	h.ok(h.send(&protocol.DescribeConsumerGroupRequest{Group: "g"})[0], &d)
	if len(d.Members) != 1 || len(d.Queues) != 5 { // 4 + the retry queue
		t.Fatalf("describe: %+v", d)
	}
	var l protocol.ConsumerGroupsResponse
	h.ok(h.send(&protocol.GetConsumerGroupsRequest{})[0], &l)
	if len(l.Groups) != 1 || l.Groups[0].Members != 1 {
		t.Fatalf("list: %+v", l)
	}
}

func TestBroadcastingAssignsEverything(t *testing.T) {
	h := startBroker(t, vfs.NewMem(), func(c *Config) { c.ConsumerHeartbeatInterval = 100 * time.Millisecond })
	time.Sleep(250 * time.Millisecond)
	h.ok(h.send(&protocol.CreateTopicRequest{TopicConfig: protocol.TopicConfig{Topic: "t", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}})[0], nil)
	bc := func(i *protocol.ConsumerGroupInfo) { i.MessageModel = protocol.Broadcasting }
	h.heartbeat("c1", nil, bc)
	a2 := h.heartbeat("c2", nil, bc)
	a1 := h.heartbeat("c1", nil, bc)
	if len(onlyTopic(a1.Queues, "t")) != 4 || len(onlyTopic(a2.Queues, "t")) != 4 {
		t.Fatalf("broadcast: %v / %v", a1.Queues, a2.Queues)
	}
}

func pullAll(h *harness, topic string, q int32, from int64) []protocol.MessageExt {
	h.t.Helper()
	f := h.conn.await(h.t, h.send(&protocol.PullRequest{ConsumerGroup: "g", Topic: topic, QueueID: q, QueueOffset: from, MaxMsgNums: 32})[0], 3*time.Second)
	if f.Status != protocol.StatusOK {
		return nil
	}
	var r protocol.PullResponse
	if err := protocol.DecodeResponse(f, protocol.DefaultLimits(), &r); err != nil {
		h.t.Fatal(err)
	}
	return r.Messages
}

func waitMessages(h *harness, topic string, q int32, n int, within time.Duration) []protocol.MessageExt {
	h.t.Helper()
	deadline := time.Now().Add(within)
	for {
		m := pullAll(h, topic, q, 0)
		if len(m) >= n {
			return m
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s-%d: %d messages after %v, want %d", topic, q, len(m), within, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDelayAndRetry: a delayed message appears at its time; a message given
// back goes to the retry topic with a delay and, past maxReconsumeTimes, to
// the dead-letter topic.
func TestDelayAndRetry(t *testing.T) {
	h := startBroker(t, vfs.NewMem(), func(c *Config) {
		c.DelayLevels = []time.Duration{300 * time.Millisecond, 600 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond}
	})
	r := sendReq("t", 0, "later")
	r.Properties = map[string]string{protocol.PropertyDelay: "1"}
	start := time.Now()
	h.ok(h.send(r)[0], nil)
	if m := pullAll(h, "t", 0, 0); len(m) != 0 {
		t.Fatalf("delayed message visible at once")
	}
	m := waitMessages(h, "t", 0, 1, 3*time.Second)
	if d := time.Since(start); d < 250*time.Millisecond || string(m[0].Body) != "later" {
		t.Fatalf("delayed message after %v: %q", d, m[0].Body)
	}
	abs := sendReq("t", 1, "at")
	abs.Properties = map[string]string{protocol.PropertyTimerDeliverMs: strconv.FormatInt(time.Now().Add(400*time.Millisecond).UnixMilli(), 10)}
	h.ok(h.send(abs)[0], nil)
	waitMessages(h, "t", 1, 1, 3*time.Second)

	// Give it back: retry topic after level 3 (100 ms) ...
	h.ok(h.send(&protocol.ConsumerSendMsgBackRequest{Group: "g", CommitLogOffset: m[0].CommitLogOffset, MaxReconsumeTimes: 2})[0], nil)
	retry := waitMessages(h, protocol.RetryTopic("g"), 0, 1, 3*time.Second)
	if retry[0].ReconsumeTimes != 1 || retry[0].Property(protocol.PropertyRetryTopic) != "t" || string(retry[0].Body) != "later" {
		t.Fatalf("retried message: %+v", retry[0])
	}
	h.ok(h.send(&protocol.ConsumerSendMsgBackRequest{Group: "g", CommitLogOffset: retry[0].CommitLogOffset, MaxReconsumeTimes: 2})[0], nil)
	retry = waitMessages(h, protocol.RetryTopic("g"), 0, 2, 3*time.Second)
	if retry[1].ReconsumeTimes != 2 {
		t.Fatalf("second retry: reconsume %d", retry[1].ReconsumeTimes)
	}
	// ... and past maxReconsumeTimes, the dead-letter topic.
	h.ok(h.send(&protocol.ConsumerSendMsgBackRequest{Group: "g", CommitLogOffset: retry[1].CommitLogOffset, MaxReconsumeTimes: 2})[0], nil)
	dlq := waitMessages(h, protocol.DLQTopic("g"), 0, 1, 3*time.Second)
	if string(dlq[0].Body) != "later" || dlq[0].Property(protocol.PropertyOriginMessageID) != m[0].MsgID {
		t.Fatalf("dead letter: %+v", dlq[0])
	}
}
