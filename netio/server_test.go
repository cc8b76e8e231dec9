package netio

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// bigCode marks requests the fake handler answers with bigSize bytes;
// parkCode ones it parks (as the broker parks a long poll) and never
// answers.
const (
	bigCode  = protocol.CodeQueryMessage
	bigSize  = 1 << 20
	parkCode = protocol.CodePullMessage
)

type delivery struct {
	conn   uint64
	frames []*protocol.Frame
}

// echoHandler answers every request with a response echoing its code,
// opaque and body (bigCode: a 1 MiB body), and records what it saw.
type echoHandler struct {
	mu           sync.Mutex
	deliveries   []delivery
	disconnected map[uint64]int
	conns        map[uint64]actors.Conn
	// answered counts the Reply calls that returned: the answer is then
	// written or queued, and the server's counters include it. bigAnswered
	// counts those to bigCode.
	answered, bigAnswered atomic.Int64
}

func newEchoHandler() *echoHandler {
	return &echoHandler{disconnected: map[uint64]int{}, conns: map[uint64]actors.Conn{}}
}

func (h *echoHandler) Deliver(in *actors.Inbound) {
	h.mu.Lock()
	h.deliveries = append(h.deliveries, delivery{in.Conn.ID(), in.Frames})
	h.conns[in.Conn.ID()] = in.Conn
	h.mu.Unlock()
	for _, f := range in.Frames {
		if f.IsOneway() {
			continue
		}
		if f.Code == parkCode {
			in.Conn.(interface{ Parked(int) }).Parked(1)
			continue
		}
		body := f.Body
		if f.Code == bigCode {
			body = make([]byte, bigSize)
		}
		in.Conn.Reply(actors.Response{Code: f.Code, Opaque: f.Opaque, Status: protocol.StatusOK, Remark: "echo", Fields: &protocol.RawBody{Body: body}})
		h.answered.Add(1)
		if f.Code == bigCode {
			h.bigAnswered.Add(1)
		}
	}
}

// waitAnswered waits until n answers have been handed to the connection.
func (h *echoHandler) waitAnswered(t *testing.T, n int64) {
	t.Helper()
	testwait.For(t, testwait.Wall, 5*time.Second, fmt.Sprintf("%d answers handed over", n),
		func() bool { return h.answered.Load() >= n })
}

func (h *echoHandler) Disconnected(c actors.Conn) {
	h.mu.Lock()
	h.disconnected[c.ID()]++
	h.mu.Unlock()
}

// framesOf returns the deliveries and frames seen for one connection.
func (h *echoHandler) framesOf(id uint64) (bursts int, frames []*protocol.Frame) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, d := range h.deliveries {
		if d.conn == id {
			bursts++
			frames = append(frames, d.frames...)
		}
	}
	return bursts, frames
}

func (h *echoHandler) disconnects(id uint64) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.disconnected[id]
}

func (h *echoHandler) totalDisconnects() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, v := range h.disconnected {
		n += v
	}
	return n
}

func testLogger() *slog.Logger {
	level := slog.LevelError
	if testing.Verbose() {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// startServer starts a server on a free loopback port and registers a Stop
// (with a goroutine-leak check) for the end of the test.
func startServer(t testing.TB, h actors.Handler, opt Options) *Server {
	t.Helper()
	base := runtime.NumGoroutine()
	if opt.Addr == "" {
		opt.Addr = "tcp://127.0.0.1:0"
	}
	if opt.Logger == nil {
		opt.Logger = testLogger()
	}
	opt.NumEventLoop = max(opt.NumEventLoop, 2)
	s := NewServer(h, opt)
	if err := s.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
		waitGoroutines(t, base)
	})
	return s
}

// waitGoroutines fails the test if the goroutine count does not come back
// to base within a few seconds.
func waitGoroutines(t testing.TB, base int) {
	t.Helper()
	if !testwait.Until(testwait.Wall, 3*time.Second, func() bool { return runtime.NumGoroutine() <= base }) {
		buf := make([]byte, 1<<16)
		buf = buf[:runtime.Stack(buf, true)]
		t.Errorf("goroutine leak: %d running, %d before the server started\n%s", runtime.NumGoroutine(), base, buf)
	}
}

