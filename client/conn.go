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
	"syscall"
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
	// helloMu holds a hello from its build to its enqueue (see
	// helloBarrier).
	helloMu sync.Mutex
	// onRequest, if set (before the first connect), gets the frames the
	// broker sends on its own (requests, not responses), from the reader
	// goroutine: it must not block. Without it they are ignored.
	onRequest func(f *protocol.Frame)
	// onDown, if set (before the first connect), is called when a session
	// ends for another reason than close, after its calls have been
	// failed: a Producer on name-server routes refreshes them at once.
	// It must not block.
	onDown func()

	opaque atomic.Uint32

	mu       sync.Mutex
	s        *session      // the current session; nil or done when disconnected
	closed   bool          // Close was called
	dialing  chan struct{} // non-nil while a dial is in progress, closed when it ends
	nextDial time.Time     // no dial before this (backoff after a failure)
	backoff  time.Duration
	lastErr  error
	wg       sync.WaitGroup // session goroutines

	callbacks callbackRunner // completions of async calls
}

// callbackRunner runs the completions of async calls in order, on a
// goroutine of its own (started when work arrives, ended when there is
// none): a callback may block or call into the client without stalling the
// connection's reader, and the reader never blocks handing one over.
// A completion is queued as a value (an answer and its handler, or a
// func), so that handing an answer over allocates nothing.
type callbackRunner struct {
	mu      sync.Mutex
	queue   []completion
	spare   []completion // the last loop's slice, for the next one
	running bool
}

// completion is one queued callback: to.answered(f, at, err), or fn if to
// is nil.
type completion struct {
	to  answerer
	f   *protocol.Frame
	at  time.Time
	err error
	fn  func()
}

// answerer handles the answer to an async call (f, read at about at: when
// the reader took the bytes it came in), or its failure (err; f nil, at
// zero).
type answerer interface {
	answered(f *protocol.Frame, at time.Time, err error)
}

// answerFunc is a func as an answerer.
type answerFunc func(*protocol.Frame, time.Time, error)

func (fn answerFunc) answered(f *protocol.Frame, at time.Time, err error) { fn(f, at, err) }

func (r *callbackRunner) run(fn func()) { r.push(completion{fn: fn}) }

// answer queues to.answered(f, at, err).
func (r *callbackRunner) answer(to answerer, f *protocol.Frame, at time.Time, err error) {
	r.push(completion{to: to, f: f, at: at, err: err})
}

func (r *callbackRunner) push(c completion) {
	r.mu.Lock()
	r.queue = append(r.queue, c)
	if r.running {
		r.mu.Unlock()
		return
	}
	r.running = true
	r.mu.Unlock()
	go r.loop()
}

func (r *callbackRunner) loop() {
	r.mu.Lock()
	batch := r.spare
	r.spare = nil
	r.mu.Unlock()
	for {
		r.mu.Lock()
		if len(r.queue) == 0 {
			r.running = false
			r.spare = batch[:0]
			r.mu.Unlock()
			return
		}
		batch, r.queue = r.queue, batch[:0]
		r.mu.Unlock()
		for i, c := range batch {
			if c.to != nil {
				c.to.answered(c.f, c.at, c.err)
			} else {
				c.fn()
			}
			batch[i] = completion{}
		}
	}
}

// session is one TCP connection and its two goroutines. Requests are
// encoded straight into wbuf under mu, and the writer goroutine writes
// everything queued since its last write in one syscall: no allocation and
// no channel hand-off per request, and the bigger the load the bigger the
// writes. A blocking call alone in wbuf with no write under way writes its
// frame itself, once and without blocking (writeOnce), and leaves to the
// writer only what the kernel did not take.
type session struct {
	c    *conn
	nc   net.Conn
	raw  syscall.RawConn // nc's socket, for a caller's non-blocking write (nil if nc has none)
	done chan struct{}
	once sync.Once
	err  error // why the session ended; set before done is closed

	kick chan struct{} // cap 1: wbuf has bytes for the writer
	// every carries the heartbeat interval a group member's HEART_BEAT
	// answer asked for (cap 1), to the writer, which runs the ticker.
	every chan time.Duration

	mu      sync.Mutex
	wbuf    []byte        // encoded frames not yet taken by the writer
	spare   []byte        // the buffer the last write gave back, for wbuf
	writing bool          // a write is under way (the writer's or a caller's): the next waits for it
	drained chan struct{} // closed when the writer takes wbuf (made when someone waits)
	pending map[uint32]*pendingCall
	async   int        // async calls in pending (the writer sweeps their deadlines)
	open    *openBatch // coalesced async sends not yet encoded (coalesce.go)
	// The last encoded batch's message slice and size (coalesce.go).
	spareMsgs []protocol.Message
	lastBatch int
}

