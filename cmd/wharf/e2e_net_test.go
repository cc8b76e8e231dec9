package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// TestE2ELongPolling: a pull on an empty queue with a 2 s suspend returns
// as soon as a message is stored (well under the suspend time after the
// send), and an empty pull returns PULL_NOT_FOUND after about the suspend.
func TestE2ELongPolling(t *testing.T) {
	t.Parallel()
	const topic, suspend = "lp", 2 * time.Second
	b := startBroker(t, t.TempDir())
	ctx := e2eCtx(t, 30*time.Second)
	e2eCreateTopic(t, ctx, e2eAdmin(t, b.addr), topic, 2)
	pc := e2ePuller(t, b.addr, "lp-group")
	p := e2eProducer(t, b.addr)

	type pulled struct {
		res PullOrErr
		at  time.Time
	}
	got := make(chan pulled, 1)
	pullStart := time.Now()
	go func() {
		res, err := pc.Pull(ctx, topic, 1, 0, 32, client.PullOptions{Suspend: suspend})
		got <- pulled{PullOrErr{res, err}, time.Now()}
	}()
	// The pull is held at the broker: it must not come back before a
	// message does (and the send below comes after it reached the broker).
	if testwait.Chan(got, 300*time.Millisecond) {
		t.Fatal("a pull on an empty queue came back at once: not held")
	}
	sendAt := time.Now()
	if _, err := p.Send(ctx, e2eMessage(topic, "lp-1"), client.ToQueue(1)); err != nil {
		t.Fatal(err)
	}
	var r pulled
	select {
	case r = <-got:
	case <-time.After(suspend + 5*time.Second):
		t.Fatal("held pull never returned")
	}
	if r.res.err != nil {
		t.Fatalf("held pull: %v", r.res.err)
	}
	if r.res.Status != protocol.PullFound || len(r.res.Messages) != 1 || r.res.Messages[0].Keys()[0] != "lp-1" {
		t.Fatalf("held pull: status %v with %d messages", r.res.Status, len(r.res.Messages))
	}
	if lag := r.at.Sub(sendAt); lag > 500*time.Millisecond {
		t.Errorf("held pull returned %v after the send; want well under the %v suspend", lag, suspend)
	}
	if r.at.Sub(pullStart) > suspend-500*time.Millisecond {
		t.Errorf("held pull took %v in all: it waited for the suspend time", r.at.Sub(pullStart))
	}
	t.Logf("message arrived %v after its send (pull held %v)", r.at.Sub(sendAt).Round(time.Millisecond), r.at.Sub(pullStart).Round(time.Millisecond))

	// Nothing new: PULL_NOT_FOUND at the suspend timeout.
	start := time.Now()
	res, err := pc.Pull(ctx, topic, 1, 1, 32, client.PullOptions{Suspend: suspend})
	took := time.Since(start)
	if err != nil {
		t.Fatalf("empty pull: %v", err)
	}
	if res.Status != protocol.PullNoNewMsg || res.NextBeginOffset != 1 {
		t.Fatalf("empty pull: status %v next %d, want PULL_NOT_FOUND (NO_NEW_MSG) at 1", res.Status, res.NextBeginOffset)
	}
	if took < suspend*8/10 || took >= suspend+2*time.Second {
		t.Errorf("empty pull returned after %v, want about %v", took, suspend)
	}
	// Without a suspend time an empty pull answers at once.
	start = time.Now()
	if res, err := pc.Pull(ctx, topic, 0, 0, 32, client.PullOptions{}); err != nil || res.Status != protocol.PullNoNewMsg {
		t.Fatalf("pull without suspend: %v %v", res.Status, err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("pull without suspend took %v", took)
	}
}

// PullOrErr pairs a pull's result with its error.
type PullOrErr struct {
	client.PullResult
	err error
}

// e2eHealthy checks that a well-behaved client can produce and consume:
// it sends a message with a fresh key to queue 0 of topic and pulls it
// back by its offset.
func e2eHealthy(t *testing.T, b *e2eBroker, topic, what string) {
	t.Helper()
	b.mustBeAlive(what)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	p, err := client.NewProducer(b.addr)
	if err != nil {
		t.Fatalf("%s: a healthy producer cannot connect: %v", what, err)
	}
	defer p.Close()
	key := fmt.Sprintf("healthy-%d", time.Now().UnixNano())
	res, err := p.Send(ctx, e2eMessage(topic, key), client.ToQueue(0))
	if err != nil {
		t.Fatalf("%s: healthy send: %v", what, err)
	}
	pc, err := client.NewPullConsumer(b.addr, "healthy")
	if err != nil {
		t.Fatalf("%s: healthy consumer: %v", what, err)
	}
	defer pc.Close()
	pr, err := pc.Pull(ctx, topic, 0, res.QueueOffset, 1, client.PullOptions{Suspend: time.Second})
	if err != nil {
		t.Fatalf("%s: healthy pull: %v", what, err)
	}
	if pr.Status != protocol.PullFound || len(pr.Messages) != 1 {
		t.Fatalf("%s: healthy pull: status %v, %d messages", what, pr.Status, len(pr.Messages))
	}
	if k, err := e2eCheckBody(pr.Messages[0].Body); err != nil || k != key {
		t.Fatalf("%s: healthy pull returned key %q (%v), want %s", what, k, err, key)
	}
	b.mustBeAlive(what)
}

// e2eDial opens a raw connection to the broker.
func e2eDial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// e2eReadToClose reads from c until the peer closes it or d passes; it
// returns what was read and whether the peer closed the connection.
func e2eReadToClose(c net.Conn, d time.Duration) ([]byte, bool) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	var got []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return got, false
			}
			return got, true // EOF or reset
		}
	}
}

