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
		{name: "one member acked", set: []int64{2}, acks: []SlaveAck{{2, 100}}, want: "SUCCESS"},
		{name: "one member behind", set: []int64{2}, acks: []SlaveAck{{2, 99}}, want: "FLUSH_SLAVE_TIMEOUT", at: 3 * time.Second},
		{name: "member acks later", set: []int64{2}, acks: []SlaveAck{{2, 50}}, then: []ev{{acks: []SlaveAck{{2, 120}}}}, want: "SUCCESS"},
		{name: "two members, one behind", set: []int64{2, 3}, acks: []SlaveAck{{2, 100}, {3, 60}}, want: "FLUSH_SLAVE_TIMEOUT", at: 3 * time.Second},
		{name: "two members, both acked", set: []int64{2, 3}, acks: []SlaveAck{{3, 100}, {2, 101}}, want: "SUCCESS"},
		{name: "member not connected", set: []int64{2}, acks: []SlaveAck{{3, 100}}, want: "FLUSH_SLAVE_TIMEOUT", at: 3 * time.Second},
		{name: "a slave outside the set does not count", set: []int64{2}, acks: []SlaveAck{{3, 100}, {2, 10}}, want: "FLUSH_SLAVE_TIMEOUT", at: 3 * time.Second},
		{name: "no in-sync refusal: no SLAVE_NOT_AVAILABLE", set: []int64{2}, then: []ev{{acks: []SlaveAck{{2, 100}}}}, want: "SUCCESS"},
		{name: "set grows while waiting: waits for the new member", set: []int64{2}, acks: []SlaveAck{{2, 10}, {3, 10}},
			then: []ev{{set: []int64{2, 3}}, {acks: []SlaveAck{{2, 100}, {3, 10}}}}, want: "FLUSH_SLAVE_TIMEOUT", at: 3 * time.Second},
		{name: "set grows, both ack", set: []int64{2}, acks: []SlaveAck{{2, 10}},
			then: []ev{{set: []int64{2, 3}}, {acks: []SlaveAck{{2, 100}}}, {acks: []SlaveAck{{2, 100}, {3, 100}}}}, want: "SUCCESS"},
		{name: "set shrinks to the acked member", set: []int64{2, 3}, acks: []SlaveAck{{2, 100}}, then: []ev{{set: []int64{2}}}, want: "SUCCESS"},
		{name: "sync flush and set: acked, not flushed", syncFlush: true, set: []int64{2}, acks: []SlaveAck{{2, 100}}, want: "FLUSH_DISK_TIMEOUT", at: 3 * time.Second},
		{name: "sync flush and set: both", syncFlush: true, set: []int64{2}, acks: []SlaveAck{{2, 100}}, then: []ev{{flush: 100}}, want: "SUCCESS"},
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
		g.SlaveAcks(t0, []SlaveAck{{2, 100}, {3, 10}})
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
