package benchrun

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/protocol"
)

// The publishing loads. Each runs until its context ends and returns once
// everything it has in flight has completed.

func benchMessage(topic string, body []byte) *protocol.Message {
	return &protocol.Message{Topic: topic, Body: body}
}

// loadAsync: one producer (one connection), inflight SendAsync calls.
func loadAsync(ctx context.Context, addr, topic string, body []byte, inflight int, copts []client.Option, rec *recorder) error {
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

// loadBatch: one producer, flight workers each sending batches of n.
func loadBatch(ctx context.Context, addr, topic string, body []byte, n, flight int, copts []client.Option, rec *recorder) error {
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
					sleepCtx(ctx, 10*time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	return nil
}

// loadSync: n producers (n connections), each sending and waiting.
func loadSync(ctx context.Context, addr, topic string, body []byte, n int, copts []client.Option, rec *recorder) error {
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
					sleepCtx(ctx, 10*time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	return nil
}

// e2e is the e2e-10k scenario: a push consumer in its own group and a
// producer, set up before the clock starts.
type e2e struct {
	topic string
	c     *client.PushConsumer
	p     *client.Producer
	rec   atomic.Pointer[recorder] // where the consumer records; nil before publish
}

// newE2E starts the consumer, waits until the group has handed it
// every queue (it starts each at the queue's end: messages sent before that
// would never be consumed, and the window would count too few) and its first
// long polls are parked, and connects the producer.
func newE2E(ctx context.Context, addr, topic string, queues int, copts []client.Option) (*e2e, error) {
	e := &e2e{topic: topic}
	group := fmt.Sprintf("bench-e2e-%d", time.Now().UnixNano())
	// One handler call at a time, as JetStream's Consume calls its
	// handler from one goroutine in order.
	c, err := client.NewPushConsumer(addr, group, append(copts,
		client.WithConsumeFrom(client.ConsumeFromLast),
		client.WithPullBatchSize(32), client.WithConsumeBatchSize(32), client.WithConsumeConcurrency(1))...)
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
		sleepCtx(ctx, 10*time.Millisecond)
	}
	if e.p, err = client.NewProducer(addr, copts...); err != nil {
		c.Close()
		return nil, err
	}
	sleepCtx(ctx, 100*time.Millisecond)
	return e, nil
}

func (e *e2e) close() {
	e.p.Close()
	e.c.Close()
}

// publish sends at rate msg/s (async, paced every millisecond) until ctx
// ends; the consumer records each message's latency into rec.
func (e *e2e) publish(ctx context.Context, size, rate int, rec *recorder) error {
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
