package client

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wharfmq/wharf/client/sendpath"
	"github.com/wharfmq/wharf/protocol"
)

// serveSends is a broker reduced to its wire: it answers every SEND with
// a stored SendResponse, every SEND_BATCH with one id per message and
// GET_ALL_TOPIC_CONFIG with the topic "bench" of 4 queues, writing the
// answers to what one read brought in one write (as the broker does),
// until nc is closed, each write delay after its read. It allocates
// nothing per frame, so that a benchmark's allocs/op are the client's.
func serveSends(nc net.Conn, delay time.Duration) {
	defer nc.Close()
	br := bufio.NewReaderSize(nc, 64<<10)
	var out, frame []byte
	var offset int64
	var f protocol.Frame
	ids := make([]string, 1024)
	for i := range ids {
		ids[i] = "0A00000100002A9F0000000200000000"
	}
	for {
		var prefix [protocol.PrefixSize]byte
		if _, err := io.ReadFull(br, prefix[:]); err != nil {
			return
		}
		n := 4 + int(binary.BigEndian.Uint32(prefix[:]))
		if cap(frame) < n {
			frame = make([]byte, n)
		}
		frame = frame[:n]
		copy(frame, prefix[:])
		if _, err := io.ReadFull(br, frame[protocol.PrefixSize:]); err != nil {
			return
		}
		if err := protocol.DecodeFrameInto(&f, frame, protocol.Limits{}); err != nil {
			return
		}
		if !f.IsOneway() {
			out = appendSendAnswer(out, &f, ids, &offset)
		}
		if br.Buffered() > 0 {
			continue // answer the burst in one write
		}
		time.Sleep(delay)
		if _, err := nc.Write(out); err != nil {
			return
		}
		out = out[:0]
	}
}

// sendRequests counts the SEND and SEND_BATCH requests serveSends
// answered: a coalescing producer's batches.
var sendRequests atomic.Int64

// appendSendAnswer appends serveSends' answer to f.
func appendSendAnswer(out []byte, f *protocol.Frame, ids []string, offset *int64) []byte {
	var resp protocol.Fields
	switch f.Code {
	case protocol.CodeSendMessage, protocol.CodeSendBatchMessage:
		sendRequests.Add(1)
	}
	switch f.Code {
	case protocol.CodeSendMessage:
		resp = &protocol.SendResponse{MsgID: ids[0], QueueID: 1, QueueOffset: *offset}
		*offset++
	case protocol.CodeSendBatchMessage:
		n := msgpackArrayLen(f.Body) // the body: an array of messages
		if n < 0 || n > len(ids) {
			return protocol.AppendErrorResponse(out, f.Code, f.Opaque, protocol.StatusFrameIllegal, "batch")
		}
		resp = &protocol.SendBatchResponse{QueueID: 1, QueueOffset: *offset, MsgIDs: ids[:n]}
		*offset += int64(n)
	case protocol.CodeGetAllTopicConfig:
		resp = &protocol.TopicListResponse{Topics: []protocol.TopicConfig{{Topic: "bench", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}}}
	}
	b, err := protocol.AppendResponse(out, f.Code, f.Opaque, protocol.StatusOK, "", resp)
	if err != nil {
		panic(err)
	}
	return b
}

// msgpackArrayLen is the length of the msgpack array b starts with (-1:
// not an array).
func msgpackArrayLen(b []byte) int {
	switch {
	case len(b) >= 1 && b[0]&0xf0 == 0x90:
		return int(b[0] & 0x0f)
	case len(b) >= 3 && b[0] == 0xdc:
		return int(binary.BigEndian.Uint16(b[1:]))
	case len(b) >= 5 && b[0] == 0xdd:
		return int(binary.BigEndian.Uint32(b[1:]))
	}
	return -1
}

// sendServer listens on loopback and serves every connection with
// serveSends; the returned func stops it.
func sendServer(tb testing.TB) (addr string, stop func()) { return delayedSendServer(tb, 0) }

// delayedSendServer is sendServer whose answers wait delay.
func delayedSendServer(tb testing.TB, delay time.Duration) (addr string, stop func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { serveSends(nc, delay) })
		}
	})
	return ln.Addr().String(), func() { ln.Close(); wg.Wait() }
}

