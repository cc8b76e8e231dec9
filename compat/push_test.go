package compat

import (
	"context"
	"fmt"
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
		for !routed(c, topic) {
			if ctx.Err() != nil {
				t.Fatalf("no route for %s", topic)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func startPush(t *testing.T, c cluster, topic, group, instance string, handler func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error),
	opts ...consumer.Option) {
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
	t.Cleanup(func() { pc.Shutdown() })
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
	for !cond() {
		if ctx.Err() != nil {
			t.Fatalf("timed out: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
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
// every message at least once.
func TestGoPushConsumerClustering(t *testing.T) {
	rlog.SetLogLevel("error")
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	pushSetup(ctx, t, c, "push")
	r := newReceived()
	startPush(t, c, "push", "push-cg", "one", recorder(r, "one"))
	startPush(t, c, "push", "push-cg", "two", recorder(r, "two"))
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
			return
		}
		if ctx.Err() != nil {
			_, per := r.has(bodies)
			t.Fatalf("the queues were never split: %v", per)
		}
	}
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
	for _, in := range []string{"one", "two"} {
		startPush(t, c, "bcast", "bcast-cg", in, recorder(r, in), consumer.WithConsumerModel(consumer.BroadCasting))
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
