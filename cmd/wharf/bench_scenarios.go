package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/protocol"
)

// runBenchScenario runs one scenario at one body size.
func runBenchScenario(ctx context.Context, o *benchFlags, sc string, size int, stderr io.Writer) ([]benchResult, error) {
	switch sc {
	case "disk-probe":
		return runDiskProbe(ctx, o, stderr)
	case "sync-master-64":
		return benchSyncMaster(ctx, o, size, stderr)
	}
	flush := "ASYNC_FLUSH"
	if sc == "sync-flush-64" {
		flush = "SYNC_FLUSH"
		if o.broker != "" && o.flushMode != "SYNC_FLUSH" {
			return []benchResult{{Scenario: sc, Size: size, Skipped: true,
				Note: "needs a SYNC_FLUSH broker: pass --flush-mode SYNC_FLUSH with a broker started with --flushDiskType SYNC_FLUSH"}}, nil
		}
	}
	b, err := startBenchBroker(ctx, o, flush, stderr)
	if err != nil {
		return nil, err
	}
	defer b.stop()
	r, err := benchRunOn(ctx, o, b, sc, size, stderr)
	if r.Scenario == "" {
		return nil, err
	}
	if err != nil && r.Note == "" {
		r.Note = "failed: " + err.Error()
	}
	return []benchResult{r}, err
}

// benchRunOn runs a load scenario against broker b.
func benchRunOn(ctx context.Context, o *benchFlags, b *benchBroker, sc string, size int, stderr io.Writer) (benchResult, error) {
	topic := "bench"
	if o.broker != "" {
		// an existing broker: a topic of our own, so earlier runs do not count
		topic = fmt.Sprintf("bench-%s-%d-%d", sc, size, time.Now().UnixNano())
	}
	if err := b.createTopic(ctx, topic, o.queues, o.timeout); err != nil {
		return benchResult{}, fmt.Errorf("create topic: %w", err)
	}
	b.settle(ctx, o.settle, stderr)
	body := make([]byte, size)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	copts := []client.Option{client.WithTimeout(o.timeout), client.WithRetries(0)}
	var (
		rec *benchRecorder
		res benchResult
		err error
	)
	switch sc {
	case "async-256", "async-4096":
		n, _ := strconv.Atoi(strings.TrimPrefix(sc, "async-"))
		rec, res, err = benchTimed(ctx, o, b, sc, size, stderr, func(load context.Context, rec *benchRecorder) error {
			return benchAsync(load, b.addr, topic, body, n, copts, rec)
		})
	case "batch-32":
		rec, res, err = benchTimed(ctx, o, b, sc, size, stderr, func(load context.Context, rec *benchRecorder) error {
			return benchBatch(load, b.addr, topic, body, 32, o.batchFlight, copts, rec)
		})
	case "sync-1", "sync-16", "sync-flush-64":
		n, _ := strconv.Atoi(sc[strings.LastIndexByte(sc, '-')+1:])
		rec, res, err = benchTimed(ctx, o, b, sc, size, stderr, func(load context.Context, rec *benchRecorder) error {
			return benchSync(load, b.addr, topic, body, n, copts, rec)
		})
	case "consume-backlog":
		return benchConsume(ctx, o, b, topic, body, copts, stderr)
	case "e2e-10k":
		// The consumer joins and gets its queues before the clock starts.
		e2e, err := newBenchE2E(ctx, b.addr, topic, o.queues, copts)
		if err != nil {
			return benchResult{}, err
		}
		defer e2e.close()
		rec, res, err = benchTimed(ctx, o, b, sc, size, stderr, func(load context.Context, rec *benchRecorder) error {
			return e2e.publish(load, size, o.rate, rec)
		})
		if err == nil && rec != nil {
			res.Note = fmt.Sprintf("publish->consume at %d msg/s: push consumer (long polling), latency from a timestamp in the body", o.rate)
		}
	default:
		return benchResult{}, fmt.Errorf("unknown scenario %q", sc)
	}
	if err == nil && rec != nil && rec.msgs.Load() == 0 {
		err = fmt.Errorf("no message completed in the measured window (first error: %v)", rec.err())
	}
	return res, err
}

