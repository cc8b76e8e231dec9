package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// countingWriter counts the bytes written to it.
type countingWriter struct{ n atomic.Int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n.Add(int64(len(p))); return len(p), nil }

// silentPeer is a producer built with opts, connected to a peer on
// loopback that reads nothing until the test reads from srv; both are
// closed when the test ends.
func silentPeer(t *testing.T, opts ...Option) (p *Producer, srv net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- c
		}
	}()
	p, err = NewProducer(ln.Addr().String(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	select {
	case srv = <-accepted:
		t.Cleanup(func() { srv.Close() })
	case <-time.After(5 * time.Second):
		t.Fatal("no connection")
	}
	return p, srv
}

// TestFullWriteBufferDrains: a peer that stops reading fills the kernel's
// buffers and then the connection's write buffer (senders wait for room).
// Heartbeats keep falling due meanwhile; once the peer reads again, every
// accepted send must reach it. A heartbeat that waited for room would stall
// the writer for good: only the writer makes room.
func TestFullWriteBufferDrains(t *testing.T) {
	p, srv := silentPeer(t, WithHeartbeat(time.Millisecond), WithRetries(0))

	body := make([]byte, 256<<10)
	sent := 0
	for full := false; !full; {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := p.SendOneway(ctx, &protocol.Message{Topic: "T", Body: body}, ToQueue(0))
		cancel()
		switch {
		case err == nil:
			sent++
		case ctx.Err() != nil:
			full = true // waited 200 ms for room
		default:
			t.Fatalf("send %d: %v", sent, err)
		}
		if sent > 400 {
			t.Fatal("the write buffer never filled: 100 MB accepted by a peer that does not read")
		}
	}
	// A real socket held full: heartbeats (every 1 ms) must fall due while
	// it is, and nothing observable marks that they did; 50 ms is dozens.
	time.Sleep(50 * time.Millisecond)

	var got countingWriter
	go io.Copy(&got, srv)
	want := int64(sent) * int64(len(body))
	if !testwait.Until(testwait.Wall, 15*time.Second, func() bool { return got.n.Load() >= want }) {
		t.Fatalf("the peer got %d bytes of the %d accepted sends (%d bytes of bodies): the writer stalled", got.n.Load(), sent, want)
	}
	// And the connection still works.
	if err := p.SendOneway(context.Background(), &protocol.Message{Topic: "T", Body: body}, ToQueue(0)); err != nil {
		t.Fatalf("send after draining: %v", err)
	}
}

// TestReadRest: a frame's rest comes whole and in order whether bufio holds
// none, part or all of it, and the next frame reads on after it.
func TestReadRest(t *testing.T) {
	for _, size := range []int{1, directRead - 1, directRead, directRead + 1, 3 * directRead} {
		for _, bufSize := range []int{16, directRead, 8 * directRead} {
			data := make([]byte, 2*(8+size))
			for i := range data {
				data[i] = byte(i * 7)
			}
			src := bytes.NewReader(data)
			br := bufio.NewReaderSize(src, bufSize)
			for frame := range 2 {
				at := frame * (8 + size)
				var prefix [8]byte
				if _, err := io.ReadFull(br, prefix[:]); err != nil {
					t.Fatal(err)
				}
				rest := make([]byte, size)
				if err := readRest(br, src, rest); err != nil {
					t.Fatalf("size %d, bufio %d, frame %d: %v", size, bufSize, frame, err)
				}
				if !bytes.Equal(prefix[:], data[at:at+8]) || !bytes.Equal(rest, data[at+8:at+8+size]) {
					t.Fatalf("size %d, bufio %d, frame %d: wrong bytes", size, bufSize, frame)
				}
			}
		}
	}
}

// TestBlockingCallWriteBounded: a blocking call alone on its connection
// writes its frame itself, once, without waiting for the peer. Against a
// peer that stopped reading each call still ends by its deadline, and what
// the kernel did not take of a frame goes out after it through the writer:
// once the peer reads, every frame arrives whole and in order.
func TestBlockingCallWriteBounded(t *testing.T) {
	const timeout = 100 * time.Millisecond
	p, srv := silentPeer(t, WithTimeout(timeout), WithRetries(0)) // read from only at the end
	// A small send first, which times out: the session's hello is out, so
	// each big send is alone in the buffer.
	send := func(i int, body []byte) {
		done := make(chan error, 1)
		start := time.Now()
		go func() {
			_, err := p.Send(context.Background(), &protocol.Message{Topic: "T", Body: body}, ToQueue(0))
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Fatalf("send %d: answered by a peer that never answers", i)
			}
			if took := time.Since(start); took > timeout+2*time.Second {
				t.Fatalf("send %d took %v with a timeout of %v", i, took, timeout)
			}
		case <-time.After(timeout + 5*time.Second):
			t.Fatalf("send %d still blocked %v after its deadline: its write waits for the peer", i, 5*time.Second)
		}
	}
	send(-1, []byte("x"))
	const big = 6
	for i := range big { // 24 MiB: more than the kernel's buffers hold
		body := make([]byte, 4<<20)
		for j := range body {
			body[j] = byte(i)
		}
		send(i, body)
	}
	// The peer reads: the hello, the small send, then the big ones that
	// were queued (a send that found the buffer full timed out without
	// being queued), each whole and in order. The first big one went in
	// part from its caller, the rest through the writer.
	br := bufio.NewReaderSize(srv, 1<<20)
	var bodies []int // -1 for the small one
	for {
		srv.SetReadDeadline(time.Now().Add(2 * time.Second))
		var prefix [protocol.PrefixSize]byte
		if _, err := io.ReadFull(br, prefix[:]); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				break // nothing more came
			}
			t.Fatalf("after %v: %v", bodies, err)
		}
		frame := make([]byte, 4+int(binary.BigEndian.Uint32(prefix[:4])))
		copy(frame, prefix[:])
		if _, err := io.ReadFull(br, frame[protocol.PrefixSize:]); err != nil {
			t.Fatalf("after %v: a frame cut short: %v", bodies, err)
		}
		f, err := protocol.DecodeFrame(frame, protocol.Limits{})
		if err != nil {
			t.Fatalf("after %v: a frame that does not decode: %v", bodies, err)
		}
		if f.Code != protocol.CodeSendMessage {
			continue // the hello
		}
		if string(f.Body) == "x" && len(bodies) == 0 {
			bodies = append(bodies, -1)
			continue
		}
		if len(f.Body) != 4<<20 || f.Body[0] != f.Body[len(f.Body)-1] || len(bodies) == 0 || int(f.Body[0]) <= bodies[len(bodies)-1] {
			t.Fatalf("after %v: a send of %d bytes marked %d", bodies, len(f.Body), f.Body[0])
		}
		bodies = append(bodies, int(f.Body[0]))
	}
	if len(bodies) < 3 || bodies[1] != 0 || bodies[2] != 1 {
		t.Fatalf("the peer got sends %v, want the small one, then 0, 1 and maybe more in order", bodies)
	}
	t.Logf("the peer got sends %v", bodies)
}