// e2eFirstFrame decodes the first frame of b.
func e2eFirstFrame(b []byte) (*protocol.Frame, error) {
	n, err := protocol.Split(b, protocol.DefaultLimits())
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("no complete frame in %d bytes", len(b))
	}
	return protocol.DecodeFrame(b[:n], protocol.DefaultLimits())
}

// e2eExpectRejected checks that the broker answered FRAME_ILLEGAL on c and
// closed it.
func e2eExpectRejected(t *testing.T, c net.Conn, what string) {
	t.Helper()
	got, closed := e2eReadToClose(c, 5*time.Second)
	if !closed {
		t.Fatalf("%s: the broker did not close the connection within 5 s", what)
	}
	f, err := e2eFirstFrame(got)
	if err != nil {
		t.Fatalf("%s: no FRAME_ILLEGAL response before the close (%d bytes: %v)", what, len(got), err)
	}
	if !f.IsResponse() || f.Status != protocol.StatusFrameIllegal {
		t.Fatalf("%s: response status %v, want FRAME_ILLEGAL", what, f.Status)
	}
	t.Logf("%s: FRAME_ILLEGAL %q, connection closed", what, f.Remark)
}

// e2eFrame builds [len][headerLen][header][body].
func e2eFrame(header, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(4+len(header)+len(body)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(header)))
	b = append(b, header...)
	return append(b, body...)
}

