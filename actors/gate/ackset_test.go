package gate

import (
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// Controller mode: a waiting send is answered OK once every slave of the
// ack set acknowledged it (and it is flushed under SYNC_FLUSH); an empty
// set is the master alone; a set member not connected holds nothing; a
// slave outside the set does not count; the set may grow while a send
// waits, and the send then waits for the new member too.
func TestAckSet(t *testing.T) {
	type ev struct {
		set   []int64    // nil: unchanged
		acks  []SlaveAck // nil: unchanged
		flush int64      // 0: none
	}
	cases := []struct {
		name      string
		syncFlush bool
		set       []int64
		acks      []SlaveAck
		then      []ev
		want      string // the one verdict, after ticking past every deadline
		at        time.Duration
	}{
		{name: "empty set: the master alone", want: "SUCCESS"},
		{name: "empty set, sync flush waits for the flush", syncFlush: true, then: []ev{{flush: 100}}, want: "SUCCESS"},
		{name: "empty set, sync flush never flushed", syncFlush: true, want: "FLUSH_DISK_TIMEOUT", at: 3 * time.Second},
		{name: "one member acked", set: []int64{2}, acks: []SlaveAck{{2, 100, 100}}, want: "SUCCESS"},
		{name: "one member behind", set: []int64{2}, acks: []SlaveAck{{2, 99, 99}}, want: "FLUSH_SLAVE_TIMEOUT", at: 3 * time.Second},
		{name: "member acks later", set: []int64{2}, acks: []SlaveAck{{2, 50, 50}}, then: []ev{{acks: []SlaveAck{{2, 120, 120}}}}, want: "SUCCESS"},
		{name: "two members, one behind", set: []int64{2, 3}, acks: []SlaveAck{{2, 100, 100}, {3, 60, 60}}, want: "FLUSH_SLAVE_TIMEOUT", at: 3 * time.Second},
		{name: "two members, both acked", set: []int64{2, 3}, acks: []SlaveAck{{3, 100, 100}, {2, 101, 101}}, want: "SUCCESS"},
		{name: "member not connected", set: []int64{2}, acks: []SlaveAck{{3, 100, 100}}, want: "FLUSH_SLAVE_TIMEOUT", at: 3 * time.Second},
		{name: "a slave outside the set does not count", set: []int64{2}, acks: []SlaveAck{{3, 100, 100}, {2, 10, 10}}, want: "FLUSH_SLAVE_TIMEOUT", at: 3 * time.Second},
		{name: "no in-sync refusal: no SLAVE_NOT_AVAILABLE", set: []int64{2}, then: []ev{{acks: []SlaveAck{{2, 100, 100}}}}, want: "SUCCESS"},
		{name: "set grows while waiting: waits for the new member", set: []int64{2}, acks: []SlaveAck{{2, 10, 10}, {3, 10, 10}},
			then: []ev{{set: []int64{2, 3}}, {acks: []SlaveAck{{2, 100, 100}, {3, 10, 10}}}}, want: "FLUSH_SLAVE_TIMEOUT", at: 3 * time.Second},
		{name: "set grows, both ack", set: []int64{2}, acks: []SlaveAck{{2, 10, 10}},
			then: []ev{{set: []int64{2, 3}}, {acks: []SlaveAck{{2, 100, 100}}}, {acks: []SlaveAck{{2, 100, 100}, {3, 100, 100}}}}, want: "SUCCESS"},
		{name: "set shrinks to the acked member", set: []int64{2, 3}, acks: []SlaveAck{{2, 100, 100}}, then: []ev{{set: []int64{2}}}, want: "SUCCESS"},
		{name: "sync flush and set: acked, not flushed", syncFlush: true, set: []int64{2}, acks: []SlaveAck{{2, 100, 100}}, want: "FLUSH_DISK_TIMEOUT", at: 3 * time.Second},
		{name: "sync flush and set: both", syncFlush: true, set: []int64{2}, acks: []SlaveAck{{2, 100, 100}}, then: []ev{{flush: 100}}, want: "SUCCESS"},
		{name: "sync flush: a member's copy counts once fsynced", syncFlush: true, set: []int64{2}, acks: []SlaveAck{{2, 100, 50}},
			then: []ev{{flush: 100}}, want: "FLUSH_SLAVE_TIMEOUT", at: 3 * time.Second},
		{name: "sync flush: the member fsyncs later", syncFlush: true, set: []int64{2}, acks: []SlaveAck{{2, 100, 50}},
			then: []ev{{flush: 100}, {acks: []SlaveAck{{2, 100, 100}}}}, want: "SUCCESS"},
		{name: "sync flush: the better of two connections", syncFlush: true, set: []int64{2}, acks: []SlaveAck{{2, 100, 10}, {2, 100, 100}},
			then: []ev{{flush: 100}}, want: "SUCCESS"},
		{name: "async flush: the appended copy counts", set: []int64{2}, acks: []SlaveAck{{2, 100, 0}}, want: "SUCCESS"},
	}
	for _, c := range cases {
		m := Mode{SyncFlush: c.syncFlush, SyncMaster: true, InSyncReplicas: 3, Controller: true,
			FlushTimeout: 5 * time.Second, SlaveTimeout: 3 * time.Second}
		g := New(m, 0)
		g.SetAckSet(t0, c.set)
		g.SlaveAcks(t0, c.acks)
		admit(g, t0, "m", 100, true)
		now := t0.Add(time.Millisecond)
		var got []Verdict
		for _, e := range c.then {
			got = append(got, ready(g).Verdicts...)
			if e.set != nil {
				g.SetAckSet(now, e.set)
			}
			if e.acks != nil {
				g.SlaveAcks(now, e.acks)
			}
			if e.flush > 0 {
				g.Flushed(now, e.flush)
			}
		}
		rd := ready(g)
		got = append(got, rd.Verdicts...)
		if len(got) == 0 && !rd.Deadline.IsZero() {
			if d := rd.Deadline.Sub(t0); d != c.at {
				t.Errorf("%s: deadline after %v, want %v", c.name, d, c.at)
			}
			g.Tick(rd.Deadline)
			got = ready(g).Verdicts
		}
		if len(got) != 1 || got[0].Status.String() != c.want {
			t.Errorf("%s: verdicts %v, want one %s", c.name, got, c.want)
		}
	}
}

// Outside controller mode the ack set is ignored: SYNC_MASTER counts
// copies against inSyncReplicas as before.
func TestAckSetIgnoredOutsideControllerMode(t *testing.T) {
	g := New(mode("ASYNC_FLUSH", "SYNC_MASTER", 2), 0)
	g.SetAckSet(t0, []int64{2, 3})
	g.Replicas(t0, []int64{100}, 1)
	admit(g, t0, "m", 100, true)
	if v := ready(g).Verdicts; len(v) != 1 || v[0].Status != protocol.StatusOK {
		t.Fatalf("SYNC_MASTER with one copy acked: %v", v)
	}
}

// The planted bug AckOldSet: the gate's ack set never gains a member, so a
// send is acknowledged on the old set's word while a member the
// controllers added lacks it (RocketMQ #5663); without the bug it waits.
func TestAckOldSetPlantedBug(t *testing.T) {
	for _, bug := range []bool{true, false} {
		g := New(Mode{Controller: true, FlushTimeout: 5 * time.Second, SlaveTimeout: 3 * time.Second, AckOldSet: bug}, 0)
		g.SetAckSet(t0, []int64{2})
		g.SetAckSet(t0, []int64{2, 3})
		g.SlaveAcks(t0, []SlaveAck{{2, 100, 100}, {3, 10, 10}})
		admit(g, t0, "m", 100, true)
		rd := ready(g)
		got := rd.Verdicts
		if len(got) == 0 && !rd.Deadline.IsZero() {
			g.Tick(rd.Deadline)
			got = ready(g).Verdicts
		}
		want := protocol.StatusFlushSlaveTimeout
		if bug {
			want = protocol.StatusOK
		}
		if len(got) != 1 || got[0].Status != want {
			t.Errorf("bug %v: verdicts %v, want one %v", bug, got, want)
		}
	}
}

// The confirm offset: the least of the master's durable end (its flush
// under SYNC_FLUSH, its log end otherwise) and each ack set member's copy
// (fsynced under SYNC_FLUSH); at least the epoch's start (floor); never
// back.
func TestConfirm(t *testing.T) {
	type step struct {
		set           []int64    // nil: unchanged
		acks          []SlaveAck // nil: unchanged
		flush         int64      // 0: none
		logEnd, floor int64
		want          int64
	}
	cases := []struct {
		name      string
		syncFlush bool
		steps     []step
	}{
		{name: "master alone, async flush: its log end", steps: []step{{logEnd: 500, want: 500}}},
		{name: "master alone, sync flush: its flush", syncFlush: true, steps: []step{
			{logEnd: 500, want: 0}, {flush: 300, logEnd: 500, want: 300}, {flush: 500, logEnd: 600, want: 500}}},
		{name: "the slowest member", steps: []step{
			{set: []int64{2, 3}, acks: []SlaveAck{{2, 400, 0}, {3, 250, 0}}, logEnd: 500, want: 250},
			{acks: []SlaveAck{{2, 400, 0}, {3, 450, 0}}, logEnd: 500, want: 400}}},
		{name: "a member not connected holds it at the floor", steps: []step{
			{set: []int64{2}, acks: []SlaveAck{{3, 500, 500}}, logEnd: 500, floor: 100, want: 100}}},
		{name: "a slave outside the set does not count", steps: []step{
			{set: []int64{2}, acks: []SlaveAck{{2, 450, 450}, {3, 10, 10}}, logEnd: 500, want: 450}}},
		{name: "sync flush: members' fsynced copies and the master's flush", syncFlush: true, steps: []step{
			{set: []int64{2}, acks: []SlaveAck{{2, 500, 200}}, flush: 500, logEnd: 500, want: 200},
			{acks: []SlaveAck{{2, 500, 500}}, logEnd: 500, want: 500}}},
		{name: "sync flush: the master's flush behind", syncFlush: true, steps: []step{
			{set: []int64{2}, acks: []SlaveAck{{2, 500, 500}}, flush: 320, logEnd: 500, want: 320}}},
		{name: "floor: what the master held when elected", steps: []step{
			{set: []int64{2}, acks: []SlaveAck{{2, 0, 0}}, logEnd: 900, floor: 700, want: 700}}},
		{name: "the floor never passes the log end", steps: []step{{set: []int64{2}, logEnd: 100, floor: 700, want: 100}}},
		{name: "never back: a member still catching up joins the set", steps: []step{
			{set: []int64{2}, acks: []SlaveAck{{2, 500, 500}}, logEnd: 500, want: 500},
			{set: []int64{2, 3}, acks: []SlaveAck{{2, 600, 600}, {3, 300, 300}}, logEnd: 600, want: 500},
			{acks: []SlaveAck{{2, 600, 600}, {3, 550, 550}}, logEnd: 600, want: 550}}},
	}
	for _, c := range cases {
		g := New(Mode{SyncFlush: c.syncFlush, Controller: true, FlushTimeout: time.Second, SlaveTimeout: time.Second}, 0)
		for i, s := range c.steps {
			if s.set != nil {
				g.SetAckSet(t0, s.set)
			}
			if s.acks != nil {
				g.SlaveAcks(t0, s.acks)
			}
			if s.flush > 0 {
				g.Flushed(t0, s.flush)
			}
			if got := g.Confirm(s.logEnd, s.floor); got != s.want {
				t.Errorf("%s, step %d: confirm %d, want %d", c.name, i, got, s.want)
			}
		}
	}
}