// newSession is c's session on nc, its loops not started.
func newSession(c *conn, nc net.Conn) *session {
	s := &session{c: c, nc: nc, kick: make(chan struct{}, 1), every: make(chan time.Duration, 1),
		done: make(chan struct{}), pending: make(map[uint32]*pendingCall)}
	if sc, ok := nc.(syscall.Conn); ok {
		s.raw, _ = sc.SyscallConn()
	}
	return s
}

// pendingCall is a request waiting for its response: a blocking call
// waits on ch; an async call has done run on the conn's callback goroutine.
type pendingCall struct {
	ch       chan *protocol.Frame
	done     answerer
	code     protocol.Code
	start    time.Time
	deadline time.Time
}

var errorIncompleteFrame = errors.New("incomplete frame")

// errNoBroker is the failure of a call on a connection without an
// address: an Admin built WithNameServer only asked for a broker's call.
var errNoBroker = fmt.Errorf("%w: no broker address (this client was built WithNameServer only)", ErrInvalidParameter)

// noWait is a done context: enqueue with it fails instead of waiting for
// room in the write buffer.
var noWait = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// maxQueuedBytes bounds the encoded requests waiting for the writer:
// beyond it a sender waits (its context permitting) instead of growing the
// buffer without bound while the broker or the network is slow.
const maxQueuedBytes = 4 << 20

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
	if c.addr == "" {
		return nil, errNoBroker
	}
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
		nc, err := c.o.dial(dctx, "tcp", c.addr) // WithDialer: the transport seam
		cancel()
		if err == nil && nc == nil {
			err = errors.New("the dialer returned no connection")
		}

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
		s := newSession(c, nc)
		// The heartbeat goes first on the wire, before any request a
		// caller queues once it has the session: the broker learns who
		// this client is (and, for a group member, what it owns) first.
		s.heartbeat()
		c.s = s
		c.wg.Add(2)
		go s.writeLoop()
		go s.readLoop()
		c.mu.Unlock()
		c.o.logger.Debug("wharf client: connected", "addr", c.addr, "local", addrString(nc.LocalAddr()))
		return s, nil
	}
}

// addrString is a's text; a dialer's connection need not have an address.
func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
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

// badRequest is a request that cannot be encoded or breaks the limits: the
// caller's mistake, returned as is rather than as a connection problem.
type badRequest struct{ err error }

func (e *badRequest) Error() string { return e.err.Error() }
func (e *badRequest) Unwrap() error { return e.err }

