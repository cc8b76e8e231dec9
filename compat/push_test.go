package compat

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// RocketMQ's push consumer: it allocates queues itself from the members
// GET_CONSUMER_LIST_BY_GROUP lists, rebalances when NOTIFY_CONSUMER_IDS_CHANGED
// comes, locks queues for orderly consumption, and gives messages back for
// retries. Each test is bounded by its context; nothing sleeps but the
// bounded polls.

// received records what each consumer instance got, by body.
type received struct {
	mu    sync.Mutex
	by    map[string][]string // body -> instances that consumed it, in order
	queue map[int][]int       // queue id -> sequence numbers, in consumption order (orderly)
}

func newReceived() *received { return &received{by: map[string][]string{}, queue: map[int][]int{}} }

func (r *received) add(instance string, m *primitive.MessageExt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.by[string(m.Body)] = append(r.by[string(m.Body)], instance)
	if seq, err := strconv.Atoi(m.GetProperty("SEQ")); err == nil {
		r.queue[m.Queue.QueueId] = append(r.queue[m.Queue.QueueId], seq)
	}
}

// has reports whether every body of want was consumed, and by which
// instances.
func (r *received) has(want []string) (bool, map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	per := map[string]int{}
	all := true
	for _, b := range want {
		if len(r.by[b]) == 0 {
			all = false
		}
		for _, in := range r.by[b] {
			per[in]++
		}
	}
	return all, per
}

// duplicates counts deliveries beyond the first (at-least-once allows them).
func (r *received) duplicates() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, ins := range r.by {
		n += len(ins) - 1
	}
	return n
}

// pushSetup creates topic with queues on the cluster and waits for its
// route: a push consumer fails to start on a topic without one.
func pushSetup(ctx context.Context, t *testing.T, c cluster, topics ...string) {
	t.Helper()
	admin, err := client.NewAdmin(c.brokerAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, topic := range topics {
		if err := admin.CreateTopic(ctx, protocol.TopicConfig{Topic: topic, ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}); err != nil {
			t.Fatal(err)
		}
		testwait.For(t, testwait.Wall, left(ctx), "a route for "+topic, func() bool { return routed(c, topic) })
	}
}

func startPush(t *testing.T, c cluster, topic, group, instance string, handler func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error),
	opts ...consumer.Option) (shutdown func()) {
	t.Helper()
	opts = append([]consumer.Option{consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{c.nsRemoting})),
		consumer.WithGroupName(group), consumer.WithInstance(instance), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset)}, opts...)
	pc, err := consumer.NewPushConsumer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Subscribe(topic, consumer.MessageSelector{}, handler); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	shutdown = func() { once.Do(func() { pc.Shutdown() }) }
	t.Cleanup(shutdown)
	return shutdown
}

func newRMQProducer(t *testing.T, c cluster, group string, opts ...producer.Option) interface {
	SendSync(context.Context, ...*primitive.Message) (*primitive.SendResult, error)
} {
	t.Helper()
	opts = append([]producer.Option{producer.WithNsResolver(primitive.NewPassthroughResolver([]string{c.nsRemoting})),
		producer.WithGroupName(group), producer.WithRetry(2)}, opts...)
	p, err := producer.NewDefaultProducer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Shutdown() })
	return p
}

// sendBodies sends n messages named prefix-i over the producer's queue
// choice, returning their bodies.
func sendBodies(ctx context.Context, t *testing.T, p interface {
	SendSync(context.Context, ...*primitive.Message) (*primitive.SendResult, error)
}, topic, prefix string, n int) []string {
	t.Helper()
	var bodies []string
	for i := range n {
		b := fmt.Sprintf("%s-%d", prefix, i)
		if _, err := sendUntilRouted(ctx, p, primitive.NewMessage(topic, []byte(b))); err != nil {
			t.Fatalf("send %s: %v", b, err)
		}
		bodies = append(bodies, b)
	}
	return bodies
}

// waitAll polls until cond holds, failing the test at ctx's end.
func waitAll(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, testwait.Wall, left(ctx), what, cond)
}

func recorder(r *received, instance string) func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	return func(_ context.Context, ms ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range ms {
			r.add(instance, m)
		}
		return consumer.ConsumeSuccess, nil
	}
}

