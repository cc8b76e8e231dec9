package netio

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/protocol"
)

// sendAnswerer answers every frame as the broker answers a stored SEND,
// with one shared (read-only) set of fields, so that what the benchmark
// counts is the server's own work per request, and gives the burst back.
type sendAnswerer struct{ fields protocol.Fields }

func (h *sendAnswerer) Deliver(in *actors.Inbound) {
	for _, f := range in.Frames {
		in.Conn.Reply(actors.Response{Code: f.Code, Opaque: f.Opaque, Status: protocol.StatusOK, Fields: h.fields})
	}
	if in.Release != nil {
		in.Release() // as the broker's writer does after the append
	}
}

func (h *sendAnswerer) Disconnected(actors.Conn) {}

// BenchmarkServerSend1KiB is the server's cost per async send: 256 SEND
// frames of 1 KiB written at once (a client with 256 in flight, its
// coalescing off), every answer read back. allocs/op is per request, the
// client's reads included (they allocate nothing).
func BenchmarkServerSend1KiB(b *testing.B) {
	const window = 256
	h := &sendAnswerer{fields: &protocol.SendResponse{MsgID: "7F00000100002A9F0000000000000000", QueueID: 3, QueueOffset: 12345}}
	s := startServer(b, h, Options{NumEventLoop: 1})
	c, err := net.DialTimeout("tcp", s.Addr(), 2*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	req := &protocol.SendRequest{ProducerGroup: "bench-producer", Topic: "bench", QueueID: 3, BornTimestamp: 1700000000000,
		Properties: map[string]string{protocol.PropertyUniqKey: "0A0102032345DEADBEEF01020304ABCD"}, Body: make([]byte, 1024)}
	var burst []byte
	for i := range window {
		if burst, err = protocol.AppendRequest(burst, uint32(i), 0, req); err != nil {
			b.Fatal(err)
		}
	}
	buf := make([]byte, 1<<20)
	b.ReportAllocs()
	b.SetBytes(1024)
	b.ResetTimer()
	for done := 0; done < b.N; done += window {
		if _, err := c.Write(burst); err != nil {
			b.Fatal(err)
		}
		if err := readAnswers(c, buf, window); err != nil {
			b.Fatal(err)
		}
	}
}

// readAnswers reads n whole frames from c into buf (reused), allocating
// nothing.
func readAnswers(c net.Conn, buf []byte, n int) error {
	have, at := 0, 0
	for n > 0 {
		if have-at >= 4 {
			if size := 4 + int(binary.BigEndian.Uint32(buf[at:])); have-at >= size {
				at += size
				n--
				continue
			}
		}
		copy(buf, buf[at:have])
		have, at = have-at, 0
		k, err := c.Read(buf[have:])
		if err != nil && (err != io.EOF || k == 0) {
			return err
		}
		have += k
	}
	return nil
}
