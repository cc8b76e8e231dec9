package client

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/wharfmq/wharf/internal/brokertest"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// TestPushConsumerSpansGroups: a PushConsumer on name-server routes is a
// member on every broker group hosting its topic and gets every message;
// with one group's master gone, a new consumer of the group reads that
// group's queues from its slave, from the offsets committed before.
func TestPushConsumerSpansGroups(t *testing.T) {
	const topic = "orders"
	ns := brokertest.StartNameServer(t)
	m1, m2 := brokertest.Start(t), brokertest.Start(t)
	s1 := brokertest.Start(t, brokertest.SlaveOf(m1))
	m1.CreateTopic(topic, 2)
	m2.CreateTopic(topic, 2)
	m1.RegisterWith(ns, "c1", "g1")
	s1.RegisterWith(ns, "c1", "g1")
	m2.RegisterWith(ns, "c1", "g2")
	p := newNSProducer(t, ns.Addr())
	ctx := testCtx(t)
	send := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if _, err := p.Send(ctx, &protocol.Message{Topic: topic, Body: []byte(fmt.Sprint(i))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	consume := func(want int) (*PushConsumer, *pushRecorder) {
		t.Helper()
		rec := newPushRecorder()
		c, err := NewPushConsumer("", "G", WithNameServer(ns.Addr()), WithConsumeFrom(ConsumeFromFirst),
			WithPullSuspend(200*time.Millisecond), WithCommitInterval(50*time.Millisecond),
			WithMasterRetryInterval(200*time.Millisecond), WithReconnectBackoff(10*time.Millisecond, 50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if err := c.Subscribe(topic, "*", rec.handle); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		testwait.For(t, testwait.Wall, 10*time.Second, fmt.Sprintf("%d messages consumed", want), func() bool {
			return rec.total.Load() >= int64(want)
		})
		return c, rec
	}

	send(0, 40)
	c, rec := consume(40)
	if got := slices.Sorted(maps.Keys(c.BrokerGroups())); !slices.Equal(got, []string{"g1", "g2"}) {
		t.Errorf("broker groups = %v, want [g1 g2]", got)
	}
	n := 0
	for _, q := range c.Assignment() {
		if q.Topic == topic {
			n++
		}
	}
	if n != 4 {
		t.Errorf("assignment %v: want the 2 queues of %s of each group", c.Assignment(), topic)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if len(rec.bodies) != 40 {
		t.Fatalf("%d distinct messages of 40", len(rec.bodies))
	}

	send(40, 60)
	waitSynced(t, m1, s1, topic)
	testwait.For(t, testwait.Wall, 5*time.Second, "g1's offsets on its slave", func() bool {
		for q := range int32(2) {
			want, _ := m1.CommittedOffset("G", topic, q)
			if got, ok := s1.CommittedOffset("G", topic, q); !ok || got != want {
				return false
			}
		}
		return true
	})
	m1.Stop() // g1 is masterless: readable from s1 only
	c2, rec2 := consume(20)
	defer c2.Close()
	for i := 40; i < 60; i++ {
		if rec2.bodies[fmt.Sprint(i)] == 0 {
			t.Errorf("message %d not consumed after g1's master stopped", i)
		}
	}
	for i := range 40 {
		if rec2.bodies[fmt.Sprint(i)] > 0 {
			t.Errorf("message %d consumed again: the committed offsets were not kept", i)
		}
	}
}

// TestPushConsumerFollowsMovedMaster: a failover moves a group's master to
// another address (here a slave the routes never named, promoted and
// registered as brokerId 0 at a newer master epoch). The consumer, with
// no restart, joins the group on the new master and consumes what is sent
// there, from the offsets committed before.
func TestPushConsumerFollowsMovedMaster(t *testing.T) {
	const topic = "orders"
	ns := brokertest.StartNameServer(t)
	m1 := brokertest.Start(t)
	n1 := brokertest.Start(t, brokertest.SlaveOf(m1))
	m1.CreateTopic(topic, 2)
	m1.RegisterWith(ns, "c1", "g1")
	p := newNSProducer(t, ns.Addr())
	ctx := testCtx(t)
	send := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if _, err := p.Send(ctx, &protocol.Message{Topic: topic, Body: []byte(fmt.Sprint(i))}); err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
		}
	}
	rec := newPushRecorder()
	c, err := NewPushConsumer("", "G", WithNameServer(ns.Addr()), WithConsumeFrom(ConsumeFromFirst), WithRouteRefresh(100*time.Millisecond),
		WithPullSuspend(200*time.Millisecond), WithCommitInterval(50*time.Millisecond),
		WithMasterRetryInterval(200*time.Millisecond), WithReconnectBackoff(10*time.Millisecond, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Subscribe(topic, "*", rec.handle); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	send(0, 20)
	testwait.For(t, testwait.Wall, 10*time.Second, "20 messages consumed on m1", func() bool { return rec.total.Load() >= 20 })
	waitSynced(t, m1, n1, topic)
	testwait.For(t, testwait.Wall, 5*time.Second, "the offsets on the slave", func() bool {
		for q := range int32(2) {
			want, _ := m1.CommittedOffset("G", topic, q)
			if got, ok := n1.CommittedOffset("G", topic, q); !ok || got != want {
				return false
			}
		}
		return true
	})

	m1.Stop()
	a, err := NewAdmin(n1.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.UpdateBrokerRole(ctx, RoleAsyncMaster, "", 0); err != nil {
		t.Fatal(err)
	}
	n1.RegisterAs(ns, "c1", "g1", protocol.MasterID, RoleAsyncMaster, 2)
	send(20, 40)
	testwait.For(t, testwait.Wall, 10*time.Second, "the messages sent to the new master consumed", func() bool { return rec.total.Load() >= 40 })
	for i := range 40 {
		if n := rec.bodies[fmt.Sprint(i)]; n != 1 {
			t.Errorf("message %d consumed %d times", i, n)
		}
	}
	if members := n1.GroupMembers("G"); len(members) != 1 {
		t.Errorf("members on the new master: %v, want the consumer", members)
	}
}
