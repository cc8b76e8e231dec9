package netio

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/protocol"
)

// DefaultMaxOutboundBytes is the default per-connection limit of unsent
// bytes (Options.MaxOutboundBytes).
const DefaultMaxOutboundBytes = 64 << 20

// readBufferCap is the most an event loop reads from one connection per
// readable event (gnet's ReadBufferCap; one buffer per loop, not per
// connection). gnet's default, 64 KiB, is smaller than a coalesced
// SEND_BATCH (up to 256 KiB of bodies): such a frame took two or more
// reads and wake-ups, its first part was copied into the connection's
// inbound ring, and Peek copied the parts together again before the
// burst's own copy. Read whole, it is copied once. async-256 at 1 KiB:
// 1.03x msg/s, 0.95x broker CPU per message (6 paired rounds,
// docs/BENCHMARKS.md, issue 17).
const readBufferCap = 1 << 20

// Options configures a Server. The zero value of every field but Addr is
// usable.
type Options struct {
	// Addr is where to listen: "tcp://127.0.0.1:10911" or "127.0.0.1:10911"
	// (tcp is assumed without a scheme). Port 0 picks a free port; see
	// Server.Addr.
	Addr string
	// Limits bounds every inbound frame (zero fields mean protocol defaults).
	Limits protocol.Limits
	// MaxOutboundBytes is the most bytes a connection may have queued and
	// not yet taken by the kernel; a peer above it (one that stopped
	// reading) is disconnected. 0 means DefaultMaxOutboundBytes. It should
	// exceed the largest response frame.
	MaxOutboundBytes int
	// Multicore runs one event loop per CPU; NumEventLoop, if > 0, sets the
	// number of loops directly and wins.
	Multicore    bool
	NumEventLoop int
	// Logger receives connection events (debug) and problems (warn). nil
	// means slog.Default(). gnet's own log goes to the Logger of the first
	// Server started in the process (gnet's logger is process-global).
	Logger *slog.Logger
	// MaxInflightRequests bounds the requests of one connection that are
	// not answered yet; a client above it is disconnected. 0 means 65536.
	MaxInflightRequests int
	// IdleTimeout closes a connection with no traffic in either direction
	// for that long and no request waiting for its answer (a held long
	// poll keeps its connection open). 0 disables it. (The broker passes
	// serverChannelMaxIdleTimeSeconds, 120 s by default.)
	IdleTimeout time.Duration
	// Codec encodes the actors' typed answers; nil means WharfCodec.
	Codec actors.Codec
}

// Stats is a snapshot of a Server's counters.
type Stats struct {
	ConnsOpen      int64  // connections currently open
	ConnsTotal     uint64 // connections accepted since Start
	Bursts         uint64 // Deliver calls (one per read burst with frames)
	FramesIn       uint64 // frames delivered to the handler
	BytesIn        uint64 // bytes read from peers
	BytesOut       uint64 // bytes handed to gnet for sending
	ClosedSlow     uint64 // connections closed for exceeding MaxOutboundBytes
	ClosedIdle     uint64 // connections closed for exceeding IdleTimeout
	MalformedFrame uint64 // connections closed for a malformed or oversized frame
	DroppedWrites  uint64 // frames dropped because their connection was closed or shed
	DirectWrites   uint64 // answers written by the answering goroutine, bypassing the loop
	// OutboundQueued: bytes written to open connections and not yet handed
	// to gnet's outbound buffer (what the outbound limit is held against).
	OutboundQueued int64
}

type counters struct {
	connsOpen     atomic.Int64
	connsTotal    atomic.Uint64
	bursts        atomic.Uint64
	framesIn      atomic.Uint64
	bytesIn       atomic.Uint64
	bytesOut      atomic.Uint64
	closedSlow    atomic.Uint64
	closedIdle    atomic.Uint64
	malformed     atomic.Uint64
	droppedWrites atomic.Uint64
	directWrites  atomic.Uint64
}

// Server is the broker's client-facing listener: one gnet engine that
// frames inbound bytes, hands each read burst to an actors.Handler, and
// sends the handler's replies back with a per-connection outbound limit.
type Server struct {
	h    actors.Handler
	opt  Options
	fr   framer // the listener's framing: the codec's own, or Wharf's
	log  *slog.Logger
	addr string // gnet form, with scheme

	mu       sync.Mutex
	started  bool
	eng      gnet.Engine
	bound    string
	done     chan struct{} // closed when gnet.Run has returned
	runErr   error         // gnet.Run's result, valid after done
	stopping atomic.Bool

	connsMu sync.Mutex
	conns   map[uint64]*conn

	stats counters
}

