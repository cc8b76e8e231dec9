package actors

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wharfmq/wharf/actors/clientgroups"
	"github.com/wharfmq/wharf/protocol"
)

// The table's rules are tested in actors/clientgroups; these tests drive
// the groups router's shell: routing of the typed requests the remoting
// codec builds, notices on the members' connections, the expiry timer on
// the Clock seam, closed connections, and the refusal of a group mixing
// both kinds of consumer.

// deliverTyped hands the broker a request as a codec other than Wharf's
// does (already decoded) on conn, and returns its frame's answer.
func (h *harness) deliverTyped(conn *memberConn, req protocol.Request) *protocol.Frame {
	h.t.Helper()
	h.next++
	f := &protocol.Frame{Code: req.RequestCode(), Opaque: h.next, Request: req}
	h.b.Deliver(&Inbound{Conn: conn, Frames: []*protocol.Frame{f}})
	return conn.await(h.t, h.next, 5*time.Second)
}

func (h *harness) rmqConn(id uint64) *memberConn {
	c := h.newMemberConn()
	c.id = id
	return c
}

func rmqHeartbeat(client string, groups ...string) *protocol.ClientHeartbeatRequest {
	r := &protocol.ClientHeartbeatRequest{ClientID: client}
	for _, g := range groups {
		r.ConsumerGroups = append(r.ConsumerGroups, sub(g))
	}
	return r
}

// noted waits until c got a notice for group.
func (h *harness) noted(c *memberConn, group string) {
	h.t.Helper()
	if !h.loop.RunUntil(func() bool { return len(c.notes) > 0 }, 5*time.Second) {
		h.t.Fatalf("conn %d: no notification for group %q", c.id, group)
	}
	if g := <-c.notes; g != group {
		h.t.Fatalf("conn %d: notified for group %q, want %q", c.id, g, group)
	}
}

func (h *harness) consumerList(c *memberConn, group string) []string {
	h.t.Helper()
	f := h.deliverTyped(c, &protocol.GetConsumerListRequest{Group: group})
	var r protocol.ConsumerListResponse
	if err := protocol.DecodeResponse(f, protocol.DefaultLimits(), &r); err != nil || f.Status != protocol.StatusOK {
		h.t.Fatalf("consumer list: %v %v %q", err, f.Status, f.Remark)
	}
	return r.ClientIDs
}

func TestClientGroupsMembersNoticesExpiry(t *testing.T) {
	h := startGroupBroker(t, time.Second)
	c1, c2 := h.rmqConn(11), h.rmqConn(12)
	if f := h.deliverTyped(c1, rmqHeartbeat("r1", "rg")); f.Status != protocol.StatusOK {
		t.Fatalf("heartbeat: %v %q", f.Status, f.Remark)
	}
	h.noted(c1, "rg")
	h.deliverTyped(c2, rmqHeartbeat("r2", "rg"))
	h.noted(c1, "rg")
	h.noted(c2, "rg")
	if got := h.consumerList(c1, "rg"); !reflect.DeepEqual(got, []string{"r1", "r2"}) {
		t.Fatalf("members %v", got)
	}
	if got := h.consumerList(c1, "other"); len(got) != 0 {
		t.Fatalf("members of an unknown group: %v", got)
	}
	// A beat of a known member changes nothing; a closed connection
	// removes its member at once.
	h.deliverTyped(c1, rmqHeartbeat("r1", "rg"))
	c1.quiet(t)
	h.b.Disconnected(c2)
	h.noted(c1, "rg")
	if got := h.consumerList(c1, "rg"); !reflect.DeepEqual(got, []string{"r1"}) {
		t.Fatalf("after c2 closed: %v", got)
	}
	// r3 joins at +60 s; r1 is silent: it expires at 120 s, r3 is told.
	h.loop.Advance(60 * time.Second)
	c3 := h.rmqConn(13)
	h.deliverTyped(c3, rmqHeartbeat("r3", "rg"))
	h.noted(c1, "rg")
	h.noted(c3, "rg")
	h.loop.Advance(clientgroups.MemberExpiry - 60*time.Second - time.Second)
	if got := h.consumerList(c3, "rg"); len(got) != 2 {
		t.Fatalf("a member expired early: %v", got)
	}
	h.loop.Advance(2 * time.Second)
	h.noted(c3, "rg")
	if got := h.consumerList(c3, "rg"); !reflect.DeepEqual(got, []string{"r3"}) {
		t.Fatalf("after r1's expiry: %v", got)
	}
	// UNREGISTER_CLIENT removes at once.
	h.deliverTyped(c3, &protocol.UnregisterClientRequest{ClientID: "r3", Group: "rg"})
	if got := h.consumerList(c3, "rg"); len(got) != 0 {
		t.Fatalf("after unregister: %v", got)
	}
}

