package brokertest

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// send stores one message through addr (the proxy, or the broker itself).
func send(t *testing.T, addr, topic string, q int32, body string) (protocol.Status, protocol.SendResponse) {
	t.Helper()
	var out protocol.SendResponse
	st, remark, err := call(addr, &protocol.SendRequest{Topic: topic, QueueID: q, Body: []byte(body)}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if st == protocol.StatusOK && out.MsgID == "" {
		t.Fatalf("send OK without a message id (%s)", remark)
	}
	return st, out
}

// TestProxyFaults: what the proxy counts, answers itself, rewrites and
// swallows, checked against what the broker stored.
func TestProxyFaults(t *testing.T) {
	b := Start(t)
	b.CreateTopic("T", 2)
	if st, _ := send(t, b.Addr(), "T", 0, "plain"); st != protocol.StatusOK || b.Count(protocol.CodeSendMessage) != 1 {
		t.Fatalf("plain send: %v, %d counted", st, b.Count(protocol.CodeSendMessage))
	}
	b.SetStatusHook(func(code protocol.Code, n int) protocol.Status {
		switch {
		case code == protocol.CodeSendMessage && n == 2:
			return protocol.StatusSystemBusy // answered by the proxy: not stored
		case code == protocol.CodeSendMessage && n == 3:
			return protocol.StatusFlushDiskTimeout // stored, answered so
		}
		return 0
	})
	if st, _ := send(t, b.Addr(), "T", 0, "busy"); st != protocol.StatusSystemBusy {
		t.Errorf("hooked SYSTEM_BUSY: %v", st)
	}
	st, res := send(t, b.Addr(), "T", 0, "unconfirmed")
	if st != protocol.StatusFlushDiskTimeout || res.MsgID == "" || res.QueueOffset != 1 {
		t.Errorf("hooked FLUSH_DISK_TIMEOUT: %v %+v", st, res)
	}
	b.SetStatusHook(nil)
	ms := b.Messages("T", 0)
	if len(ms) != 2 || string(ms[0].Body) != "plain" || string(ms[1].Body) != "unconfirmed" || b.Total("T") != 2 {
		t.Errorf("stored %d messages %v", len(ms), ms)
	}
	if b.Count(protocol.CodeSendMessage) != 3 || b.Count(protocol.CodeGetMaxOffset) != 0 {
		t.Errorf("counted %d sends and %d max-offset calls: the helpers' calls must not count",
			b.Count(protocol.CodeSendMessage), b.Count(protocol.CodeGetMaxOffset))
	}

	b.SetPullSuggestion(1)
	var pr protocol.PullResponse
	if st, _, err := call(b.Addr(), &protocol.PullRequest{ConsumerGroup: "G", Topic: "T", QueueOffset: 0, MaxMsgNums: 8}, &pr); err != nil ||
		st != protocol.StatusOK || len(pr.Messages) != 2 || pr.SuggestWhichBrokerID != 1 {
		t.Errorf("pull with a forced suggestion: %v %v %+v", st, err, pr)
	}
	if n := b.PullCount("T", 0); n != 1 {
		t.Errorf("%d pulls of T/0 counted, want 1", n)
	}
}

// TestProxyStallHoldAndCut: a stalled code is never answered; a held long
// poll shows in Held and Pending; DropConns cuts the client, and a cut
// connection holds nothing any more.
func TestProxyStallHoldAndCut(t *testing.T) {
	b := Start(t)
	b.CreateTopic("T", 1)
	nc, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	b.SetStall(protocol.CodeGetMaxOffset, true)
	write := func(opaque uint32, req protocol.Request) {
		frame, err := protocol.AppendRequest(nil, opaque, 0, req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nc.Write(frame); err != nil {
			t.Fatal(err)
		}
	}
	write(1, &protocol.GetMaxOffsetRequest{Topic: "T"})
	write(2, &protocol.PullRequest{ConsumerGroup: "G", Topic: "T", MaxMsgNums: 1, SuspendTimeoutMillis: 60_000})
	write(3, &protocol.GetMinOffsetRequest{Topic: "T"})
	r := bufio.NewReader(nc)
	buf, err := readFrame(r, protocol.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	f, err := protocol.DecodeFrame(buf, protocol.DefaultLimits())
	if err != nil || f.Opaque != 3 {
		t.Fatalf("first answer: %+v, %v; want the min offset's (3): the stalled one never comes, the pull is held", f, err)
	}
	testwait.For(t, testwait.Wall, 5*time.Second, "the pull held", func() bool {
		return b.Held("T") == 1 && b.Pending(protocol.CodePullMessage) == 1
	})
	if b.Pending(protocol.CodeGetMaxOffset) != 0 || b.Count(protocol.CodeGetMaxOffset) != 1 {
		t.Errorf("stalled call: %d pending, %d counted; want 0 and 1", b.Pending(protocol.CodeGetMaxOffset), b.Count(protocol.CodeGetMaxOffset))
	}
	b.DropConns()
	if _, err := readFrame(r, protocol.DefaultLimits()); err == nil {
		t.Fatal("an answer after DropConns")
	}
	if b.Held("T") != 0 || b.Pending(protocol.CodePullMessage) != 0 {
		t.Errorf("a cut connection still holds %d pulls", b.Pending(protocol.CodePullMessage))
	}
}

// TestLongPollOnTheBrokersClock: a held pull's suspend ends when the
// broker's clock is advanced past it, not on the wall clock.
func TestLongPollOnTheBrokersClock(t *testing.T) {
	b := Start(t)
	b.CreateTopic("T", 1)
	done := make(chan protocol.Status, 1)
	go func() {
		st, _, _ := call(b.Addr(), &protocol.PullRequest{ConsumerGroup: "G", Topic: "T", MaxMsgNums: 1, SuspendTimeoutMillis: 3_600_000}, nil)
		done <- st
	}()
	testwait.For(t, testwait.Wall, 5*time.Second, "the pull held", func() bool { return b.Held("T") == 1 })
	b.Clock().Advance(time.Hour)
	if !testwait.Chan(done, 5*time.Second) {
		t.Fatal("an hour-long poll still held after advancing the broker's clock an hour")
	}
}

// TestRestartKeepsData: a clean restart keeps messages and offsets, at
// the same address.
func TestRestartKeepsData(t *testing.T) {
	b := Start(t)
	b.CreateTopic("T", 1)
	send(t, b.Addr(), "T", 0, "kept")
	if st, _, err := call(b.Addr(), &protocol.UpdateConsumerOffsetRequest{ConsumerGroup: "G", Topic: "T", QueueID: 0, CommitOffset: 1}, nil); err != nil || st != protocol.StatusOK {
		t.Fatalf("commit: %v %v", st, err)
	}
	addr := b.Addr()
	b.Restart()
	if b.Addr() != addr {
		t.Errorf("address %s after restart, was %s", b.Addr(), addr)
	}
	if ms := b.Messages("T", 0); len(ms) != 1 || string(ms[0].Body) != "kept" {
		t.Errorf("after restart: %v", ms)
	}
	if off, ok := b.CommittedOffset("G", "T", 0); !ok || off != 1 {
		t.Errorf("committed offset after restart: %d, %v", off, ok)
	}
	if st, _ := send(t, b.Addr(), "T", 0, "after"); st != protocol.StatusOK {
		t.Errorf("send after restart: %v", st)
	}
}

// TestSlaveReplicates: a slave copies its master's topics and messages
// over the real replication link; with replication off it falls behind,
// and catches up once on again (at its next retry, on its clock).
func TestSlaveReplicates(t *testing.T) {
	m := Start(t)
	s := Start(t, SlaveOf(m))
	m.CreateTopic("T", 2)
	send(t, m.Addr(), "T", 1, "one")
	synced := func(n int) func() bool { return func() bool { return s.Total("T") == n } }
	testwait.For(t, testwait.Wall, 5*time.Second, "the slave has the message", synced(1))
	if ms := s.Messages("T", 1); len(ms) != 1 || string(ms[0].Body) != "one" {
		t.Errorf("on the slave: %v", ms)
	}
	if st, _ := send(t, s.Addr(), "T", 1, "to the slave"); st == protocol.StatusOK {
		t.Error("the slave stored a send")
	}
	s.SetReplicating(false)
	send(t, m.Addr(), "T", 1, "two")
	if testwait.Until(testwait.Wall, 300*time.Millisecond, synced(2)) {
		t.Fatal("the slave replicated with replication off")
	}
	s.SetReplicating(true)
	s.Clock().Advance(10 * time.Second) // past the link's retry backoff
	testwait.For(t, testwait.Wall, 5*time.Second, "the slave caught up", synced(2))
}

// TestSyncMasterNeedsItsSlave: a SYNC_MASTER answers a send OK once its
// slave has it. With the slave's link cut, the send is stored and answered
// unconfirmed, naming the message: SLAVE_NOT_AVAILABLE once the master
// has seen the link go, FLUSH_SLAVE_TIMEOUT when SlaveTimeout passes on
// its clock before that. OK again once the slave is back.
func TestSyncMasterNeedsItsSlave(t *testing.T) {
	m := Start(t, WithRole("SYNC_MASTER"), WithConfig(func(c *actors.Config) { c.SlaveTimeout = time.Hour }))
	s := Start(t, SlaveOf(m))
	m.CreateTopic("T", 1)
	acked := func() bool { st, _ := send(t, m.Addr(), "T", 0, "x"); return st == protocol.StatusOK }
	testwait.For(t, testwait.Wall, 5*time.Second, "a send the slave acknowledged", acked)
	s.SetReplicating(false)
	type answer struct {
		st  protocol.Status
		res protocol.SendResponse
		err error
	}
	done := make(chan answer, 1)
	go func() {
		var a answer
		a.st, _, a.err = call(m.Addr(), &protocol.SendRequest{Topic: "T", QueueID: 0, Body: []byte("alone")}, &a.res)
		done <- a
	}()
	testwait.For(t, testwait.Wall, 5*time.Second, "the send answered or waiting", func() bool {
		return len(done) == 1 || m.Pending(protocol.CodeSendMessage) == 1
	})
	m.Clock().Advance(time.Hour) // SlaveTimeout, if it waits
	select {
	case a := <-done:
		if a.err != nil || !a.st.Unconfirmed() || a.res.MsgID == "" {
			t.Errorf("send without the slave: %v %+v %v, want an unconfirmed status with the stored message's id", a.st, a.res, a.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the send still waits after SlaveTimeout on the master's clock")
	}
	s.SetReplicating(true)
	s.Clock().Advance(10 * time.Second) // past the link's retry backoff
	testwait.For(t, testwait.Wall, 5*time.Second, "a send the slave acknowledged again", acked)
}