// TestGoPushConsumerClustering: two push consumers of one group split the
// topic's queues (each consumes part of what is sent) and together consume
// every message at least once; when one stops, the other takes its queues.
func TestGoPushConsumerClustering(t *testing.T) {
	rlog.SetLogLevel("error")
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	pushSetup(ctx, t, c, "push")
	r := newReceived()
	startPush(t, c, "push", "push-cg", "one", recorder(r, "one"))
	stopTwo := startPush(t, c, "push", "push-cg", "two", recorder(r, "two"))
	p := newRMQProducer(t, c, "push-pg")
	var bodies []string
	// Send in rounds until both have consumed some: the second member's
	// arrival makes the first give up half of the queues, on the broker's
	// notification.
	for round := 0; ; round++ {
		bodies = append(bodies, sendBodies(ctx, t, p, "push", fmt.Sprintf("r%d", round), 16)...)
		waitAll(ctx, t, "every message consumed", func() bool { all, _ := r.has(bodies); return all })
		if _, per := r.has(bodies); per["one"] > 0 && per["two"] > 0 {
			t.Logf("%d messages in %d rounds: %v, %d duplicates", len(bodies), round+1, per, r.duplicates())
			break
		}
		if ctx.Err() != nil {
			_, per := r.has(bodies)
			t.Fatalf("the queues were never split: %v", per)
		}
	}
	// "two" stops: its connection closes, the broker notifies "one", which
	// takes every queue (and consumes what "two" left uncommitted again).
	stopTwo()
	after := sendBodies(ctx, t, p, "push", "after", 16)
	waitAll(ctx, t, "every message after the stop consumed by the remaining member", func() bool { return r.byEach(after, "one") })
	t.Logf("after the stop: %d duplicates in all", r.duplicates())
}

// TestGoPushConsumerBroadcasting: every broadcasting consumer gets every
// message.
func TestGoPushConsumerBroadcasting(t *testing.T) {
	rlog.SetLogLevel("error")
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	pushSetup(ctx, t, c, "bcast")
	r := newReceived()
	// A broadcasting consumer keeps its offsets in a local file named by
	// group and client id (the Go client's, under $HOME): a group of this
	// run only, its files removed after it.
	group := fmt.Sprintf("bcast-cg-%d", rand.Int64())
	t.Cleanup(func() { os.RemoveAll(filepath.Join(os.Getenv("HOME"), ".rocketmq_client_go", group)) })
	for _, in := range []string{"one", "two"} {
		startPush(t, c, "bcast", group, in, recorder(r, in), consumer.WithConsumerModel(consumer.BroadCasting))
	}
	bodies := sendBodies(ctx, t, newRMQProducer(t, c, "bcast-pg"), "bcast", "b", 20)
	waitAll(ctx, t, "every message consumed by both", func() bool { return r.byEach(bodies, "one", "two") })
	t.Logf("%d messages to each of two, %d deliveries beyond those", len(bodies), r.duplicates()-len(bodies))
}

// byEach reports whether each instance consumed every body.
func (r *received) byEach(bodies []string, instances ...string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range bodies {
		for _, in := range instances {
			if !slices.Contains(r.by[b], in) {
				return false
			}
		}
	}
	return true
}

// TestGoPushConsumerOrderly: an orderly consumer (it locks its queues
// with LOCK_BATCH_MQ before pulling them) consumes each queue in the order
// sent. One consumer: the Go client does not unlock a queue it gives up in
// a rebalance (its removeUnnecessaryMessageQueue leaves orderly queues as a
// TODO), so a second orderly member gets its half only once the first's
// locks expire, 60 s later (RocketMQ's broker behaves the same); the lock
// table's hand-over is tested on the broker's side (netio, actors).
func TestGoPushConsumerOrderly(t *testing.T) {
	rlog.SetLogLevel("error")
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	pushSetup(ctx, t, c, "orderly")
	r := newReceived()
	startPush(t, c, "orderly", "orderly-cg", "one", recorder(r, "one"), consumer.WithConsumerOrder(true))
	p := newRMQProducer(t, c, "orderly-pg", producer.WithQueueSelector(producer.NewManualQueueSelector()))
	const perQueue = 15
	var bodies []string
	for i := range perQueue {
		for q := range 4 {
			m := primitive.NewMessage("orderly", []byte(fmt.Sprintf("q%d-%d", q, i)))
			m.WithProperty("SEQ", strconv.Itoa(i))
			m.Queue = &primitive.MessageQueue{Topic: "orderly", BrokerName: "broker-a", QueueId: q}
			if _, err := sendUntilRouted(ctx, p, m); err != nil {
				t.Fatal(err)
			}
			bodies = append(bodies, string(m.Body))
		}
	}
	waitAll(ctx, t, "every message consumed", func() bool { all, _ := r.has(bodies); return all })
	r.mu.Lock()
	defer r.mu.Unlock()
	for q := range 4 {
		seqs := r.queue[q]
		for i, seq := range seqs {
			if seq != i {
				t.Fatalf("queue %d consumed as %v, sent 0 … %d in order", q, seqs, perQueue-1)
			}
		}
	}
}