func dial(t *testing.T, s *Server) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", s.Addr(), 2*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", s.Addr(), err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func request(code protocol.Code, opaque uint32, body []byte) []byte {
	return protocol.AppendFrame(nil, &protocol.Frame{Code: code, Opaque: opaque, Body: body})
}

// readFrame reads one frame from c, failing after the deadline.
func readFrame(c net.Conn, timeout time.Duration) (*protocol.Frame, error) {
	if err := c.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return nil, err
	}
	var prefix [4]byte
	if _, err := io.ReadFull(c, prefix[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(prefix[:])
	if n > 32<<20 {
		return nil, fmt.Errorf("response length %d", n)
	}
	buf := make([]byte, 4+int(n))
	copy(buf, prefix[:])
	if _, err := io.ReadFull(c, buf[4:]); err != nil {
		return nil, err
	}
	return protocol.DecodeFrame(buf, protocol.Limits{MaxFrameSize: 32 << 20})
}

// roundTrip sends one request and checks its echo.
func roundTrip(t *testing.T, c net.Conn, opaque uint32, body []byte) {
	t.Helper()
	if _, err := c.Write(request(protocol.CodeHeartbeat, opaque, body)); err != nil {
		t.Fatalf("write: %v", err)
	}
	f, err := readFrame(c, 3*time.Second)
	if err != nil {
		t.Fatalf("read response %d: %v", opaque, err)
	}
	if !f.IsResponse() || f.Status != protocol.StatusOK || f.Opaque != opaque ||
		f.Code != protocol.CodeHeartbeat || !bytes.Equal(f.Body, body) {
		t.Fatalf("bad response %+v to opaque %d", f, opaque)
	}
}

// expectRejected reads the FRAME_ILLEGAL response and then EOF.
func expectRejected(t *testing.T, c net.Conn, code protocol.Code, opaque uint32) {
	t.Helper()
	f, err := readFrame(c, 3*time.Second)
	if err != nil {
		t.Fatalf("want a FRAME_ILLEGAL response, got %v", err)
	}
	if !f.IsResponse() || f.Status != protocol.StatusFrameIllegal || f.Code != code || f.Opaque != opaque {
		t.Fatalf("want FRAME_ILLEGAL response (code %d, opaque %d), got %+v", code, opaque, f)
	}
	expectClosed(t, c)
}

func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	var b [1]byte
	if n, err := c.Read(b[:]); err == nil {
		t.Fatalf("want the connection closed, read %d bytes", n)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("want the connection closed, still open after 3 s")
	}
}

// connID finds the server-side ID of the connection that sent opaque.
func connID(t *testing.T, h *echoHandler, opaque uint32) uint64 {
	t.Helper()
	var id uint64
	testwait.For(t, testwait.Wall, 3*time.Second, fmt.Sprintf("a delivery of opaque %d", opaque), func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, d := range h.deliveries {
			for _, f := range d.frames {
				if f.Opaque == opaque {
					id = d.conn
					return true
				}
			}
		}
		return false
	})
	return id
}

func TestEchoRoundTrip(t *testing.T) {
	h := newEchoHandler()
	s := startServer(t, h, Options{})
	if !strings.HasPrefix(s.Addr(), "127.0.0.1:") || strings.HasSuffix(s.Addr(), ":0") {
		t.Fatalf("Addr() = %q, want the bound loopback port", s.Addr())
	}
	c := dial(t, s)
	for i := range uint32(20) {
		roundTrip(t, c, i+1, bytes.Repeat([]byte{byte(i)}, int(i)*10))
	}
	st := s.Stats()
	if st.ConnsOpen != 1 || st.ConnsTotal != 1 || st.FramesIn != 20 || st.BytesIn == 0 || st.BytesOut == 0 {
		t.Fatalf("stats %+v", st)
	}
	c.Close()
	testwait.For(t, testwait.Wall, 3*time.Second, "Disconnected", func() bool { return h.totalDisconnects() == 1 })
	testwait.For(t, testwait.Wall, 3*time.Second, "ConnsOpen == 0", func() bool { return s.Stats().ConnsOpen == 0 })
}

func TestOnewayGetsNoResponse(t *testing.T) {
	h := newEchoHandler()
	s := startServer(t, h, Options{})
	c := dial(t, s)
	ow := protocol.AppendFrame(nil, &protocol.Frame{Code: protocol.CodeHeartbeat, Opaque: 7, Flags: protocol.FlagOneway})
	if _, err := c.Write(ow); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, c, 8, []byte("after oneway")) // the next response is 8's, not 7's
}

