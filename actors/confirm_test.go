package actors

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/internal/vtime"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage/vfs"
)

// ctlPair starts b1 (made master) and b2 (its slave) in controller mode
// on one loop, with cfg changed by mut for each, and waits until the
// SyncStateSet is {1, 2} and the master's gate waits for 2.
func ctlPair(t *testing.T, mut func(name string, cfg *Config)) (m, s *harness, net *ctlNet, ctl *testController) {
	m, s, net, ctl, _ = ctlPairRestartable(t, mut)
	return m, s, net, ctl
}

// ctlPairRestartable is ctlPair that also returns how to start a broker
// again on its store (after its harness stopped).
func ctlPairRestartable(t *testing.T, mut func(name string, cfg *Config)) (m, s *harness, net *ctlNet, ctl *testController, start func(name string) *harness) {
	t.Helper()
	loop := vtime.NewFIFO(testEpoch)
	net = newCtlNet()
	ctl = newTestController(loop, net, "ctl:9878")
	env := Env{Dial: net.dial}
	disks := map[string]*vfs.Mem{}
	start = func(name string) *harness {
		cfg := ctlBroker(name)
		if mut != nil {
			mut(name, &cfg)
		}
		if disks[name] == nil {
			disks[name] = vfs.NewMem()
		}
		h := startAt(t, disks[name], cfg, loop, env)
		net.listen(name+":10912", h.b.HAHandler())
		return h
	}
	m = start("b1")
	testwait.For(t, loop, 5*time.Second, "b1 master", func() bool { return m.runtime().BrokerRole == RoleSyncMaster })
	s = start("b2")
	testwait.For(t, loop, 10*time.Second, "the set {1,2}", func() bool { return slices.Equal(ctl.group().SyncStateSet, []int64{1, 2}) })
	testwait.For(t, loop, time.Second, "the gate waits for 2", func() bool { return slices.Equal(m.b.v.ackSetSnapshot(), []int64{2}) })
	return m, s, net, ctl, start
}

// Controller mode: the master's consumers see a message only once every
// member of the SyncStateSet holds it (the confirm offset), not at the
// append. A long poll held for it wakes when the slave's acknowledgement
// moves the confirm offset; the queue's bound follows the same rule; the
// confirm offset is what the controller heartbeat carries and what the
// transfers tell the slave.
func TestConfirmOffsetGatesConsumers(t *testing.T) {
	m, s, net, _ := ctlPair(t, nil)
	if f := m.sendNow("confirmed"); f.Status != protocol.StatusOK {
		t.Fatalf("send: %v %q", f.Status, f.Remark)
	}
	m.waitMax("t", 0, 1)

	net.set(net.hold, "b1:10912", true) // the slave gets nothing more
	pull := m.send(&protocol.PullRequest{ConsumerGroup: "g", Topic: "t", QueueID: 0, QueueOffset: 1, MaxMsgNums: 8, SuspendTimeoutMillis: 5000})[0]
	send := m.send(sendReq("t", 0, "unconfirmed"))[0]
	m.loop.Advance(500 * time.Millisecond)
	if m.conn.has(pull) {
		f := m.conn.await(t, pull, 0)
		t.Fatalf("a pull answered %v while the message was on the master alone", f.Status)
	}
	if got := m.maxOffset("t", 0); got != 1 {
		t.Fatalf("the queue's bound is %d before the slave has the message, want 1", got)
	}
	end := m.store.CommitLog().MaxOffset()
	if c := m.b.v.confirmOffset(); c >= end || c == 0 {
		t.Fatalf("confirm offset %d with the log ending at %d, the slave behind", c, end)
	}

	net.release("b1:10912")
	f := m.conn.await(t, pull, 2*time.Second)
	if f.Status != protocol.StatusOK {
		t.Fatalf("the held pull after the slave's copy: %v %q", f.Status, f.Remark)
	}
	var pr protocol.PullResponse
	if err := protocol.DecodeResponse(f, protocol.DefaultLimits(), &pr); err != nil || len(pr.Messages) != 1 || string(pr.Messages[0].Body) != "unconfirmed" {
		t.Fatalf("the held pull got %v (%v), want the confirmed message", pr.Messages, err)
	}
	if f := m.conn.await(t, send, time.Second); f.Status != protocol.StatusOK {
		t.Fatalf("the send: %v %q", f.Status, f.Remark)
	}
	testwait.For(t, m.loop, time.Second, "the confirm offset at the log's end", func() bool { return m.b.v.confirmOffset() == end })
	// The slave hears of it with the next transfer.
	if f := m.sendNow("next"); f.Status != protocol.StatusOK {
		t.Fatalf("send: %v %q", f.Status, f.Remark)
	}
	testwait.For(t, m.loop, time.Second, "the slave's confirm offset", func() bool { return s.b.v.confirmOffset() >= end })
	if st := (&ctlClientActor{v: m.b.v, st: m.store}).storeState(); st.ConfirmOffset < end {
		t.Fatalf("the heartbeat carries confirm offset %d, want at least %d", st.ConfirmOffset, end)
	}
}

