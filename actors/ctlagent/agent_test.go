package ctlagent

import (
	"slices"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// run drives one Agent and keeps what its Readys asked for.
type run struct {
	t        *testing.T
	a        *Agent
	now      time.Time
	st       StoreState
	out      []Request // requests sent and not yet answered
	role     *Role
	writable bool
	leaseEnd time.Time
	ackSet   []int64
	deadline time.Time
}

func newRun(t *testing.T, cfg Config) *run {
	t.Helper()
	if cfg.Controllers == nil {
		cfg.Controllers = []string{"c0", "c1", "c2"}
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &run{t: t, a: a, now: t0}
	a.Start(r.now, r.st)
	r.take()
	return r
}

func (r *run) take() {
	rd := r.a.Ready()
	r.out = append(r.out, rd.Requests...)
	if rd.Role != nil {
		r.role = rd.Role
	}
	if rd.Writable != nil {
		r.writable = *rd.Writable
	}
	if rd.LeaseEnd != nil {
		r.leaseEnd = *rd.LeaseEnd
	}
	if rd.AckSet != nil {
		r.ackSet = *rd.AckSet
	}
	r.deadline = rd.Deadline
}

// advance moves time on by d, ticking at every deadline on the way.
func (r *run) advance(d time.Duration) {
	end := r.now.Add(d)
	for i := 0; !r.deadline.IsZero() && !r.deadline.After(end); i++ {
		if i > 10_000 || !r.deadline.After(r.now) {
			r.t.Fatalf("deadline %v does not move on (now %v)", r.deadline, r.now)
		}
		r.now = r.deadline
		r.a.Tick(r.now, r.st)
		r.take()
	}
	r.now = end
	r.a.Tick(r.now, r.st)
	r.take()
}

// pop removes and returns the oldest request of kind k in flight.
func (r *run) pop(k Kind) Request {
	r.t.Helper()
	for i, q := range r.out {
		if q.Kind == k {
			r.out = slices.Delete(r.out, i, i+1)
			return q
		}
	}
	r.t.Fatalf("no %v request in flight; have %v", k, r.out)
	return Request{}
}

func (r *run) has(k Kind) bool {
	return slices.ContainsFunc(r.out, func(q Request) bool { return q.Kind == k })
}

func (r *run) answer(q Request, ans Answer) {
	ans.ID = q.ID
	r.a.Answer(r.now, ans)
	r.take()
}

// master makes the agent broker 1, master of epoch 1 with set {1}.
func (r *run) master(set ...int64) {
	r.t.Helper()
	r.answer(r.pop(Register), Answer{BrokerID: 1})
	r.answer(r.pop(Heartbeat), Answer{})
	r.answer(r.pop(GetInfo), Answer{Info: &Info{MasterID: 1, MasterEpoch: 1, Set: append([]int64{1}, set...), SetEpoch: 1}})
	if r.role == nil || !r.role.Master || r.role.Epoch != 1 {
		r.t.Fatalf("role %+v, want master of epoch 1", r.role)
	}
	r.a.RoleApplied(r.now, *r.role)
	r.take()
}

func TestRegisterThenMasterWithLease(t *testing.T) {
	r := newRun(t, Config{})
	if len(r.out) != 1 || r.out[0].Kind != Register || r.out[0].To != "c0" || r.writable {
		t.Fatalf("first requests %v, writable %v; want one REGISTER to c0", r.out, r.writable)
	}
	r.master()
	if !r.writable {
		t.Fatal("a master with a fresh lease must accept writes")
	}
	// The lease counts from the heartbeat's send time (t0): heartbeats now
	// go unanswered, so writes stop at t0 + Lease exactly, not later.
	r.advance(DefaultLease - ms(1))
	if !r.writable {
		t.Fatal("writes stopped before the lease ran out")
	}
	r.advance(ms(1))
	if r.writable {
		t.Fatalf("writes still accepted at send time + lease (%v)", r.now.Sub(t0))
	}
}

func TestLeaseRenewedBySendTimeNotAnswerTime(t *testing.T) {
	r := newRun(t, Config{})
	r.master()
	r.advance(DefaultHeartbeatInterval)
	hb := r.pop(Heartbeat)
	sent := r.now
	r.advance(ms(900)) // a slow answer: 900 ms in flight
	r.answer(hb, Answer{})
	r.out = nil
	// Renewed until sent + lease, not answer time + lease.
	r.advance(sent.Add(DefaultLease).Sub(r.now) - ms(1))
	if !r.writable {
		t.Fatal("lease lost early")
	}
	r.advance(ms(1))
	if r.writable {
		t.Fatal("lease counted from the answer, not from the send")
	}
}

func TestNoLeaseBugKeepsWriting(t *testing.T) {
	r := newRun(t, Config{NoLease: true})
	r.master()
	r.advance(10 * DefaultLease)
	if !r.writable {
		t.Fatal("the planted bug should keep the master writable")
	}
}

func TestNotLeaderAndFailuresMoveController(t *testing.T) {
	r := newRun(t, Config{})
	r.answer(r.pop(Register), Answer{Status: NotLeader, Leader: "c2"})
	if q := r.pop(Register); q.To != "c2" {
		t.Fatalf("register after NotLeader(c2) went to %s", q.To)
	} else {
		r.a.Failed(r.now, q.ID)
		r.take()
	}
	r.advance(DefaultRetryDelay)
	if q := r.pop(Register); q.To != "c0" {
		t.Fatalf("after c2 failed, register went to %s, want c0 (the next)", q.To)
	}
}

func TestRequestTimeout(t *testing.T) {
	r := newRun(t, Config{})
	r.pop(Register) // never answered
	r.advance(DefaultRequestTimeout + DefaultRetryDelay)
	if q := r.pop(Register); q.To != "c1" {
		t.Fatalf("a timed-out register is retried on %s, want c1", q.To)
	}
}

func TestSlaveRoleAndStaleInfo(t *testing.T) {
	r := newRun(t, Config{})
	r.answer(r.pop(Register), Answer{BrokerID: 2})
	r.answer(r.pop(GetInfo), Answer{Info: &Info{MasterID: 1, MasterAddr: "m1:10912", MasterEpoch: 3, Set: []int64{1, 2}, SetEpoch: 4}})
	want := Role{MasterAddr: "m1:10912", BrokerID: 2, Epoch: 3}
	if r.role == nil || *r.role != want {
		t.Fatalf("role %+v, want %+v", r.role, want)
	}
	r.a.RoleApplied(r.now, *r.role)
	r.role = nil
	r.take()
	// Older info (a deposed controller, a reordered answer) changes nothing.
	r.advance(DefaultHeartbeatInterval)
	r.answer(r.pop(GetInfo), Answer{Info: &Info{MasterID: 2, MasterEpoch: 2, Set: []int64{2}, SetEpoch: 5}})
	if r.role != nil || r.writable {
		t.Fatalf("stale info (epoch 2 < 3) acted on: role %+v writable %v", r.role, r.writable)
	}
	// A newer epoch naming this broker makes it master.
	r.a.Notified(r.now)
	r.take()
	r.answer(r.pop(GetInfo), Answer{Info: &Info{MasterID: 2, MasterEpoch: 4, Set: []int64{2}, SetEpoch: 6}})
	if r.role == nil || !r.role.Master || r.role.Epoch != 4 {
		t.Fatalf("role %+v, want master of epoch 4", r.role)
	}
	if r.writable {
		t.Fatal("writable before the role was carried out")
	}
}

func TestDeposedMasterStopsAtOnce(t *testing.T) {
	r := newRun(t, Config{})
	r.master()
	r.advance(DefaultHeartbeatInterval)
	r.answer(r.pop(GetInfo), Answer{Info: &Info{MasterID: 3, MasterAddr: "m3", MasterEpoch: 2, Set: []int64{3}, SetEpoch: 2}})
	if r.writable {
		t.Fatal("a master that learned of a newer epoch's master still writes")
	}
	if r.role == nil || r.role.Master || r.role.MasterAddr != "m3" {
		t.Fatalf("role %+v, want slave of m3", r.role)
	}
}

func TestSyncStateSetExpandAndShrink(t *testing.T) {
	r := newRun(t, Config{})
	r.master()
	r.st.MaxOffset = 1000
	r.advance(0)
	r.a.Slaves(r.now, []SlaveProgress{{BrokerID: 2, Acked: 999, Connected: true}})
	r.take()
	if r.has(AlterSet) {
		t.Fatal("a slave behind the master's end was proposed into the set")
	}
	r.a.Slaves(r.now, []SlaveProgress{{BrokerID: 2, Acked: 1000, Connected: true}})
	r.take()
	q := r.pop(AlterSet)
	if !slices.Equal(q.NewSet, []int64{1, 2}) || q.MasterEpoch != 1 || q.SetEpoch != 1 {
		t.Fatalf("alter %+v, want {1,2} fenced by epochs 1/1", q)
	}
	if !slices.Equal(r.ackSet, []int64{2}) {
		t.Fatalf("ack set %v while the expansion is in flight, want [2]", r.ackSet)
	}
	r.answer(q, Answer{Info: &Info{MasterID: 1, MasterEpoch: 1, Set: []int64{1, 2}, SetEpoch: 2}})
	if !slices.Equal(r.ackSet, []int64{2}) {
		t.Fatalf("ack set %v after the expansion, want [2]", r.ackSet)
	}
	// The slave goes away: the shrink is proposed, and until the
	// controller applied it, sends still wait for the slave.
	r.a.Slaves(r.now, nil)
	r.take()
	q = r.pop(AlterSet)
	if !slices.Equal(q.NewSet, []int64{1}) || q.SetEpoch != 2 {
		t.Fatalf("alter %+v, want {1} at set epoch 2", q)
	}
	if !slices.Equal(r.ackSet, []int64{2}) {
		t.Fatalf("ack set %v while the shrink is in flight, want [2] (the old set)", r.ackSet)
	}
	r.answer(q, Answer{Info: &Info{MasterID: 1, MasterEpoch: 1, Set: []int64{1}, SetEpoch: 3}})
	if len(r.ackSet) != 0 {
		t.Fatalf("ack set %v after the shrink, want empty", r.ackSet)
	}
}

// TestLostAlterAnswerKeepsUnion is RocketMQ #5663: the controller applied
// an expansion whose answer was lost. Until the master learns a newer set
// epoch it must keep waiting for the proposed members.
func TestLostAlterAnswerKeepsUnion(t *testing.T) {
	r := newRun(t, Config{})
	r.master()
	r.st.MaxOffset = 50
	r.a.Slaves(r.now, []SlaveProgress{{BrokerID: 2, Acked: 50, Connected: true}})
	r.take()
	r.pop(AlterSet) // never answered
	r.advance(DefaultRequestTimeout)
	if !slices.Equal(r.ackSet, []int64{2}) {
		t.Fatalf("ack set %v after the alter timed out, want [2]: it may have been applied", r.ackSet)
	}
	r.out = nil
	r.advance(DefaultRequestTimeout + DefaultRetryDelay) // the heartbeat and info requests time out too
	r.answer(r.pop(GetInfo), Answer{Info: &Info{MasterID: 1, MasterEpoch: 1, Set: []int64{1, 2}, SetEpoch: 2}})
	if !slices.Equal(r.ackSet, []int64{2}) {
		t.Fatalf("ack set %v, want [2]", r.ackSet)
	}
}

func TestShrinkAfterNotCatchup(t *testing.T) {
	r := newRun(t, Config{})
	r.master(2)
	r.st.MaxOffset = 100
	r.advance(0)
	r.a.Slaves(r.now, []SlaveProgress{{BrokerID: 2, Acked: 100, Connected: true}})
	r.take()
	r.st.MaxOffset = 200
	r.advance(0)
	r.a.Slaves(r.now, []SlaveProgress{{BrokerID: 2, Acked: 150, Connected: true}})
	r.take()
	r.out = nil
	r.advance(DefaultSlaveNotCatchup - ms(1))
	if r.has(AlterSet) {
		t.Fatal("shrunk before haMaxTimeSlaveNotCatchup")
	}
	r.advance(ms(1))
	if q := r.pop(AlterSet); !slices.Equal(q.NewSet, []int64{1}) {
		t.Fatalf("alter %v, want [1]", q.NewSet)
	}
}

func TestCandidateWaitsThenJoins(t *testing.T) {
	r := newRun(t, Config{CatchupGap: 100})
	r.master()
	r.st.MaxOffset = 1000
	r.advance(0)
	r.a.Slaves(r.now, []SlaveProgress{{BrokerID: 2, Acked: 950, Connected: true}})
	r.take()
	if !slices.Equal(r.ackSet, []int64{2}) || r.has(AlterSet) {
		t.Fatalf("ack set %v alter %v: a slave 50 bytes behind should be waited for, not yet proposed", r.ackSet, r.has(AlterSet))
	}
	r.st.MaxOffset = 1100 // new writes meanwhile: they wait for slave 2 too
	r.advance(0)
	r.a.Slaves(r.now, []SlaveProgress{{BrokerID: 2, Acked: 1000, Connected: true}})
	r.take()
	if q := r.pop(AlterSet); !slices.Equal(q.NewSet, []int64{1, 2}) {
		t.Fatalf("alter %v, want [1 2] once the slave holds everything below the wait's start", q.NewSet)
	}
}

func TestCandidateGivesUp(t *testing.T) {
	r := newRun(t, Config{CatchupGap: 100})
	r.master()
	r.st.MaxOffset = 1000
	r.advance(0)
	r.a.Slaves(r.now, []SlaveProgress{{BrokerID: 2, Acked: 950, Connected: true}})
	r.take()
	r.advance(DefaultSlaveNotCatchup)
	if len(r.ackSet) != 0 {
		t.Fatalf("ack set %v: a slave that never caught up must stop holding sends", r.ackSet)
	}
}

func TestInvalidConfig(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Fatal("no controllers accepted")
	}
}

func TestLeaseEndReported(t *testing.T) {
	r := newRun(t, Config{})
	r.master()
	if !r.leaseEnd.Equal(t0.Add(DefaultLease)) {
		t.Fatalf("lease end %v, want the heartbeat's send time + lease", r.leaseEnd.Sub(t0))
	}
	r.advance(DefaultHeartbeatInterval)
	at := r.now
	r.answer(r.pop(Heartbeat), Answer{})
	if !r.leaseEnd.Equal(at.Add(DefaultLease)) {
		t.Fatalf("lease end %v after a renewal sent at %v", r.leaseEnd.Sub(t0), at.Sub(t0))
	}
	r.out = nil
	r.advance(2 * DefaultLease)
	if r.writable || !r.leaseEnd.IsZero() {
		t.Fatalf("writable %v, lease end %v after the lease ran out", r.writable, r.leaseEnd)
	}
}

func TestUnregisteredRegistersAgain(t *testing.T) {
	r := newRun(t, Config{})
	r.master()
	r.advance(DefaultHeartbeatInterval)
	r.answer(r.pop(Heartbeat), Answer{Status: Unregistered})
	if r.writable || r.a.BrokerID() != 0 {
		t.Fatalf("writable %v, broker id %d after the controller forgot the broker", r.writable, r.a.BrokerID())
	}
	r.answer(r.pop(Register), Answer{BrokerID: 4})
	if r.a.BrokerID() != 4 || !r.has(Heartbeat) {
		t.Fatalf("after registering again: id %d, requests %v", r.a.BrokerID(), r.out)
	}
}

// TestHeartbeatOfANewerEpochRenewsNoLease is the simulator's seed 2044 of
// ctl-master-partition: the controllers elected another master while this
// one's notification was lost; a heartbeat answer naming the newer epoch
// must not renew the old master's lease.
func TestHeartbeatOfANewerEpochRenewsNoLease(t *testing.T) {
	r := newRun(t, Config{})
	r.master()
	r.advance(DefaultHeartbeatInterval)
	r.answer(r.pop(Heartbeat), Answer{MasterEpoch: 2})
	if !r.has(GetInfo) {
		t.Fatal("the newer epoch is not read at once")
	}
	r.advance(DefaultLease - DefaultHeartbeatInterval)
	if r.writable {
		t.Fatalf("the lease was renewed by an answer of epoch 2 (writable at %v)", r.now.Sub(t0))
	}
}

// TestDemotionKeepsTheAckSet: a master that learns of a newer epoch stops
// writing at once, but the ack set stays: emptied, it would acknowledge
// the sends still waiting for slaves and confirm the log's tail.
func TestDemotionKeepsTheAckSet(t *testing.T) {
	r := newRun(t, Config{})
	r.master(2)
	if !slices.Equal(r.ackSet, []int64{2}) {
		t.Fatalf("ack set %v, want [2]", r.ackSet)
	}
	r.advance(DefaultHeartbeatInterval)
	r.answer(r.pop(GetInfo), Answer{Info: &Info{MasterID: 3, MasterAddr: "m3", MasterEpoch: 2, Set: []int64{3}, SetEpoch: 3}})
	if r.writable {
		t.Fatal("a deposed master still writes")
	}
	if !slices.Equal(r.ackSet, []int64{2}) {
		t.Fatalf("ack set %v after the demotion, want [2] kept", r.ackSet)
	}
}

// TestLackingLogTakesMasterOnlyKnowingly: a broker whose log may lack
// acknowledged messages says so in its heartbeats and takes the master
// role only from an election that knew it, of an epoch it has not begun.
func TestLackingLogTakesMasterOnlyKnowingly(t *testing.T) {
	cases := []struct {
		name     string
		store    int32 // the store's last epoch
		knowing  bool  // Info.MasterMayLackAcked
		wantRole bool
	}{
		{"elected unknowingly", 1, false, false},
		{"elected knowingly", 1, true, true},
		{"began the epoch, then lost its tail again", 2, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRun(t, Config{})
			r.st = StoreState{Epoch: tc.store, MaxOffset: 100, MayLackAcked: true}
			r.a.Tick(r.now, r.st)
			r.take()
			r.answer(r.pop(Register), Answer{BrokerID: 1})
			if hb := r.pop(Heartbeat); !hb.MayLackAcked {
				t.Fatalf("heartbeat %+v does not say the log may lack acknowledged messages", hb)
			}
			r.answer(r.pop(GetInfo), Answer{Info: &Info{MasterID: 1, MasterEpoch: 2, Set: []int64{1}, SetEpoch: 3, MasterMayLackAcked: tc.knowing}})
			if got := r.role != nil && r.role.Master; got != tc.wantRole {
				t.Fatalf("asked for the master role: %v, want %v (role %+v)", got, tc.wantRole, r.role)
			}
		})
	}
}

