package actors

import (
	"fmt"
	"testing"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage/vfs"
)

// sendReusable delivers reqs as one burst whose frames alias one buffer,
// as netio's do, with a Release that overwrites the buffer (the transport
// reusing it for the next burst) and counts its calls.
func (h *harness) sendReusable(released *int, reqs ...protocol.Request) []uint32 {
	h.t.Helper()
	var buf []byte
	var ops []uint32
	for _, r := range reqs {
		h.next++
		var err error
		if buf, err = protocol.AppendRequest(buf, h.next, 0, r); err != nil {
			h.t.Fatal(err)
		}
		ops = append(ops, h.next)
	}
	in := &Inbound{Conn: h.conn, Release: func() {
		*released++
		for i := range buf {
			buf[i] = 0xee
		}
	}}
	for off := 0; off < len(buf); {
		n, err := protocol.Split(buf[off:], protocol.DefaultLimits())
		if err != nil || n == 0 {
			h.t.Fatalf("split: %d %v", n, err)
		}
		f, err := protocol.DecodeFrame(buf[off:off+n], protocol.DefaultLimits())
		if err != nil {
			h.t.Fatal(err)
		}
		in.Frames = append(in.Frames, f)
		off += n
	}
	h.b.Deliver(in)
	return ops
}

// A burst of sends only is released once the writer appended it, and what
// it stored and answered does not depend on the bytes after that; a burst
// with anything else in it is never released (its frames may be held).
func TestBurstReleasedAfterTheAppend(t *testing.T) {
	for _, mode := range []FlushDiskType{AsyncFlush, SyncFlush} {
		t.Run(string(mode), func(t *testing.T) {
			h := startBroker(t, vfs.NewMem(), func(c *Config) { c.FlushDiskType = mode })
			released := 0
			var reqs []protocol.Request
			for i := range 6 {
				reqs = append(reqs, sendReq("orders", 0, fmt.Sprintf("m%d", i), fmt.Sprintf("key%d", i)))
			}
			reqs = append(reqs, &protocol.SendBatchRequest{Topic: "orders", QueueID: 0,
				Messages: []protocol.Message{{Body: []byte("b0")}, {Body: []byte("b1")}}})
			for i, op := range h.sendReusable(&released, reqs...) {
				if i == len(reqs)-1 {
					var r protocol.SendBatchResponse
					h.ok(op, &r)
					continue
				}
				var r protocol.SendResponse
				if h.ok(op, &r); r.QueueOffset != int64(i) || len(r.MsgID) != 32 {
					t.Fatalf("send %d: %+v", i, r)
				}
			}
			if released != 1 {
				t.Fatalf("a burst of sends released %d times, want once", released)
			}
			mixed := 0
			ops := h.sendReusable(&mixed, sendReq("orders", 1, "x"),
				&protocol.PullRequest{ConsumerGroup: "g", Topic: "orders", QueueID: 0, MaxMsgNums: 32, SuspendTimeoutMillis: 1000})
			h.ok(ops[0], nil)
			var pr protocol.PullResponse
			h.ok(ops[1], &pr)
			if mixed != 0 {
				t.Fatalf("a burst with a pull released %d times", mixed)
			}
			var bodies []string
			for _, m := range pr.Messages {
				bodies = append(bodies, string(m.Body))
			}
			if want := "[m0 m1 m2 m3 m4 m5 b0 b1]"; fmt.Sprint(bodies) != want {
				t.Fatalf("stored %v, want %s", bodies, want)
			}
		})
	}
}