// NewServer returns a Server delivering to h. Nothing listens before Start.
func NewServer(h actors.Handler, opt Options) *Server {
	if opt.MaxOutboundBytes <= 0 {
		opt.MaxOutboundBytes = DefaultMaxOutboundBytes
	}
	if opt.Codec == nil {
		opt.Codec = WharfCodec{}
	}
	if opt.IdleTimeout < 0 {
		opt.IdleTimeout = 0
	}
	if opt.MaxInflightRequests <= 0 {
		opt.MaxInflightRequests = 65536
	}
	log := opt.Logger
	if log == nil {
		log = slog.Default()
	}
	addr := opt.Addr
	if !strings.Contains(addr, "://") {
		addr = "tcp://" + addr
	}
	fr, ok := opt.Codec.(framer)
	if !ok {
		fr = wharfFramer{}
	}
	return &Server{
		h:     h,
		opt:   opt,
		fr:    fr,
		log:   log.With("component", "netio"),
		addr:  addr,
		conns: make(map[uint64]*conn),
	}
}

// Start binds the listener and starts the event loops. It returns once the
// server is listening, or with the error that prevented it (for example an
// address already in use). A Server is started at most once.
func (s *Server) Start() error {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return errors.New("netio: server already started")
	}
	s.started = true
	s.done = make(chan struct{})
	s.mu.Unlock()

	setGnetLogger(s.log)
	booted := make(chan struct{})
	eh := &engineHandler{s: s, booted: booted}
	opts := []gnet.Option{
		gnet.WithMulticore(s.opt.Multicore),
		gnet.WithNumEventLoop(s.opt.NumEventLoop),
		gnet.WithReuseAddr(true),
		gnet.WithReusePort(false),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithLogger(gnetLogger),
		gnet.WithTicker(s.opt.IdleTimeout > 0),
		gnet.WithReadBufferCap(readBufferCap),
	}
	failed := make(chan error, 1)
	go func() {
		err := gnet.Run(eh, s.addr, opts...)
		s.mu.Lock()
		s.runErr = err
		s.mu.Unlock()
		select {
		case <-booted:
			if err != nil {
				s.log.Error("gnet engine stopped with an error", "addr", s.addr, "err", err)
			}
		default:
			failed <- err
		}
		close(s.done)
	}()
	select {
	case <-booted:
		s.log.Info("listening", "addr", s.Addr())
		return nil
	case err := <-failed:
		if err == nil {
			err = errors.New("engine stopped before it booted")
		}
		return fmt.Errorf("netio: listen on %s: %w", s.opt.Addr, err)
	}
}

// Addr is the bound address ("127.0.0.1:10911"), with the actual port when
// Options.Addr asked for port 0. Before Start it is Options.Addr.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bound != "" {
		return s.bound
	}
	return s.opt.Addr
}

// Stop shuts the server down: new connections are refused, every open
// connection is closed (the handler sees Disconnected for each) and the
// event loops exit. It returns ctx's error if ctx ends first. Stop on a
// server that is not running is a no-op.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	started, eng, done := s.started, s.eng, s.done
	s.mu.Unlock()
	if !started || s.stopping.Swap(true) {
		return nil
	}
	select {
	case <-done: // never booted, or already gone
		return nil
	default:
	}
	// gnet's Stop polls for the end every 500 ms; the engine's end is
	// known at once from done (gnet.Run returns once it is shut down), so
	// that cuts the poll short.
	pollCtx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-done:
		case <-pollCtx.Done():
		}
		cancel()
	}()
	err := eng.Stop(pollCtx)
	cancel()
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("netio: stop: %w", ctx.Err())
	case err != nil && !errors.Is(err, context.Canceled): // not the cut above
		return fmt.Errorf("netio: stop: %w", err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("netio: stop: %w", ctx.Err())
	}
	s.log.Info("stopped", "addr", s.Addr())
	return nil
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	c := &s.stats
	return Stats{
		ConnsOpen:      c.connsOpen.Load(),
		ConnsTotal:     c.connsTotal.Load(),
		Bursts:         c.bursts.Load(),
		FramesIn:       c.framesIn.Load(),
		BytesIn:        c.bytesIn.Load(),
		BytesOut:       c.bytesOut.Load(),
		ClosedSlow:     c.closedSlow.Load(),
		ClosedIdle:     c.closedIdle.Load(),
		MalformedFrame: c.malformed.Load(),
		DroppedWrites:  c.droppedWrites.Load(),
		DirectWrites:   c.directWrites.Load(),
		OutboundQueued: s.outboundQueued(),
	}
}

