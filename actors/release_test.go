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

// TestRecycledBurstKeepsWaitingReplies: a burst of sends goes back to the
// broker's pool once the writer appended it, while under SYNC_FLUSH its
// replies still wait for the fsync. The next burst reuses it; the replies
// that waited must still answer their own requests, once each (a reply
// that kept a pointer into the recycled burst answered the next burst's
// requests instead, and its own never).
func TestRecycledBurstKeepsWaitingReplies(t *testing.T) {
	var stalled bool
	var held []func()
	var h *harness
	runIO := func(fn func()) {
		if stalled {
			held = append(held, fn)
			return
		}
		h.loop.RunIO(fn)
	}
	h = startBrokerEnv(t, vfs.NewMem(), func(c *Config) { c.FlushDiskType = SyncFlush }, Env{RunIO: runIO})
	h.ok(h.send(sendReq("t", 0, "warm"))[0], nil)
	settle := func() { h.loop.Run(h.loop.Now(), nil) }
	settle()
	stalled = true
	var released int
	var ops []uint32
	for burst := range 3 {
		var reqs []protocol.Request
		for i := range 4 {
			reqs = append(reqs, sendReq("t", 0, fmt.Sprintf("b%d-%d", burst, i)))
		}
		ops = append(ops, h.sendReusable(&released, reqs...)...)
		settle() // appended, recycled; the replies wait for the held fsync
	}
	if released != 3 {
		t.Fatalf("%d bursts released, want 3", released)
	}
	if n := h.answered(); n != 1 {
		t.Fatalf("%d answers before the fsync, want only the warm-up's", n)
	}
	stalled = false
	for len(held) > 0 {
		jobs := held
		held = nil
		for _, fn := range jobs {
			fn()
		}
		settle()
	}
	for i, op := range ops {
		var r protocol.SendResponse
		if h.ok(op, &r); r.QueueOffset != int64(i+1) {
			t.Fatalf("send %d (opaque %d): queue offset %d, want %d", i, op, r.QueueOffset, i+1)
		}
	}
	count := map[uint32]int{}
	h.conn.mu.Lock()
	for _, op := range h.conn.order {
		count[op]++
	}
	h.conn.mu.Unlock()
	for _, op := range ops {
		if count[op] != 1 {
			t.Fatalf("request %d answered %d times, want once", op, count[op])
		}
	}
}
