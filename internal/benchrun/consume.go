package benchrun

import (
	"context"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/protocol"
)

// consumeBacklog is consume-backlog: it stores a backlog of o.Backlog
// messages, then pulls all of it with one pull consumer (one connection,
// one goroutine per queue), each pull committing the offset reached.
func consumeBacklog(ctx context.Context, o *Options, b *broker, topic string, body []byte, copts []client.Option, stderr io.Writer) (Result, error) {
	size := len(body)
	fill, cons := newRecorder(), newRecorder()
	var consuming atomic.Bool
	started := time.Now()
	stopProgress := o.progress(func() string {
		if !consuming.Load() {
			return fmt.Sprintf("bench consume-backlog size %d: storing backlog %d/%d  %.1fs", size, fill.total.Load(), o.Backlog, time.Since(started).Seconds())
		}
		return fmt.Sprintf("bench consume-backlog size %d: consumed %d/%d  %.0f msg/s", size, cons.total.Load(), o.Backlog,
			float64(cons.total.Load())/max(cons.elapsed().Seconds(), 1e-9))
	})
	defer stopProgress()

	fill.open()
	if err := fillBacklog(ctx, b.addr, topic, body, int64(o.Backlog), copts, fill); err != nil {
		return Result{}, err
	}
	fillSecs := time.Since(started).Seconds()
	heap := b.heapMiB()
	if o.ProfileDir != "" {
		_ = b.profile(o.ProfileDir, fmt.Sprintf("consume-backlog-%d-heap.pprof", size), "heap", 0)
	}
	b.settle(ctx, o.Settle, stderr)

	pc, err := client.NewPullConsumer(b.addr, fmt.Sprintf("bench-consume-%d", time.Now().UnixNano()), copts...)
	if err != nil {
		return Result{}, err
	}
	defer pc.Close()
	maxOff, stored, err := queueEnds(ctx, pc, topic, o.Queues)
	if err != nil {
		return Result{}, err
	}
	consuming.Store(true)
	cpu0 := b.cpu()
	stopProfiles := startProfiles(o, b, "consume-backlog", size, 2, stderr)
	cons.open()
	drainBacklog(ctx, pc, topic, maxOff, int32(o.PullBatch), cons)
	cons.close()
	cpu1 := b.cpu()
	stopProfiles()

	res := cons.result("consume-backlog", size)
	res.Errors += fill.errs.Load()
	res.FlushMode = b.flushMode
	res.setBrokerCPU(cpu0, cpu1)
	if heap >= 0 {
		res.BrokerHeapMiB = roundedPtr(heap)
	}
	res.Note = fmt.Sprintf("backlog of %d stored in %.1f s (%.0f msg/s, batches of 32); pulls of %d, one connection, %d queues, latency per pull",
		stored, fillSecs, float64(stored)/math.Max(fillSecs, 1e-9), o.PullBatch, o.Queues)
	if res.Msgs < stored {
		return res, fmt.Errorf("consumed %d of %d", res.Msgs, stored)
	}
	return res, nil
}

// fillBacklog stores total messages of body with one producer and 16
// goroutines sending batches of 32, retrying failed batches.
func fillBacklog(ctx context.Context, addr, topic string, body []byte, total int64, copts []client.Option, fill *recorder) error {
	p, err := client.NewProducer(addr, copts...)
	if err != nil {
		return err
	}
	defer p.Close()
	var claimed atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for ctx.Err() == nil {
				n := min(int64(32), total-claimed.Add(32)+32)
				if n <= 0 {
					return
				}
				msgs := make([]*protocol.Message, n)
				for i := range msgs {
					msgs[i] = benchMessage(topic, body)
				}
				_, err := p.SendBatch(ctx, msgs)
				fill.done(n, 0, err)
				if err != nil {
					claimed.Add(-n) // try again
					sleepCtx(ctx, 50*time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	return ctx.Err()
}

// queueEnds returns the max offset of each of the topic's queues and their
// sum: what the backlog holds.
func queueEnds(ctx context.Context, pc *client.PullConsumer, topic string, queues int) ([]int64, int64, error) {
	maxOff := make([]int64, queues)
	var stored int64
	for q := range maxOff {
		var err error
		if maxOff[q], err = pc.MaxOffset(ctx, topic, int32(q)); err != nil {
			return nil, 0, err
		}
		stored += maxOff[q]
	}
	return maxOff, stored, nil
}

// drainBacklog pulls each queue q from 0 to maxOff[q], one goroutine per
// queue, each pull committing the offset it starts from and the last
// offset committed at the end.
func drainBacklog(ctx context.Context, pc *client.PullConsumer, topic string, maxOff []int64, batch int32, cons *recorder) {
	var wg sync.WaitGroup
	for q := range maxOff {
		wg.Go(func() {
			off := int64(0)
			for off < maxOff[q] && ctx.Err() == nil {
				commit := off
				t0 := time.Now()
				r, err := pc.Pull(ctx, topic, int32(q), off, batch, client.PullOptions{CommitOffset: &commit})
				if err != nil {
					cons.done(1, 0, err)
					sleepCtx(ctx, 10*time.Millisecond)
					continue
				}
				cons.done(int64(len(r.Messages)), time.Since(t0), nil)
				off = r.NextBeginOffset
			}
			_ = pc.CommitOffset(context.Background(), topic, int32(q), off)
		})
	}
	wg.Wait()
}
