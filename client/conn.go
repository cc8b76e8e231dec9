package client

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// conn is a logical connection to one broker: requests are multiplexed over
// one TCP connection by opaque id, with one writer and one reader goroutine.
// When the TCP connection breaks, every pending call fails at once; the next
// call dials again (after a backoff if the last dial failed).
type conn struct {
	addr  string
	o     *options
	hello func() protocol.Request // heartbeat sent on connect and periodically; may be nil
	// onRequest, if set (before the first connect), gets the frames the
	// broker sends on its own (requests, not responses), from the reader
	// goroutine: it must not block. Without it they are ignored.
	onRequest func(f *protocol.Frame)

	opaque atomic.Uint32

	mu       sync.Mutex
	s        *session      // the current session; nil or done when disconnected
	closed   bool          // Close was called
	dialing  chan struct{} // non-nil while a dial is in progress, closed when it ends
	nextDial time.Time     // no dial before this (backoff after a failure)
	backoff  time.Duration
	lastErr  error
	wg       sync.WaitGroup // session goroutines
}

// session is one TCP connection and its two goroutines.
type session struct {
	c    *conn
	nc   net.Conn
	out  chan []byte // encoded frames for the writer
	done chan struct{}
	once sync.Once
	err  error // why the session ended; set before done is closed

	mu      sync.Mutex
	pending map[uint32]chan *protocol.Frame
}

func newConn(addr string, o *options, hello func() protocol.Request) *conn {
	return &conn{addr: addr, o: o, hello: hello}
}

// connect makes sure a session is up (dials now), for constructors that
// want to fail early.
func (c *conn) connect(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.o.dialTimeout)
	defer cancel()
	_, err := c.session(ctx)
	return err
}

// session returns the live session, dialing if there is none.
func (c *conn) session(ctx context.Context) (*session, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		if s := c.s; s != nil && !s.isDone() {
			c.mu.Unlock()
			return s, nil
		}
		if ch := c.dialing; ch != nil { // someone else is dialing: wait for it
			c.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if wait := time.Until(c.nextDial); wait > 0 {
			err := fmt.Errorf("%w: %s: %v (next connect attempt in %v)", ErrBrokerUnavailable, c.addr, c.lastErr, wait.Round(time.Millisecond))
			c.mu.Unlock()
			return nil, err
		}
		ch := make(chan struct{})
		c.dialing = ch
		c.mu.Unlock()

		dctx, cancel := context.WithTimeout(ctx, c.o.dialTimeout)
		var d net.Dialer
		nc, err := d.DialContext(dctx, "tcp", c.addr)
		cancel()

		c.mu.Lock()
		c.dialing = nil
		close(ch)
		if err != nil {
			if ctx.Err() != nil { // the caller gave up: not the broker's fault
				c.mu.Unlock()
				return nil, ctx.Err()
			}
			c.backoff = min(max(c.backoff*2, c.o.reconnectMin), c.o.reconnectMax)
			c.nextDial = time.Now().Add(c.backoff)
			c.lastErr = err
			c.mu.Unlock()
			c.o.logger.Debug("wharf client: connect failed", "addr", c.addr, "err", err, "backoff", c.backoff)
			return nil, fmt.Errorf("%w: %w", ErrBrokerUnavailable, err)
		}
		if c.closed {
			c.mu.Unlock()
			nc.Close()
			return nil, ErrClosed
		}
		c.backoff, c.lastErr = 0, nil
		s := &session{
			c:       c,
			nc:      nc,
			out:     make(chan []byte, 256),
			done:    make(chan struct{}),
			pending: make(map[uint32]chan *protocol.Frame),
		}
		c.s = s
		c.wg.Add(2)
		go s.writeLoop()
		go s.readLoop()
		c.mu.Unlock()
		c.o.logger.Debug("wharf client: connected", "addr", c.addr, "local", nc.LocalAddr().String())
		return s, nil
	}
}

// close fails every pending call with ErrClosed and waits for the session
// goroutines to end.
func (c *conn) close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.wg.Wait()
		return
	}
	c.closed = true
	s := c.s
	c.mu.Unlock()
	if s != nil {
		s.fail(ErrClosed)
	}
	c.wg.Wait()
}