func (s *Server) outboundQueued() int64 {
	var n int64
	s.connsMu.Lock()
	for _, c := range s.conns {
		n += c.pending.Load()
	}
	s.connsMu.Unlock()
	return n
}

// engineHandler holds gnet's callbacks, kept off Server's exported surface.
type engineHandler struct {
	gnet.BuiltinEventEngine
	s      *Server
	booted chan struct{}
}

func (e *engineHandler) OnBoot(eng gnet.Engine) gnet.Action {
	s := e.s
	bound := boundAddr(eng)
	s.mu.Lock()
	s.eng = eng
	s.bound = bound
	s.mu.Unlock()
	close(e.booted)
	return gnet.None
}

// boundAddr asks the kernel which address the listener got (port 0).
func boundAddr(eng gnet.Engine) string {
	fd, err := eng.Dup()
	if err != nil {
		return ""
	}
	f := os.NewFile(uintptr(fd), "netio-listener")
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return ""
	}
	defer ln.Close()
	return ln.Addr().String()
}

func (e *engineHandler) OnOpen(gc gnet.Conn) ([]byte, gnet.Action) {
	s := e.s
	if s.stopping.Load() {
		return nil, gnet.Close
	}
	c := newConn(s, gc)
	gc.SetContext(c)
	s.connsMu.Lock()
	s.conns[c.id] = c
	s.connsMu.Unlock()
	s.stats.connsOpen.Add(1)
	s.stats.connsTotal.Add(1)
	s.log.Debug("connection opened", "conn", c.id, "remote", c.remote)
	if h, ok := s.h.(interface{ Connected(actors.Conn) }); ok {
		h.Connected(c) // optional: handlers that count connections
	}
	return nil, gnet.None
}

func (e *engineHandler) OnClose(gc gnet.Conn, err error) gnet.Action {
	s := e.s
	c, ok := gc.Context().(*conn)
	if !ok {
		return gnet.None // refused in OnOpen
	}
	c.closed.Store(true)
	// gnet closes the socket after this returns: wait for a direct write
	// in progress, and let none start.
	c.outMu.Lock()
	c.fdGone = true
	c.outMu.Unlock()
	if !c.disconnected.CompareAndSwap(false, true) {
		return gnet.None
	}
	s.connsMu.Lock()
	delete(s.conns, c.id)
	s.connsMu.Unlock()
	s.stats.connsOpen.Add(-1)
	if err != nil {
		s.log.Debug("connection closed", "conn", c.id, "remote", c.remote, "err", err)
	} else {
		s.log.Debug("connection closed", "conn", c.id, "remote", c.remote)
	}
	s.h.Disconnected(c)
	return gnet.None
}

// OnTraffic consumes every complete frame buffered on the connection and
// hands them to the handler as one Inbound. A partial frame stays in gnet's
// inbound buffer until more bytes arrive.
func (e *engineHandler) OnTraffic(gc gnet.Conn) gnet.Action {
	s := e.s
	c, ok := gc.Context().(*conn)
	if !ok {
		return gnet.Close
	}
	buffered := gc.InboundBuffered()
	if n := buffered - c.leftover; n > 0 {
		s.stats.bytesIn.Add(uint64(n))
	}
	c.touch()
	if c.bad || c.closed.Load() {
		// Closing: after a malformed frame (the rest of the stream is
		// garbage by definition) or at the handler's request.
		_, _ = gc.Discard(-1)
		c.leftover = 0
		return gnet.None
	}
	if buffered < c.need {
		c.leftover = buffered // a large frame still arriving: don't re-peek it
		return gnet.None
	}
	buf, err := gc.Peek(-1)
	if err != nil {
		c.leftover = buffered
		return gnet.None
	}
	end, count, splitErr := e.scan(c, buf)
	var (
		frames  []*protocol.Frame
		release func()
		failErr = splitErr
		failHdr *protocol.Frame // the offending frame, when its header decoded
	)
	if end > 0 {
		var err error
		frames, release, failHdr, err = e.decodeBurst(c, buf[:end], count)
		if err != nil {
			failErr = err
		}
	}
	if len(frames) > 0 && !e.deliver(gc, c, frames, release) {
		return gnet.Close
	}
	if failErr != nil {
		_, _ = gc.Discard(-1)
		c.leftover = 0
		c.reject(failErr, failHdr)
		return gnet.None
	}
	if end > 0 { // Discard(0) would discard everything
		_, _ = gc.Discard(end)
	}
	c.leftover = buffered - end
	return gnet.None
}

