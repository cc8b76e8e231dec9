package client

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/wharfmq/wharf/internal/brokertest"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// TestPullConsumerAcrossGroups: a PullConsumer on name-server routes lists
// the queues of every group hosting a topic, reads and commits each on its
// group; with a group's master gone it reads that group from its slave
// (and commits there), and commits to the master again once it is back.
func TestPullConsumerAcrossGroups(t *testing.T) {
	const topic = "orders"
	ns := brokertest.StartNameServer(t)
	m1, m2 := brokertest.Start(t), brokertest.Start(t)
	s1 := brokertest.Start(t, brokertest.SlaveOf(m1))
	for _, b := range []*brokertest.Broker{m1, m2} {
		b.CreateTopic(topic, 2)
	}
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
	send(0, 40)

	if _, err := NewPullConsumer(m1.Addr(), "G", WithNameServer(ns.Addr())); !errors.Is(err, ErrInvalidParameter) {
		t.Errorf("NewPullConsumer with an address and WithNameServer: %v, want ErrInvalidParameter", err)
	}
	pc, err := NewPullConsumer("", "G", WithNameServer(ns.Addr()), WithRouteRefresh(100*time.Millisecond),
		WithMasterRetryInterval(200*time.Millisecond), WithReconnectBackoff(10*time.Millisecond, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	qs, err := pc.Queues(ctx, topic)
	want := []MessageQueue{{"g1", topic, 0}, {"g1", topic, 1}, {"g2", topic, 0}, {"g2", topic, 1}}
	if err != nil || !slices.Equal(qs, want) {
		t.Fatalf("Queues = %v, %v; want %v", qs, err, want)
	}
	if _, err := pc.Pull(ctx, topic, 0, 0, 1, PullOptions{}); !errors.Is(err, ErrInvalidParameter) {
		t.Errorf("Pull without a group of a topic two groups host: %v, want ErrInvalidParameter", err)
	}
	if _, err := pc.PullQueue(ctx, MessageQueue{"g9", topic, 0}, 0, 1, PullOptions{}); !errors.Is(err, ErrTopicNotExist) {
		t.Errorf("PullQueue of a group that does not host the topic: %v, want ErrTopicNotExist", err)
	}

	// readAll pulls every queue from next and commits; it returns the
	// bodies read and the brokers that answered, per group.
	next := map[MessageQueue]int64{}
	readAll := func() (map[string]bool, map[string]string) {
		t.Helper()
		bodies, from := map[string]bool{}, map[string]string{}
		for _, q := range qs {
			res, err := pc.PullQueue(ctx, q, next[q], 256, PullOptions{})
			if err != nil {
				t.Fatalf("pull %v at %d: %v", q, next[q], err)
			}
			for _, m := range res.Messages {
				bodies[string(m.Body)] = true
			}
			from[q.BrokerName] = res.BrokerAddr
			next[q] = res.NextBeginOffset
			if err := pc.CommitQueueOffset(ctx, q, next[q]); err != nil {
				t.Fatalf("commit %v: %v", q, err)
			}
		}
		return bodies, from
	}
	bodies, from := readAll()
	if len(bodies) != 40 || from["g1"] != m1.Addr() || from["g2"] != m2.Addr() {
		t.Fatalf("read %d of 40 messages, from %v; want g1 from %s, g2 from %s", len(bodies), from, m1.Addr(), m2.Addr())
	}
	for _, q := range qs {
		b := map[string]*brokertest.Broker{"g1": m1, "g2": m2}[q.BrokerName]
		if off, ok := b.CommittedOffset("G", topic, q.QueueID); !ok || off != next[q] {
			t.Errorf("offset of %v on its master: %d, %v; want %d", q, off, ok, next[q])
		}
		if off, err := pc.QueryQueueOffset(ctx, q); err != nil || off != next[q] {
			t.Errorf("QueryQueueOffset(%v) = %d, %v; want %d", q, off, err, next[q])
		}
		if lo, hi, err := pc.QueueOffsets(ctx, q); err != nil || lo != 0 || hi != next[q] {
			t.Errorf("QueueOffsets(%v) = %d, %d, %v; want 0, %d", q, lo, hi, err, next[q])
		}
	}

	send(40, 60)
	waitSynced(t, m1, s1, topic)
	m1.Stop() // g1 is masterless: readable from s1 only
	bodies, from = readAll()
	if len(bodies) != 20 || from["g1"] != s1.Addr() {
		t.Fatalf("with g1's master gone: read %d of 20 new messages, g1 from %s; want from its slave %s", len(bodies), from["g1"], s1.Addr())
	}
	for _, q := range qs[:2] {
		if off, ok := s1.CommittedOffset("G", topic, q.QueueID); !ok || off != next[q] {
			t.Errorf("offset of %v on g1's slave: %d, %v; want %d", q, off, ok, next[q])
		}
	}

	m1.Restart()
	m1.RegisterWith(ns, "c1", "g1")
	commits := m1.Count(protocol.CodeUpdateConsumerOffset)
	testwait.For(t, testwait.Wall, 5*time.Second, "commits of g1's queues on its master again", func() bool {
		if err := pc.CommitQueueOffset(ctx, qs[0], next[qs[0]]); err != nil {
			t.Fatalf("commit after the master's restart: %v", err)
		}
		return m1.Count(protocol.CodeUpdateConsumerOffset) > commits
	})
	send(60, 80)
	testwait.For(t, testwait.Wall, 5*time.Second, "g1 read from its master again", func() bool {
		_, from := readAll()
		return from["g1"] == m1.Addr()
	})
}
