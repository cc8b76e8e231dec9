package actors

import (
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage/vfs"
)

// TestReadChecks: a pull or an offset query of a topic the broker does not
// have, of a queue out of range, or a pull of a topic that is not readable,
// is answered at once with the error (PROTOCOL.md 7.3, 7.6), never held for
// its suspend time.
func TestReadChecks(t *testing.T) {
	h := startBroker(t, vfs.NewMem(), nil)
	for _, tc := range []protocol.TopicConfig{
		{Topic: "rw", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6},
		{Topic: "wo", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 2},
		{Topic: "inherit", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 1},
	} {
		h.ok(h.send(&protocol.CreateTopicRequest{TopicConfig: tc})[0], nil)
	}
	pull := func(topic string, q int32, suspend int64) *protocol.PullRequest {
		return &protocol.PullRequest{ConsumerGroup: "g", Topic: topic, QueueID: q, MaxMsgNums: 8, SuspendTimeoutMillis: suspend}
	}
	const long = 20_000 // ms: a held pull would not be answered within the test's wait
	tests := []struct {
		name string
		req  protocol.Request
		want protocol.Status
	}{
		{"pull of an unknown topic", pull("nope", 0, long), protocol.StatusTopicNotExist},
		{"pull past the queues", pull("rw", 2, long), protocol.StatusInvalidParameter},
		{"pull of a negative queue", pull("rw", -1, long), protocol.StatusInvalidParameter},
		{"pull of a write-only topic", pull("wo", 0, long), protocol.StatusNoPermission},
		{"pull of a topic with perm 1", pull("inherit", 0, long), protocol.StatusNoPermission},
		{"pull of an empty queue", pull("rw", 1, 0), protocol.StatusPullNotFound},
		{"pull of a retry topic before its first message", pull("%RETRY%g", 0, 0), protocol.StatusPullNotFound},
		{"max offset of an unknown topic", &protocol.GetMaxOffsetRequest{Topic: "nope"}, protocol.StatusTopicNotExist},
		{"min offset of an unknown topic", &protocol.GetMinOffsetRequest{Topic: "nope"}, protocol.StatusTopicNotExist},
		{"max offset past the queues", &protocol.GetMaxOffsetRequest{Topic: "rw", QueueID: 2}, protocol.StatusInvalidParameter},
		{"min offset of a negative queue", &protocol.GetMinOffsetRequest{Topic: "rw", QueueID: -1}, protocol.StatusInvalidParameter},
		{"max offset of an empty queue", &protocol.GetMaxOffsetRequest{Topic: "rw", QueueID: 1}, protocol.StatusOK},
		{"min offset of an empty queue", &protocol.GetMinOffsetRequest{Topic: "rw", QueueID: 1}, protocol.StatusOK},
		{"offsets need no read permission", &protocol.GetMaxOffsetRequest{Topic: "wo", QueueID: 1}, protocol.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := h.conn.await(t, h.send(tt.req)[0], 2*time.Second)
			if f.Status != tt.want {
				t.Fatalf("%v (%s), want %v", f.Status, f.Remark, tt.want)
			}
			if _, ok := tt.req.(*protocol.PullRequest); ok || f.Status != protocol.StatusOK {
				return
			}
			var or protocol.OffsetResponse
			if err := protocol.DecodeResponse(f, protocol.DefaultLimits(), &or); err != nil || or.Offset != 0 {
				t.Fatalf("offset %d (%v), want 0", or.Offset, err)
			}
		})
	}
	// A topic a send auto-creates is readable at once after the send.
	h.ok(h.send(sendReq("auto", 0, "x"))[0], nil)
	var pr protocol.PullResponse
	h.ok(h.send(pull("auto", 0, long))[0], &pr)
	if len(pr.Messages) != 1 {
		t.Fatalf("pull after an auto-creating send: %d messages", len(pr.Messages))
	}
}