// BenchmarkSendAsync1KiB is the client's whole async send of a 1 KiB
// message, 256 in flight on one connection, as the bench's async-256 load
// makes it (internal/benchrun loadAsync: a new message per send, a
// callback that releases a slot), against serveSends over loopback TCP.
// The server's share is in the figure too: it is the same for every
// client change, and cheaper than the broker's.
func BenchmarkSendAsync1KiB(b *testing.B) {
	for _, coalesce := range []bool{true, false} {
		b.Run(fmt.Sprintf("coalesce=%v", coalesce), func(b *testing.B) {
			addr, stop := sendServer(b)
			defer stop()
			p, err := NewProducer(addr, WithSendCoalescing(coalesce), WithRetries(0))
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			body := make([]byte, 1024)
			if _, err := p.Send(context.Background(), &protocol.Message{Topic: "bench", Body: body}); err != nil {
				b.Fatal(err) // the route, fetched once
			}
			sem := make(chan struct{}, 256)
			var failed error
			var once sync.Once
			b.ReportAllocs()
			b.SetBytes(1024)
			ctx := context.Background()
			for b.Loop() {
				sem <- struct{}{}
				p.SendAsync(ctx, &protocol.Message{Topic: "bench", Body: body}, func(_ SendResult, err error) {
					if err != nil {
						once.Do(func() { failed = err })
					}
					<-sem
				})
			}
			for range cap(sem) {
				sem <- struct{}{}
			}
			if failed != nil {
				b.Fatal(failed)
			}
		})
	}
}

