package netio

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/protocol"
)

// DialOptions configure an outbound link.
type DialOptions struct {
	Limits           protocol.Limits
	Timeout          time.Duration // connect timeout; 0 means 5 s
	MaxOutboundBytes int           // unsent bytes before the link is dropped; 0 means 64 MiB
	Logger           *slog.Logger
	Codec            actors.Codec // nil means WharfCodec
}

// Dial opens an outbound link (a slave to its master) and returns it as an
// actors.Conn: every read burst of complete frames goes to h.Deliver, and
// h.Disconnected is called once when the link closes. Outbound links are
// few, so a plain net.Conn with one reader and one writer goroutine serves
// them; the gnet engines serve the many inbound connections.
func Dial(addr string, h actors.Handler, opt DialOptions) (actors.Conn, error) {
	if opt.Timeout <= 0 {
		opt.Timeout = 5 * time.Second
	}
	if opt.MaxOutboundBytes <= 0 {
		opt.MaxOutboundBytes = DefaultMaxOutboundBytes
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.Codec == nil {
		opt.Codec = WharfCodec{}
	}
	nc, err := net.DialTimeout("tcp", addr, opt.Timeout)
	if err != nil {
		return nil, fmt.Errorf("netio: dial %s: %w", addr, err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	c := &outConn{nc: nc, id: nextConnID.Add(1), remote: addr, h: h, opt: opt, wake: make(chan struct{}, 1)}
	go c.readLoop()
	go c.writeLoop()
	return c, nil
}

// outConn is an outbound link.
type outConn struct {
	nc     net.Conn
	id     uint64
	remote string
	h      actors.Handler
	opt    DialOptions

	mu      sync.Mutex
	queue   [][]byte
	pending int
	closed  bool
	wake    chan struct{}
	once    sync.Once
	gone    atomic.Bool
}

func (c *outConn) ID() uint64 { return c.id }

// Closed reports whether the link is closed (or closing). An owner that
// hears a link opened after it closed (its Disconnected came first) tells
// the dead link from a live one by this.
func (c *outConn) Closed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (c *outConn) RemoteAddr() string { return c.remote }

// Reply implements actors.Conn.
func (c *outConn) Reply(r actors.Response) { c.write(c.opt.Codec.AppendResponse(nil, &r)) }

// Send implements actors.Conn: a oneway request.
func (c *outConn) Send(req protocol.Request) {
	frame, err := c.opt.Codec.AppendRequest(nil, req)
	if err != nil {
		c.opt.Logger.Error("encode request", "component", "netio", "code", req.RequestCode(), "err", err)
		return
	}
	c.write(frame)
}

// write queues frame; a peer that stops reading makes the link close once
// more than MaxOutboundBytes wait.
func (c *outConn) write(frame []byte) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	if c.pending+len(frame) > c.opt.MaxOutboundBytes {
		c.mu.Unlock()
		c.Close(fmt.Sprintf("more than %d bytes unsent: the peer is not reading", c.opt.MaxOutboundBytes))
		return
	}
	c.queue = append(c.queue, frame)
	c.pending += len(frame)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Close closes the link; Disconnected follows from the reader.
func (c *outConn) Close(reason string) {
	c.once.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.queue = nil
		c.mu.Unlock()
		c.opt.Logger.Debug("outbound link closed", "component", "netio", "peer", c.remote, "reason", reason)
		c.nc.Close()
		select {
		case c.wake <- struct{}{}:
		default:
		}
	})
}

func (c *outConn) writeLoop() {
	for range c.wake {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return
		}
		q := c.queue
		c.queue = nil
		c.mu.Unlock()
		for _, f := range q {
			if _, err := c.nc.Write(f); err != nil {
				c.Close("write: " + err.Error())
				return
			}
			c.mu.Lock()
			c.pending -= len(f)
			c.mu.Unlock()
		}
	}
}

func (c *outConn) readLoop() {
	defer func() {
		c.Close("reader done")
		if c.gone.CompareAndSwap(false, true) {
			c.h.Disconnected(c)
		}
	}()
	buf := make([]byte, 0, 64<<10)
	tmp := make([]byte, 64<<10)
	for {
		n, err := c.nc.Read(tmp)
		buf = append(buf, tmp[:n]...)
		var frames []*protocol.Frame
		for {
			size, serr := protocol.Split(buf, c.opt.Limits)
			if serr != nil {
				c.Close("malformed frame from peer: " + serr.Error())
				return
			}
			if size == 0 {
				break
			}
			raw := make([]byte, size) // frames alias their bytes; buf is reused
			copy(raw, buf[:size])
			f, derr := protocol.DecodeFrame(raw, c.opt.Limits)
			if derr != nil {
				c.Close("malformed frame from peer: " + derr.Error())
				return
			}
			frames = append(frames, f)
			buf = buf[:copy(buf, buf[size:])]
		}
		if len(frames) > 0 {
			c.h.Deliver(&actors.Inbound{Conn: c, Frames: frames})
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				c.opt.Logger.Debug("outbound link read", "component", "netio", "peer", c.remote, "err", err)
			}
			return
		}
	}
}