func TestFrameSplitAcrossWrites(t *testing.T) {
	h := newEchoHandler()
	s := startServer(t, h, Options{})
	c := dial(t, s)
	body := []byte("split across many tiny writes")
	frame := request(protocol.CodeHeartbeat, 42, body)
	hdrLen := 8 + int(binary.BigEndian.Uint32(frame[4:8]))
	// The length prefix and the header length a byte at a time, the header
	// and the body each cut inside. Each piece is written once the server
	// has read all before it, so every cut is one the framing must bridge.
	cuts := []int{1, 2, 3, 4, 5, 6, 7, 8, hdrLen - 3, hdrLen, hdrLen + 1, len(frame) - 2, len(frame)}
	before, from := s.Stats().BytesIn, 0
	for _, to := range cuts {
		if _, err := c.Write(frame[from:to]); err != nil {
			t.Fatal(err)
		}
		testwait.For(t, testwait.Wall, 3*time.Second, fmt.Sprintf("the server reading byte %d", to), func() bool {
			return s.Stats().BytesIn >= before+uint64(to)
		})
		from = to
	}
	f, err := readFrame(c, 3*time.Second)
	if err != nil || f.Opaque != 42 || !bytes.Equal(f.Body, body) {
		t.Fatalf("response %+v, %v", f, err)
	}
	id := connID(t, h, 42)
	if _, frames := h.framesOf(id); len(frames) != 1 || !bytes.Equal(frames[0].Body, body) {
		t.Fatalf("delivered %d frames, want 1 intact", len(frames))
	}
}

func TestLargeFrameInRaggedChunks(t *testing.T) {
	h := newEchoHandler()
	s := startServer(t, h, Options{})
	c := dial(t, s)
	body := make([]byte, 3<<20)
	for i := range body {
		body[i] = byte(i * 7)
	}
	// Two frames, the second beginning inside the last chunk of the first.
	stream := append(request(protocol.CodeHeartbeat, 1, body), request(protocol.CodeHeartbeat, 2, []byte("tail"))...)
	sizes := []int{1, 2, 3, 5, 7, 4093, 65536, 300000}
	go func() {
		for i, off := 0, 0; off < len(stream); i++ {
			n := min(sizes[i%len(sizes)], len(stream)-off)
			if _, err := c.Write(stream[off : off+n]); err != nil {
				return
			}
			off += n
		}
	}()
	f, err := readFrame(c, 5*time.Second)
	if err != nil || f.Opaque != 1 || !bytes.Equal(f.Body, body) {
		t.Fatalf("first response: opaque %v, %v", f, err)
	}
	f, err = readFrame(c, 5*time.Second)
	if err != nil || f.Opaque != 2 || string(f.Body) != "tail" {
		t.Fatalf("second response: %+v, %v", f, err)
	}
}

func TestBurstIsOneInbound(t *testing.T) {
	h := newEchoHandler()
	s := startServer(t, h, Options{})
	c := dial(t, s)
	const n = 50
	var burst []byte
	for i := range uint32(n) {
		burst = append(burst, request(protocol.CodeHeartbeat, 1000+i, []byte(fmt.Sprint(i)))...)
	}
	if _, err := c.Write(burst); err != nil { // one syscall
		t.Fatal(err)
	}
	for i := range uint32(n) {
		f, err := readFrame(c, 3*time.Second)
		if err != nil || f.Opaque != 1000+i {
			t.Fatalf("response %d: %+v, %v", i, f, err)
		}
	}
	bursts, frames := h.framesOf(connID(t, h, 1000))
	if len(frames) != n {
		t.Fatalf("delivered %d frames, want %d", len(frames), n)
	}
	for i, f := range frames {
		if f.Opaque != 1000+uint32(i) || string(f.Body) != fmt.Sprint(i) {
			t.Fatalf("frame %d out of order or damaged: %+v", i, f)
		}
	}
	if bursts >= n {
		t.Fatalf("%d frames in one write came as %d Deliver calls: not batched", n, bursts)
	}
	t.Logf("%d frames in %d Deliver call(s)", n, bursts)
}

