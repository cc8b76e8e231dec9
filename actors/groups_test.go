package actors

import (
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/internal/vtime"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage/vfs"
)

// The coordinator's rules are tested in rebalance/; these tests drive the
// shell through the real actors: routing, one heartbeat's answers joined
// over its groups, notifications on the member's connection, the timer on
// the Clock seam, descriptions completed by the offset manager.

// memberConn is one member's connection: it records the notifications the
// broker pushes.
type memberConn struct {
	*fakeConn
	notes chan string
}

func (h *harness) newMemberConn() *memberConn {
	return &memberConn{fakeConn: newConn(h.loop), notes: make(chan string, 64)}
}

func (c *memberConn) Send(req protocol.Request) {
	if n, ok := req.(*protocol.NotifyConsumerIDsChangedRequest); ok {
		c.notes <- n.Group
	}
}

// notified waits for a notification of c's member for group. One
// rebalance can notify a member more than once (a revocation, then the
// changed assignment), so it then waits for the coordinator to finish the
// input (a describe is answered after it) and drops the rest.
func (h *harness) notified(c *memberConn, group string) {
	h.t.Helper()
	if !h.loop.RunUntil(func() bool { return len(c.notes) > 0 }, 5*time.Second) {
		h.t.Fatalf("no notification for group %q", group)
	}
	if g := <-c.notes; g != group {
		h.t.Fatalf("notified for group %q, want %q", g, group)
	}
	h.describe(group)
	for {
		select {
		case <-c.notes:
		default:
			return
		}
	}
}

// quiet checks that no notification is pending (call it after an answer
// from the coordinator, which sends its notifications first).
func (c *memberConn) quiet(t *testing.T) {
	t.Helper()
	select {
	case g := <-c.notes:
		t.Fatalf("unexpected notification for group %q", g)
	default:
	}
}

// groupEpoch is the virtual start of the group tests (generations start
// at the broker's start time).
var groupEpoch = time.UnixMilli(1_000_000)

func startGroupBroker(t *testing.T, interval time.Duration) *harness {
	t.Helper()
	cfg := DefaultConfig()
	cfg.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	cfg.ConsumerHeartbeatInterval = interval
	h := startAt(t, vfs.NewMem(), cfg, vtime.NewFIFO(groupEpoch), Env{})
	h.ok(h.send(&protocol.CreateTopicRequest{TopicConfig: protocol.TopicConfig{Topic: "t", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}})[0], nil)
	return h
}

// heartbeat sends client's heartbeat over c (echoing the generation it
// last got for each group) and returns the answer.
func (h *harness) heartbeat(c *memberConn, client string, infos ...protocol.ConsumerGroupInfo) protocol.HeartbeatResponse {
	h.t.Helper()
	for i := range infos {
		infos[i].Generation = h.gens[client+"/"+infos[i].Group]
	}
	h.next++
	buf, err := protocol.AppendRequest(nil, h.next, 0, &protocol.HeartbeatRequest{ClientID: client, ConsumerGroups: infos})
	if err != nil {
		h.t.Fatal(err)
	}
	f, err := protocol.DecodeFrame(buf, protocol.DefaultLimits())
	if err != nil {
		h.t.Fatal(err)
	}
	h.b.Deliver(&Inbound{Conn: c, Frames: []*protocol.Frame{f}})
	var r protocol.HeartbeatResponse
	if err := protocol.DecodeResponse(c.await(h.t, h.next, 5*time.Second), protocol.DefaultLimits(), &r); err != nil {
		h.t.Fatal(err)
	}
	for _, a := range r.Assignments {
		h.gens[client+"/"+a.Group] = a.Generation
	}
	return r
}

func (h *harness) describe(group string) protocol.ConsumerGroupDescription {
	h.t.Helper()
	var d protocol.ConsumerGroupDescription
	h.ok(h.send(&protocol.DescribeConsumerGroupRequest{Group: group})[0], &d)
	return d
}

func sub(group string, owned ...protocol.QueueRef) protocol.ConsumerGroupInfo {
	return protocol.ConsumerGroupInfo{Group: group, Subscriptions: []protocol.Subscription{{Topic: "t", Expression: "*"}}, Owned: owned}
}

func refsOf(topic string, ids ...int32) []protocol.QueueRef {
	out := make([]protocol.QueueRef, len(ids))
	for i, id := range ids {
		out[i] = protocol.QueueRef{Topic: topic, QueueID: id}
	}
	return out
}

