package netio

import (
	"sync/atomic"

	"github.com/wharfmq/wharf/protocol"
)

// A read burst's frames alias one copy of the bytes (gnet reuses its own
// buffer once OnTraffic returns). That copy was the broker's largest
// allocation on async publish: 41-54 % of its allocated bytes, one
// burst-sized buffer per read (docs/BENCHMARKS.md, issue 17). A burst of
// sends only lives until the writer has appended it, so its buffer is
// taken from its connection's spare buffers and goes back there through
// actors.Inbound.Release; any other burst (pulls, heartbeats: their frames
// may be held longer) gets a buffer of its own, left to the garbage
// collector.
//
// The spares are per connection, not a sync.Pool: a buffer goes back on
// the writer's goroutine and is taken on the event loop's, and a
// sync.Pool's per-P slot put on one P is not seen from the other (a
// synchronous producer would allocate a fresh buffer for every send).

// spareBursts is the most buffers a connection keeps: as many bursts as
// the loop reads while the writer still holds the ones before (with 256
// sends of 1 KiB in flight, about five of 64 KiB). Only as many as were in
// flight at once are ever made: a synchronous producer keeps one.
const spareBursts = 16

// maxSpareBurst bounds a kept buffer: a rare huge burst is not held.
const maxSpareBurst = 1 << 20

// minBurstBuf is the smallest buffer made for a burst of sends; a buffer
// is made a power of two in size, so that bursts a little larger than the
// last still fit (gnet reads 64 KiB at a time).
const minBurstBuf = 4 << 10

// burstBufs holds a connection's spare burst buffers. take runs on the
// event loop, put on whichever goroutine releases the burst.
type burstBufs struct {
	slots [spareBursts]atomic.Pointer[[]byte]
}

// copyBurst copies a burst's bytes into a buffer of its own. With bufs,
// the buffer is one of its spares (or a new one); release then gives it
// back (call it at most once, when nothing aliases it any more; not
// calling it is safe).
func copyBurst(b []byte, bufs *burstBufs) (data []byte, release func()) {
	if bufs == nil {
		// append, not make+copy: the runtime then skips zeroing bytes
		// that are overwritten at once.
		return append([]byte(nil), b...), nil
	}
	box := bufs.take(len(b))
	if box == nil {
		box = new([]byte)
		*box = make([]byte, 0, burstCap(len(b)))
	}
	data = append((*box)[:0], b...)
	*box = data
	var done atomic.Bool
	return data, func() {
		if !done.Swap(true) {
			bufs.put(box)
		}
	}
}

// burstCap is the size of a buffer made for n bytes: the power of two at
// or above n, at least minBurstBuf.
func burstCap(n int) int {
	c := minBurstBuf
	for c < n {
		c *= 2
	}
	return c
}

// take returns a spare buffer that holds n bytes, or nil. A spare too small
// is dropped: the next one made is larger.
func (bb *burstBufs) take(n int) *[]byte {
	for i := range bb.slots {
		if p := bb.slots[i].Swap(nil); p != nil {
			if cap(*p) >= n {
				return p
			}
		}
	}
	return nil
}

// put keeps a released buffer if a slot is free and it is not huge.
func (bb *burstBufs) put(p *[]byte) {
	if cap(*p) > maxSpareBurst {
		return
	}
	for i := range bb.slots {
		if bb.slots[i].CompareAndSwap(nil, p) {
			return
		}
	}
}

// sendsOnly reports whether every frame is a SEND or SEND_BATCH request:
// a burst the broker hands to its writer whole, and releases after the
// append. A connection's next burst is guessed to be like its last (a
// producer sends little else), and a wrong guess costs only a buffer the
// garbage collector takes instead of the spares.
func sendsOnly(frames []*protocol.Frame) bool {
	for _, f := range frames {
		if f.Code != protocol.CodeSendMessage && f.Code != protocol.CodeSendBatchMessage {
			return false
		}
	}
	return len(frames) > 0
}