func TestHostileClients(t *testing.T) {
	h := newEchoHandler()
	s := startServer(t, h, Options{})
	good := dial(t, s)
	roundTrip(t, good, 1, []byte("hello"))

	bomb := []byte{0, 0, 0, 9, 0, 0, 0, 5, 0xdf, 0xff, 0xff, 0xff, 0xff} // map32 of 2^32-1 entries
	rnd := make([]byte, 4096)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range rnd {
		rnd[i] = byte(r.UintN(256))
	}
	rnd[0] = 0x7f // a declared length far above the 16 MiB limit
	cases := []struct {
		name   string
		send   []byte
		code   protocol.Code
		opaque uint32
	}{
		{"random bytes", rnd, 0, 0},
		{"4 GiB declared length", []byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3}, 0, 0},
		{"4 GiB length alone", []byte{0xff, 0xff, 0xff, 0xff}, 0, 0},
		{"msgpack bomb header", bomb, 0, 0},
		{"zero header length", []byte{0, 0, 0, 8, 0, 0, 0, 0, 1, 2, 3, 4}, 0, 0},
		{"header not a map", []byte{0, 0, 0, 5, 0, 0, 0, 1, 0x2a}, 0, 0},
		{"response frame from a client", protocol.AppendErrorResponse(nil, protocol.CodeSendMessage, 77, protocol.StatusOK, ""), protocol.CodeSendMessage, 77},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := s.Stats().MalformedFrame
			c := dial(t, s)
			if _, err := c.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			expectRejected(t, c, tc.code, tc.opaque)
			if got := s.Stats().MalformedFrame; got != before+1 {
				t.Fatalf("MalformedFrame %d -> %d", before, got)
			}
			roundTrip(t, good, uint32(100+i), []byte(tc.name))
		})
	}

	t.Run("good frames before the bad one are delivered", func(t *testing.T) {
		c := dial(t, s)
		burst := append(request(protocol.CodeHeartbeat, 500, []byte("a")), request(protocol.CodeHeartbeat, 501, []byte("b"))...)
		burst = append(burst, bomb...)
		if _, err := c.Write(burst); err != nil {
			t.Fatal(err)
		}
		for _, op := range []uint32{500, 501} {
			f, err := readFrame(c, 3*time.Second)
			if err != nil || f.Opaque != op || f.Status != protocol.StatusOK {
				t.Fatalf("want echo of %d first, got %+v, %v", op, f, err)
			}
		}
		expectRejected(t, c, 0, 0)
		roundTrip(t, good, 502, nil)
	})

	t.Run("truncated frame then close", func(t *testing.T) {
		c := dial(t, s)
		roundTrip(t, c, 600, nil) // learn its server-side id
		id := connID(t, h, 600)
		frame := request(protocol.CodeHeartbeat, 601, []byte("never completed"))
		before := s.Stats().BytesIn
		if _, err := c.Write(frame[:len(frame)-3]); err != nil {
			t.Fatal(err)
		}
		// Close once the server holds the partial frame, not before it read it.
		testwait.For(t, testwait.Wall, 3*time.Second, "the partial frame read", func() bool {
			return s.Stats().BytesIn >= before+uint64(len(frame)-3)
		})
		c.Close()
		testwait.For(t, testwait.Wall, 3*time.Second, "Disconnected", func() bool { return h.disconnects(id) == 1 })
		if _, frames := h.framesOf(id); len(frames) != 1 {
			t.Fatalf("truncated frame delivered: %d frames", len(frames))
		}
		roundTrip(t, good, 602, nil)
	})

	t.Run("frame above a configured limit", func(t *testing.T) {
		h2 := newEchoHandler()
		s2 := startServer(t, h2, Options{Limits: protocol.Limits{MaxFrameSize: 1024}})
		c := dial(t, s2)
		roundTrip(t, c, 1, make([]byte, 900))
		if _, err := c.Write(request(protocol.CodeHeartbeat, 2, make([]byte, 2000))); err != nil {
			t.Fatal(err)
		}
		expectRejected(t, c, 0, 0)
	})

	testwait.For(t, testwait.Wall, 3*time.Second, "every hostile connection disconnected exactly once", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		for id, n := range h.disconnected {
			if n != 1 {
				t.Fatalf("conn %d: Disconnected %d times", id, n)
			}
		}
		return s.Stats().ConnsOpen == 1 // only good is left
	})
	roundTrip(t, good, 999, []byte("still served"))
}