// enqueue encodes req into the session's write buffer, registering pc (if
// not nil) under the request's opaque id, and wakes the writer. It waits
// while the buffer is full. The frame is checked against the limits before
// it is queued.
func (s *session) enqueue(ctx context.Context, flags protocol.Flags, req protocol.Request, pc *pendingCall) (uint32, error) {
	if err := s.lockRoom(ctx, nil); err != nil {
		return 0, err
	}
	s.sealLocked() // frames go out in the order they were asked for
	opaque := s.c.opaque.Add(1)
	at := len(s.wbuf)
	b, err := protocol.AppendRequest(s.wbuf, opaque, flags, req)
	if err == nil {
		var n int
		if n, err = protocol.Split(b[at:], s.c.o.limits); err == nil && n != len(b)-at {
			err = errorIncompleteFrame
		}
	}
	if err != nil {
		s.wbuf = b[:at]
		s.mu.Unlock()
		return 0, &badRequest{fmt.Errorf("wharf client: %v request: %w", req.RequestCode(), err)}
	}
	s.wbuf = b
	if pc != nil {
		s.pending[opaque] = pc
		if pc.done != nil {
			s.async++
		}
	}
	if pc != nil && pc.done == nil && at == 0 && !s.writing && s.raw != nil {
		// A blocking call alone in the buffer, no write under way: its
		// caller writes the frame itself, once and without blocking,
		// instead of waking the writer to (a goroutine hand-off per
		// sync send). What the kernel does not take goes back to the
		// front of the buffer for the writer.
		w := s.takeLocked()
		s.mu.Unlock()
		s.writeOnce(w)
		return opaque, nil
	}
	s.mu.Unlock()
	s.kickWriter()
	return opaque, nil
}

// kickWriter tells the writer that wbuf has bytes.
func (s *session) kickWriter() {
	select {
	case s.kick <- struct{}{}:
	default: // already kicked
	}
}

// takeLocked takes the write buffer for a write (s.mu held): wbuf starts
// again in the spare buffer, whoever waited for room is told, and writes
// after this one wait for it (writing).
// Nothing to take leaves wbuf (and its capacity) where it is.
func (s *session) takeLocked() []byte {
	if len(s.wbuf) == 0 {
		return nil
	}
	w := s.wbuf
	s.wbuf, s.spare = s.spare[:0], nil
	if s.drained != nil {
		close(s.drained)
		s.drained = nil
	}
	s.writing = true
	return w
}

// writeTaken writes what takeLocked took, gives the buffer back, and wakes
// the writer for what was queued meanwhile (it left that to this write). A
// failed write ends the session. It reports whether the write succeeded.
func (s *session) writeTaken(w []byte) bool {
	if len(w) == 0 {
		return true
	}
	_, err := s.nc.Write(w)
	s.wrote(w, nil)
	if err != nil {
		s.fail(err)
		return false
	}
	return true
}

// writeOnce is a caller's write of what takeLocked took: one write(2) on
// the non-blocking socket, never a wait for the peer. The rest, if the
// kernel took less, goes back to the front of wbuf (before whatever was
// queued meanwhile) and the writer writes it as any other.
func (s *session) writeOnce(w []byte) {
	n := 0
	var werr error
	err := s.raw.Write(func(fd uintptr) bool {
		for {
			n, werr = syscall.Write(int(fd), w)
			if werr != syscall.EINTR {
				break
			}
		}
		return true // one try: EAGAIN leaves the rest to the writer
	})
	if err == nil && werr != nil && werr != syscall.EAGAIN {
		err = werr
	}
	if err != nil {
		s.wrote(nil, nil)
		s.fail(err)
		return
	}
	s.wrote(w, w[max(n, 0):])
}

// wrote ends a write of w (nil: keep no buffer): the buffer comes back as
// the spare, rest (what the kernel did not take) goes back before what was
// queued meanwhile, and the writer is woken for what is left.
func (s *session) wrote(w, rest []byte) {
	s.mu.Lock()
	s.writing = false
	if len(rest) > 0 {
		s.wbuf = append(append(make([]byte, 0, len(rest)+len(s.wbuf)), rest...), s.wbuf...)
		w = nil // rest aliases it
	}
	if w != nil && s.spare == nil && cap(w) <= 1<<20 { // do not keep a burst's buffer for ever
		s.spare = w[:0]
	}
	more := len(s.wbuf) > 0 || s.open != nil // an open batch waits for the next write
	s.mu.Unlock()
	if more {
		s.kickWriter()
	}
}

