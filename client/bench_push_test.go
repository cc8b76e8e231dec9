package client

import (
	"context"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wharfmq/wharf/internal/brokertest"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// benchGroupQueue builds a group consumer with one owned queue, without a
// connection: the per-message path from a pull's messages to the handler
// and back to the tracker (dispatch, the handler calls, done) and nothing
// of the network, which BenchmarkPullClient32x1KiB measures.
func benchGroupQueue(tb testing.TB, h Handler, opts ...Option) (*groupConsumer, *groupQueue) {
	o, err := buildOptions(opts)
	if err != nil {
		tb.Fatal(err)
	}
	pc := &PushConsumer{o: o, group: "g"}
	if err := pc.o.grp.normalize(); err != nil {
		tb.Fatal(err)
	}
	pc.subs = []*subscription{{topic: "bench", expr: "*", handler: h}}
	g := newGroupConsumer(pc)
	g.runCtx, g.runCancel = context.WithCancel(context.Background())
	g.startWorkers()
	tb.Cleanup(func() {
		g.runCancel()
		g.stopWorkers()
	})
	q := g.newQueue(protocol.QueueRef{Topic: "bench", QueueID: 1})
	q.tr.init(0)
	return g, q
}

// cpuTime is the process's user+sys time: on a shared machine the CPU a
// run used is steadier than its wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPushConsume is the push consumer's per-message path in
// concurrent mode at the default WithConsumeBatchSize(1): one op is one
// message. Pulls of 32 are dispatched as runQueue does, waiting while 512
// messages of the queue are in flight. cpu-ns/msg is the process's
// user+sys time per message; allocs/msg counts every allocation of the
// process (workers included) per message.
func BenchmarkPushConsume(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts []Option
	}{
		{"concurrency=1", []Option{WithConsumeConcurrency(1)}},
		{"concurrency=20", nil},
	} {
		b.Run(bc.name, func(b *testing.B) { benchPushConsume(b, bc.opts) })
	}
}

func benchPushConsume(b *testing.B, opts []Option) {
	const pullSize, ring = 32, 32 // ring > maxQueueInflight/pullSize + 1: a reused pull is done
	var handled atomic.Int64
	h := func(_ context.Context, msgs []*protocol.MessageExt) ConsumeResult {
		handled.Add(int64(len(msgs)))
		return ConsumeSuccess
	}
	g, q := benchGroupQueue(b, h, opts...)
	pulls := make([][]protocol.MessageExt, ring)
	for i := range pulls {
		pulls[i] = make([]protocol.MessageExt, pullSize)
		for k := range pulls[i] {
			pulls[i][k].Message = protocol.Message{Topic: "bench", Body: make([]byte, 1024)}
		}
	}
	ctx := context.Background()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cpu0 := cpuTime()
	b.ResetTimer()
	sent, off := 0, int64(0)
	for i := 0; sent < b.N; i++ {
		if !q.tr.waitSpace(ctx, maxQueueInflight) {
			b.Fatal("waitSpace")
		}
		n := min(pullSize, b.N-sent)
		pull := pulls[i%ring][:n]
		msgs := make([]*protocol.MessageExt, n) // runQueue's one slice per pull
		for k := range pull {
			pull[k].QueueOffset = off
			off++
			msgs[k] = &pull[k]
		}
		if !g.dispatch(q, msgs) {
			b.Fatal("dispatch")
		}
		sent += n
		q.tr.setNext(off)
	}
	for got, _ := q.tr.consumed(); got != off; got, _ = q.tr.consumed() {
		runtime.Gosched() // the last handler calls are finishing
	}
	b.StopTimer()
	cpu := cpuTime() - cpu0
	runtime.ReadMemStats(&ms1)
	if handled.Load() != int64(b.N) {
		b.Fatalf("handled %d messages, want %d", handled.Load(), b.N)
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/msg")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(b.N), "allocs/msg")
	b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(b.N), "B/msg")
}

// BenchmarkPushConsumeBroker is a group PushConsumer draining a backlog of
// b.N messages of 1 KiB (4 queues) from the in-process real broker
// (internal/brokertest), from Start to the last handler call: the whole
// user-level consume, the pulls included. Run it with a fixed count
// (-benchtime 100000x): the backlog is stored before the timer starts.
// cpu-ns/msg is the process's, so it holds the broker's share too.
func BenchmarkPushConsumeBroker(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts []Option
	}{
		{"concurrency=1", []Option{WithConsumeConcurrency(1)}},
		{"concurrency=20", nil},
	} {
		b.Run(bc.name, func(b *testing.B) { benchPushConsumeBroker(b, bc.opts) })
	}
}

func benchPushConsumeBroker(b *testing.B, opts []Option) {
	br := brokertest.Start(b)
	br.CreateTopic("T", 4)
	p, err := NewProducer(br.Addr())
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	body := make([]byte, 1024)
	for sent := 0; sent < b.N; {
		batch := make([]*protocol.Message, min(64, b.N-sent))
		for i := range batch {
			batch[i] = &protocol.Message{Topic: "T", Body: body}
		}
		if _, err := p.SendBatch(ctx, batch); err != nil {
			b.Fatal(err)
		}
		sent += len(batch)
	}
	var handled atomic.Int64
	all := make(chan struct{})
	h := func(_ context.Context, msgs []*protocol.MessageExt) ConsumeResult {
		if handled.Add(int64(len(msgs))) == int64(b.N) {
			close(all)
		}
		return ConsumeSuccess
	}
	c, err := NewPushConsumer(br.Addr(), "G", append([]Option{WithConsumeFrom(ConsumeFromFirst)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.Subscribe("T", "*", h); err != nil {
		b.Fatal(err)
	}
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cpu0 := cpuTime()
	b.ResetTimer()
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	if !testwait.Chan(all, time.Minute) {
		b.Fatalf("handled %d of %d messages", handled.Load(), b.N)
	}
	b.StopTimer()
	cpu := cpuTime() - cpu0
	runtime.ReadMemStats(&ms1)
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/msg")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(b.N), "allocs/msg")
}
