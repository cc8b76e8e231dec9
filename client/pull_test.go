package client

import (
	"testing"
	"time"

	"github.com/wharfmq/wharf/internal/brokertest"
	"github.com/wharfmq/wharf/internal/testwait"
)

// TestPullConsumerCloseLeavesGroup: a closed PullConsumer leaves its group
// at once, on one broker group and on name-server routes. The brokers'
// clocks never move, so a member that only timed out would stay in
// DESCRIBE for ever.
func TestPullConsumerCloseLeavesGroup(t *testing.T) {
	t.Run("broker", func(t *testing.T) {
		b := brokertest.Start(t)
		b.CreateTopic("T", 2)
		pc, err := NewPullConsumer(b.Addr(), "G", WithClientID("p1"))
		if err != nil {
			t.Fatal(err)
		}
		closeLeaves(t, pc, b)
	})
	t.Run("namesrv", func(t *testing.T) {
		ns := brokertest.StartNameServer(t)
		b := brokertest.Start(t)
		b.CreateTopic("T", 2)
		b.RegisterWith(ns, "c1", "g1")
		pc, err := NewPullConsumer("", "G", WithNameServer(ns.Addr()), WithClientID("p1"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pc.PullQueue(testCtx(t), MessageQueue{"g1", "T", 0}, 0, 1, PullOptions{}); err != nil { // connects to g1's master
			pc.Close()
			t.Fatal(err)
		}
		closeLeaves(t, pc, b)
	})
}

// TestPullConsumerHeartbeatsAtTheBrokersInterval: a PullConsumer is a
// member of its group, which the broker drops after three of its
// heartbeat intervals of silence; with the connection's default 30 s it
// was dropped (and logged "consumer timed out") 3 s into every run. Its
// heartbeats follow the interval the broker's answer asks for.
func TestPullConsumerHeartbeatsAtTheBrokersInterval(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithHeartbeatInterval(20*time.Millisecond))
	b.CreateTopic("T", 1)
	pc, err := NewPullConsumer(b.Addr(), "G", WithClientID("p1")) // default heartbeat: 30 s
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	testwait.For(t, testwait.Wall, 5*time.Second, "p1 a member of G", func() bool {
		_, ok := b.GroupMembers("G")["p1"]
		return ok
	})
	seen := b.Heartbeats()
	testwait.For(t, testwait.Wall, 5*time.Second, "10 more heartbeats (one each 20 ms)", func() bool { return b.Heartbeats() >= seen+10 })
	if _, ok := b.GroupMembers("G")["p1"]; !ok {
		t.Fatal("p1 dropped from G although it heartbeats")
	}
}

// TestPullConsumerHeartbeatAfterLeaving: a heartbeat the connection sends
// between Close's leave and its close of the connection (here: many, the
// connection staying open) does not make the consumer a member again.
func TestPullConsumerHeartbeatAfterLeaving(t *testing.T) {
	b := brokertest.Start(t)
	b.CreateTopic("T", 1)
	pc, err := NewPullConsumer(b.Addr(), "G", WithClientID("p1"), WithHeartbeat(2*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	testwait.For(t, testwait.Wall, 5*time.Second, "p1 a member of G", func() bool {
		_, ok := b.GroupMembers("G")["p1"]
		return ok
	})
	pc.leaving.Store(true) // Close's first steps, without closing the connection
	pc.leave(pc.r)
	seen := b.Heartbeats()
	testwait.For(t, testwait.Wall, 5*time.Second, "5 more heartbeats", func() bool { return b.Heartbeats() >= seen+5 })
	if m := b.GroupMembers("G"); len(m) != 0 {
		t.Errorf("members of G after leaving and more heartbeats: %v", m)
	}
}

// closeLeaves waits until pc (client id p1) is a member of group G on b,
// closes it and checks that b no longer lists it.
func closeLeaves(t *testing.T, pc *PullConsumer, b *brokertest.Broker) {
	t.Helper()
	testwait.For(t, testwait.Wall, 5*time.Second, "p1 a member of G", func() bool {
		_, ok := b.GroupMembers("G")["p1"]
		return ok
	})
	if err := pc.Close(); err != nil {
		t.Fatal(err)
	}
	if m := b.GroupMembers("G"); len(m) != 0 {
		t.Errorf("members of G after Close: %v", m)
	}
	if err := pc.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