// benchTimed runs load (which must return once its context is cancelled
// and everything in flight has completed) for o.warmup + o.duration, and
// measures the second part.
func benchTimed(ctx context.Context, o *benchFlags, b *benchBroker, sc string, size int, stderr io.Writer,
	load func(context.Context, *benchRecorder) error) (*benchRecorder, benchResult, error) {
	rec := newBenchRecorder()
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	started := time.Now()
	progress := startCLIProgress(stderr, func() string {
		phase := "warm-up"
		if rec.start.Load() != 0 {
			phase = "measuring"
		}
		return fmt.Sprintf("bench %s size %d: %s %.1fs  %d msgs  %d errors  %.0f msg/s",
			sc, size, phase, time.Since(started).Seconds(), rec.total.Load(), rec.errs.Load(),
			float64(rec.msgs.Load())/max(rec.elapsed().Seconds(), 1e-9))
	})
	defer progress.Stop()
	loadErr := make(chan error, 1)
	go func() { loadErr <- load(loadCtx, rec) }()

	select {
	case err := <-loadErr:
		return nil, benchResult{}, fmt.Errorf("load ended during warm-up: %v", err)
	case <-time.After(o.warmup):
	case <-ctx.Done():
	}
	cpu0 := b.cpu()
	allocs0 := o.profileDir != ""
	if allocs0 {
		_ = b.profile(o.profileDir, fmt.Sprintf("%s-%d-allocs-before.pprof", sc, size), "allocs", 0)
	}
	rec.open()
	var profWG sync.WaitGroup
	if o.profileDir != "" {
		profWG.Add(1)
		go func() {
			defer profWG.Done()
			secs := max(1, int(o.duration.Seconds()))
			if err := b.profile(o.profileDir, fmt.Sprintf("%s-%d-cpu.pprof", sc, size), "profile", secs); err != nil {
				fmt.Fprintf(stderr, "bench: cpu profile: %v\n", err)
			}
		}()
	}
	stopClientProf := startClientProfile(o, sc, size)
	var early error
	select {
	case early = <-loadErr:
	case <-time.After(o.duration):
	case <-ctx.Done():
	}
	rec.close()
	cpu1 := b.cpu()
	stopClientProf()
	profWG.Wait()
	if allocs0 {
		_ = b.profile(o.profileDir, fmt.Sprintf("%s-%d-allocs-after.pprof", sc, size), "allocs", 0)
	}
	stopLoad()
	if early == nil {
		early = <-loadErr
	}
	res := rec.result(sc, size)
	res.FlushMode = b.flushMode
	if cpu0 >= 0 && cpu1 >= 0 {
		res.BrokerCPUS = benchF(cpu1 - cpu0)
		if res.Msgs > 0 {
			res.BrokerCPUSPerMMsg = benchF((cpu1 - cpu0) / float64(res.Msgs) * 1e6)
		}
	}
	if early != nil && ctx.Err() == nil {
		return rec, res, early
	}
	return rec, res, nil
}

func benchMessage(topic string, body []byte) *protocol.Message {
	return &protocol.Message{Topic: topic, Body: body}
}

// benchAsync: one producer (one connection), inflight SendAsync calls.
func benchAsync(ctx context.Context, addr, topic string, body []byte, inflight int, copts []client.Option, rec *benchRecorder) error {
	p, err := client.NewProducer(addr, copts...)
	if err != nil {
		return err
	}
	defer p.Close()
	sem := make(chan struct{}, inflight)
	sendCtx := context.Background()
loop:
	for {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			break loop
		}
		t0 := time.Now()
		p.SendAsync(sendCtx, benchMessage(topic, body), func(_ client.SendResult, err error) {
			rec.done(1, time.Since(t0), err)
			<-sem
		})
	}
	for range inflight {
		sem <- struct{}{}
	}
	return nil
}

