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
// sends of 1 KiB in flight, a few, the bytes in flight bounding them). Only as many as were in
// flight at once are ever made: a synchronous producer keeps one.
const spareBursts = 16

// maxSpareBurst bounds a kept buffer: a rare huge burst is not held.
const maxSpareBurst = 1 << 20

// minBurstBuf is the smallest buffer made for a burst of sends; a buffer
// is made a power of two in size, so that bursts a little larger than the
// last still fit.
const minBurstBuf = 4 << 10

// burstBufs holds a connection's spare burst buffers. take runs on the
// event loop, put on whichever goroutine releases the burst.
type burstBufs struct {
	slots [spareBursts]atomic.Pointer[burstBox]
}

// burstBox is one spare: the buffer, the frames decoded from it (Wharf's
// wire decodes a burst into one slice of them) and the slice of their
// pointers, all given back together, and the release function that gives
// it back, made once per box rather than once per burst.
type burstBox struct {
	buf     []byte
	arena   []protocol.Frame
	frames  []*protocol.Frame
	used    int         // frames of the last burst: what put clears
	done    atomic.Bool // released since it was taken
	release func()
}

// copyBurst copies a burst's bytes into a buffer of its own. With bufs,
// the buffer is one of its spares (or a new one), box is that spare (its
// frame slices for the caller to reuse, see burstFrames), and release
// gives it back (call it at most once, when nothing aliases the bytes or
// the frames any more; not calling it is safe).
func copyBurst(b []byte, bufs *burstBufs) (data []byte, box *burstBox, release func()) {
	if bufs == nil {
		// append, not make+copy: the runtime then skips zeroing bytes
		// that are overwritten at once.
		return append([]byte(nil), b...), nil, nil
	}
	box = bufs.take(len(b))
	if box == nil {
		box = &burstBox{buf: make([]byte, 0, burstCap(len(b)))}
		box.release = func() {
			if !box.done.Swap(true) {
				bufs.put(box)
			}
		}
	}
	box.done.Store(false)
	box.buf = append(box.buf[:0], b...)
	return box.buf, box, box.release
}

// burstFrames returns the slices a burst of count frames decodes into:
// the box's if it has room (nil box: new ones), with arena (Wharf's
// frames, one allocation for the burst) only if want. The box keeps what
// was made.
func burstFrames(box *burstBox, count int, want bool) (frames []*protocol.Frame, arena []protocol.Frame) {
	if box == nil {
		frames = make([]*protocol.Frame, 0, count)
		if want {
			arena = make([]protocol.Frame, count)
		}
		return frames, arena
	}
	if cap(box.frames) < count {
		box.frames = make([]*protocol.Frame, 0, count)
	}
	box.used = count
	if want {
		if cap(box.arena) < count {
			box.arena = make([]protocol.Frame, count)
		}
		arena = box.arena[:count]
	}
	return box.frames[:0], arena
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

// take returns a spare whose buffer holds n bytes, or nil. A spare too
// small is dropped: the next one made is larger.
func (bb *burstBufs) take(n int) *burstBox {
	for i := range bb.slots {
		if p := bb.slots[i].Swap(nil); p != nil {
			if cap(p.buf) >= n {
				return p
			}
		}
	}
	return nil
}

// put keeps a released spare if a slot is free and it is not huge. The
// frames its last burst used are cleared (a spare must not keep strings of
// that burst's headers alive); past them it is zero already.
func (bb *burstBufs) put(p *burstBox) {
	if cap(p.buf) > maxSpareBurst {
		return
	}
	clear(p.arena[:min(p.used, len(p.arena))])
	clear(p.frames[:min(p.used, cap(p.frames))])
	p.used = 0
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