// TestE2EHostileClients attacks the real broker with raw sockets: random
// bytes, a truncated frame, a 4 GiB declared length, msgpack bombs in the
// header and the body, and clients that send requests without ever reading
// the responses. After each the broker process must still run and serve a
// well-behaved client. The broker runs with small limits (1 MiB messages,
// maxFrameSize 1 MiB + 64 KiB, 2 MiB of unread responses per connection).
func TestE2EHostileClients(t *testing.T) {
	t.Parallel()
	const topic = "hostile"
	b := startBroker(t, t.TempDir(),
		"--maxMessageSize", "1048576",
		"--maxFrameSize", "1114116", // maxMessageSize + 4 + 64 KiB: Validate's minimum
		"--maxOutboundBytes", "2097152",
		"--log-level", "debug", // connection closes and their reasons
	)
	ctx := e2eCtx(t, 60*time.Second)
	e2eCreateTopic(t, ctx, e2eAdmin(t, b.addr), topic, 2)
	e2eHealthy(t, b, topic, "before")

	// A valid SEND frame, to truncate and to prefix garbage with.
	send, err := protocol.AppendRequest(nil, 7, 0, &protocol.SendRequest{
		ProducerGroup: "pg", Topic: topic, QueueID: 0, Body: []byte("never stored"),
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("random bytes", func(t *testing.T) {
		for seed := uint64(1); seed <= 3; seed++ {
			rng := rand.New(rand.NewPCG(seed, 42))
			junk := make([]byte, 64<<10)
			for i := range junk {
				junk[i] = byte(rng.Uint32())
			}
			c := e2eDial(t, b.addr)
			_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			_, _ = c.Write(junk) // may fail once the broker has closed
			if _, closed := e2eReadToClose(c, 5*time.Second); !closed {
				t.Fatalf("seed %d: the broker kept a connection sending random bytes open", seed)
			}
			e2eHealthy(t, b, topic, fmt.Sprintf("after random bytes (seed %d)", seed))
		}
		// Random bytes behind a plausible frame prefix: garbage msgpack.
		rng := rand.New(rand.NewPCG(7, 7))
		hdr := make([]byte, 200)
		for i := range hdr {
			hdr[i] = byte(rng.Uint32())
		}
		hdr[0] = 0xc1 // never used in msgpack
		c := e2eDial(t, b.addr)
		_, _ = c.Write(e2eFrame(hdr, []byte("body")))
		e2eExpectRejected(t, c, "garbage header")
		e2eHealthy(t, b, topic, "after a garbage header")
	})

	t.Run("truncated frame", func(t *testing.T) {
		// Half a frame, then close.
		c := e2eDial(t, b.addr)
		if _, err := c.Write(send[:len(send)/2]); err != nil {
			t.Fatal(err)
		}
		c.Close()
		e2eHealthy(t, b, topic, "after a truncated frame and close")
		// Half a frame, left open while others are served, then the rest:
		// the frame is reassembled and answered.
		c = e2eDial(t, b.addr)
		if _, err := c.Write(send[:10]); err != nil {
			t.Fatal(err)
		}
		e2eHealthy(t, b, topic, "while a truncated frame is pending")
		if _, err := c.Write(send[10:]); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 4096)
		n, err := io.ReadAtLeast(c, buf, protocol.PrefixSize)
		if err != nil {
			t.Fatalf("no response to a frame sent in two parts: %v", err)
		}
		for {
			if fl, _ := protocol.Split(buf[:n], protocol.DefaultLimits()); fl > 0 {
				break
			}
			m, err := c.Read(buf[n:])
			if err != nil {
				t.Fatalf("reading the response: %v", err)
			}
			n += m
		}
		f, err := e2eFirstFrame(buf[:n])
		if err != nil || f.Opaque != 7 || f.Status != protocol.StatusOK {
			t.Fatalf("response to a frame sent in two parts: %+v %v", f, err)
		}
		c.Close()
	})

	t.Run("4 GiB declared length", func(t *testing.T) {
		c := e2eDial(t, b.addr)
		if _, err := c.Write([]byte{0xff, 0xff, 0xff, 0xff}); err != nil {
			t.Fatal(err)
		}
		e2eExpectRejected(t, c, "length 0xFFFFFFFF")
		// Just above maxFrameSize.
		c = e2eDial(t, b.addr)
		_, _ = c.Write(binary.BigEndian.AppendUint32(nil, 1114116-4+1))
		e2eExpectRejected(t, c, "length maxFrameSize+1")
		e2eHealthy(t, b, topic, "after huge declared lengths")
	})

	t.Run("msgpack bombs", func(t *testing.T) {
		cases := map[string][]byte{
			// map32 claiming 2^32-1 pairs, 3 bytes behind it.
			"header map32 of 2^32-1 entries": e2eFrame([]byte{0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 'a', 0x01}, nil),
			// str32 key claiming 4 GiB.
			"header str32 of 4 GiB": e2eFrame([]byte{0x81, 0xdb, 0xff, 0xff, 0xff, 0xff, 'c', 'o', 'd', 'e'}, nil),
			// array32 of 2^32-1 elements as the fields value.
			"fields array32 of 2^32-1": e2eFrame(append([]byte{0x81, 0xa6, 'f', 'i', 'e', 'l', 'd', 's', 0xdd, 0xff, 0xff, 0xff, 0xff}, make([]byte, 16)...), nil),
			// 10,000 nested arrays.
			"header nested 10000 deep": e2eFrame(append(append([]byte{0x81, 0xa6, 'f', 'i', 'e', 'l', 'd', 's'}, strings.Repeat("\x91", 10000)...), 0xc0), nil),
		}
		// A SEND_BATCH whose body claims 2^32-1 messages.
		batch, err := protocol.AppendRequest(nil, 9, 0, &protocol.SendBatchRequest{
			ProducerGroup: "pg", Topic: topic, QueueID: 0,
			Messages: []protocol.Message{{Topic: topic, Body: []byte("x")}},
		})
		if err != nil {
			t.Fatal(err)
		}
		hl := binary.BigEndian.Uint32(batch[4:])
		cases["batch body array32 of 2^32-1 messages"] = e2eFrame(batch[8:8+hl], append([]byte{0xdd, 0xff, 0xff, 0xff, 0xff}, make([]byte, 64)...))
		for name, frame := range cases {
			c := e2eDial(t, b.addr)
			if _, err := c.Write(frame); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			e2eExpectRejected(t, c, name)
			e2eHealthy(t, b, topic, "after "+name)
		}
	})

	t.Run("clients that never read", func(t *testing.T) {
		// Queue 1 holds 12 messages of 200 KB: a pull of 4 is an 800 KB
		// response, as is a query by their key for 4.
		p := e2eProducer(t, b.addr)
		for i := range 12 {
			m := &protocol.Message{Topic: topic, Body: make([]byte, 200_000)}
			m.SetKeys("big")
			m.Body[0] = byte(i)
			if _, err := p.Send(ctx, m, client.ToQueue(1)); err != nil {
				t.Fatal(err)
			}
		}
		// The query needs the index: wait for it.
		a := e2eAdmin(t, b.addr)
		var msgs []protocol.MessageExt
		var err error
		if !testwait.Until(testwait.Wall, 10*time.Second, func() bool {
			msgs, err = a.QueryByKey(ctx, topic, "big", time.Time{}, time.Time{}, 4)
			return err == nil && len(msgs) == 4
		}) {
			t.Fatalf("query by key found %d of 4 messages (%v)", len(msgs), err)
		}

		// Two non-readers at once, each sending 1,000 pulls and queries
		// (800 KB answers each) and then a heartbeat every 20 ms until the
		// broker cuts it off; healthy clients work meanwhile.
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		for n := range 2 {
			c := e2eDial(t, b.addr)
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- e2eNonReader(b, c, topic, n, 1000, 20*time.Second)
			}()
		}
		for i := range 3 {
			e2eHealthy(t, b, topic, fmt.Sprintf("while clients do not read (%d)", i))
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
		if !b.waitLog("slow reader disconnected", 5*time.Second) {
			t.Errorf("the broker log has no \"slow reader disconnected\"")
		}
		e2eHealthy(t, b, topic, "after the non-readers")
		// The queue the non-readers hammered serves again within a few
		// seconds (the broker still works off their queued requests).
		pc := e2ePuller(t, b.addr, "after")
		st := time.Now()
		for {
			qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			res, err := pc.Pull(qctx, topic, 1, 0, 1, client.PullOptions{})
			cancel()
			if err == nil && res.Status == protocol.PullFound {
				break
			}
			if time.Since(st) > 15*time.Second {
				t.Fatalf("queue 1 still unserved %v after the non-readers were cut off: %v %v", time.Since(st), res.Status, err)
			}
		}
		t.Logf("queue 1 served again %v after the non-readers were cut off", time.Since(st).Round(time.Millisecond))
	})

	t.Run("unbounded pipelining", func(t *testing.T) {
		// A client that pipelines requests as fast as it can write (and
		// never reads) is cut off only once answers pile up, but the
		// broker reads and queues every request before that, and then
		// works off all of them, for a connection that is gone.
		c := e2eDial(t, b.addr)
		if err := e2eNonReader(b, c, topic, 0, 1<<30, 20*time.Second); err != nil {
			t.Fatal(err)
		}
		pc := e2ePuller(t, b.addr, "after-flood")
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := pc.Pull(qctx, topic, 1, 0, 1, client.PullOptions{}); err != nil {
			t.Fatalf("queue 1 after a flood of pipelined pulls: %v", err)
		}
	})

	t.Run("large responses to a reading client", func(t *testing.T) {
		// A well-behaved client whose pull or query matches more bytes than
		// maxOutboundBytes (or maxFrameSize) allows must get a smaller
		// answer, not be disconnected as a slow reader.
		pc := e2ePuller(t, b.addr, "big-reader")
		res, err := pc.Pull(ctx, topic, 1, 0, 32, client.PullOptions{})
		if err != nil {
			t.Fatalf("pulling 12 messages of 200 KB with maxOutboundBytes 2 MiB: %v", err)
		}
		if res.Status != protocol.PullFound || len(res.Messages) == 0 {
			t.Fatalf("pull: status %v, %d messages", res.Status, len(res.Messages))
		}
		a := e2eAdmin(t, b.addr)
		msgs, err := a.QueryByKey(ctx, topic, "big", time.Time{}, time.Time{}, 32)
		if err != nil || len(msgs) == 0 {
			t.Fatalf("query by key for 12 messages of 200 KB with maxOutboundBytes 2 MiB: %d messages, %v", len(msgs), err)
		}
	})

	e2eHealthy(t, b, topic, "at the end")
	if n := strings.Count(b.log(), "panic"); n > 0 {
		t.Errorf("the broker log mentions panic %d times", n)
	}
}

// e2eNonReader writes n pull and query requests to c (each answered with
// about 800 KB) without ever reading, then a heartbeat every poll interval
// (10 ms), until the broker logs that it cut c off as a slow reader;
// then it reads to check that the connection was really closed. It fails
// if either takes longer than d.
func e2eNonReader(b *e2eBroker, c net.Conn, topic string, id, n int, d time.Duration) error {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4096) // fill up early
	}
	const cutOff = `msg="slow reader disconnected"`
	remote := "remote=" + c.LocalAddr().String() + " "
	isCutOff := func() bool {
		for _, line := range strings.Split(b.log(), "\n") {
			if strings.Contains(line, cutOff) && strings.Contains(line, remote) {
				return true
			}
		}
		return false
	}
	var buf []byte
	deadline := time.Now().Add(d)
	sent := 0
	// write sends request i; reset reports that the broker reset c.
	write := func(i int, req protocol.Request) (reset bool, err error) {
		if buf, err = protocol.AppendRequest(buf[:0], uint32(i), 0, req); err != nil {
			return false, err
		}
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := c.Write(buf); err == nil {
			sent++
		} else if ne := net.Error(nil); !errors.As(err, &ne) || !ne.Timeout() {
			// Reset: cut off. (A full send buffer times out: keep going.)
			// The broker closes the connection before it logs why, so
			// the line may come a moment after the reset.
			if !testwait.Until(testwait.Wall, 5*time.Second, isCutOff) {
				return true, fmt.Errorf("non-reader %d: write failed (%v) but the broker did not log a slow-reader disconnect", id, err)
			}
			return true, nil
		}
		return false, nil
	}
	for i := 0; i < n; i++ {
		if time.Now().After(deadline) {
			return fmt.Errorf("non-reader %d (%s): not cut off after %v and %d requests it never read", id, c.LocalAddr(), d, sent)
		}
		var req protocol.Request = &protocol.PullRequest{ConsumerGroup: "nr", Topic: topic, QueueID: 1, QueueOffset: 0, MaxMsgNums: 4}
		if (i+id)%2 != 0 {
			req = &protocol.QueryMessageRequest{Topic: topic, Key: "big", MaxNum: 4, EndTimestamp: time.Now().Add(time.Hour).UnixMilli()}
		}
		if reset, err := write(i, req); reset || err != nil {
			return err
		}
	}
	// The log is read every 20th poll, as before (every 10th heartbeat of
	// 20 ms): a peer that only reads after the cut-off may not see the
	// close for many seconds (its heartbeats bring the reset), and the read
	// below is then the rarer path.
	var reset bool
	var werr error
	i := n
	if !testwait.Until(testwait.Wall, time.Until(deadline), func() bool {
		if (i-n)%20 == 0 && isCutOff() {
			return true
		}
		reset, werr = write(i, &protocol.HeartbeatRequest{ClientID: "non-reader"})
		i++
		return reset || werr != nil
	}) {
		return fmt.Errorf("non-reader %d (%s): not cut off after %v and %d requests it never read", id, c.LocalAddr(), d, sent)
	}
	if reset || werr != nil {
		return werr
	}
	// Now read: what the broker queued before closing, then EOF or reset.
	if _, closed := e2eReadToClose(c, time.Until(deadline)+5*time.Second); !closed {
		return fmt.Errorf("non-reader %d: the broker logged the disconnect but the connection stays open", id)
	}
	return nil
}
