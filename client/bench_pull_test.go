package client

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"

	"github.com/wharfmq/wharf/protocol"
)

// cannedPullAnswer is a pull answer of n messages of size bytes, as the
// broker writes one (topic, hosts and properties repeating), less the
// frame's prefix and header: its fields and body.
func cannedPullAnswer(tb testing.TB, n, size int) (fields, body []byte) {
	msgs := make([]protocol.MessageExt, n)
	for i := range msgs {
		msgs[i] = protocol.MessageExt{
			Message: protocol.Message{Topic: "bench", Body: make([]byte, size),
				Properties: map[string]string{protocol.PropertyTags: "t", protocol.PropertyUniqKey: "0A0102032345DEADBEEF01020304ABCD"}},
			QueueID: 1, QueueOffset: int64(i), CommitLogOffset: int64(i) * 1200, StoreSize: 1200,
			BornTimestamp: 1700000000000, StoreTimestamp: 1700000000003,
			BornHost: "10.0.0.9:53000", StoreHost: "10.0.0.1:10911", MsgID: "0A00000100002A9F0000000200000000",
		}
	}
	b, err := protocol.AppendResponse(nil, protocol.CodePullMessage, 0, protocol.StatusOK, "",
		&protocol.PullResponse{NextBeginOffset: int64(n), MaxOffset: int64(n), Messages: msgs})
	if err != nil {
		tb.Fatal(err)
	}
	f, err := protocol.DecodeFrame(b, protocol.Limits{})
	if err != nil {
		tb.Fatal(err)
	}
	return f.Fields, f.Body
}

// servePulls answers every request on nc with the canned pull answer
// (its opaque the request's) until nc is closed.
func servePulls(nc net.Conn, fields, body []byte) {
	defer nc.Close()
	br := bufio.NewReader(nc)
	var out []byte
	for {
		var prefix [protocol.PrefixSize]byte
		if _, err := io.ReadFull(br, prefix[:]); err != nil {
			return
		}
		frame := make([]byte, 4+binary.BigEndian.Uint32(prefix[:]))
		copy(frame, prefix[:])
		if _, err := io.ReadFull(br, frame[protocol.PrefixSize:]); err != nil {
			return
		}
		f, err := protocol.DecodeFrame(frame, protocol.Limits{})
		if err != nil || f.IsOneway() {
			continue // the heartbeat
		}
		out = protocol.AppendFrame(out[:0], &protocol.Frame{Code: f.Code, Opaque: f.Opaque, Flags: protocol.FlagResponse,
			Status: protocol.StatusOK, Fields: fields, Body: body})
		if _, err := nc.Write(out); err != nil {
			return
		}
	}
}

// BenchmarkPullClient32x1KiB is the client's whole pull of 32 messages of
// 1 KiB over an in-memory connection: the request, the read path
// (conn.readLoop), the decode and the checks of pull(). The peer's share
// (reading the request, copying the canned answer) is in the figure too.
func BenchmarkPullClient32x1KiB(b *testing.B) {
	fields, body := cannedPullAnswer(b, 32, 1024)
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		client, server := net.Pipe()
		go servePulls(server, fields, body)
		return client, nil
	}
	o, err := buildOptions([]Option{WithDialer(dial)})
	if err != nil {
		b.Fatal(err)
	}
	c := newConn("in-memory:1", &o, nil)
	defer c.close()
	ctx := context.Background()
	for _, sub := range []string{"", "t || u"} {
		b.Run("sub="+sub, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(32 * 1024)
			for b.Loop() {
				res, err := pull(ctx, c, "g", "bench", 1, 0, 32, PullOptions{Subscription: sub})
				if err != nil || len(res.Messages) != 32 {
					b.Fatal(len(res.Messages), err)
				}
			}
		})
	}
}
