package client

import (
	"bufio"
	"bytes"
	"context"
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

// TestFullWriteBufferDrains: a peer that stops reading fills the kernel's
// buffers and then the connection's write buffer (senders wait for room).
// Heartbeats keep falling due meanwhile; once the peer reads again, every
// accepted send must reach it. A heartbeat that waited for room would stall
// the writer for good: only the writer makes room.
func TestFullWriteBufferDrains(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- c
		}
	}()
	p, err := NewProducer(ln.Addr().String(), WithHeartbeat(time.Millisecond), WithRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var srv net.Conn
	select {
	case srv = <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("no connection")
	}
	defer srv.Close()

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