func TestClientGroupsRefuseMixing(t *testing.T) {
	h := startGroupBroker(t, time.Second)
	c1 := h.rmqConn(11)
	h.deliverTyped(c1, rmqHeartbeat("r1", "rg"))
	// A Wharf member cannot join a group with RocketMQ members.
	f := h.conn.await(t, h.send(&protocol.HeartbeatRequest{ClientID: "w1", ConsumerGroups: []protocol.ConsumerGroupInfo{sub("rg")}})[0], 5*time.Second)
	if f.Status != protocol.StatusInvalidParameter || !strings.Contains(f.Remark, `"rg"`) || !strings.Contains(f.Remark, "coordinated by its clients") {
		t.Fatalf("Wharf join of a client-coordinated group: %v %q", f.Status, f.Remark)
	}
	if d := h.send(&protocol.DescribeConsumerGroupRequest{Group: "rg"}); h.conn.await(t, d[0], 5*time.Second).Status != protocol.StatusQueryNotFound {
		t.Fatal("the refused Wharf member reached the coordinator")
	}
	// A RocketMQ member cannot join a group with Wharf members; nothing
	// of its heartbeat is taken.
	h.heartbeat(h.newMemberConn(), "w2", sub("wg"))
	f = h.deliverTyped(c1, rmqHeartbeat("r1", "rg2", "wg"))
	if f.Status != protocol.StatusInvalidParameter || !strings.Contains(f.Remark, `"wg"`) || !strings.Contains(f.Remark, "coordinated by the broker") {
		t.Fatalf("RocketMQ join of a broker-coordinated group: %v %q", f.Status, f.Remark)
	}
	if got := h.consumerList(c1, "rg2"); len(got) != 0 {
		t.Fatalf("a refused heartbeat's other group was taken: %v", got)
	}
	if got := h.consumerList(c1, "rg"); !reflect.DeepEqual(got, []string{"r1"}) {
		t.Fatalf("the earlier membership: %v", got)
	}
}

func TestClientGroupsLocks(t *testing.T) {
	h := startGroupBroker(t, time.Second)
	c1, c2 := h.rmqConn(11), h.rmqConn(12)
	q := func(id int32) protocol.BrokerQueue {
		return protocol.BrokerQueue{Topic: "t", BrokerName: "broker-a", QueueID: id}
	}
	lock := func(c *memberConn, client string, qs ...protocol.BrokerQueue) []protocol.BrokerQueue {
		t.Helper()
		f := h.deliverTyped(c, &protocol.LockBatchRequest{Group: "og", ClientID: client, Queues: qs})
		var r protocol.LockBatchResponse
		if err := protocol.DecodeResponse(f, protocol.DefaultLimits(), &r); err != nil || f.Status != protocol.StatusOK {
			t.Fatalf("lock: %v %v %q", err, f.Status, f.Remark)
		}
		return r.Locked
	}
	if got := lock(c1, "r1", q(0), q(1)); !reflect.DeepEqual(got, []protocol.BrokerQueue{q(0), q(1)}) {
		t.Fatalf("r1 locked %v", got)
	}
	if got := lock(c2, "r2", q(1), q(2)); !reflect.DeepEqual(got, []protocol.BrokerQueue{q(2)}) {
		t.Fatalf("r2 locked %v", got)
	}
	if f := h.deliverTyped(c1, &protocol.LockBatchRequest{Group: "og", ClientID: "r1", Queues: []protocol.BrokerQueue{q(1)}, Unlock: true}); f.Status != protocol.StatusOK {
		t.Fatalf("unlock: %v", f.Status)
	}
	if got := lock(c2, "r2", q(1)); !reflect.DeepEqual(got, []protocol.BrokerQueue{q(1)}) {
		t.Fatalf("after r1 unlocked: r2 locked %v", got)
	}
	h.loop.Advance(clientgroups.LockExpiry)
	if got := lock(c2, "r2", q(0)); !reflect.DeepEqual(got, []protocol.BrokerQueue{q(0)}) {
		t.Fatalf("after r1's lock expired: r2 locked %v", got)
	}
}
