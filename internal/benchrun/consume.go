package benchrun

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/protocol"
)

// consumeBacklog is consume-backlog: it stores a backlog of o.Backlog
// messages, then pulls all of it with one pull consumer (one connection,
// o.PullInflight pulls in flight, one handler goroutine: drainBacklog),
// each pull committing the offset it starts from.
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
	cpu0, client0 := b.cpu(), procCPU(os.Getpid())
	stopProfiles := startProfiles(o, b, "consume-backlog", size, 2, stderr)
	cons.open()
	drainBacklog(ctx, pc, topic, maxOff, int32(o.PullBatch), o.PullInflight, cons)
	cons.close()
	cpu1, client1 := b.cpu(), procCPU(os.Getpid())
	stopProfiles()

	res := cons.result("consume-backlog", size)
	res.Errors += fill.errs.Load()
	res.FlushMode = b.flushMode
	res.setBrokerCPU(cpu0, cpu1)
	res.setClientCPU(client0, client1) // the consumer's (the filling producer is closed)
	if heap >= 0 {
		res.BrokerHeapMiB = roundedPtr(heap)
	}
	res.Note = fmt.Sprintf("backlog of %d stored in %.1f s (%.0f msg/s, batches of 32); %d pulls of %d in flight, one connection, %d queues, one handler goroutine; latency per pull",
		stored, fillSecs, float64(stored)/math.Max(fillSecs, 1e-9), o.PullInflight, o.PullBatch, o.Queues)
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

// pulled is one pull's answer on its way to the handler.
type pulled struct {
	msgs []protocol.MessageExt
	took time.Duration
}

// drainBacklog reads each queue q from 0 to maxOff[q] the way an
// application consumes: inflight pulls of batch messages at a time on the
// one connection (each on a queue with no pull in flight, committing the
// offset it starts from), and one handler goroutine that gets every pull's
// messages, in the order the pulls completed, so in queue order. A pull
// waits for the handler to finish an earlier one once inflight are
// unhandled: at most inflight*batch messages are on their way. At the end
// each queue's last offset is committed.
func drainBacklog(ctx context.Context, pc *client.PullConsumer, topic string, maxOff []int64, batch int32, inflight int, cons *recorder) {
	ready := make(chan int, len(maxOff)) // queues with messages left and no pull in flight
	left := 0
	for q := range maxOff {
		if maxOff[q] > 0 {
			ready <- q
			left++
		}
	}
	next := make([]int64, len(maxOff)) // owned by the pull of the queue in flight
	credits := make(chan struct{}, inflight)
	handed := make(chan pulled, inflight)
	drained := make(chan struct{})
	var remaining atomic.Int64
	remaining.Store(int64(left))
	if left == 0 {
		close(drained)
	}
	var pullers sync.WaitGroup
	for range inflight {
		pullers.Go(func() {
			for {
				select {
				case credits <- struct{}{}:
				case <-drained:
					return
				case <-ctx.Done():
					return
				}
				var q int
				select {
				case q = <-ready:
				case <-drained:
					return
				case <-ctx.Done():
					return
				}
				if pullOnce(ctx, pc, topic, int32(q), next, maxOff[q], batch, handed, credits, cons) {
					ready <- q
				} else if remaining.Add(-1) == 0 {
					close(drained)
				}
			}
		})
	}
	handled := make(chan struct{})
	go func() {
		defer close(handled)
		handleInOrder(handed, credits, cons)
	}()
	pullers.Wait()
	close(handed)
	<-handled
	for q := range maxOff {
		_ = pc.CommitOffset(context.Background(), topic, int32(q), next[q])
	}
}

// pullOnce pulls queue q from next[q], hands what came to the handler (or
// gives its credit back) and reports whether q has messages left.
func pullOnce(ctx context.Context, pc *client.PullConsumer, topic string, q int32, next []int64, end int64, batch int32,
	handed chan<- pulled, credits <-chan struct{}, cons *recorder) bool {
	commit := next[q]
	t0 := time.Now()
	r, err := pc.Pull(ctx, topic, q, next[q], batch, client.PullOptions{CommitOffset: &commit})
	if err != nil || len(r.Messages) == 0 {
		<-credits
		if err != nil {
			cons.done(1, 0, err)
			sleepCtx(ctx, 10*time.Millisecond)
		}
		next[q] = max(next[q], r.NextBeginOffset)
		return next[q] < end && ctx.Err() == nil
	}
	next[q] = r.NextBeginOffset
	handed <- pulled{msgs: r.Messages, took: time.Since(t0)}
	return next[q] < end
}

// handleInOrder is the application's handler goroutine: it looks at every
// message of each pull in turn, records the pull, and frees its credit.
func handleInOrder(handed <-chan pulled, credits <-chan struct{}, cons *recorder) {
	var bodyBytes int
	for p := range handed {
		for i := range p.msgs {
			bodyBytes += len(p.msgs[i].Body)
		}
		cons.done(int64(len(p.msgs)), p.took, nil)
		<-credits
	}
	_ = bodyBytes
}