// TestGroupsRouteAndJoinAnswers: one heartbeat for two groups is answered
// once, with both groups' assignments in group order; within the restart
// grace a member keeps what it reports holding and gets nothing else; a
// revocation notifies the old owner on its connection; describe and list
// see the groups; unregistering removes the member.
func TestGroupsRouteAndJoinAnswers(t *testing.T) {
	h := startGroupBroker(t, time.Hour) // the grace lasts the whole test
	c1, c2 := h.newMemberConn(), h.newMemberConn()
	held := append(refsOf(protocol.RetryTopic("g"), 0), refsOf("t", 0, 1, 2, 3)...)
	r := h.heartbeat(c1, "c1", sub("h"), sub("g", held...), sub("g"))
	if r.HeartbeatIntervalMillis != time.Hour.Milliseconds() || len(r.Assignments) != 2 {
		t.Fatalf("heartbeat answer: %+v", r)
	}
	g, hh := r.Assignments[0], r.Assignments[1]
	if g.Group != "g" || hh.Group != "h" || len(g.Queues) != 5 || len(hh.Queues) != 0 {
		t.Fatalf("assignments: %+v", r.Assignments)
	}
	if g.Generation != 1_000_000*1000+1 {
		t.Fatalf("generation %d, want the start time in ms times 1000, plus one", g.Generation)
	}
	// c2 joins g: c1 must give up t:2,3 and is told so on its connection.
	if r := h.heartbeat(c2, "c2", sub("g")); len(r.Assignments[0].Queues) != 0 {
		t.Fatalf("c2 got %v while c1 holds everything", r.Assignments[0].Queues)
	}
	h.notified(c1, "g")
	c2.quiet(t)
	d := h.describe("g")
	if len(d.Members) != 2 || len(d.Queues) != 5 || d.Queues[3].Pending != "c2" || d.Queues[0].CommittedOffset != -1 {
		t.Fatalf("describe: %+v", d)
	}
	var l protocol.ConsumerGroupsResponse
	h.ok(h.send(&protocol.GetConsumerGroupsRequest{})[0], &l)
	if len(l.Groups) != 2 || l.Groups[0].Group != "g" || l.Groups[0].Members != 2 || l.Groups[1].Members != 1 {
		t.Fatalf("list: %+v", l)
	}
	h.ok(h.send(&protocol.UnregisterClientRequest{ClientID: "c1"})[0], nil)
	if d := h.describe("g"); len(d.Members) != 1 || d.Members[0].ClientID != "c2" {
		t.Fatalf("after c1 left: %+v", d.Members)
	}
	h.describe("h")
	// The coordinators told the router before they answered the describes.
	h.ok(h.send(&protocol.GetConsumerGroupsRequest{})[0], &l)
	if len(l.Groups) != 1 || l.Groups[0].Group != "g" {
		t.Fatalf("list after c1 left every group: %+v", l)
	}
	if f := h.conn.await(t, h.send(&protocol.DescribeConsumerGroupRequest{Group: "nope"})[0], 5*time.Second); f.Status != protocol.StatusQueryNotFound {
		t.Fatalf("describe of an unknown group: %v", f.Status)
	}
}

// TestGroupTimerGrantsAndExpires: the coordinator's timer runs on the Clock
// seam: the tick after the restart grace grants what nobody held, and the
// tick after three silent intervals removes a member and hands its queues
// over.
func TestGroupTimerGrantsAndExpires(t *testing.T) {
	const iv = time.Second
	h := startGroupBroker(t, iv)
	c1, c2 := h.newMemberConn(), h.newMemberConn()
	if r := h.heartbeat(c1, "c1", sub("g")); len(r.Assignments[0].Queues) != 0 {
		t.Fatalf("granted %v within the restart grace", r.Assignments[0].Queues)
	}
	h.loop.Advance(2 * iv) // the tick armed at 1 s runs at 2 s: the grace is over
	h.notified(c1, "g")
	a1 := h.heartbeat(c1, "c1", sub("g")).Assignments[0].Queues
	if n := len(onlyTopic(a1, "t")); n != 4 {
		t.Fatalf("c1 got %d of 4 queues after the grace", n)
	}
	h.heartbeat(c2, "c2", sub("g"))
	h.notified(c1, "g")
	a1 = h.heartbeat(c1, "c1", sub("g", a1...)).Assignments[0].Queues // learns it keeps two
	h.heartbeat(c1, "c1", sub("g", a1...))                            // released the others
	h.notified(c2, "g")
	if a2 := h.heartbeat(c2, "c2", sub("g")).Assignments[0].Queues; len(onlyTopic(a2, "t")) != 2 {
		t.Fatalf("c2 got %v after c1 released", a2)
	}
	// c2 falls silent; c1 keeps heartbeating.
	h.loop.Advance(2 * iv)
	h.heartbeat(c1, "c1", sub("g", a1...))
	c1.quiet(t)
	h.loop.Advance(1500 * time.Millisecond) // c2 silent for 3.5 intervals at the next tick
	h.notified(c1, "g")
	if d := h.describe("g"); len(d.Members) != 1 || d.Members[0].ClientID != "c1" {
		t.Fatalf("after c2 timed out: %+v", d.Members)
	}
	if a := h.heartbeat(c1, "c1", sub("g", a1...)).Assignments[0].Queues; len(onlyTopic(a, "t")) != 4 {
		t.Fatalf("c1 has %v after c2 timed out", a)
	}
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

// waitMessages pulls topic-q from offset 0 on the loop's virtual time until
// it holds at least n messages, and returns them.
func waitMessages(h *harness, topic string, q int32, n int, within time.Duration) []protocol.MessageExt {
	h.t.Helper()
	var m []protocol.MessageExt
	if !testwait.Until(h.loop, within, func() bool { m = pullAll(h, topic, q, 0); return len(m) >= n }) {
		h.t.Fatalf("%s-%d: %d messages after %v, want %d", topic, q, len(m), within, n)
	}
	return m
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
	start := h.loop.Now()
	h.ok(h.send(r)[0], nil)
	if m := pullAll(h, "t", 0, 0); len(m) != 0 {
		t.Fatalf("delayed message visible at once")
	}
	m := waitMessages(h, "t", 0, 1, 3*time.Second)
	if d := h.loop.Now().Sub(start); d < 300*time.Millisecond || string(m[0].Body) != "later" {
		t.Fatalf("delayed message after %v: %q", d, m[0].Body)
	}
	abs := sendReq("t", 1, "at")
	abs.Properties = map[string]string{protocol.PropertyTimerDeliverMs: strconv.FormatInt(h.loop.Now().Add(400*time.Millisecond).UnixMilli(), 10)}
	start = h.loop.Now()
	h.ok(h.send(abs)[0], nil)
	waitMessages(h, "t", 1, 1, 3*time.Second)
	if d := h.loop.Now().Sub(start); d < 400*time.Millisecond {
		t.Fatalf("message for a delivery time 400 ms ahead visible after %v", d)
	}

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
