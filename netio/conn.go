package netio

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

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
	parked   atomic.Int64 // of those, long polls the broker parked (Parked)

	fd int // the socket, for direct writes (closed by gnet after OnClose)

	outMu       sync.Mutex
	out         [][]byte // frames waiting for the loop's next flush
	spare       [][]byte // the previous batch's slice, reused
	sent        [][]byte // loop only: a flush's frames as queued, for the pool (Writev cuts the ones it writes in part)
	flushQueued bool     // a flush is queued on the loop
	// viaLoop: gnet may hold unsent bytes of ours (or a reject is queued),
	// so a frame must follow them through the loop; cleared by a flush
	// that leaves gnet's outbound buffer empty with nothing queued after
	// it. fdGone: OnClose ran, the loop is about to close fd (and its
	// number may be reused): no direct write may start.
	viaLoop, fdGone bool
	corks           int          // Cork calls not yet matched by Uncork: frames wait in out
	closed          atomic.Bool  // Write is a no-op once set
	disconnected    atomic.Bool  // Disconnected delivered
	lastActive      atomic.Int64 // unix nanos of the last read or completed write

	// loop only
	leftover int  // bytes left in gnet's inbound buffer after the last OnTraffic
	need     int  // size of the partial frame at the head of the buffer, if known
	bad      bool // a malformed frame was seen; the close is under way
	sends    bool // the last burst was sends only: the next one's bytes come from bursts

	bursts burstBufs // spare buffers of bursts of sends (see copyBurst)
}

var _ actors.Conn = (*conn)(nil)

func newConn(s *Server, gc gnet.Conn) *conn {
	c := &conn{s: s, gc: gc, id: nextConnID.Add(1), fd: gc.Fd()}
	if a := gc.RemoteAddr(); a != nil {
		c.remote = a.String()
	}
	c.touch()
	return c
}

// Parked counts requests the broker parked as long polls (see Write).
func (c *conn) Parked(delta int) { c.parked.Add(int64(delta)) }

// waiting reports whether the peer waits for an answer: a request
// delivered and not answered yet, parked as a long poll or not.
func (c *conn) waiting() bool { return c.inflight.Load() > 0 || c.parked.Load() > 0 }

func (c *conn) ID() uint64         { return c.id }
func (c *conn) RemoteAddr() string { return c.remote }

func (c *conn) touch() { c.lastActive.Store(time.Now().UnixNano()) }

// Reply implements actors.Conn: the server's codec encodes r on the
// calling goroutine (the answering actor's), then write sends it.
func (c *conn) Reply(r actors.Response) {
	if wc, ok := c.s.opt.Codec.(WharfCodec); ok {
		// A concrete call: r stays on the stack (through the interface it
		// escapes: one allocation per answer).
		c.write(wc.AppendResponse(getFrame(), &r))
		return
	}
	c.replyVia(r)
}

// replyVia encodes r with a codec other than WharfCodec (RocketMQ's remoting).
func (c *conn) replyVia(r actors.Response) {
	c.write(c.s.opt.Codec.AppendResponse(getFrame(), &r))
}

// framePool holds answer buffers written out: a pull answer's buffer was
// a third of the broker's allocated bytes in e2e-10k, and the GC it caused
// paused the broker every 300 ms (docs/BENCHMARKS.md, issue 17). Only
// write puts buffers back: ones the kernel took whole from a direct write,
// and every frame of a loop flush once gnet's Writev returned (it copies
// what the kernel did not take into its own outbound buffer), so nothing
// else holds them then.
var framePool sync.Pool // of *[]byte

// boxPool holds the emptied *[]byte boxes of framePool: putFrame reuses
// one, so that putting a buffer back allocates nothing (a new box per Put
// was one allocation per answer).
var boxPool sync.Pool // of *[]byte, nil inside

// maxPooledFrame bounds what the pool keeps: a rare huge answer is not held.
const maxPooledFrame = 256 << 10

func getFrame() []byte {
	p, ok := framePool.Get().(*[]byte)
	if !ok {
		return nil
	}
	b := (*p)[:0]
	*p = nil
	boxPool.Put(p)
	return b
}

func putFrame(b []byte) {
	if cap(b) == 0 || cap(b) > maxPooledFrame {
		return
	}
	p, ok := boxPool.Get().(*[]byte)
	if !ok {
		p = new([]byte)
	}
	*p = b[:0]
	framePool.Put(p)
}