// scan finds the end of the last complete frame in buf, how many frames
// end there, and the first framing error; it notes in c.need how many
// bytes a frame still arriving needs.
func (e *engineHandler) scan(c *conn, buf []byte) (end, count int, err error) {
	c.need = 0
	for {
		n, err := e.s.fr.split(buf[end:], e.s.opt.Limits)
		if err != nil {
			return end, count, err
		}
		if n == 0 {
			if rest := buf[end:]; len(rest) >= 4 {
				c.need = 4 + int(binary.BigEndian.Uint32(rest))
			}
			return end, count, nil
		}
		end += n
		count++
	}
}

// decodeBurst decodes the count complete frames of buf: the frames before
// the first one that fails, that one's header when it decoded, and its
// error. One copy per burst: gnet reuses Peek's memory once OnTraffic
// returns, and the frames alias their bytes (see copyBurst); release gives
// a pooled copy back (see actors.Inbound.Release).
func (e *engineHandler) decodeBurst(c *conn, buf []byte, count int) (frames []*protocol.Frame, release func(), failHdr *protocol.Frame, err error) {
	s, lim := e.s, e.s.opt.Limits
	_, wharf := s.fr.(wharfFramer)
	var bufs *burstBufs
	if wharf && c.sends {
		bufs = &c.bursts
	}
	data, box, release := copyBurst(buf, bufs)
	frames, arena := burstFrames(box, count, wharf) // arena: Wharf's frames, one slice for the burst
	for off := 0; off < len(data); {
		n, _ := s.fr.split(data[off:], lim) // already validated by scan
		var f *protocol.Frame
		if wharf {
			f = &arena[len(frames)]
			err = protocol.DecodeFrameInto(f, data[off:off+n], lim)
		} else {
			f, err = s.fr.decode(data[off:off+n], lim)
		}
		if err == nil && f.IsResponse() {
			failHdr = f
			err = fmt.Errorf("%w: a response frame (code %d, opaque %d) sent to a server", protocol.ErrFrameIllegal, f.Code, f.Opaque)
		}
		if err != nil {
			return frames, release, failHdr, err
		}
		frames = append(frames, f)
		off += n
	}
	return frames, release, nil, nil
}

// deliver hands a burst's frames to the handler, unless the client has too
// many requests unanswered: one that writes without reading would
// otherwise queue unbounded work in the broker. False: the connection is
// closed.
func (e *engineHandler) deliver(gc gnet.Conn, c *conn, frames []*protocol.Frame, release func()) bool {
	s := e.s
	waiting := int64(0)
	for _, f := range frames {
		if !f.IsOneway() {
			waiting++
		}
	}
	if n := c.inflight.Add(waiting); n > int64(s.opt.MaxInflightRequests) {
		s.stats.closedSlow.Add(1)
		_, _ = gc.Discard(-1)
		c.leftover = 0
		c.closeOnce(nil, fmt.Sprintf("more than %d requests unanswered: the client does not read its answers", s.opt.MaxInflightRequests))
		return false
	}
	s.stats.bursts.Add(1)
	s.stats.framesIn.Add(uint64(len(frames)))
	c.sends = sendsOnly(frames)
	s.h.Deliver(&actors.Inbound{Conn: c, Frames: frames, Release: release})
	return true
}

// OnTick closes idle connections: no traffic either way for IdleTimeout,
// and no request waiting for its answer. A held long poll is no traffic,
// but its peer is waiting, and closing would lose the answer. It runs on
// its own goroutine, so it uses only what is safe off the loops: atomics
// and Close.
func (e *engineHandler) OnTick() (time.Duration, gnet.Action) {
	s := e.s
	idle := s.opt.IdleTimeout
	every := min(max(idle/4, 10*time.Millisecond), 5*time.Second)
	if idle <= 0 {
		return time.Hour, gnet.None
	}
	cutoff := time.Now().Add(-idle).UnixNano()
	var victims []*conn
	s.connsMu.Lock()
	for _, c := range s.conns {
		if c.lastActive.Load() < cutoff && !c.waiting() {
			victims = append(victims, c)
		}
	}
	s.connsMu.Unlock()
	for _, c := range victims {
		c.closeOnce(&s.stats.closedIdle, fmt.Sprintf("idle for more than %s", idle))
	}
	return every, gnet.None
}