// benchBatch: one producer, flight workers each sending batches of n.
func benchBatch(ctx context.Context, addr, topic string, body []byte, n, flight int, copts []client.Option, rec *benchRecorder) error {
	p, err := client.NewProducer(addr, copts...)
	if err != nil {
		return err
	}
	defer p.Close()
	var wg sync.WaitGroup
	for range flight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				msgs := make([]*protocol.Message, n)
				for i := range msgs {
					msgs[i] = benchMessage(topic, body)
				}
				t0 := time.Now()
				_, err := p.SendBatch(context.Background(), msgs)
				rec.done(int64(n), time.Since(t0), err)
				if err != nil {
					benchSleep(ctx, 10*time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	return nil
}

// benchSync: n producers (n connections), each sending and waiting.
func benchSync(ctx context.Context, addr, topic string, body []byte, n int, copts []client.Option, rec *benchRecorder) error {
	ps := make([]*client.Producer, n)
	defer func() {
		for _, p := range ps {
			if p != nil {
				p.Close()
			}
		}
	}()
	for i := range ps {
		p, err := client.NewProducer(addr, copts...)
		if err != nil {
			return err
		}
		ps[i] = p
	}
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				t0 := time.Now()
				_, err := p.Send(context.Background(), benchMessage(topic, body))
				rec.done(1, time.Since(t0), err)
				if err != nil {
					benchSleep(ctx, 10*time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	return nil
}

// benchE2E is the e2e-10k scenario: a push consumer in its own group and a
// producer, set up before the clock starts.
type benchE2E struct {
	topic string
	c     *client.PushConsumer
	p     *client.Producer
	rec   atomic.Pointer[benchRecorder] // where the consumer records; nil before publish
}

// newBenchE2E starts the consumer, waits until the group has handed it
// every queue (it starts each at the queue's end: messages sent before that
// would never be consumed, and the window would count too few) and its first
// long polls are parked, and connects the producer.
func newBenchE2E(ctx context.Context, addr, topic string, queues int, copts []client.Option) (*benchE2E, error) {
	e := &benchE2E{topic: topic}
	group := fmt.Sprintf("bench-e2e-%d", time.Now().UnixNano())
	c, err := client.NewPushConsumer(addr, group, append(copts,
		client.WithConsumeFrom(client.ConsumeFromLast),
		client.WithPullBatchSize(32), client.WithConsumeBatchSize(32))...)
	if err != nil {
		return nil, err
	}
	e.c = c
	err = c.Subscribe(topic, "*", func(_ context.Context, msgs []*protocol.MessageExt) client.ConsumeResult {
		now := time.Now().UnixNano()
		rec := e.rec.Load()
		for _, m := range msgs {
			if len(m.Body) >= 8 && rec != nil {
				sent := int64(binary.LittleEndian.Uint64(m.Body))
				rec.done(1, time.Duration(now-sent), nil)
			}
		}
		return client.ConsumeSuccess
	})
	if err == nil {
		err = c.Start(ctx)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	for waited := time.Duration(0); len(c.Assignment()) < queues; waited += 10 * time.Millisecond {
		if waited > 15*time.Second || ctx.Err() != nil {
			c.Close()
			return nil, fmt.Errorf("the e2e consumer has %d of the %d queues after %v", len(c.Assignment()), queues, waited)
		}
		benchSleep(ctx, 10*time.Millisecond)
	}
	if e.p, err = client.NewProducer(addr, copts...); err != nil {
		c.Close()
		return nil, err
	}
	benchSleep(ctx, 100*time.Millisecond)
	return e, nil
}

func (e *benchE2E) close() {
	e.p.Close()
	e.c.Close()
}

// publish sends at rate msg/s (async, paced every millisecond) until ctx
// ends; the consumer records each message's latency into rec.
func (e *benchE2E) publish(ctx context.Context, size, rate int, rec *benchRecorder) error {
	e.rec.Store(rec)
	p := e.p
	const maxInflight = 4096
	sem := make(chan struct{}, maxInflight)
	var inflight sync.WaitGroup
	start := time.Now()
	sent := 0
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
loop:
	for {
		select {
		case <-tick.C:
		case <-ctx.Done():
			break loop
		}
		due := int(time.Since(start).Seconds()*float64(rate)) - sent
		for ; due > 0; due-- {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				break loop
			}
			b := make([]byte, size)
			binary.LittleEndian.PutUint64(b, uint64(time.Now().UnixNano()))
			inflight.Add(1)
			p.SendAsync(context.Background(), benchMessage(e.topic, b), func(_ client.SendResult, err error) {
				if err != nil {
					rec.done(1, 0, err)
				}
				<-sem
				inflight.Done()
			})
			sent++
		}
	}
	inflight.Wait()
	// let the last messages arrive (outside the window)
	time.Sleep(50 * time.Millisecond)
	return nil
}

// benchConsume stores a backlog of o.backlog messages, then pulls all of it
// with one pull consumer (one connection, one goroutine per queue), each
// pull committing the offset reached.
func benchConsume(ctx context.Context, o *benchFlags, b *benchBroker, topic string, body []byte, copts []client.Option, stderr io.Writer) (benchResult, error) {
	size := len(body)
	// 1. fill
	fill := newBenchRecorder()
	fill.open()
	var claimed atomic.Int64
	total := int64(o.backlog)
	started := time.Now()
	phase := atomic.Value{}
	phase.Store("fill")
	cons := newBenchRecorder()
	progress := startCLIProgress(stderr, func() string {
		if phase.Load() == "fill" {
			return fmt.Sprintf("bench consume-backlog size %d: storing backlog %d/%d  %.1fs", size, fill.total.Load(), total, time.Since(started).Seconds())
		}
		return fmt.Sprintf("bench consume-backlog size %d: consumed %d/%d  %.0f msg/s", size, cons.total.Load(), total,
			float64(cons.total.Load())/max(cons.elapsed().Seconds(), 1e-9))
	})
	defer progress.Stop()
	p, err := client.NewProducer(b.addr, copts...)
	if err != nil {
		return benchResult{}, err
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
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
					benchSleep(ctx, 50*time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	p.Close()
	if ctx.Err() != nil {
		return benchResult{}, ctx.Err()
	}
	fillSecs := time.Since(started).Seconds()
	heap := b.heapMiB()
	if o.profileDir != "" {
		_ = b.profile(o.profileDir, fmt.Sprintf("consume-backlog-%d-heap.pprof", size), "heap", 0)
	}
	b.settle(ctx, o.settle, stderr)

	// 2. consume
	pc, err := client.NewPullConsumer(b.addr, fmt.Sprintf("bench-consume-%d", time.Now().UnixNano()), copts...)
	if err != nil {
		return benchResult{}, err
	}
	defer pc.Close()
	maxOff := make([]int64, o.queues)
	var stored int64
	for q := range maxOff {
		if maxOff[q], err = pc.MaxOffset(ctx, topic, int32(q)); err != nil {
			return benchResult{}, err
		}
		stored += maxOff[q]
	}
	phase.Store("consume")
	cpu0 := b.cpu()
	var profWG sync.WaitGroup
	if o.profileDir != "" {
		_ = b.profile(o.profileDir, fmt.Sprintf("consume-backlog-%d-allocs-before.pprof", size), "allocs", 0)
		profWG.Add(1)
		go func() {
			defer profWG.Done()
			_ = b.profile(o.profileDir, fmt.Sprintf("consume-backlog-%d-cpu.pprof", size), "profile", 2)
		}()
	}
	stopClientProf := startClientProfile(o, "consume-backlog", size)
	cons.open()
	for q := range maxOff {
		wg.Add(1)
		go func() {
			defer wg.Done()
			off := int64(0)
			for off < maxOff[q] && ctx.Err() == nil {
				commit := off
				t0 := time.Now()
				r, err := pc.Pull(ctx, topic, int32(q), off, int32(o.pullBatch), client.PullOptions{CommitOffset: &commit})
				if err != nil {
					cons.done(1, 0, err)
					benchSleep(ctx, 10*time.Millisecond)
					continue
				}
				cons.done(int64(len(r.Messages)), time.Since(t0), nil)
				off = r.NextBeginOffset
			}
			_ = pc.CommitOffset(context.Background(), topic, int32(q), off)
		}()
	}
	wg.Wait()
	cons.close()
	cpu1 := b.cpu()
	stopClientProf()
	profWG.Wait()
	if o.profileDir != "" {
		_ = b.profile(o.profileDir, fmt.Sprintf("consume-backlog-%d-allocs-after.pprof", size), "allocs", 0)
	}
	res := cons.result("consume-backlog", size)
	res.Errors += fill.errs.Load()
	res.FlushMode = b.flushMode
	if cpu0 >= 0 && cpu1 >= 0 {
		res.BrokerCPUS = benchF(cpu1 - cpu0)
		if res.Msgs > 0 {
			res.BrokerCPUSPerMMsg = benchF((cpu1 - cpu0) / float64(res.Msgs) * 1e6)
		}
	}
	if heap >= 0 {
		res.BrokerHeapMiB = benchF(heap)
	}
	res.Note = fmt.Sprintf("backlog of %d stored in %.1f s (%.0f msg/s, batches of 32); pulls of %d, one connection, %d queues, latency per pull",
		stored, fillSecs, float64(stored)/math.Max(fillSecs, 1e-9), o.pullBatch, o.queues)
	if res.Msgs < stored {
		return res, fmt.Errorf("consumed %d of %d", res.Msgs, stored)
	}
	return res, nil
}

// benchSyncMaster compares SYNC_MASTER with ASYNC_MASTER (each with one
// slave), 64 sync publishers. It is skipped when this build refuses
// SYNC_MASTER.
func benchSyncMaster(ctx context.Context, o *benchFlags, size int, stderr io.Writer) ([]benchResult, error) {
	skip := func(note string) ([]benchResult, error) {
		return []benchResult{{Scenario: "sync-master-64", Size: size, Skipped: true, Note: note}}, nil
	}
	if o.broker != "" {
		return skip("needs brokers of its own (a master and a slave); not run with --broker")
	}
	var rs []benchResult
	for _, role := range []string{"SYNC_MASTER", "ASYNC_MASTER"} {
		haPort, err := benchFreePort()
		if err != nil {
			return nil, err
		}
		m, err := startBenchBroker(ctx, o, "ASYNC_FLUSH", stderr, "--brokerRole", role, "--haListenPort", strconv.Itoa(haPort))
		if err != nil {
			if role == "SYNC_MASTER" {
				msg := err.Error()
				if i := strings.Index(msg, "brokerRole"); i >= 0 {
					msg = msg[i:]
					if j := strings.IndexByte(msg, '\n'); j >= 0 {
						msg = msg[:j]
					}
				}
				return skip("replication not available: this build refuses SYNC_MASTER (" + strings.TrimSpace(msg) + ")")
			}
			return rs, err
		}
		s, err := startBenchBroker(ctx, o, "ASYNC_FLUSH", stderr, "--brokerRole", "SLAVE", "--brokerId", "1",
			"--haMasterAddress", net4(haPort))
		if err != nil {
			m.stop()
			if role == "SYNC_MASTER" {
				return skip("replication not available: a SLAVE could not be started (" + firstLine(err.Error()) + ")")
			}
			return rs, err
		}
		name := strings.ToLower(strings.ReplaceAll(role, "_", "-")) + "-64"
		r, err := benchRunOn(ctx, o, m, "sync-flush-64", size, stderr)
		s.stop()
		m.stop()
		if err != nil {
			return rs, err
		}
		r.Scenario = name
		r.Note = "64 sync publishers, master " + role + " with one slave"
		rs = append(rs, r)
	}
	if len(rs) == 2 && rs[1].MsgsPerS > 0 {
		rs[0].Note += fmt.Sprintf("; SYNC/ASYNC = %.2fx", rs[0].MsgsPerS/rs[1].MsgsPerS)
	}
	return rs, nil
}

func net4(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// startClientProfile starts a CPU profile of this process (the bench's
// clients) when --profile is set, and returns what stops it. The clients
// share the machine's cores with the broker, so their CPU caps the
// throughput as much as the broker's.
func startClientProfile(o *benchFlags, sc string, size int) (stop func()) {
	if o.profileDir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(o.profileDir, fmt.Sprintf("%s-%d-client-cpu.pprof", sc, size)))
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}