// BenchmarkSendSync1KiB is one producer's blocking sends, one at a time,
// through the loopback server: a sync publisher's cost per send (its
// frame is written by the calling goroutine, no hand-off to the writer).
func BenchmarkSendSync1KiB(b *testing.B) {
	addr, stop := sendServer(b)
	defer stop()
	p, err := NewProducer(addr, WithRetries(0))
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	body := make([]byte, 1024)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(1024)
	for b.Loop() {
		if _, err := p.Send(ctx, &protocol.Message{Topic: "bench", Body: body}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSendAsyncAllocations bounds what async sends allocate, whole
// process (client, serveSends and this test's message and callback), as
// BenchmarkSendAsync1KiB measures it: per send the message's properties
// map and UNIQ_KEY, the send's state and its answer's message id, per
// request (a SEND, or a coalesced batch) its pending call and answer, and
// per read chunk a little more. A closure or a box per send or per answer
// coming back takes it past the bound, however the sends were batched.
func TestSendAsyncAllocations(t *testing.T) {
	const maxBytesPerSend = 1600
	for _, tt := range []struct {
		coalesce        bool
		window          int
		perSend, perReq float64
	}{{true, 256, 5.5, 14}, {true, 4, 5.5, 14}, {false, 256, 9, 0}} {
		t.Run(fmt.Sprintf("coalesce=%v,window=%d", tt.coalesce, tt.window), func(t *testing.T) {
			addr, stop := sendServer(t)
			defer stop()
			p, err := NewProducer(addr, WithSendCoalescing(tt.coalesce), WithRetries(0))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			body := make([]byte, 1024)
			if _, err := p.Send(t.Context(), &protocol.Message{Topic: "bench", Body: body}); err != nil {
				t.Fatal(err)
			}
			sem := make(chan struct{}, tt.window)
			var failed atomic.Value
			send := func() {
				sem <- struct{}{}
				p.SendAsync(t.Context(), &protocol.Message{Topic: "bench", Body: body}, func(_ SendResult, err error) {
					if err != nil {
						failed.Store(err)
					}
					<-sem
				})
			}
			for range 1000 { // warm: buffers, maps and chunks at their size
				send()
			}
			const n = 5000
			var m0, m1 runtime.MemStats
			r0 := sendRequests.Load()
			runtime.ReadMemStats(&m0)
			for range n {
				send()
			}
			for range cap(sem) {
				sem <- struct{}{}
			}
			runtime.ReadMemStats(&m1)
			if err := failed.Load(); err != nil {
				t.Fatal(err)
			}
			reqs := sendRequests.Load() - r0
			got, bound := float64(m1.Mallocs-m0.Mallocs), tt.perSend*n+tt.perReq*float64(reqs)
			bytes := float64(m1.TotalAlloc-m0.TotalAlloc) / n
			t.Logf("%.2f allocations and %.0f bytes per async send, %d sends in %d requests", got/n, bytes, n, reqs)
			if got > bound {
				t.Fatalf("%.0f allocations for %d sends in %d requests, want <= %.0f", got, n, reqs, bound)
			}
			// Bytes too: a write buffer dropped instead of reused grows
			// again by copies (few allocations, 2.4 KB per send).
			if bytes > maxBytesPerSend {
				t.Fatalf("%.0f bytes allocated per async send, want <= %d", bytes, maxBytesPerSend)
			}
		})
	}
}

// TestSlowAsyncAnswerAvoidsTheBroker: an async send's answer slower than
// the fault table's first step latches its broker, coalesced or not: the
// latency runs from the send to when the reader took the answer.
func TestSlowAsyncAnswerAvoidsTheBroker(t *testing.T) {
	for _, coalesce := range []bool{true, false} {
		t.Run(fmt.Sprintf("coalesce=%v", coalesce), func(t *testing.T) {
			t.Parallel()
			addr, stop := delayedSendServer(t, 100*time.Millisecond)
			defer stop()
			p, err := NewProducer(addr, WithSendCoalescing(coalesce), WithRetries(0))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if _, err := p.Send(t.Context(), &protocol.Message{Topic: "bench", Body: []byte("route")}); err != nil {
				t.Fatal(err)
			}
			// A fault table whose first step the server's delay passes,
			// fresh (the Send above latched the old one) but for the route.
			p.mu.Lock()
			p.policy.Latency = []sendpath.LatencyStep{{Over: 50 * time.Millisecond, AvoidFor: time.Minute}}
			p.table = sendpath.NewTable(p.policy)
			p.table.Update(sendpath.Route{Topic: "bench", Version: 1, Fetched: time.Now(), Queues: sendpath.Queues(addr, 4)})
			before := p.table.Avoided(addr, time.Now())
			p.mu.Unlock()
			done := make(chan error, 1)
			p.SendAsync(t.Context(), &protocol.Message{Topic: "bench", Body: []byte("x")}, func(_ SendResult, err error) { done <- err })
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			p.mu.Lock()
			after := p.table.Avoided(addr, time.Now())
			p.mu.Unlock()
			if before || !after {
				t.Fatalf("broker avoided before the send: %v, after its 100 ms answer: %v", before, after)
			}
		})
	}
}

// BenchmarkSendSyncConcurrent1KiB is 64 goroutines' blocking sends on one
// producer (one connection), as in the bench's sync-flush-64 and sync-16
// scenarios: the client's cost per sync send when many are in flight.
func BenchmarkSendSyncConcurrent1KiB(b *testing.B) {
	addr, stop := sendServer(b)
	defer stop()
	p, err := NewProducer(addr, WithRetries(0))
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	body := make([]byte, 1024)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(1024)
	b.SetParallelism(32) // 64 goroutines on 2 Ps
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := p.Send(ctx, &protocol.Message{Topic: "bench", Body: body}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// TestSendSyncAllocations bounds what blocking sends allocate, whole
// process, 16 senders on one producer: a sync call's channel, timer and
// timer context are pooled (callwait.go), so a send costs the message's
// properties and UNIQ_KEY, its result and the answer's frame, and the
// server's side. Before the pool: 19 allocations and 1.27 KB per send.
func TestSendSyncAllocations(t *testing.T) {
	addr, stop := sendServer(t)
	defer stop()
	p, err := NewProducer(addr, WithRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	body := make([]byte, 1024)
	const senders, each = 16, 300
	run := func() {
		var wg sync.WaitGroup
		var failed atomic.Value
		for range senders {
			wg.Go(func() {
				for range each {
					if _, err := p.Send(t.Context(), &protocol.Message{Topic: "bench", Body: body}); err != nil {
						failed.Store(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if err := failed.Load(); err != nil {
			t.Fatal(err)
		}
	}
	run() // warm: buffers, maps, the pool
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	run()
	runtime.ReadMemStats(&m1)
	n := float64(senders * each)
	allocs, bytes := float64(m1.Mallocs-m0.Mallocs)/n, float64(m1.TotalAlloc-m0.TotalAlloc)/n
	t.Logf("%.2f allocations and %.0f bytes per sync send", allocs, bytes)
	if allocs > 14 || bytes > 1000 {
		t.Fatalf("%.1f allocations and %.0f bytes per sync send, want <= 14 and <= 1000", allocs, bytes)
	}
}
