package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wharfmq/wharf/internal/brokertest"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// replicaOpts make failover and the return to the master quick.
func replicaOpts(slave *brokertest.Broker) []Option {
	return []Option{
		WithSlaveAddrs(slave.Addr()),
		WithMasterRetryInterval(200 * time.Millisecond),
		WithReconnectBackoff(10*time.Millisecond, 50*time.Millisecond),
		WithDialTimeout(time.Second),
	}
}

// startPair starts a master and a slave replicating from it.
func startPair(t *testing.T) (m, s *brokertest.Broker) {
	t.Helper()
	m = brokertest.Start(t)
	return m, brokertest.Start(t, brokertest.SlaveOf(m))
}

// waitSynced waits until the slave holds every message of topic the
// master holds, queue by queue.
func waitSynced(t *testing.T, m, s *brokertest.Broker, topic string) {
	t.Helper()
	testwait.For(t, testwait.Wall, 5*time.Second, "the slave caught up on "+topic, func() bool {
		want := m.Total(topic)
		return want > 0 && s.Total(topic) == want
	})
}

// fill sends n messages to queue q of topic on b, bodies prefix-i.
func fill(t *testing.T, b *brokertest.Broker, topic string, q int32, prefix string, from, n int) {
	t.Helper()
	p := newProducer(t, b)
	for i := from; i < from+n; i++ {
		if _, err := p.Send(testCtx(t), msg(topic, fmt.Sprintf("%s-%d", prefix, i)), ToQueue(q)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPullConsumerReplicaRouting pulls one queue of 30 messages in batches
// of 10 (and once more at the end) and checks which broker served each
// pull: m for the master, s for the slave.
func TestPullConsumerReplicaRouting(t *testing.T) {
	tests := []struct {
		name        string
		suggest     int64 // the master's SuggestWhichBrokerID
		slaveLacks  int   // messages the master has and the slave lacks
		masterDown  bool  // before the consumer starts
		stopAfter   int   // stop the master after this many pulls (0: never)
		slaveDown   bool
		wantFrom    string // broker of each pull
		wantLast    protocol.PullStatus
		wantCommit  string // where CommitOffset lands: "m" or "s"
		wantNewErr  error  // NewPullConsumer's error
		wantPullErr error
	}{
		{name: "master up", wantFrom: "mmmm", wantLast: protocol.PullNoNewMsg, wantCommit: "m"},
		{name: "master suggests slave until caught up", suggest: 1, wantFrom: "mssm", wantLast: protocol.PullNoNewMsg, wantCommit: "m"},
		{name: "master down at start", masterDown: true, wantFrom: "ssss", wantLast: protocol.PullNoNewMsg, wantCommit: "s"},
		{name: "master lost after one pull", stopAfter: 1, wantFrom: "msss", wantLast: protocol.PullNoNewMsg, wantCommit: "s"},
		// The slave lacks the last 10: its end is a catch-up point, and a
		// pull beyond it waits instead of moving the consumer back.
		{name: "lagging slave", suggest: 1, slaveLacks: 10, wantFrom: "msms", wantLast: protocol.PullNoNewMsg, wantCommit: "m"},
		{name: "suggested slave unreachable", suggest: 1, slaveDown: true, wantFrom: "mmmm", wantLast: protocol.PullNoNewMsg, wantCommit: "m"},
		{name: "master and slave down", masterDown: true, slaveDown: true, wantNewErr: ErrBrokerUnavailable},
		{name: "master lost, slave down", stopAfter: 2, slaveDown: true, wantFrom: "mm", wantPullErr: ErrBrokerUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, s := startPair(t)
			m.CreateTopic("T", 1)
			fill(t, m, "T", 0, "x", 0, 30-tt.slaveLacks)
			waitSynced(t, m, s, "T")
			if tt.slaveLacks > 0 {
				s.SetReplicating(false)
				fill(t, m, "T", 0, "x", 30-tt.slaveLacks, tt.slaveLacks)
				m.WaitDispatched()
			}
			m.SetPullSuggestion(tt.suggest)
			if tt.masterDown {
				m.Stop()
			}
			if tt.slaveDown {
				s.Stop()
			}
			name := map[string]string{m.Addr(): "m", s.Addr(): "s"}
			ctx := testCtx(t)
			pc, err := NewPullConsumer(m.Addr(), "G", replicaOpts(s)...)
			if tt.wantNewErr != nil {
				if !errors.Is(err, tt.wantNewErr) {
					t.Fatalf("NewPullConsumer: %v, want %v", err, tt.wantNewErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer pc.Close()
			var from string
			var last PullResult
			offset := int64(0)
			seen := map[string]bool{}
			for i := 0; i < len(tt.wantFrom) || tt.wantPullErr != nil && i < 10; i++ {
				if tt.stopAfter > 0 && i == tt.stopAfter {
					m.Stop()
				}
				res, err := pc.Pull(ctx, "T", 0, offset, 10, PullOptions{})
				if err != nil {
					if tt.wantPullErr != nil && errors.Is(err, tt.wantPullErr) {
						break
					}
					t.Fatalf("pull %d at %d: %v", i, offset, err)
				}
				from += name[res.BrokerAddr]
				for j, msg := range res.Messages {
					if msg.QueueOffset != offset+int64(j) {
						t.Fatalf("pull %d: message %d at offset %d, want %d", i, j, msg.QueueOffset, offset+int64(j))
					}
					seen[string(msg.Body)] = true
				}
				if res.NextBeginOffset < offset {
					t.Fatalf("pull %d from %s moved the consumer back from %d to %d", i, res.BrokerAddr, offset, res.NextBeginOffset)
				}
				offset, last = res.NextBeginOffset, res
			}
			if from != tt.wantFrom {
				t.Errorf("pulls served by %q, want %q", from, tt.wantFrom)
			}
			if tt.wantPullErr != nil {
				return
			}
			if last.Status != tt.wantLast || offset != 30 || len(seen) != 30 {
				t.Errorf("last pull %v at %d, %d distinct messages; want %v at 30 and 30 messages", last.Status, offset, len(seen), tt.wantLast)
			}
			if err := pc.CommitOffset(ctx, "T", 0, 30); err != nil {
				t.Fatal(err)
			}
			on := map[string]*brokertest.Broker{"m": m, "s": s}[tt.wantCommit]
			if off, ok := on.CommittedOffset("G", "T", 0); !ok || off != 30 {
				t.Errorf("commit on %s: %d, %v; want 30", tt.wantCommit, off, ok)
			}
			if got, err := pc.QueryOffset(ctx, "T", 0); err != nil || got != 30 {
				t.Errorf("QueryOffset = %d, %v", got, err)
			}
		})
	}
}

// TestPushConsumerFailsOverToSlaveAndBack: a push consumer reads from the
// master, keeps consuming from the slave (and commits there) while the
// master is down, and returns to the master when it is back, delivering
// every message exactly once.
func TestPushConsumerFailsOverToSlaveAndBack(t *testing.T) {
	m, s := startPair(t)
	m.CreateTopic("T", 2)
	for q := range int32(2) {
		fill(t, m, "T", q, fmt.Sprintf("a%d", q), 0, 10)
	}
	ctx := testCtx(t)

	var mu sync.Mutex
	got := map[string]int{}
	total := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, c := range got {
			n += c
		}
		return n
	}
	c, err := NewPushConsumer(m.Addr(), "G", append(replicaOpts(s), WithConsumeFrom(ConsumeFromFirst),
		WithPullSuspend(300*time.Millisecond), WithCommitInterval(50*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Subscribe("T", "*", func(_ context.Context, msgs []*protocol.MessageExt) ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		for _, x := range msgs {
			got[string(x.Body)]++
		}
		return ConsumeSuccess
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, testwait.Wall, 5*time.Second, "20 messages from the master", func() bool { return total() == 20 })
	if n := s.Count(protocol.CodePullMessage); n != 0 {
		t.Errorf("%d pulls reached the slave while the master was up", n)
	}
	committed := func(b *brokertest.Broker, want int64) func() bool {
		return func() bool {
			for q := range int32(2) {
				if off, ok := b.CommittedOffset("G", "T", q); !ok || off != want {
					return false
				}
			}
			return true
		}
	}
	testwait.For(t, testwait.Wall, 5*time.Second, "offsets 10 committed on the master", committed(m, 10))

	// 20 more reach the master and its slave, but no consumer: the
	// master's pulls go unanswered. Then the master dies; the consumer
	// reads them from the slave.
	m.SetStall(protocol.CodePullMessage, true)
	testwait.For(t, testwait.Wall, 5*time.Second, "the master's held pulls answered", func() bool { return m.Held("T") == 0 })
	for q := range int32(2) {
		fill(t, m, "T", q, fmt.Sprintf("b%d", q), 10, 10)
	}
	waitSynced(t, m, s, "T")
	if n := total(); n != 20 {
		t.Fatalf("%d consumed while the master's pulls were stalled, want 20", n)
	}
	m.Stop()
	m.SetStall(protocol.CodePullMessage, false)
	testwait.For(t, testwait.Wall, 5*time.Second, "20 more messages from the slave", func() bool { return total() == 40 })
	testwait.For(t, testwait.Wall, 5*time.Second, "offsets 20 committed on the slave", committed(s, 20))

	// The master comes back with its log; every queue's pulls return to
	// it (two pulls of a queue on the master: the first was answered).
	m.Restart()
	back := [2]int{m.PullCount("T", 0), m.PullCount("T", 1)}
	testwait.For(t, testwait.Wall, 5*time.Second, "pulls of both queues back on the master", func() bool {
		return m.PullCount("T", 0) >= back[0]+2 && m.PullCount("T", 1) >= back[1]+2
	})
	slavePulls := s.Count(protocol.CodePullMessage)
	for q := range int32(2) {
		fill(t, m, "T", q, fmt.Sprintf("c%d", q), 20, 10)
	}
	testwait.For(t, testwait.Wall, 5*time.Second, "20 more messages from the master", func() bool { return total() == 60 })
	testwait.For(t, testwait.Wall, 5*time.Second, "offsets 30 committed on the master", committed(m, 30))
	if n := s.Count(protocol.CodePullMessage); n != slavePulls {
		t.Errorf("%d pulls reached the slave after the master returned", n-slavePulls)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for body, n := range got {
		if n != 1 {
			t.Errorf("%s delivered %d times", body, n)
		}
	}
	if len(got) != 60 {
		t.Errorf("%d distinct messages, want 60", len(got))
	}
}

// TestPushConsumerStartsOnSlave: with the master down, Start reads the
// topic and the committed offsets from the slave.
func TestPushConsumerStartsOnSlave(t *testing.T) {
	m, s := startPair(t)
	m.CreateTopic("T", 1)
	fill(t, m, "T", 0, "x", 0, 10)
	a := newAdmin(t, m)
	if err := a.UpdateConsumerOffset(testCtx(t), "G", "T", 0, 4); err != nil {
		t.Fatal(err)
	}
	waitSynced(t, m, s, "T")
	testwait.For(t, testwait.Wall, 5*time.Second, "the committed offset on the slave", func() bool {
		off, ok := s.CommittedOffset("G", "T", 0)
		return ok && off == 4
	})
	m.Stop()
	rec := newPushRecorder()
	c, err := NewPushConsumer(m.Addr(), "G", append(replicaOpts(s), WithPullSuspend(200*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Subscribe("T", "*", rec.handle); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, testwait.Wall, 5*time.Second, "6 messages from offset 4", func() bool { return rec.total.Load() == 6 })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if off, ok := s.CommittedOffset("G", "T", 0); !ok || off != 10 {
		t.Errorf("slave offset %d, %v after Close; want 10", off, ok)
	}
}

func TestSlaveOptionValidation(t *testing.T) {
	b := brokertest.Start(t)
	if _, err := NewPullConsumer(b.Addr(), "G", WithSlaveAddrs("")); err == nil {
		t.Error("empty slave address accepted")
	}
	if _, err := NewPullConsumer(b.Addr(), "G", WithMasterRetryInterval(0)); err == nil {
		t.Error("zero master retry interval accepted")
	}
}

// TestNoGoroutineLeaksWithSlaves: consumers that failed over to a slave
// and back leave no goroutine behind.
func TestNoGoroutineLeaksWithSlaves(t *testing.T) {
	m, s := startPair(t)
	m.CreateTopic("T", 2)
	fill(t, m, "T", 0, "x", 0, 5)
	waitSynced(t, m, s, "T")
	ctx := testCtx(t)
	base := clientGoroutines()

	rec := newPushRecorder()
	c, err := NewPushConsumer(m.Addr(), "G", append(replicaOpts(s), WithConsumeFrom(ConsumeFromFirst), WithPullSuspend(10*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe("T", "*", rec.handle); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pc, err := NewPullConsumer(m.Addr(), "G2", replicaOpts(s)...)
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, testwait.Wall, 5*time.Second, "consumed", func() bool { return rec.total.Load() == 5 })
	m.Stop()
	if _, err := pc.Pull(ctx, "T", 0, 0, 1, PullOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, testwait.Wall, 5*time.Second, "pulls on the slave", func() bool { return s.Count(protocol.CodePullMessage) >= 2 })
	// A long poll held at the slave when the consumers close.
	pullDone := make(chan error, 1)
	held := s.Pending(protocol.CodePullMessage)
	go func() {
		_, err := pc.Pull(ctx, "T", 1, 0, 1, PullOptions{Suspend: 10 * time.Second})
		pullDone <- err
	}()
	testwait.For(t, testwait.Wall, 5*time.Second, "the long poll held at the slave", func() bool {
		return s.Pending(protocol.CodePullMessage) > held
	})
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	pc.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("closing took %v", d)
	}
	<-pullDone
	testwait.For(t, testwait.Wall, 5*time.Second, fmt.Sprintf("client goroutines back to %d", base), func() bool {
		return clientGoroutines() <= base
	})
}
