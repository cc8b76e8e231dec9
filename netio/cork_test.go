package netio

import (
	"bytes"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// corkable is what the writer sees of a connection.
type corkable interface {
	actors.Conn
	Cork()
	Uncork()
	Parked(int)
}

// parkedConn sends n parked requests (opaques 1..n) on c and returns the
// server's side of c, for the test to answer them from its own goroutine
// as an actor would.
func parkedConn(t *testing.T, h *echoHandler, c net.Conn, n int) corkable {
	t.Helper()
	var burst []byte
	for i := range n {
		burst = append(burst, request(parkCode, uint32(1+i), nil)...)
	}
	if _, err := c.Write(burst); err != nil {
		t.Fatal(err)
	}
	id := connID(t, h, uint32(n))
	h.mu.Lock()
	sc := h.conns[id].(corkable)
	h.mu.Unlock()
	return sc
}

func answer(sc corkable, opaque uint32, body []byte) {
	sc.Parked(-1)
	sc.Reply(actors.Response{Code: parkCode, Opaque: opaque, Status: protocol.StatusOK, Fields: &protocol.RawBody{Body: body}})
}

// TestCorkedAnswersLeaveTogether: answers written while a connection is
// corked (by the corking goroutine or any other) are held until Uncork,
// which writes them in one writev, in the order they were written.
func TestCorkedAnswersLeaveTogether(t *testing.T) {
	h := newEchoHandler()
	s := startServer(t, h, Options{})
	c := dial(t, s)
	const n = 10
	sc := parkedConn(t, h, c, n)
	sc.Cork()
	for i := range uint32(n - 1) {
		answer(sc, 1+i, []byte(fmt.Sprint("a", i)))
	}
	done := make(chan struct{})
	go func() { // another actor's answer, while the writer holds the cork
		answer(sc, n, []byte("other"))
		close(done)
	}()
	<-done
	if f, err := readFrame(c, 100*time.Millisecond); err == nil {
		t.Fatalf("answer %d arrived while the connection was corked", f.Opaque)
	}
	direct := s.Stats().DirectWrites
	sc.Uncork()
	for i := range uint32(n) {
		want := fmt.Sprint("a", i)
		if i == n-1 {
			want = "other"
		}
		f, err := readFrame(c, 3*time.Second)
		if err != nil || f.Opaque != 1+i || string(f.Body) != want {
			t.Fatalf("answer %d: %+v, %v", i, f, err)
		}
	}
	if got := s.Stats().DirectWrites - direct; got != 1 {
		t.Fatalf("the corked answers took %d direct writes, want one writev", got)
	}
	roundTrip(t, c, 100, []byte("after")) // not corked any more
}

// TestCorkedAnswersBeyondTheSocketBuffer: what the kernel does not take of
// the corked answers (the peer is not reading) follows through the loop,
// and an answer written after Uncork stays behind them; all arrive intact
// and in order once the peer reads.
func TestCorkedAnswersBeyondTheSocketBuffer(t *testing.T) {
	h := newEchoHandler()
	s := startServer(t, h, Options{MaxOutboundBytes: 64 << 20})
	c := dial(t, s)
	if err := c.(*net.TCPConn).SetReadBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	const n = 8
	sc := parkedConn(t, h, c, n+1)
	bodies := make([][]byte, n+1)
	sc.Cork()
	for i := range n {
		bodies[i] = bytes.Repeat([]byte{byte('a' + i)}, 1<<20)
		answer(sc, uint32(1+i), bodies[i])
	}
	sc.Uncork()
	bodies[n] = []byte("last")
	answer(sc, n+1, bodies[n])
	for i := range n + 1 {
		f, err := readFrame(c, 10*time.Second)
		if err != nil || f.Opaque != uint32(1+i) || !bytes.Equal(f.Body, bodies[i]) {
			t.Fatalf("answer %d: opaque %v, intact %v, err %v", i, f != nil && f.Opaque == uint32(1+i), f != nil && bytes.Equal(f.Body, bodies[i]), err)
		}
	}
	testwait.For(t, testwait.Wall, 3*time.Second, "nothing left queued", func() bool { return s.Stats().OutboundQueued == 0 })
	if st := s.Stats(); st.DroppedWrites != 0 || st.ClosedSlow != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// An Uncork without its Cork is the caller's bug: it panics, and leaves
// the connection usable.
func TestUncorkWithoutCorkPanics(t *testing.T) {
	h := newEchoHandler()
	s := startServer(t, h, Options{})
	c := dial(t, s)
	sc := parkedConn(t, h, c, 1)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Uncork without a Cork did not panic")
			}
		}()
		sc.Uncork()
	}()
	answer(sc, 1, []byte("still"))
	if f, err := readFrame(c, 3*time.Second); err != nil || f.Opaque != 1 || string(f.Body) != "still" {
		t.Fatalf("answer after the panic: %+v, %v", f, err)
	}
}
