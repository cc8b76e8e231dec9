package actors

import (
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// TestSearchOffsetByTimestamp: the dispatch actor answers the first offset
// stored at or after a time, from the store times of its queue's records.
func TestSearchOffsetByTimestamp(t *testing.T) {
	h := startGroupBroker(t, time.Second)
	var stored []int64
	for i := range 3 {
		h.ok(h.send(sendReq("t", 1, "m"))[0], nil)
		if i < 2 {
			h.loop.Advance(time.Second)
		}
	}
	for _, m := range waitMessages(h, "t", 1, 3, 5*time.Second) {
		stored = append(stored, m.StoreTimestamp)
	}
	if stored[0] >= stored[1] || stored[1] >= stored[2] {
		t.Fatalf("store times %v do not grow", stored)
	}
	c := h.newMemberConn()
	cases := []struct {
		topic string
		q     int32
		ts    int64
		want  int64
		st    protocol.Status
	}{
		{"t", 1, 0, 0, protocol.StatusOK},
		{"t", 1, stored[1], 1, protocol.StatusOK},
		{"t", 1, stored[1] + 1, 2, protocol.StatusOK},
		{"t", 1, stored[2] + 1, 3, protocol.StatusOK}, // after the last: the max offset
		{"t", 2, 0, 0, protocol.StatusOK},             // an empty queue
		{"absent", 0, 0, 0, protocol.StatusTopicNotExist},
	}
	for _, cs := range cases {
		f := h.deliverTyped(c, &protocol.SearchOffsetRequest{Topic: cs.topic, QueueID: cs.q, Timestamp: cs.ts})
		if f.Status != cs.st {
			t.Fatalf("%s-%d at %d: status %v %q, want %v", cs.topic, cs.q, cs.ts, f.Status, f.Remark, cs.st)
		}
		if cs.st != protocol.StatusOK {
			continue
		}
		var r protocol.OffsetResponse
		if err := protocol.DecodeResponse(f, protocol.DefaultLimits(), &r); err != nil || r.Offset != cs.want {
			t.Fatalf("%s-%d at %d: offset %d %v, want %d", cs.topic, cs.q, cs.ts, r.Offset, err, cs.want)
		}
	}
}