func TestSlowReaderIsShed(t *testing.T) {
	h := newEchoHandler()
	s := startServer(t, h, Options{MaxOutboundBytes: 4 << 20})
	good := dial(t, s)
	roundTrip(t, good, 1, nil)

	slow := dial(t, s)
	// One request for 1 MiB at a time, never reading: the kernel buffers
	// fill, then gnet's outbound buffer grows past the limit. Trickled, each
	// request sent once the previous one's answer is handed to the
	// connection, so that the shedding comes from the peer not reading, not
	// from a burst.
	trickleDone := make(chan struct{})
	var sent atomic.Int64
	go func() {
		defer close(trickleDone)
		deadline := time.Now().Add(8 * time.Second)
		for i := uint32(0); i < 2000 && time.Now().Before(deadline); i++ {
			_ = slow.SetWriteDeadline(time.Now().Add(time.Second))
			answered := h.bigAnswered.Load()
			if _, err := slow.Write(request(bigCode, 10_000+i, nil)); err != nil {
				return // shed
			}
			sent.Add(1)
			shed := func() bool { return s.Stats().ClosedSlow > 0 }
			if !testwait.Until(testwait.Wall, time.Second, func() bool { return h.bigAnswered.Load() > answered || shed() }) || shed() {
				return
			}
		}
	}()
	defer func() { slow.Close(); <-trickleDone }()
	id := connID(t, h, 10_000)

	stop := make(chan struct{})
	served := make(chan error, 1)
	go func() { // the well-behaved client keeps being served meanwhile
		for i := uint32(0); ; i++ {
			select {
			case <-stop:
				served <- nil
				return
			default:
			}
			if _, err := good.Write(request(protocol.CodeHeartbeat, 20_000+i, []byte("ping"))); err != nil {
				served <- err
				return
			}
			f, err := readFrame(good, 3*time.Second)
			if err != nil || f.Opaque != 20_000+i {
				served <- fmt.Errorf("good client: %+v, %v", f, err)
				return
			}
		}
	}()

	testwait.For(t, testwait.Wall, 8*time.Second, "the slow reader shed", func() bool {
		return s.Stats().ClosedSlow >= 1 && h.disconnects(id) == 1
	})
	close(stop)
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	t.Logf("stats after shedding, %d requests sent: %+v", sent.Load(), st)
	if st.ClosedSlow != 1 || st.ConnsOpen != 1 {
		t.Fatalf("stats %+v", st)
	}
	// Writes to the shed connection are dropped, not queued.
	h.mu.Lock()
	sc := h.conns[id]
	h.mu.Unlock()
	dropped := s.Stats().DroppedWrites
	sc.Reply(actors.Response{Fields: &protocol.RawBody{Body: make([]byte, 100)}})
	if s.Stats().DroppedWrites != dropped+1 {
		t.Fatal("Write after close was not dropped")
	}
	roundTrip(t, good, 30_000, []byte("still served"))
}

// A peer that reads is not shed, even when a pipelined burst of large
// responses comes close to the limit.
func TestLargeResponsesToAReaderAreNotShed(t *testing.T) {
	h := newEchoHandler()
	s := startServer(t, h, Options{MaxOutboundBytes: 4 << 20})
	c := dial(t, s)
	for round := range uint32(5) {
		var reqs []byte
		for i := range uint32(3) {
			reqs = append(reqs, request(bigCode, round*10+i, nil)...)
		}
		if _, err := c.Write(reqs); err != nil {
			t.Fatal(err)
		}
		for i := range uint32(3) {
			f, err := readFrame(c, 5*time.Second)
			if err != nil || f.Opaque != round*10+i || len(f.Body) != bigSize {
				t.Fatalf("round %d response %d: %v", round, i, err)
			}
		}
	}
	if st := s.Stats(); st.ClosedSlow != 0 || st.DroppedWrites != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestIdleTimeout(t *testing.T) {
	h := newEchoHandler()
	s := startServer(t, h, Options{IdleTimeout: 300 * time.Millisecond})
	c := dial(t, s)
	roundTrip(t, c, 1, nil)
	start := time.Now()
	expectClosed(t, c)
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("closed after %s, before the idle timeout", d)
	}
	if st := s.Stats(); st.ClosedIdle != 1 {
		t.Fatalf("stats %+v", st)
	}
	// A busy connection stays open: round trips for over three idle
	// timeouts, and the server must not close it as idle (roundTrip fails
	// the test on a closed connection, the count tells the cause).
	c2 := dial(t, s)
	opaque := uint32(10)
	if testwait.Until(testwait.Wall, time.Second, func() bool {
		roundTrip(t, c2, opaque, nil)
		opaque++
		return s.Stats().ClosedIdle != 1
	}) {
		t.Fatalf("a busy connection closed as idle: stats %+v", s.Stats())
	}
}