// Under SYNC_FLUSH in controller mode a slave's copy counts once it is
// fsynced: with the slave flushing once a second (ASYNC_FLUSH), a SYNC
// send waits for that flush, not for the append; with the slave under
// SYNC_FLUSH too (the group's shared flushDiskType) it is answered at
// once, the slave reporting after each fsync.
func TestSyncFlushCountsFsyncedCopy(t *testing.T) {
	for _, slaveSync := range []bool{false, true} {
		t.Run(fmt.Sprintf("slave SYNC_FLUSH %v", slaveSync), func(t *testing.T) {
			m, s, _, _ := ctlPair(t, func(name string, cfg *Config) {
				if name == "b1" || slaveSync {
					cfg.FlushDiskType = SyncFlush
					return
				}
				cfg.FlushIntervalCommitLog = time.Second
				cfg.FlushCommitLogLeastPages = 0
			})
			op := m.send(sendReq("t", 0, "durable"))[0]
			m.loop.Advance(100 * time.Millisecond)
			sl := s.store.CommitLog()
			if slaveSync {
				f := m.conn.await(t, op, 0)
				if f.Status != protocol.StatusOK || sl.FlushedOffset() < m.store.CommitLog().MaxOffset() {
					t.Fatalf("with the slave under SYNC_FLUSH: %v %q, the slave flushed to %d", f.Status, f.Remark, sl.FlushedOffset())
				}
				return
			}
			logHolds(t, s, "durable")
			if m.conn.has(op) {
				f := m.conn.await(t, op, 0)
				t.Fatalf("answered %v with the slave's copy not fsynced (flushed %d, end %d)", f.Status, sl.FlushedOffset(), sl.MaxOffset())
			}
			if f := m.conn.await(t, op, 2*time.Second); f.Status != protocol.StatusOK {
				t.Fatalf("after the slave's flush: %v %q", f.Status, f.Remark)
			}
			if sl.FlushedOffset() < m.store.CommitLog().MaxOffset() {
				t.Fatalf("acknowledged with the slave flushed to %d, the master's log ending at %d", sl.FlushedOffset(), m.store.CommitLog().MaxOffset())
			}
		})
	}
}

// A slave that becomes master serves what it holds: the messages of the
// old epoch are pulled from it, and its own writes once it confirms them
// (its SyncStateSet is itself alone).
func TestPromotedSlaveServesWhatItHolds(t *testing.T) {
	m, s, net, _ := ctlPair(t, nil)
	var want []string
	for i := range 3 {
		body := fmt.Sprintf("acked-%d", i)
		if f := m.sendNow(body); f.Status != protocol.StatusOK {
			t.Fatalf("send %d: %v %q", i, f.Status, f.Remark)
		}
		want = append(want, body)
	}
	net.unlisten("b1:10912")
	if err := m.stop(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, s.loop, 10*time.Second, "b2 master", func() bool { return s.runtime().BrokerRole == RoleSyncMaster })
	if f := s.sendNow("after"); f.Status != protocol.StatusOK {
		t.Fatalf("the new master: %v %q", f.Status, f.Remark)
	}
	want = append(want, "after")
	s.waitMax("t", 0, int64(len(want)))
	if got, st := s.pullBodies("t", 0); st != protocol.StatusOK || !slices.Equal(got, want) {
		t.Fatalf("the new master serves %v (%v), want %v", got, st, want)
	}
}

// A master restarted with a tail past its confirm offset (the slave never
// got it, so it was never acknowledged) shows consumers nothing of that
// tail before it knows its role: the controllers may have elected the
// slave meanwhile, and the tail is then cut when this broker rejoins, its
// queue offsets reused by the new master's messages. A consumer that had
// read the tail would skip those. (The store used to dispatch the whole
// log when it opened.)
func TestRestartedMasterHidesUnconfirmedTail(t *testing.T) {
	m, _, net, _, start := ctlPairRestartable(t, nil)
	if f := m.sendNow("confirmed"); f.Status != protocol.StatusOK {
		t.Fatalf("send: %v %q", f.Status, f.Remark)
	}
	m.waitMax("t", 0, 1)
	net.set(net.hold, "b1:10912", true) // the slave gets nothing more
	m.send(sendReq("t", 0, "unconfirmed"))
	logHolds(t, m, "unconfirmed")
	if got := m.maxOffset("t", 0); got != 1 {
		t.Fatalf("the queue's bound is %d with the message on the master alone, want 1", got)
	}
	// The master stops (cleanly: a power cut keeps less, not more) and
	// starts again while the controllers are unreachable: no role yet.
	net.set(net.mute, "ctl:9878", true)
	if err := m.stop(); err != nil {
		t.Fatal(err)
	}
	net.unlisten("b1:10912")
	again := start("b1")
	again.loop.Advance(time.Second)
	if r := again.b.v.currentRole(); !r.slave() || r.master != "" {
		t.Fatalf("the restarted broker has role %+v, want none yet (the controllers are unreachable)", r)
	}
	if got := again.maxOffset("t", 0); got != 1 {
		t.Fatalf("the restarted broker's queue bound is %d before it knows its role, want 1 (the unconfirmed tail hidden)", got)
	}
	f := again.conn.await(t, again.send(&protocol.PullRequest{ConsumerGroup: "g", Topic: "t", QueueID: 0, QueueOffset: 1, MaxMsgNums: 8})[0], time.Second)
	var pr protocol.PullResponse
	if f.Status == protocol.StatusOK {
		if err := protocol.DecodeResponse(f, protocol.DefaultLimits(), &pr); err == nil && len(pr.Messages) > 0 {
			t.Fatalf("a pull read %q from the restarted broker before it knew its role", pr.Messages[0].Body)
		}
	}
}
