package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// serveNATS runs an embedded nats-server with JetStream (file store in dir)
// until SIGTERM: the child process the bench starts with `serve-nats`.
func serveNATS(args []string) error {
	if len(args) != 3 {
		return errors.New("usage: serve-nats PORT DIR SYNC(always|default)")
	}
	port, err := strconv.Atoi(args[0])
	if err != nil {
		return err
	}
	opts := &server.Options{
		Host:      "127.0.0.1",
		Port:      port,
		JetStream: true,
		StoreDir:  args[1],
		NoLog:     true,
		NoSigs:    true,
		// Unlimited-enough resources so the limits never throttle the bench.
		JetStreamMaxMemory: 1 << 30,
		JetStreamMaxStore:  64 << 30,
		MaxPayload:         8 << 20,
	}
	if args[2] == "always" {
		opts.SyncAlways = true // sync_interval: always: fsync every write before the ack
	} else if v := os.Getenv("BENCH_NATS_SYNC_INTERVAL"); v != "" {
		// The default mode with another sync_interval (its default is 2
		// minutes): to compare with Wharf's ASYNC_FLUSH every 500 ms.
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("BENCH_NATS_SYNC_INTERVAL: %w", err)
		}
		opts.SyncInterval = d
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return err
	}
	go s.Start()
	if !s.ReadyForConnections(15 * time.Second) {
		return errors.New("nats-server not ready")
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	s.Shutdown()
	s.WaitForShutdown()
	return nil
}

// natsServer is a nats-server child process.
type natsServer struct {
	url  string
	cmd  *exec.Cmd
	dir  string
	done chan struct{}
}

func startNATS(ctx context.Context, storeBase string, syncAlways bool) (*natsServer, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(storeBase, "nats-bench-")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	mode := "default"
	if syncAlways {
		mode = "always"
	}
	n := &natsServer{url: "nats://127.0.0.1:" + strconv.Itoa(port), dir: dir, done: make(chan struct{})}
	n.cmd = exec.Command(exe, "serve-nats", strconv.Itoa(port), dir, mode)
	n.cmd.Stdout, n.cmd.Stderr = os.Stderr, os.Stderr
	if err := n.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	go func() { _ = n.cmd.Wait(); close(n.done) }()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-n.done:
			os.RemoveAll(dir)
			return nil, errors.New("nats-server exited at start")
		default:
		}
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 200*time.Millisecond); err == nil {
			c.Close()
			return n, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	n.stop()
	return nil, errors.New("nats-server did not start")
}

func (n *natsServer) stop() {
	select {
	case <-n.done:
	default:
		_ = n.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-n.done:
		case <-time.After(15 * time.Second):
			_ = n.cmd.Process.Kill()
			<-n.done
		}
	}
	os.RemoveAll(n.dir)
}

func (n *natsServer) cpu() float64 { return procCPU(n.cmd.Process.Pid) }

const natsSubject = "bench.x"

func natsConnect(url string) (*nats.Conn, error) {
	return nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectBufSize(64<<20))
}

func natsStream(ctx context.Context, url string) error {
	nc, err := natsConnect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: "BENCH", Subjects: []string{"bench.>"}, Storage: jetstream.FileStorage, Replicas: 1,
	})
	return err
}