// TestIdleTimeoutSparesWaitingPeers: a connection whose only traffic is a
// held long poll, or a request not answered yet, is not idle: closing it
// would lose the answer. Once answered, it is idle again.
func TestIdleTimeoutSparesWaitingPeers(t *testing.T) {
	h := newEchoHandler()
	s := startServer(t, h, Options{IdleTimeout: 200 * time.Millisecond})
	for _, tc := range []struct {
		name   string
		parked bool
		opaque uint32 // distinct: connID finds a connection by it
	}{{"parked long poll", true, 77}, {"unanswered request", false, 78}} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, s)
			opaque := tc.opaque
			if _, err := c.Write(request(parkCode, opaque, nil)); err != nil {
				t.Fatal(err)
			}
			id := connID(t, h, opaque)
			h.mu.Lock()
			sc := h.conns[id]
			h.mu.Unlock()
			if !tc.parked {
				sc.(interface{ Parked(int) }).Parked(-1) // held, but not as a long poll
			}
			// Many idle periods pass with the peer waiting.
			if f, err := readFrame(c, time.Second); err == nil {
				t.Fatalf("unexpected frame %+v", f)
			} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
				t.Fatalf("the waiting connection was closed: %v", err)
			}
			closedBefore := s.Stats().ClosedIdle
			if tc.parked {
				sc.(interface{ Parked(int) }).Parked(-1) // taken out, as the broker does before answering
			}
			sc.Reply(actors.Response{Code: parkCode, Opaque: opaque, Status: protocol.StatusPullNotFound})
			f, err := readFrame(c, 3*time.Second)
			if err != nil || f.Opaque != opaque || f.Status != protocol.StatusPullNotFound {
				t.Fatalf("the held answer: %+v, %v", f, err)
			}
			// Answered: now it is idle.
			expectClosed(t, c)
			if st := s.Stats(); st.ClosedIdle != closedBefore+1 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