// lockRoom locks s.mu once the write buffer has room for another request,
// or once noRoomNeeded (called with s.mu held) says none is needed, waiting
// (ctx permitting) for the writer to take the buffer. On error s.mu is not
// held.
func (s *session) lockRoom(ctx context.Context, noRoomNeeded func() bool) error {
	for {
		s.mu.Lock()
		if s.isDone() {
			err := s.err
			s.mu.Unlock()
			return err
		}
		if len(s.wbuf) < maxQueuedBytes || (noRoomNeeded != nil && noRoomNeeded()) {
			return nil
		}
		if s.drained == nil {
			s.drained = make(chan struct{})
		}
		drained := s.drained
		s.mu.Unlock()
		select {
		case <-drained:
		case <-s.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// take removes and returns the pending call for opaque (nil if none).
// s.mu must be held.
func (s *session) take(opaque uint32) *pendingCall {
	pc := s.pending[opaque]
	if pc != nil {
		delete(s.pending, opaque)
		if pc.done != nil {
			s.async--
		}
	}
	return pc
}

// enqueueErr turns an enqueue error into what the caller returns.
func (c *conn) enqueueErr(code protocol.Code, start time.Time, err error) error {
	var bad *badRequest
	if errors.As(err, &bad) {
		return bad.err
	}
	return c.wrapErr(code, start, err)
}

// call sends req and waits for its response. timeout > 0 bounds the wait
// (ctx can shorten it). A response of any status is returned as a frame;
// the error is for everything else: ErrClosed, ErrTimeout (wrapping
// context.DeadlineExceeded), context.Canceled, ErrBrokerUnavailable.
func (c *conn) call(ctx context.Context, req protocol.Request, timeout time.Duration) (*protocol.Frame, error) {
	code := req.RequestCode()
	start := time.Now()
	sc, wctx := getSyncCall(ctx, start, timeout)
	s, err := c.session(wctx)
	if err != nil {
		err = c.wrapErr(code, start, err)
		sc.release(true)
		return nil, err
	}
	pc := &sc.pc
	opaque, err := s.enqueue(wctx, 0, req, pc)
	if err != nil {
		err = c.enqueueErr(code, start, err)
		sc.release(true)
		return nil, err
	}
	var cause error
	select {
	case f := <-pc.ch:
		sc.release(true)
		return f, nil
	case <-ctx.Done():
		cause = ctx.Err()
	case <-sc.timedOut():
		cause = context.DeadlineExceeded
	case <-s.done:
		select { // the response may have come just before the end
		case f := <-pc.ch:
			sc.release(true)
			return f, nil
		default:
		}
		sc.release(false) // still in the dead session's table
		return nil, c.wrapErr(code, start, s.err)
	}
	s.mu.Lock()
	mine := s.take(opaque) != nil // else the reader has it, and may answer yet
	s.mu.Unlock()
	sc.release(mine)
	return nil, c.wrapErr(code, start, cause)
}

// callAsync sends req and returns at once; pc.done gets the response frame
// or the error (as call would return them) on the conn's callback
// goroutine, exactly once. The answer is awaited until pc.start+timeout, or
// ctx's deadline if that is earlier; cancelling ctx after callAsync
// returned does not withdraw the request. pc (with done and start set) is
// the caller's, so that it can live inside the caller's state of the send:
// callAsync sets the rest.
func (c *conn) callAsync(ctx context.Context, req protocol.Request, pc *pendingCall, timeout time.Duration) {
	code, start := req.RequestCode(), pc.start
	fail := func(err error) { c.callbacks.answer(pc.done, nil, time.Time{}, err) }
	if err := ctx.Err(); err != nil {
		fail(c.wrapErr(code, start, err))
		return
	}
	s, err := c.session(ctx)
	if err != nil {
		fail(c.wrapErr(code, start, err))
		return
	}
	deadline := start.Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	pc.code, pc.deadline = code, deadline
	if _, err := s.enqueue(ctx, 0, req, pc); err != nil {
		fail(c.enqueueErr(code, start, err))
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
	if _, err := s.enqueue(ctx, protocol.FlagOneway, req, nil); err != nil {
		return c.enqueueErr(code, start, err)
	}
	return nil
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
		s.mu.Lock()
		s.err = err
		close(s.done)
		// Blocking calls see done; async ones are answered here.
		var async []*pendingCall
		for op, pc := range s.pending {
			if pc.done != nil {
				async = append(async, pc)
				delete(s.pending, op)
			}
		}
		s.async = 0
		var open []partHandler
		var openStart time.Time
		if s.open != nil {
			open, openStart, s.open = s.open.parts, s.open.start, nil
		}
		s.wbuf = nil
		if s.drained != nil {
			close(s.drained)
			s.drained = nil
		}
		s.mu.Unlock()
		s.nc.Close()
		for _, pc := range async {
			e := s.c.wrapErr(pc.code, pc.start, err)
			s.c.callbacks.answer(pc.done, nil, time.Time{}, e)
		}
		if len(open) > 0 {
			e := s.c.wrapErr(protocol.CodeSendMessage, openStart, err)
			for _, p := range open {
				s.c.callbacks.run(func() { p.part(sendPart{err: e}) })
			}
		}
		if s.c.onDown != nil && !errors.Is(err, ErrClosed) {
			s.c.onDown()
		}
	})
}

// expire fails the async calls whose deadline has passed.
func (s *session) expire(now time.Time) {
	var late []*pendingCall
	s.mu.Lock()
	if s.async > 0 {
		for op, pc := range s.pending {
			if pc.done != nil && now.After(pc.deadline) {
				late = append(late, s.take(op))
			}
		}
	}
	s.mu.Unlock()
	for _, pc := range late {
		s.c.callbacks.answer(pc.done, nil, time.Time{}, s.c.wrapErr(pc.code, pc.start, context.DeadlineExceeded))
	}
}

// heartbeat queues the conn's hello (if any) as a oneway request. It never
// waits for room: the writer goroutine sends the periodic ones and only it
// makes room, so waiting would stall the connection for good; a full
// buffer means the connection is busy and a heartbeat can be skipped.
//
// A heartbeat that names a consumer group (a PullConsumer's) is a member's:
// the broker drops a member silent for three of its heartbeat intervals
// (consumerHeartbeatInterval, 1 s by default), far less than the
// connection's 30 s. So it is sent as a call, and its answer's
// heartbeatIntervalMillis becomes the connection's interval if shorter
// (PROTOCOL.md: a member heartbeats at the interval of the last answer).
func (s *session) heartbeat() {
	if s.c.hello == nil {
		return
	}
	s.c.helloMu.Lock()
	defer s.c.helloMu.Unlock()
	req := s.c.hello()
	var pc *pendingCall
	if hb, ok := req.(*protocol.HeartbeatRequest); ok && len(hb.ConsumerGroups) > 0 {
		now := time.Now()
		pc = &pendingCall{done: answerFunc(s.heartbeatAnswered), code: protocol.CodeHeartbeat, start: now,
			deadline: now.Add(s.c.o.timeout)}
	}
	flags := protocol.FlagOneway
	if pc != nil {
		flags = 0
	}
	_, err := s.enqueue(noWait, flags, req, pc)
	if err != nil && !s.isDone() && !errors.Is(err, context.Canceled) {
		s.c.o.logger.Warn("wharf client: heartbeat", "err", err)
	}
}

// helloBarrier returns once no heartbeat built before it is still to be
// queued: a request queued after it goes out after every such heartbeat.
// A PullConsumer's leave needs it: a heartbeat built while it was still a
// member and queued after its UNREGISTER_CLIENT made it a member again
// (until the broker timed it out).
func (c *conn) helloBarrier() {
	c.helloMu.Lock()
	c.helloMu.Unlock() // an empty critical section: the barrier
}

// heartbeatAnswered reads a member's HEART_BEAT answer for the interval
// the broker wants, and hands it to the writer. A failed heartbeat is
// logged: the next one is the retry.
func (s *session) heartbeatAnswered(f *protocol.Frame, _ time.Time, err error) {
	var resp protocol.HeartbeatResponse
	switch {
	case err != nil:
	case f.Status != protocol.StatusOK:
		err = statusError(f)
	default:
		err = s.c.decode(f, &resp)
	}
	if err != nil {
		if !s.isDone() && !errors.Is(err, ErrClosed) {
			s.c.o.logger.Warn("wharf client: heartbeat", "addr", s.c.addr, "err", err)
		}
		return
	}
	if resp.HeartbeatIntervalMillis <= 0 {
		return
	}
	d := time.Duration(resp.HeartbeatIntervalMillis) * time.Millisecond
	select {
	case s.every <- d:
	default: // the writer has not taken the last one yet: it asked the same
	}
}

func (s *session) writeLoop() {
	defer s.c.wg.Done()
	var tick <-chan time.Time
	var ticker *time.Ticker
	every := s.c.o.heartbeat
	if s.c.hello != nil && every > 0 {
		ticker = time.NewTicker(every)
		defer ticker.Stop()
		tick = ticker.C
	}
	// Deadlines of async calls are checked on a tick, a fraction of the
	// request timeout.
	sweep := time.NewTicker(min(max(s.c.o.timeout/8, 5*time.Millisecond), 100*time.Millisecond))
	defer sweep.Stop()
	for {
		select {
		case <-s.kick:
			s.mu.Lock()
			if s.writing { // a caller's write: it kicks again when done
				s.mu.Unlock()
				continue
			}
			s.sealLocked() // the async sends gathered while we were writing
			w := s.takeLocked()
			s.mu.Unlock()
			if !s.writeTaken(w) {
				return
			}
		case <-tick:
			s.heartbeat()
		case d := <-s.every:
			// Only shorter: WithHeartbeat may ask for more than the
			// broker; 0 (no periodic heartbeat) stays the caller's choice.
			if ticker != nil && d < every {
				every = d
				ticker.Reset(d)
			}
		case now := <-sweep.C:
			s.expire(now)
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
	var arena frameArena
	// at is about when the reader last took bytes from the connection,
	// for the async answers they brought: read once per read, and only
	// if one of its answers is async (a blocking call reads its own).
	var at time.Time
	stale := true
	for {
		if br.Buffered() < protocol.PrefixSize {
			stale = true // the prefix takes a read
		}
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
		// No frame's buffer is ever reused: a decoded answer aliases it
		// (a pull answer's bodies and properties are sub-slices of it,
		// copied nowhere), for as long as the caller holds on to the
		// messages. Small answers without a body share chunks
		// (readbuf.go).
		length := binary.BigEndian.Uint32(prefix[:4])
		if br.Buffered() < int(length)-4 {
			stale = true // so does the rest
		}
		buf := arena.buf(4+int(length), int(binary.BigEndian.Uint32(prefix[4:])))
		copy(buf, prefix[:])
		if err := readRest(br, s.nc, buf[protocol.PrefixSize:]); err != nil {
			s.fail(err)
			return
		}
		f := arena.frame()
		if err := protocol.DecodeFrameInto(f, buf, lim); err != nil {
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
		pc := s.take(f.Opaque)
		s.mu.Unlock()
		if pc == nil {
			// A late answer to a call that timed out or was cancelled.
			s.c.o.logger.Debug("wharf client: response for no pending request", "code", f.Code, "opaque", f.Opaque, "status", f.Status)
			continue
		}
		if pc.done != nil {
			if stale {
				at, stale = time.Now(), false
			}
			s.c.callbacks.answer(pc.done, f, at, nil)
		} else {
			pc.ch <- f // buffered 1, one response per opaque
		}
	}
}

// directRead is the size from which the rest of a frame is read from the
// connection straight into its buffer rather than through the bufio.Reader
// (which would copy every byte twice: into its own buffer, then out).
const directRead = 4 << 10

// readRest fills p with the next bytes of nc, those br holds first.
func readRest(br *bufio.Reader, nc io.Reader, p []byte) error {
	n := br.Buffered()
	if len(p)-n < directRead {
		_, err := io.ReadFull(br, p)
		return err
	}
	if _, err := io.ReadFull(br, p[:n]); err != nil { // buffered: no read of nc
		return err
	}
	_, err := io.ReadFull(nc, p[n:])
	return err
}