// runNATS runs one scenario against a fresh nats-server.
func runNATS(ctx context.Context, o *opts, sc string, size int) (result, error) {
	syncAlways := sc == "sync-flush-64"
	ns, err := startNATS(ctx, o.storeDir, syncAlways)
	if err != nil {
		return result{}, err
	}
	defer ns.stop()
	if err := natsStream(ctx, ns.url); err != nil {
		return result{}, fmt.Errorf("create stream: %w", err)
	}
	settle(ctx, ns.cpu, o.settle)
	body := make([]byte, size)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	var res result
	switch sc {
	case "async-256", noCoalesce:
		res, err = timed(ctx, o, ns.cpu, sc, size, func(c context.Context, r *recorder) error { return natsAsync(c, ns.url, body, 256, r) })
		if sc == noCoalesce {
			res.Note = "async-256 (nats.go has no send coalescing: one PUB per message either way)"
		}
	case "async-4096":
		res, err = timed(ctx, o, ns.cpu, sc, size, func(c context.Context, r *recorder) error { return natsAsync(c, ns.url, body, 4096, r) })
	case "batch-32":
		// JetStream has no client-side batch send in nats.go: the nearest is
		// async publish with the same number of messages in flight.
		res, err = timed(ctx, o, ns.cpu, sc, size, func(c context.Context, r *recorder) error {
			return natsAsync(c, ns.url, body, 32*o.batchFlight, r)
		})
		res.Note = fmt.Sprintf("no batch API in nats.go: async publish with %d messages in flight", 32*o.batchFlight)
	case "sync-1", "sync-16", "sync-flush-64":
		n := map[string]int{"sync-1": 1, "sync-16": 16, "sync-flush-64": 64}[sc]
		res, err = timed(ctx, o, ns.cpu, sc, size, func(c context.Context, r *recorder) error { return natsSync(c, ns.url, body, n, r) })
		if syncAlways {
			res.Note = "sync_interval: always (fsync of every write before the ack)"
		}
	case "consume-backlog":
		res, err = natsConsume(ctx, o, ns, body)
	case "e2e-10k":
		res, err = timed(ctx, o, ns.cpu, sc, size, func(c context.Context, r *recorder) error { return natsE2E(c, ns.url, size, o.rate, o.natsPull, r) })
		res.Note = fmt.Sprintf("publish->consume: pull consumer (Consume, AckNone, DeliverNew, PullMaxMessages %d), latency from a timestamp in the body", o.natsPull)
	default:
		return result{Scenario: sc, Size: size, Skipped: true, Note: "no JetStream counterpart run (a replicated stream needs a 3-node cluster)"}, nil
	}
	return res, err
}

type paf struct {
	f  jetstream.PubAckFuture
	t0 time.Time
}

// natsAsync: one connection, PublishAsync with exactly inflight acks
// outstanding, as Wharf's async load keeps inflight SendAsync calls: a
// send waits for a slot, and a slot is freed when its ack has been
// recorded. The acks are awaited in order by one goroutine (JetStream acks
// a stream's publishes in order).
func natsAsync(ctx context.Context, url string, body []byte, inflight int, rec *recorder) error {
	nc, err := natsConnect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(inflight))
	if err != nil {
		return err
	}
	slots := make(chan struct{}, inflight)
	fifo := make(chan paf, inflight)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for p := range fifo {
			select {
			case <-p.f.Ok():
				rec.done(1, time.Since(p.t0), nil)
			case err := <-p.f.Err():
				rec.done(1, 0, err)
			case <-time.After(30 * time.Second):
				rec.done(1, 0, errors.New("no ack in 30 s"))
			}
			<-slots
		}
	}()
	for ctx.Err() == nil {
		slots <- struct{}{} // waits while inflight acks are outstanding
		t0 := time.Now()
		f, err := js.PublishAsync(natsSubject, body)
		if err != nil {
			<-slots
			rec.done(1, 0, err)
			sleep(ctx, 10*time.Millisecond)
			continue
		}
		fifo <- paf{f, t0}
	}
	close(fifo)
	<-done
	return nil
}

