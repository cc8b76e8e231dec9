package compat

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/protocol/remoting"
)

// TestGoProducerKinds: RocketMQ's Go producer's other sends (a batch, a
// body it compresses, async, oneway, a delay level) all land, as sent,
// where Wharf's own client reads them.
func TestGoProducerKinds(t *testing.T) {
	rlog.SetLogLevel("error")
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// RocketMQ's admin creates the topic (UPDATE_AND_CREATE_TOPIC on the
	// broker's remoting port) and lists it from the name server's.
	ra, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{c.nsRemoting})))
	if err != nil {
		t.Fatal(err)
	}
	defer ra.Close()
	if err := ra.CreateTopic(ctx, admin.WithTopicCreate("kinds"), admin.WithBrokerAddrCreate(c.brokerRemoting),
		admin.WithReadQueueNums(2), admin.WithWriteQueueNums(2)); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, testwait.Wall, left(ctx), "the name server to list the topic", func() bool {
		l, err := ra.FetchAllTopicList(ctx)
		return err == nil && slices.Contains(l.TopicList, "kinds")
	})
	p, err := producer.NewDefaultProducer(producer.WithNsResolver(primitive.NewPassthroughResolver([]string{c.nsRemoting})),
		producer.WithGroupName("kinds-pg"), producer.WithRetry(2), producer.WithQueueSelector(producer.NewManualQueueSelector()))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown()
	msg := func(body []byte, tag string) *primitive.Message {
		m := primitive.NewMessage("kinds", body)
		m.WithTag(tag)
		m.Queue = &primitive.MessageQueue{Topic: "kinds", BrokerName: "broker-a", QueueId: 0}
		return m
	}
	if _, err := sendUntilRouted(ctx, p, msg([]byte("first"), "sync")); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("compressible "), 1000) // above the client's 4 KiB compression threshold
	batch := []*primitive.Message{msg([]byte("b0"), "batch"), msg([]byte("b1"), "batch"), msg([]byte("b2"), "batch")}
	if res, err := p.SendSync(ctx, batch...); err != nil || res.Status != primitive.SendOK {
		t.Fatalf("batch: %+v, %v", res, err)
	}
	if res, err := p.SendSync(ctx, msg(big, "big")); err != nil || res.Status != primitive.SendOK {
		t.Fatalf("big: %+v, %v", res, err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	var asyncErr error
	if err := p.SendAsync(ctx, func(_ context.Context, _ *primitive.SendResult, err error) { asyncErr = err; wg.Done() },
		msg([]byte("async"), "async")); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if asyncErr != nil {
		t.Fatalf("async: %v", asyncErr)
	}
	if err := p.SendOneWay(ctx, msg([]byte("oneway"), "oneway")); err != nil {
		t.Fatal(err)
	}
	delayed := msg([]byte("delayed"), "delay")
	delayed.WithDelayTimeLevel(1) // 1 s
	if res, err := p.SendSync(ctx, delayed); err != nil || res.Status != primitive.SendOK {
		t.Fatalf("delayed: %+v, %v", res, err)
	}

	want := []struct{ body, tag string }{{"first", "sync"}, {"b0", "batch"}, {"b1", "batch"}, {"b2", "batch"},
		{string(big), "big"}, {"async", "async"}, {"oneway", "oneway"}, {"delayed", "delay"}}
	got := readQueue(ctx, t, c.brokerAddr, "kinds", 0, len(want))
	for i, w := range want {
		if string(got[i].Body) != w.body || got[i].Property("TAGS") != w.tag {
			t.Fatalf("message %d: %d bytes tag %q; want %d bytes tag %q", i, len(got[i].Body), got[i].Property("TAGS"), len(w.body), w.tag)
		}
	}
}

// readQueue pulls n messages of one queue from offset 0 with Wharf's
// client, waiting up to ctx for them (a delayed one arrives late).
func readQueue(ctx context.Context, t *testing.T, addr, topic string, q int32, n int) []protocol.MessageExt {
	t.Helper()
	pc, err := client.NewPullConsumer(addr, "reader")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var out []protocol.MessageExt
	for off := int64(0); len(out) < n; {
		r, err := pc.Pull(ctx, topic, q, off, 32, client.PullOptions{Suspend: 2 * time.Second})
		if err != nil {
			t.Fatalf("pull at %d, %d of %d read: %v", off, len(out), n, err)
		}
		out = append(out, r.Messages...)
		off = r.NextBeginOffset
	}
	return out
}

// TestWharfProducerToGoPullConsumer: the other way round, a message sent
// with Wharf's client is read by RocketMQ's pull consumer with its tag,
// keys and ids.
func TestWharfProducerToGoPullConsumer(t *testing.T) {
	rlog.SetLogLevel("error")
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin, err := client.NewAdmin(c.brokerAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	createTopic(ctx, t, admin, "compat")
	wp, err := client.NewProducer(c.brokerAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer wp.Close()
	m := &protocol.Message{Topic: "compat", Body: []byte("from wharf")}
	m.SetProperty("TAGS", "w")
	m.SetProperty("KEYS", "wk")
	res, err := wp.Send(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	// The route comes from the name server once the broker registered.
	testwait.For(t, testwait.Wall, left(ctx), "a route for the topic at the name server's remoting port",
		func() bool { return routed(c, "compat") })
	read := rocketmqReader(t, c)
	read(ctx, &primitive.SendResult{MsgID: res.UniqKey, OffsetMsgID: res.MsgID, QueueOffset: res.QueueOffset,
		MessageQueue: &primitive.MessageQueue{Topic: "compat", BrokerName: "broker-a", QueueId: int(res.QueueID)}},
		"from wharf", "w", "wk")
}

// routed reports whether the name server's remoting port has a route
// for topic (the broker's registration reached it).
func routed(c cluster, topic string) bool {
	conn, err := net.DialTimeout("tcp", c.nsRemoting, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	req, err := remoting.Append(nil, &remoting.Command{Code: remoting.GetRouteInfoByTopic, Opaque: 1,
		ExtFields: map[string]string{"topic": topic}})
	if err != nil {
		return false
	}
	if _, err := conn.Write(req); err != nil {
		return false
	}
	var n [4]byte
	if _, err := io.ReadFull(conn, n[:]); err != nil || binary.BigEndian.Uint32(n[:]) > 1<<20 {
		return false
	}
	f := make([]byte, 4+binary.BigEndian.Uint32(n[:]))
	copy(f, n[:])
	if _, err := io.ReadFull(conn, f[4:]); err != nil {
		return false
	}
	a, err := remoting.Decode(f, remoting.Limits{})
	return err == nil && a.Code == remoting.Success
}
