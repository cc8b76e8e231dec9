package netio

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/protocol"
)

var nextConnID atomic.Uint64

// conn is the actors.Conn of one gnet connection. Write and Close are safe
// from any goroutine; the fields marked "loop only" are touched only by the
// connection's event loop (its callbacks are serialized).
type conn struct {
	s      *Server
	gc     gnet.Conn
	id     uint64
	remote string

	// pending counts bytes passed to AsyncWrite whose callback has not run
	// yet: frames queued for the loop, not yet in gnet's outbound buffer.
	pending  atomic.Int64
	inflight atomic.Int64 // requests delivered and not yet answered

	outMu        sync.Mutex
	out          [][]byte     // frames waiting for the loop's next flush
	spare        [][]byte     // the previous batch's slice, reused
	flushQueued  bool         // a flush is queued on the loop
	closed       atomic.Bool  // Write is a no-op once set
	disconnected atomic.Bool  // Disconnected delivered
	lastActive   atomic.Int64 // unix nanos of the last read or completed write

	// loop only
	leftover int  // bytes left in gnet's inbound buffer after the last OnTraffic
	need     int  // size of the partial frame at the head of the buffer, if known
	bad      bool // a malformed frame was seen; the close is under way
}

var _ actors.Conn = (*conn)(nil)

func newConn(s *Server, gc gnet.Conn) *conn {
	c := &conn{s: s, gc: gc, id: nextConnID.Add(1)}
	if a := gc.RemoteAddr(); a != nil {
		c.remote = a.String()
	}
	c.touch()
	return c
}

func (c *conn) ID() uint64         { return c.id }
func (c *conn) RemoteAddr() string { return c.remote }

func (c *conn) touch() { c.lastActive.Store(time.Now().UnixNano()) }

// Write queues frame with gnet's AsyncWrite and returns at once.
//
// The outbound limit is enforced in two places. Here, against the bytes
// queued for the loop and not yet written (a burst far beyond the limit is
// shed at once, without waiting for the loop). And in the AsyncWrite
// callback, on the loop, against gnet's outbound buffer (what the kernel
// refused: the peer is not reading) plus what is still queued: the only
// place gnet lets us read OutboundBuffered. Either way the connection is
// closed and the frame dropped, so at most about twice the limit is ever
// held for one peer.
func (c *conn) Write(frame []byte) {
	if c.inflight.Add(-1) < 0 { // a frame the broker sent on its own (NOTIFY)
		c.inflight.Add(1)
	}
	if c.closed.Load() {
		c.s.stats.droppedWrites.Add(1)
		return
	}
	n := int64(len(frame))
	limit := int64(c.s.opt.MaxOutboundBytes)
	if c.pending.Add(n) > limit {
		c.pending.Add(-n)
		c.s.stats.droppedWrites.Add(1)
		c.shed()
		return
	}
	// Gather the frames written while one flush is pending, and hand them
	// to the loop together: one writev per loop turn instead of one write
	// per response (syscalls were a third of the broker's CPU).
	c.outMu.Lock()
	c.out = append(c.out, frame)
	if c.flushQueued {
		c.outMu.Unlock()
		return
	}
	c.flushQueued = true
	c.outMu.Unlock()
	err := c.gc.AsyncWritev(nil, func(gc gnet.Conn, err error) error {
		c.outMu.Lock()
		bufs := c.out
		c.out = c.spare[:0]
		c.flushQueued = false
		c.outMu.Unlock()
		var n int64
		for _, b := range bufs {
			n += int64(len(b))
		}
		c.pending.Add(-n)
		// writev takes at most IOV_MAX (1024) buffers: more fail with EINVAL.
		for rest := bufs; err == nil && len(rest) > 0; { // even if closing: a reject's answer comes after these
			k := min(len(rest), maxIOV)
			_, err = gc.Writev(rest[:k])
			rest = rest[k:]
		}
		clear(bufs)
		c.spare = bufs[:0]
		if err != nil { // closed meanwhile
			c.s.stats.droppedWrites.Add(uint64(len(bufs)))
			return nil
		}
		c.s.stats.bytesOut.Add(uint64(n))
		c.touch()
		if int64(gc.OutboundBuffered())+c.pending.Load() > limit {
			c.shed()
		}
		return nil
	})
	if err != nil { // the engine is shutting down
		c.outMu.Lock()
		c.pending.Add(-n)
		c.flushQueued = false
		c.out = c.out[:0]
		c.outMu.Unlock()
		c.s.stats.droppedWrites.Add(1)
	}
}

// maxIOV bounds the buffers of one writev (the kernel's IOV_MAX is 1024).
const maxIOV = 512

// shed closes a connection whose peer does not read its responses.
func (c *conn) shed() {
	limit := c.s.opt.MaxOutboundBytes
	if c.closeOnce(&c.s.stats.closedSlow, fmt.Sprintf("outbound limit of %d bytes exceeded: peer is not reading", limit)) {
		c.s.log.Warn("slow reader disconnected", "conn", c.id, "remote", c.remote, "limit", limit)
	}
}

// Close closes the connection; pending writes already queued are attempted
// first by gnet, later Writes are dropped.
func (c *conn) Close(reason string) { c.closeOnce(nil, reason) }

// Closed reports whether the connection is closed, so the broker can skip
// work whose answer nobody would read.
func (c *conn) Closed() bool { return c.closed.Load() }

// closeOnce closes the connection if nobody did yet and reports whether this
// call did. counter, if not nil, counts the close (before it happens, so
// that a peer seeing EOF sees the count too).
func (c *conn) closeOnce(counter *atomic.Uint64, reason string) bool {
	if !c.closed.CompareAndSwap(false, true) {
		return false
	}
	if counter != nil {
		counter.Add(1)
	}
	c.s.log.Debug("closing connection", "conn", c.id, "remote", c.remote, "reason", reason)
	_ = c.gc.Close() // safe from any goroutine; a no-op if already closed
	return true
}

// reject answers a malformed frame with FRAME_ILLEGAL and closes the
// connection once that response has been handed to the kernel. Responses
// the handler queued before (for the good frames of the same burst) go out
// first: AsyncWrite keeps their order. Runs on the loop.
func (c *conn) reject(cause error, hdr *protocol.Frame) {
	c.bad = true
	c.s.stats.malformed.Add(1)
	var code protocol.Code
	var opaque uint32
	if hdr != nil {
		code, opaque = hdr.Code, hdr.Opaque
	}
	c.s.log.Warn("malformed frame, closing connection", "conn", c.id, "remote", c.remote, "err", cause)
	resp := protocol.AppendErrorResponse(nil, code, opaque, protocol.StatusFrameIllegal, truncate(cause.Error(), 256))
	if !c.closed.CompareAndSwap(false, true) {
		return // already closing
	}
	err := c.gc.AsyncWrite(resp, func(gc gnet.Conn, err error) error {
		if err == nil {
			c.s.stats.bytesOut.Add(uint64(len(resp)))
		}
		_ = gc.Close() // gnet flushes the outbound buffer before closing
		return nil
	})
	if err != nil {
		_ = c.gc.Close()
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "")
}