func natsSync(ctx context.Context, url string, body []byte, n int, rec *recorder) error {
	var wg sync.WaitGroup
	var firstErr atomic.Pointer[error]
	for range n {
		nc, err := natsConnect(url)
		if err != nil {
			return err
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				t0 := time.Now()
				pc, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err := js.Publish(pc, natsSubject, body)
				cancel()
				rec.done(1, time.Since(t0), err)
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
					sleep(ctx, 10*time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	return nil
}

// natsE2E publishes at rate msg/s (async, paced every millisecond, at most
// 4096 unacked) and consumes on a second connection with Consume (one
// handler goroutine, in order) and the pull window of pullWindow.
func natsE2E(ctx context.Context, url string, size, rate, pull int, rec *recorder) error {
	nc, err := natsConnect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return err
	}
	cnc, err := natsConnect(url)
	if err != nil {
		return err
	}
	defer cnc.Close()
	cjs, err := jetstream.New(cnc)
	if err != nil {
		return err
	}
	cons, err := cjs.CreateOrUpdateConsumer(ctx, "BENCH", jetstream.ConsumerConfig{
		AckPolicy: jetstream.AckNonePolicy, DeliverPolicy: jetstream.DeliverNewPolicy,
	})
	if err != nil {
		return err
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		d := m.Data()
		if len(d) >= 8 {
			rec.done(1, time.Duration(time.Now().UnixNano()-int64(binary.LittleEndian.Uint64(d))), nil)
		}
	}, pullWindow(pull)...)
	if err != nil {
		return err
	}
	defer cc.Stop()
	sleep(ctx, 100*time.Millisecond)
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
		for due := int(time.Since(start).Seconds()*float64(rate)) - sent; due > 0; due-- {
			b := make([]byte, size)
			binary.LittleEndian.PutUint64(b, uint64(time.Now().UnixNano()))
			if _, err := js.PublishAsync(natsSubject, b); err != nil {
				rec.done(1, 0, err)
			}
			sent++
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(10 * time.Second):
	}
	time.Sleep(50 * time.Millisecond)
	return nil
}

// natsConsume stores a backlog, then reads it with JetStream's fastest
// consume mode: a pull consumer with AckNone, pipelined pulls (Consume)
// of the same window as Wharf's consumer (pullWindow).
func natsConsume(ctx context.Context, o *opts, ns *natsServer, body []byte) (result, error) {
	size := len(body)
	total := int64(o.backlog)
	nc, err := natsConnect(ns.url)
	if err != nil {
		return result{}, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return result{}, err
	}
	start := time.Now()
	var fillErrs atomic.Int64
	for i := int64(0); i < total && ctx.Err() == nil; i++ {
		if _, err := js.PublishAsync(natsSubject, body); err != nil {
			fillErrs.Add(1)
			i--
			sleep(ctx, 10*time.Millisecond)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(60 * time.Second):
		return result{}, errors.New("backlog acks did not complete")
	}
	fillSecs := time.Since(start).Seconds()
	s, err := js.Stream(ctx, "BENCH")
	if err != nil {
		return result{}, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return result{}, err
	}
	stored := int64(info.State.Msgs)
	settle(ctx, ns.cpu, o.settle)

	cnc, err := natsConnect(ns.url)
	if err != nil {
		return result{}, err
	}
	defer cnc.Close()
	cjs, err := jetstream.New(cnc)
	if err != nil {
		return result{}, err
	}
	cons, err := cjs.CreateOrUpdateConsumer(ctx, "BENCH", jetstream.ConsumerConfig{
		AckPolicy: jetstream.AckNonePolicy, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return result{}, err
	}
	rec := newRecorder()
	all := make(chan struct{})
	var got atomic.Int64
	var bodyBytes int
	cpu0, self0 := ns.cpu(), selfCPU()
	rec.open()
	cc, err := cons.Consume(func(m jetstream.Msg) {
		bodyBytes += len(m.Data()) // the handler looks at each message, as Wharf's does
		rec.count(1)
		if got.Add(1) == stored {
			close(all)
		}
	}, pullWindow(o.natsPull)...)
	if err != nil {
		return result{}, err
	}
	select {
	case <-all:
	case <-time.After(10 * time.Minute):
	case <-ctx.Done():
	}
	rec.close()
	cpu1, self1 := ns.cpu(), selfCPU()
	cc.Stop()
	res := rec.result("consume-backlog", size)
	res.Errors = fillErrs.Load()
	res.BrokerCPUS = f64(cpu1 - cpu0)
	if res.Msgs > 0 {
		res.BrokerCPUSPerMMsg = f64((cpu1 - cpu0) / float64(res.Msgs) * 1e6)
	}
	res.ClientCPUSPerMMsg = perM(self1-self0, res.Msgs)
	res.Note = fmt.Sprintf("backlog of %d stored in %.1f s (%.0f msg/s, async publish); Consume (one handler goroutine) with PullMaxMessages %d, PullThresholdMessages %d, AckNone",
		stored, fillSecs, float64(stored)/max(fillSecs, 1e-9), o.natsPull, o.natsPull/2)
	if got.Load() < stored {
		return res, fmt.Errorf("consumed %d of %d", got.Load(), stored)
	}
	return res, nil
}

// pullWindow is the pull window of JetStream's Consume that matches Wharf's
// consumer of 2 pulls of pull/2 in flight: at most pull messages asked for
// and not yet handled, and a new pull (of about pull/2) once half of them
// were handled.
func pullWindow(pull int) []jetstream.PullConsumeOpt {
	return []jetstream.PullConsumeOpt{jetstream.PullMaxMessages(pull), jetstream.PullThresholdMessages(max(1, pull/2))}
}
