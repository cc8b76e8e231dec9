package actors

import (
	"fmt"
	"testing"
	"time"

	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
	"github.com/wharfmq/wharf/storage/vfs"
)

// pullBodies pulls queue q of topic from 0 without waiting and returns the
// bodies (none if the answer is not SUCCESS).
func (h *harness) pullBodies(topic string, q int32) ([]string, protocol.Status) {
	h.t.Helper()
	op := h.send(&protocol.PullRequest{ConsumerGroup: "g", Topic: topic, QueueID: q, MaxMsgNums: 64})[0]
	f := h.conn.await(h.t, op, 5*time.Second)
	if f.Status != protocol.StatusOK {
		return nil, f.Status
	}
	var pr protocol.PullResponse
	if err := protocol.DecodeResponse(f, protocol.DefaultLimits(), &pr); err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, m := range pr.Messages {
		out = append(out, string(m.Body))
	}
	return out, f.Status
}

func (h *harness) maxOffset(topic string, q int32) int64 {
	h.t.Helper()
	var or protocol.OffsetResponse
	h.ok(h.send(&protocol.GetMaxOffsetRequest{Topic: topic, QueueID: q})[0], &or)
	return or.Offset
}

// waitMax polls GET_MAX_OFFSET until it is want (bounds are published as
// queues dispatch).
func (h *harness) waitMax(topic string, q int32, want int64) {
	h.t.Helper()
	var got int64
	if !testwait.Until(h.loop, 3*time.Second, func() bool { got = h.maxOffset(topic, q); return got == want }) {
		h.t.Fatalf("max offset of %s-%d is %d, want %d", topic, q, got, want)
	}
}

// TestDeleteTopicForgetsMessages: after DELETE_TOPIC the topic's messages
// are gone for pulls, offset queries, queries by key and committed offsets;
// a long poll held on it is answered TOPIC_NOT_EXIST; the topic re-created
// by CREATE_TOPIC or by an auto-creating send starts at queue offset 0 and
// serves only new messages, also after a crash and recovery.
func TestDeleteTopicForgetsMessages(t *testing.T) {
	for _, recreate := range []string{"create", "send"} {
		t.Run(recreate, func(t *testing.T) {
			mem := vfs.NewMem()
			h := startBroker(t, mem, nil)
			create := &protocol.CreateTopicRequest{TopicConfig: protocol.TopicConfig{Topic: "t", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}}
			h.ok(h.send(create)[0], nil)
			for i := range 6 {
				h.ok(h.send(sendReq("t", int32(i%2), fmt.Sprintf("old%d", i), fmt.Sprintf("okey%d", i)))[0], nil)
			}
			h.waitMax("t", 0, 3)
			h.ok(h.send(&protocol.UpdateConsumerOffsetRequest{ConsumerGroup: "g", Topic: "t", QueueID: 0, CommitOffset: 2})[0], nil)
			held := h.send(&protocol.PullRequest{ConsumerGroup: "g", Topic: "t", QueueID: 1, QueueOffset: 3, MaxMsgNums: 8, SuspendTimeoutMillis: 10000})[0]
			h.loop.Advance(30 * time.Millisecond)
			if h.conn.has(held) {
				t.Fatal("a pull past the end of a queue was answered before its suspend time")
			}

			h.ok(h.send(&protocol.DeleteTopicRequest{Topic: "t"})[0], nil)
			if f := h.conn.await(t, held, 3*time.Second); f.Status != protocol.StatusTopicNotExist {
				t.Fatalf("a long poll held on the deleted topic: %v %q, want TOPIC_NOT_EXIST", f.Status, f.Remark)
			}
			if _, st := h.pullBodies("t", 0); st != protocol.StatusTopicNotExist {
				t.Fatalf("pull of the deleted topic: %v", st)
			}
			f := h.conn.await(t, h.send(&protocol.GetMaxOffsetRequest{Topic: "t", QueueID: 0})[0], 2*time.Second)
			if f.Status != protocol.StatusTopicNotExist {
				t.Fatalf("GET_MAX_OFFSET of the deleted topic: %v", f.Status)
			}
			f = h.conn.await(t, h.send(&protocol.QueryConsumerOffsetRequest{ConsumerGroup: "g", Topic: "t", QueueID: 0})[0], 2*time.Second)
			if f.Status != protocol.StatusQueryNotFound {
				t.Fatalf("committed offset of the deleted topic: %v %q", f.Status, f.Remark)
			}

			if recreate == "create" {
				h.ok(h.send(create)[0], nil)
				if m := h.maxOffset("t", 0); m != 0 {
					t.Fatalf("GET_MAX_OFFSET of the re-created topic: %d, want 0", m)
				}
			}
			var sr protocol.SendResponse
			h.ok(h.send(sendReq("t", 0, "new0", "nkey0"))[0], &sr)
			if sr.QueueOffset != 0 {
				t.Fatalf("first send to the re-created topic got queue offset %d, want 0", sr.QueueOffset)
			}
			h.waitMax("t", 0, 1)
			h.checkOnlyNew(t, "new0")

			// kill -9: the store is what the disk holds; recovery must not
			// bring the old messages back.
			if err := h.stop(); err != nil {
				t.Fatal(err)
			}
			img := mem.Crash(3, vfs.CrashOptions{UnsyncedKeepRatio: 0.5})
			st, _, err := storage.Open(img, testStoreConfig())
			if err != nil {
				t.Fatal(err)
			}
			if err := storage.Check(st); err != nil {
				t.Fatal(err)
			}
			st.Close()
			h2 := startBroker(t, img, nil)
			// The topic manager publishes the table it loads a moment after
			// the start.
			if !h2.loop.RunUntil(func() bool { return h2.b.v.topicsSnapshot()["t"].TopicName != "" }, 3*time.Second) {
				t.Fatal("the re-created topic is not in the table after the restart")
			}
			h2.checkOnlyNew(t, "new0")
			h2.ok(h2.send(sendReq("t", 0, "new1"))[0], &sr)
			if sr.QueueOffset != 1 {
				t.Fatalf("send after the restart got queue offset %d, want 1", sr.QueueOffset)
			}
		})
	}
}

// checkOnlyNew: queue 0 of t holds exactly want, queue 1 nothing, and the
// old keys find nothing.
func (h *harness) checkOnlyNew(t *testing.T, want ...string) {
	t.Helper()
	got, st := h.pullBodies("t", 0)
	if st != protocol.StatusOK || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("pull of the re-created topic from 0: %v %q, want %q", st, got, want)
	}
	if got, _ := h.pullBodies("t", 1); len(got) != 0 {
		t.Fatalf("queue 1 of the re-created topic holds %q", got)
	}
	op := h.send(&protocol.QueryMessageRequest{Topic: "t", Key: "okey0", MaxNum: 4})[0]
	if f := h.conn.await(t, op, 3*time.Second); f.Status == protocol.StatusOK {
		var qr protocol.QueryMessageResponse
		if err := protocol.DecodeResponse(f, protocol.DefaultLimits(), &qr); err == nil && len(qr.Messages) > 0 {
			t.Fatalf("query by an old key found %d messages", len(qr.Messages))
		}
	}
}
