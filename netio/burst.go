package netio

import (
	"sync"
	"sync/atomic"

	"github.com/wharfmq/wharf/protocol"
)

// A read burst's frames alias one copy of the bytes (gnet reuses its own
// buffer once OnTraffic returns). That copy was the broker's largest
// allocation on async publish: 41-54 % of its allocated bytes, one
// burst-sized buffer per read (docs/BENCHMARKS.md, issue 17). A burst of
// sends only lives until the writer has appended it, so its buffer comes
// from burstPool and goes back through actors.Inbound.Release; any other
// burst (pulls, heartbeats: their frames may be held longer) gets a buffer
// of its own, left to the garbage collector.
var burstPool sync.Pool // of *[]byte, boxes from boxPool

const (
	// minBurstBuf is the smallest pooled buffer: gnet reads 64 KiB at a
	// time, so most bursts fit and the pool holds one size.
	minBurstBuf = 64 << 10
	// maxBurstBuf bounds what the pool keeps: a rare huge burst is not held.
	maxBurstBuf = 4 << 20
)

// copyBurst copies a burst's bytes into a buffer of its own. pooled asks
// for a buffer from burstPool; release then gives it back (call it at most
// once, when nothing aliases it any more; not calling it is safe).
func copyBurst(b []byte, pooled bool) (data []byte, release func()) {
	if !pooled {
		// append, not make+copy: the runtime then skips zeroing bytes
		// that are overwritten at once.
		return append([]byte(nil), b...), nil
	}
	var buf []byte
	if p, ok := burstPool.Get().(*[]byte); ok {
		buf, *p = *p, nil
		boxPool.Put(p)
	}
	if cap(buf) < len(b) {
		buf = make([]byte, 0, max(len(b), minBurstBuf)) // a smaller one is dropped
	}
	data = append(buf[:0], b...)
	var done atomic.Bool
	return data, func() {
		if done.Swap(true) || cap(data) > maxBurstBuf {
			return
		}
		p, ok := boxPool.Get().(*[]byte)
		if !ok {
			p = new([]byte)
		}
		*p = data[:0]
		burstPool.Put(p)
	}
}

// sendsOnly reports whether every frame is a SEND or SEND_BATCH request:
// a burst the broker hands to its writer whole, and releases after the
// append. A connection's next burst is guessed to be like its last (a
// producer sends little else), and a wrong guess costs only a buffer the
// garbage collector takes instead of the pool.
func sendsOnly(frames []*protocol.Frame) bool {
	for _, f := range frames {
		if f.Code != protocol.CodeSendMessage && f.Code != protocol.CodeSendBatchMessage {
			return false
		}
	}
	return len(frames) > 0
}