// Send implements actors.Conn: a oneway request to the peer.
func (c *conn) Send(req protocol.Request) {
	frame, err := c.s.opt.Codec.AppendRequest(nil, req)
	if err != nil {
		c.s.log.Error("encode request", "component", "netio", "code", req.RequestCode(), "err", err)
		return
	}
	c.inflight.Add(1) // not an answer: write counts one down
	c.write(frame)
}

// write sends frame without blocking. The last answer the peer waits for,
// when nothing of this connection is queued, is written at once from the
// calling goroutine (the socket is non-blocking; what the kernel does not
// take follows through the loop). Every other frame is queued with gnet's
// AsyncWrite, and the frames queued during one loop turn go out in one
// writev.
//
// The outbound limit is enforced in two places. Here, against the bytes
// queued for the loop and not yet written (a burst far beyond the limit is
// shed at once, without waiting for the loop). And in the AsyncWrite
// callback, on the loop, against gnet's outbound buffer (what the kernel
// refused: the peer is not reading) plus what is still queued: the only
// place gnet lets us read OutboundBuffered. Either way the connection is
// closed and the frame dropped, so at most about twice the limit is ever
// held for one peer.
func (c *conn) write(frame []byte) {
	left := c.inflight.Add(-1)
	if left < 0 { // a frame the broker sent on its own (NOTIFY)
		left = c.inflight.Add(1)
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
	if c.corks > 0 && !c.flushQueued {
		c.out = append(c.out, frame) // Uncork writes it, with the others
		c.outMu.Unlock()
		return
	}
	if left-c.parked.Load() <= 0 && !c.flushQueued && !c.viaLoop && !c.fdGone {
		// The last answer the peer waits for (but for parked long polls,
		// whose answers come when they come), and nothing of ours is
		// queued: write it from this goroutine. A sync client's answer,
		// or a long poll's, then costs one write instead of waking the
		// loop to write it. A batch of answers still goes through the
		// loop, in one writev.
		done, ok := c.writeDirect(frame)
		if done == len(frame) {
			c.outMu.Unlock()
			putFrame(frame)
			if ok {
				c.s.stats.directWrites.Add(1)
			}
			return
		}
		frame = frame[done:]
	}
	c.out = append(c.out, frame)
	if c.flushQueued {
		c.outMu.Unlock()
		return
	}
	c.queueFlush(limit)
}

// queueFlush hands c.out to the loop: its next turn writes it (flushOut).
// Called with outMu held and no flush queued; it unlocks outMu.
func (c *conn) queueFlush(limit int64) {
	c.flushQueued = true
	c.viaLoop = true
	c.outMu.Unlock()
	err := c.gc.AsyncWritev(nil, func(gc gnet.Conn, err error) error { return c.flushOut(gc, err, limit) })
	if err != nil { // the engine is shutting down
		c.outMu.Lock()
		var n int64
		for _, b := range c.out {
			n += int64(len(b))
		}
		c.s.stats.droppedWrites.Add(uint64(len(c.out)))
		c.pending.Add(-n)
		c.flushQueued = false
		clear(c.out)
		c.out = c.out[:0]
		c.outMu.Unlock()
	}
}

// Cork holds the frames written to c from now on until the matching
// Uncork, which writes them together. The writer corks the connections of
// a batch of sends while it answers them: the batch's answers then leave
// in one writev from the writer's goroutine, instead of waking the loop to
// write them (an eventfd write and the loop's wake-up per batch, and the
// answers waiting for the loop's thread to be scheduled).
func (c *conn) Cork() {
	c.outMu.Lock()
	c.corks++
	c.outMu.Unlock()
}

// Uncork ends a Cork. The last one writes the frames held: directly, when
// nothing of ours waits in gnet or the loop, as far as the kernel takes
// them; what it does not take (or everything, otherwise) goes through the
// loop, in order.
func (c *conn) Uncork() {
	c.outMu.Lock()
	c.corks--
	if c.corks < 0 { // a bug of the caller's: unlock first, or the connection hangs
		c.corks = 0
		c.outMu.Unlock()
		panic("netio: Uncork without a Cork")
	}
	if c.corks > 0 || len(c.out) == 0 || c.flushQueued {
		c.outMu.Unlock() // a queued flush takes c.out with it
		return
	}
	if !c.viaLoop && !c.fdGone && c.writevDirect() {
		c.outMu.Unlock()
		return
	}
	c.queueFlush(int64(c.s.opt.MaxOutboundBytes))
}

// writevDirect writes c.out to the socket from the calling goroutine, with
// outMu held (as writeDirect), and reports whether all of it is done with:
// written whole, or dropped on a broken connection. What the kernel did not
// take stays in c.out, its first frame cut to the unwritten part.
func (c *conn) writevDirect() bool {
	var written int64
	for len(c.out) > 0 {
		k := min(len(c.out), maxIOV)
		n, err := unix.Writev(c.fd, c.out[:k])
		if err == unix.EINTR {
			continue
		}
		if n > 0 {
			written += int64(n)
			c.cutWritten(n)
		}
		if err == unix.EAGAIN || (err == nil && n <= 0) {
			break
		}
		if err != nil { // broken: gnet's read side reports the close
			var rest int64
			for _, b := range c.out {
				rest += int64(len(b))
				putFrame(b)
			}
			c.pending.Add(-rest)
			c.s.stats.droppedWrites.Add(uint64(len(c.out)))
			clear(c.out)
			c.out = c.out[:0]
			break
		}
	}
	c.pending.Add(-written)
	if written > 0 {
		c.s.stats.bytesOut.Add(uint64(written))
		c.s.stats.directWrites.Add(1)
		c.touch()
	}
	return len(c.out) == 0
}

// cutWritten drops the first n bytes of c.out: frames written whole go
// back to the pool, a frame written in part keeps its unwritten tail.
func (c *conn) cutWritten(n int) {
	i := 0
	for ; i < len(c.out) && n >= len(c.out[i]); i++ {
		n -= len(c.out[i])
		putFrame(c.out[i])
	}
	rest := copy(c.out, c.out[i:])
	clear(c.out[rest:])
	c.out = c.out[:rest]
	if n > 0 {
		c.out[0] = c.out[0][n:]
	}
}

// flushOut runs on the loop for a queued flush: it writes every frame
// queued since (in writevs of at most IOV_MAX buffers), gives the frames
// back, and closes a connection whose peer lets more than limit pile up.
func (c *conn) flushOut(gc gnet.Conn, err error, limit int64) error {
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
	c.sent = append(c.sent[:0], bufs...)
	// writev takes at most IOV_MAX (1024) buffers: more fail with EINVAL.
	for rest := bufs; err == nil && len(rest) > 0; { // even if closing: a reject's answer comes after these
		k := min(len(rest), maxIOV)
		_, err = gc.Writev(rest[:k])
		rest = rest[k:]
	}
	for _, b := range c.sent {
		putFrame(b) // written or copied by gnet, or dropped: ours again
	}
	clear(c.sent)
	clear(bufs)
	c.spare = bufs[:0]
	if err != nil { // closed meanwhile
		c.s.stats.droppedWrites.Add(uint64(len(bufs)))
		return nil
	}
	c.s.stats.bytesOut.Add(uint64(n))
	c.touch()
	// Direct writes resume once a flush leaves gnet holding nothing of
	// ours. (When gnet drains a backlog on its own, on a writable
	// event, no callback runs: the next answer goes through the loop
	// and its flush clears viaLoop.)
	buffered := gc.OutboundBuffered()
	c.outMu.Lock()
	if buffered == 0 && !c.flushQueued {
		c.viaLoop = false
	}
	c.outMu.Unlock()
	if int64(buffered)+c.pending.Load() > limit {
		c.shed()
	}
	return nil
}

// writeDirect writes frame to the socket from the calling goroutine, with
// outMu held (OnClose takes it before gnet closes the socket, so the fd
// cannot be closed or reused meanwhile). It returns how many bytes of frame
// are done with; fewer than len(frame) means the kernel's buffer is full
// and the rest must go through the loop (gnet waits for the socket to
// become writable). A write error means the connection is broken: the
// frame is dropped (all of it counts as done, ok is false) and gnet's read
// side reports the close.
func (c *conn) writeDirect(frame []byte) (done int, ok bool) {
	for done < len(frame) {
		n, err := unix.Write(c.fd, frame[done:])
		if n > 0 {
			done += n
		}
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN || (err == nil && n <= 0) {
			break
		}
		if err != nil {
			c.pending.Add(-int64(len(frame)))
			c.s.stats.droppedWrites.Add(1)
			return len(frame), false
		}
	}
	c.pending.Add(-int64(done))
	if done > 0 {
		c.s.stats.bytesOut.Add(uint64(done))
		c.touch()
	}
	return done, true
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
	resp := c.s.fr.errorFrame(code, opaque, truncate(cause.Error(), 256))
	if !c.closed.CompareAndSwap(false, true) {
		return // already closing
	}
	c.outMu.Lock()
	c.viaLoop = true // the answer follows what is queued; nothing may overtake it
	c.outMu.Unlock()
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