// TestGoPushConsumerRetryAndDLQ: a handler that returns ConsumeRetryLater
// gets the message again from %RETRY%group (given back with
// CONSUMER_SEND_MSG_BACK), and after maxReconsumeTimes it lands in
// %DLQ%group, where Wharf's client reads it.
func TestGoPushConsumerRetryAndDLQ(t *testing.T) {
	rlog.SetLogLevel("error")
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	// The retry topic exists before the consumer starts, so that its first
	// route lookup finds it (a RocketMQ client looks again only every 30 s).
	pushSetup(ctx, t, c, "retry", protocol.RetryTopic("retry-cg"))
	const maxReconsume = 2
	var mu sync.Mutex
	var deliveries []int32 // the reconsume count of each delivery
	startPush(t, c, "retry", "retry-cg", "one", func(ctx context.Context, ms ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range ms {
			if string(m.Body) == "fails" {
				deliveries = append(deliveries, m.ReconsumeTimes)
			}
		}
		if cc, ok := primitive.GetConcurrentlyCtx(ctx); ok {
			cc.DelayLevelWhenNextConsume = 1 // 1 s, not the default 10 s and up
		}
		return consumer.ConsumeRetryLater, nil
	}, consumer.WithMaxReconsumeTimes(maxReconsume))
	p := newRMQProducer(t, c, "retry-pg")
	res, err := sendUntilRouted(ctx, p, primitive.NewMessage("retry", []byte("fails")))
	if err != nil {
		t.Fatal(err)
	}
	dlq := readDLQ(ctx, t, c.brokerAddr, protocol.DLQTopic("retry-cg"))
	if string(dlq.Body) != "fails" || dlq.Property("UNIQ_KEY") != res.MsgID || dlq.Property(protocol.PropertyRetryTopic) != "retry" {
		t.Fatalf("dead letter %q uniq %q retry topic %q; sent %s", dlq.Body, dlq.Property("UNIQ_KEY"), dlq.Property(protocol.PropertyRetryTopic), res.MsgID)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(deliveries) != 1+maxReconsume || deliveries[0] != 0 || deliveries[len(deliveries)-1] != maxReconsume {
		t.Fatalf("deliveries with reconsume counts %v; want 0 … %d", deliveries, maxReconsume)
	}
}

// readDLQ waits for the first message of a dead-letter topic (created when
// the first dead letter comes) and reads it with Wharf's client.
func readDLQ(ctx context.Context, t *testing.T, addr, topic string) protocol.MessageExt {
	t.Helper()
	pc, err := client.NewPullConsumer(addr, "dlq-reader")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var m protocol.MessageExt
	testwait.For(t, testwait.Wall, left(ctx), "a message in "+topic, func() bool {
		r, err := pc.Pull(ctx, topic, 0, 0, 1, client.PullOptions{Suspend: time.Second})
		if err == nil && len(r.Messages) > 0 {
			m = r.Messages[0]
			return true
		}
		return false
	})
	return m
}

// TestGoPushConsumerFromTimestamp: a new group consuming from a time
// (CONSUME_FROM_TIMESTAMP, answered by SEARCH_OFFSET_BY_TIMESTAMP) gets what
// was stored from then on, not what came before.
func TestGoPushConsumerFromTimestamp(t *testing.T) {
	rlog.SetLogLevel("error")
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pushSetup(ctx, t, c, "since")
	p := newRMQProducer(t, c, "since-pg")
	old := sendBodies(ctx, t, p, "since", "old", 8)
	// The client names the time in whole seconds: the next second, once
	// the clock is past it.
	from := time.Now().Truncate(time.Second).Add(time.Second)
	waitAll(ctx, t, "the clock past the next second", func() bool { return time.Now().After(from.Add(10 * time.Millisecond)) })
	fresh := sendBodies(ctx, t, p, "since", "new", 8)
	r := newReceived()
	startPush(t, c, "since", "since-cg", "one", recorder(r, "one"), consumer.WithConsumeFromWhere(consumer.ConsumeFromTimestamp),
		consumer.WithConsumeTimestamp(from.UTC().Format("20060102150405")))
	waitAll(ctx, t, "every message since the time consumed", func() bool { all, _ := r.has(fresh); return all })
	if _, per := r.has(old); per["one"] > 0 {
		t.Fatalf("%d messages from before the time consumed", per["one"])
	}
}
