package client

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

type queueZero struct{}

func (queueZero) pick() int32 { return 0 }

// TestFullBatchWrittenByItsCaller: an open batch that reaches
// callerWriteBytes with no write under way is written by the SendAsync
// that filled it, not left for the writer goroutine (which, on a busy P,
// may not run until the sender blocks: batches then grew to the whole
// in-flight window, one round trip at a time). With a write under way it
// keeps growing. The session here has no writer goroutine at all.
func TestFullBatchWrittenByItsCaller(t *testing.T) {
	for _, c := range []struct {
		name    string
		writing bool
	}{{"idle connection", false}, {"write under way", true}} {
		t.Run(c.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			o := defaultOptions()
			cn := newConn(ln.Addr().String(), &o, nil)
			nc, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			peer, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer peer.Close()
			s := newSession(cn, nc)
			cn.s = s
			s.writing = c.writing
			body := strings.Repeat("x", 1024)
			n := 0
			for {
				m := msg("T", body)
				cn.sendCoalesced(context.Background(), "g", m, queueZero{}, 0, time.Now(), time.Minute, partFunc(func(sendPart) {}))
				n++
				s.mu.Lock()
				open, queued := s.open, len(s.wbuf)
				s.mu.Unlock()
				if open == nil || n > 2*callerWriteBytes/1024 {
					break
				}
				if queued != 0 {
					t.Fatalf("after %d sends: %d bytes queued with the batch still open", n, queued)
				}
			}
			if c.writing {
				if s.open == nil || len(s.open.parts) != n {
					t.Fatalf("with a write under way the batch was sealed after %d sends", n)
				}
				return
			}
			if s.open != nil {
				t.Fatalf("a batch of %d messages (%d bytes) still open: nobody wrote it", len(s.open.parts), s.open.bytes)
			}
			if len(s.wbuf) != 0 || s.writing {
				t.Fatalf("after the caller's write: %d bytes queued, writing=%v", len(s.wbuf), s.writing)
			}
			if n*1024 < callerWriteBytes*3/4 {
				t.Fatalf("written after %d sends, before the batch reached %d bytes", n, callerWriteBytes)
			}
			_ = peer.SetReadDeadline(time.Now().Add(10 * time.Second))
			f := readFrame(t, peer)
			req, err := protocol.DecodeRequest(f, protocol.DefaultLimits())
			if err != nil {
				t.Fatal(err)
			}
			batch, ok := req.(*protocol.SendBatchRequest)
			if !ok || len(batch.Messages) != n {
				t.Fatalf("the peer got %T, want a SEND_BATCH of %d messages", req, n)
			}
		})
	}
}

// readFrame reads one frame from r.
func readFrame(t *testing.T, r io.Reader) *protocol.Frame {
	t.Helper()
	var prefix [protocol.PrefixSize]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4+int(binary.BigEndian.Uint32(prefix[:4]))) // the length counts all but itself
	copy(buf, prefix[:])
	if _, err := io.ReadFull(r, buf[protocol.PrefixSize:]); err != nil {
		t.Fatal(err)
	}
	f, err := protocol.DecodeFrame(buf, protocol.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	return f
}