// TestFailedAlterWaitsItsDelay: a SyncStateSet change that failed (the
// controllers unreachable) is retried after the retry delay, however many
// slave reports arrive meanwhile. Each report used to send it again at
// once, so a master whose controllers were down dialled them thousands of
// times a second (found by the simulator's ctl-rejoin scenario).
func TestFailedAlterWaitsItsDelay(t *testing.T) {
	r := newRun(t, Config{})
	r.master()
	r.st.MaxOffset = 50
	r.a.Slaves(r.now, []SlaveProgress{{BrokerID: 2, Acked: 50, Connected: true}})
	r.take()
	q := r.pop(AlterSet)
	r.a.Failed(r.now, q.ID)
	r.take()
	for i := 0; i < 50; i++ {
		r.now = r.now.Add(ms(1))
		r.a.Slaves(r.now, []SlaveProgress{{BrokerID: 2, Acked: 50, Connected: true}})
		r.take()
		if r.has(AlterSet) {
			t.Fatalf("the failed change was sent again %v after its failure, before the %v retry delay", ms(i+1), DefaultRetryDelay)
		}
	}
	r.advance(DefaultRetryDelay)
	if q := r.pop(AlterSet); !slices.Equal(q.NewSet, []int64{1, 2}) {
		t.Fatalf("alter %v after the retry delay, want [1 2]", q.NewSet)
	}
}