func TestStopClosesConnections(t *testing.T) {
	base := runtime.NumGoroutine()
	h := newEchoHandler()
	s := NewServer(h, Options{Addr: "127.0.0.1:0", Logger: testLogger(), NumEventLoop: 2})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	var clients []net.Conn
	for i := range uint32(3) {
		c, err := net.DialTimeout("tcp", s.Addr(), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		roundTrip(t, c, i, nil)
		clients = append(clients, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	t.Logf("Stop took %s", time.Since(start))
	for _, c := range clients {
		expectClosed(t, c)
	}
	if n := h.totalDisconnects(); n != 3 {
		t.Fatalf("Disconnected %d times, want 3", n)
	}
	if _, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		t.Fatal("still accepting after Stop")
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	for _, c := range clients {
		c.Close()
	}
	waitGoroutines(t, base)
}

func TestStartErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	base := runtime.NumGoroutine()
	s := NewServer(newEchoHandler(), Options{Addr: ln.Addr().String(), Logger: testLogger()})
	err = s.Start()
	if err == nil {
		_ = s.Stop(context.Background())
		t.Fatal("Start on a port in use succeeded")
	}
	if !strings.Contains(err.Error(), "in use") {
		t.Logf("error does not say 'in use': %v", err)
	}
	t.Logf("Start: %v", err)
	if err := s.Stop(context.Background()); err != nil {
		t.Fatalf("Stop after a failed Start: %v", err)
	}
	waitGoroutines(t, base)

	s2 := NewServer(newEchoHandler(), Options{Addr: "tcp://256.0.0.1:bad", Logger: testLogger()})
	if err := s2.Start(); err == nil {
		t.Fatal("Start on a bad address succeeded")
	}
}

func TestStartTwiceAndStopBeforeStart(t *testing.T) {
	s := NewServer(newEchoHandler(), Options{Addr: "127.0.0.1:0", Logger: testLogger()})
	if err := s.Stop(context.Background()); err != nil {
		t.Fatalf("Stop before Start: %v", err)
	}
	s2 := startServer(t, newEchoHandler(), Options{})
	if err := s2.Start(); err == nil {
		t.Fatal("second Start succeeded")
	}
}

// TestManyResponsesInOneFlush: more responses gathered for one flush than
// one writev takes (IOV_MAX) all arrive, in order.
func TestManyResponsesInOneFlush(t *testing.T) {
	h := newEchoHandler()
	s := startServer(t, h, Options{})
	c := dial(t, s)
	const n = 3000
	var burst []byte
	for i := range uint32(n) {
		burst = append(burst, request(protocol.CodeHeartbeat, 1+i, nil)...)
	}
	go c.Write(burst)
	for i := range uint32(n) {
		f, err := readFrame(c, 5*time.Second)
		if err != nil || f.Opaque != 1+i {
			t.Fatalf("response %d of %d: %+v, %v", i, n, f, err)
		}
	}
}

// TestDirectWrites checks the answers written straight from the answering
// goroutine: a sync round trip is one, and an answer larger than the
// socket's buffer to a peer that is not reading is finished by the loop,
// with the answer after it kept behind it, both intact.
func TestDirectWrites(t *testing.T) {
	h := newEchoHandler()
	s := startServer(t, h, Options{MaxOutboundBytes: 64 << 20})
	c := dial(t, s)
	for i := range uint32(20) {
		roundTrip(t, c, i, []byte("ping"))
	}
	if got := s.Stats().DirectWrites; got < 10 {
		t.Fatalf("DirectWrites = %d after 20 sync round trips, want most of them", got)
	}

	// 8 MiB is far more than loopback takes while the peer does not read
	// (its receive buffer fixed small: no autotuning).
	if err := c.(*net.TCPConn).SetReadBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	// The last answer's count lands just after its bytes (later still on
	// a loaded machine): take it once its Reply has returned.
	h.waitAnswered(t, 20)
	direct0 := s.Stats().DirectWrites
	big := make([]byte, 8<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	if _, err := c.Write(request(protocol.CodeSendMessage, 100, big)); err != nil {
		t.Fatal(err)
	}
	// Wait until the big answer is under way (its Reply returned: partly
	// in the kernel, the rest queued for the loop), then ask again.
	h.waitAnswered(t, 21)
	if _, err := c.Write(request(protocol.CodeSendMessage, 101, []byte("after"))); err != nil {
		t.Fatal(err)
	}
	f, err := readFrame(c, 10*time.Second)
	if err != nil || f.Opaque != 100 || !bytes.Equal(f.Body, big) {
		t.Fatalf("first answer: opaque %v, body intact %v, err %v", f.Opaque, err == nil && bytes.Equal(f.Body, big), err)
	}
	f, err = readFrame(c, 5*time.Second)
	if err != nil || f.Opaque != 101 || string(f.Body) != "after" {
		t.Fatalf("second answer: %+v, %v", f, err)
	}
	if got := s.Stats().DirectWrites - direct0; got != 0 {
		t.Fatalf("%d of the two answers behind a full socket buffer counted as direct, want 0", got)
	}
	// Once the backlog is gone, answers go direct again.
	before := s.Stats().DirectWrites
	for i := range uint32(5) {
		roundTrip(t, c, 200+i, []byte("ping"))
	}
	if got := s.Stats().DirectWrites - before; got < 3 {
		t.Fatalf("%d of 5 round trips after the backlog were direct, want at least 3", got)
	}
	// A parked request (a long poll) does not stop the answers to the
	// others from going direct.
	if _, err := c.Write(request(parkCode, 300, nil)); err != nil {
		t.Fatal(err)
	}
	before = s.Stats().DirectWrites
	for i := range uint32(5) {
		roundTrip(t, c, 400+i, []byte("ping"))
	}
	if got := s.Stats().DirectWrites - before; got < 3 {
		t.Fatalf("%d of 5 round trips beside a parked request were direct, want at least 3", got)
	}
	if st := s.Stats(); st.DroppedWrites != 0 || st.ClosedSlow != 0 {
		t.Fatalf("stats %+v", st)
	}
}