func (c *conn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// encode builds a request frame and checks it against the limits.
func (c *conn) encode(opaque uint32, flags protocol.Flags, req protocol.Request) ([]byte, error) {
	b, err := protocol.AppendRequest(nil, opaque, flags, req)
	if err != nil {
		return nil, fmt.Errorf("wharf client: %v: %w", req.RequestCode(), err)
	}
	if n, err := protocol.Split(b, c.o.limits); err != nil || n != len(b) {
		if err == nil {
			err = errors.New("incomplete frame")
		}
		return nil, fmt.Errorf("wharf client: %v request: %w", req.RequestCode(), err)
	}
	return b, nil
}

// call sends req and waits for its response. timeout > 0 bounds the wait
// (ctx can shorten it). A response of any status is returned as a frame;
// the error is for everything else: ErrClosed, ErrTimeout (wrapping
// context.DeadlineExceeded), context.Canceled, ErrBrokerUnavailable.
func (c *conn) call(ctx context.Context, req protocol.Request, timeout time.Duration) (*protocol.Frame, error) {
	code := req.RequestCode()
	start := time.Now()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	s, err := c.session(ctx)
	if err != nil {
		return nil, c.wrapErr(code, start, err)
	}
	opaque := c.opaque.Add(1)
	b, err := c.encode(opaque, 0, req)
	if err != nil {
		return nil, err
	}
	ch := make(chan *protocol.Frame, 1)
	if !s.register(opaque, ch) {
		return nil, c.wrapErr(code, start, s.err)
	}
	defer s.unregister(opaque)
	select {
	case s.out <- b:
	case <-ctx.Done():
		return nil, c.wrapErr(code, start, ctx.Err())
	case <-s.done:
		return nil, c.wrapErr(code, start, s.err)
	}
	select {
	case f := <-ch:
		return f, nil
	case <-ctx.Done():
		return nil, c.wrapErr(code, start, ctx.Err())
	case <-s.done:
		select { // the response may have come just before the end
		case f := <-ch:
			return f, nil
		default:
		}
		return nil, c.wrapErr(code, start, s.err)
	}
}

// oneway sends req with the ONEWAY flag: no response is awaited. It returns
// once the frame is queued for writing.
func (c *conn) oneway(ctx context.Context, req protocol.Request) error {
	code := req.RequestCode()
	start := time.Now()
	s, err := c.session(ctx)
	if err != nil {
		return c.wrapErr(code, start, err)
	}
	b, err := c.encode(c.opaque.Add(1), protocol.FlagOneway, req)
	if err != nil {
		return err
	}
	select {
	case s.out <- b:
		return nil
	case <-ctx.Done():
		return c.wrapErr(code, start, ctx.Err())
	case <-s.done:
		return c.wrapErr(code, start, s.err)
	}
}

func (c *conn) wrapErr(code protocol.Code, start time.Time, err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %v to %s after %v: %w", ErrTimeout, code, c.addr, time.Since(start).Round(time.Millisecond), context.DeadlineExceeded)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("wharf client: %v to %s: %w", code, c.addr, err)
	case errors.Is(err, ErrClosed):
		return ErrClosed
	default:
		return fmt.Errorf("%v to %s: %w", code, c.addr, err)
	}
}

func (s *session) isDone() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// fail ends the session (once): every pending and future call on it gets
// err (wrapped as ErrBrokerUnavailable unless it is ErrClosed).
func (s *session) fail(err error) {
	s.once.Do(func() {
		if !errors.Is(err, ErrClosed) {
			err = fmt.Errorf("%w: connection to %s lost: %v", ErrBrokerUnavailable, s.c.addr, err)
			s.c.o.logger.Debug("wharf client: connection lost", "addr", s.c.addr, "err", err)
		}
		s.err = err
		close(s.done)
		s.nc.Close()
	})
}

func (s *session) register(opaque uint32, ch chan *protocol.Frame) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isDone() {
		return false
	}
	s.pending[opaque] = ch
	return true
}

func (s *session) unregister(opaque uint32) {
	s.mu.Lock()
	delete(s.pending, opaque)
	s.mu.Unlock()
}

func (s *session) writeLoop() {
	defer s.c.wg.Done()
	bw := bufio.NewWriterSize(s.nc, 64<<10)
	write := func(b []byte) bool {
		if _, err := bw.Write(b); err != nil {
			s.fail(err)
			return false
		}
		return true
	}
	heartbeat := func() bool {
		if s.c.hello == nil {
			return true
		}
		b, err := s.c.encode(s.c.opaque.Add(1), protocol.FlagOneway, s.c.hello())
		if err != nil {
			s.c.o.logger.Warn("wharf client: heartbeat", "err", err)
			return true
		}
		return write(b)
	}
	flush := func() bool {
		if err := bw.Flush(); err != nil {
			s.fail(err)
			return false
		}
		return true
	}
	if !heartbeat() || !flush() {
		return
	}
	var tick <-chan time.Time
	if s.c.hello != nil && s.c.o.heartbeat > 0 {
		t := time.NewTicker(s.c.o.heartbeat)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case b := <-s.out:
			if !write(b) {
				return
			}
			// Coalesce whatever else is queued into the same flush.
			for more := true; more; {
				select {
				case b := <-s.out:
					if !write(b) {
						return
					}
				default:
					more = false
				}
			}
			if !flush() {
				return
			}
		case <-tick:
			if !heartbeat() || !flush() {
				return
			}
		case <-s.done:
			return
		}
	}
}

func (s *session) readLoop() {
	defer s.c.wg.Done()
	br := bufio.NewReaderSize(s.nc, 64<<10)
	lim := s.c.o.limits
	var prefix [protocol.PrefixSize]byte
	for {
		if _, err := io.ReadFull(br, prefix[:]); err != nil {
			s.fail(err)
			return
		}
		// Every legal frame is longer than its 8-byte prefix, so Split
		// sees both length words and checks them before we allocate.
		if _, err := protocol.Split(prefix[:], lim); err != nil {
			s.fail(fmt.Errorf("%w: %w", ErrProtocol, err))
			return
		}
		length := binary.BigEndian.Uint32(prefix[:4])
		buf := make([]byte, 4+int(length))
		copy(buf, prefix[:])
		if _, err := io.ReadFull(br, buf[protocol.PrefixSize:]); err != nil {
			s.fail(err)
			return
		}
		f, err := protocol.DecodeFrame(buf, lim)
		if err != nil {
			s.fail(fmt.Errorf("%w: %w", ErrProtocol, err))
			return
		}
		if !f.IsResponse() {
			// A broker-initiated request (NOTIFY_CONSUMER_IDS_CHANGED):
			// not an answer to anything of ours.
			if h := s.c.onRequest; h != nil {
				h(f)
			} else {
				s.c.o.logger.Debug("wharf client: ignoring a request from the broker", "code", f.Code)
			}
			continue
		}
		s.mu.Lock()
		ch := s.pending[f.Opaque]
		delete(s.pending, f.Opaque)
		s.mu.Unlock()
		if ch == nil {
			// A late answer to a call that timed out or was cancelled.
			s.c.o.logger.Debug("wharf client: response for no pending request", "code", f.Code, "opaque", f.Opaque, "status", f.Status)
			continue
		}
		ch <- f // buffered 1, one response per opaque
	}
}
