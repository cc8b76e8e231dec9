package controller

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

var t0 = time.Unix(1_700_000_000, 0)

const hbTimeout = 3 * time.Second

// rig is one controller node with an instant raft: commit applies every
// proposal at once, in order, and confirms every read.
type rig struct {
	t       *testing.T
	st      *State
	core    *Core
	now     time.Time
	reqID   uint64
	replies map[uint64]Reply
	notes   []Notification
	last    Ready
	log     [][]byte // every entry committed, in order
	results [][]byte
}

func newRig(t *testing.T, cfg Config) *rig {
	if cfg.HeartbeatTimeout == 0 {
		cfg.HeartbeatTimeout = hbTimeout
	}
	if cfg.Origin == 0 {
		cfg.Origin = 7
	}
	st := &State{}
	r := &rig{t: t, st: st, core: NewCore(cfg, st), now: t0, replies: map[uint64]Reply{}}
	r.core.Leader(t0, true, "self:9878")
	return r
}

// collect takes the Core's output without committing anything.
func (r *rig) collect() Ready {
	rd := r.core.Ready()
	for _, rp := range rd.Replies {
		r.replies[rp.ReqID] = rp
	}
	r.notes = append(r.notes, rd.Notify...)
	r.last = rd
	return rd
}

// settle commits and confirms until the Core has nothing more to say.
func (r *rig) settle() {
	for {
		rd := r.collect()
		if len(rd.Proposals) == 0 && len(rd.Reads) == 0 {
			return
		}
		for _, p := range rd.Proposals {
			r.commit(p.Cmd)
		}
		for _, id := range rd.Reads {
			r.core.ReadDone(id)
		}
	}
}

func (r *rig) commit(cmd []byte) {
	idx := r.st.Applied() + 1
	res := r.st.Apply(idx, cmd)
	r.log, r.results = append(r.log, cmd), append(r.results, res)
	r.core.Applied(idx, cmd, res)
}

// ask sends req and settles; it returns the reply (the test fails if none).
func (r *rig) ask(req protocol.Request) Reply {
	r.t.Helper()
	id := r.send(req)
	r.settle()
	rp, ok := r.replies[id]
	if !ok {
		r.t.Fatalf("%T: no reply", req)
	}
	return rp
}

func (r *rig) send(req protocol.Request) uint64 {
	r.reqID++
	r.core.Request(r.now, r.reqID, req)
	return r.reqID
}

func (r *rig) at(d time.Duration) { r.now = t0.Add(d); r.core.Tick(r.now) }

var gref = protocol.GroupRef{ClusterName: cl, BrokerName: grp}

func (r *rig) register(identity, addr string) int64 {
	r.t.Helper()
	rp := r.ask(&protocol.ControllerRegisterBrokerRequest{GroupRef: gref, Identity: identity, BrokerAddr: addr})
	if rp.Status != protocol.StatusOK {
		r.t.Fatalf("register %s: %v %s", identity, rp.Status, rp.Remark)
	}
	return rp.Fields.(*protocol.ReplicaInfo).BrokerID
}

func (r *rig) beat(id int64, addr string, epoch int32, maxOffset int64, prio int32) Reply {
	return r.ask(&protocol.ControllerHeartbeatRequest{GroupRef: gref, BrokerID: id, BrokerAddr: addr,
		Epoch: epoch, MaxOffset: maxOffset, ElectionPriority: prio})
}

func (r *rig) group() protocol.ReplicaInfo {
	in, _ := r.st.Group(cl, grp)
	return in
}

// cluster3 registers brokers 1..3 (a, b, c); 1 heartbeats and becomes
// master, then sets {1,2,3} (master epoch 1, set epoch 2).
func cluster3(t *testing.T, cfg Config) *rig {
	r := newRig(t, cfg)
	for _, x := range []string{"a", "b", "c"} {
		r.register(x, x)
	}
	r.beat(1, "a", 0, 0, 0)
	r.at(0)
	r.settle()
	if g := r.group(); g.MasterID != 1 || g.MasterEpoch != 1 {
		t.Fatalf("bootstrap: %+v", g)
	}
	rp := r.ask(&protocol.AlterSyncStateSetRequest{GroupRef: gref, MasterID: 1, MasterEpoch: 1, SyncStateSetEpoch: 1, SyncStateSet: []int64{1, 2, 3}})
	if rp.Status != protocol.StatusOK {
		t.Fatalf("alter: %v %s", rp.Status, rp.Remark)
	}
	return r
}

func TestCompareCandidates(t *testing.T) {
	c := func(id int64, epoch int32, off int64, prio int32) candidate {
		return candidate{id: id, beat: beat{epoch: epoch, maxOffset: off, priority: prio}}
	}
	cases := []struct {
		name     string
		in       []candidate
		wantBest int64
	}{
		{"newer epoch beats a longer log", []candidate{c(1, 2, 100, 0), c(2, 3, 5, 0)}, 2},
		{"longer log in one epoch", []candidate{c(1, 3, 100, 0), c(2, 3, 200, 0)}, 2},
		// RocketMQ #10578: (int)(a - b) of these offsets is negative.
		{"offsets 2^33 apart", []candidate{c(1, 3, 1, 0), c(2, 3, 1<<33, 0)}, 2},
		{"offsets at the extremes", []candidate{c(1, 3, math.MinInt64, 0), c(2, 3, math.MaxInt64, 0)}, 2},
		{"lower priority value wins", []candidate{c(1, 3, 9, 5), c(2, 3, 9, 1)}, 2},
		{"then the lower id", []candidate{c(3, 3, 9, 1), c(2, 3, 9, 1)}, 2},
	}
	for _, tc := range cases {
		for _, in := range [][]candidate{tc.in, {tc.in[1], tc.in[0]}} {
			if got := best(in, false); got.id != tc.wantBest {
				t.Errorf("%s: best %d, want %d", tc.name, got.id, tc.wantBest)
			}
		}
	}
}

func TestElection(t *testing.T) {
	type hb struct {
		id     int64
		epoch  int32
		offset int64
		lacks  bool // the log may lack acknowledged messages
	}
	cases := []struct {
		name    string
		cfg     Config
		set     []int64 // the set before the master dies (nil: {1,2,3})
		beats   []hb    // heartbeats after the master's last, at 1 s
		want    int64   // the new master, NoBroker: none
		unclean bool
		lacking bool
	}{
		{"most caught-up member", Config{}, nil, []hb{{2, 1, 90, false}, {3, 1, 100, false}}, 3, false, false},
		{"newer epoch first", Config{}, nil, []hb{{2, 1, 900, false}, {3, 2, 100, false}}, 3, false, false},
		{"dead members are not candidates", Config{}, nil, []hb{{2, 1, 90, false}}, 2, false, false},
		{"only the set", Config{}, []int64{1, 2}, []hb{{3, 1, 1000, false}}, protocol.NoBroker, false, false},
		{"set before a longer log", Config{}, []int64{1, 2}, []hb{{2, 1, 10, false}, {3, 1, 1000, false}}, 2, false, false},
		{"unclean when enabled", Config{ElectUnclean: true}, []int64{1, 2}, []hb{{3, 1, 1000, false}}, 3, true, false},
		{"unclean only without a member", Config{ElectUnclean: true}, []int64{1, 2}, []hb{{2, 1, 1, false}, {3, 1, 1000, false}}, 2, false, false},
		{"planted bug elects outside the set", Config{Faults: Faults{ElectOutsideSyncStateSet: true}}, []int64{1, 2},
			[]hb{{2, 1, 10, false}, {3, 1, 5, false}}, 3, true, false},
		{"nobody alive", Config{}, nil, nil, protocol.NoBroker, false, false},
		// The master (1) is down: a member that lost its tail waits for it.
		{"a member that lost its tail waits for the master", Config{}, []int64{1, 2}, []hb{{2, 1, 90, true}}, protocol.NoBroker, false, false},
		{"a whole member goes first", Config{}, nil, []hb{{2, 1, 100, true}, {3, 1, 90, false}}, 3, false, false},
		{"planted bug elects the lacking member", Config{Faults: Faults{ElectLackingReplica: true}}, []int64{1, 2},
			[]hb{{2, 1, 90, true}}, 2, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := cluster3(t, tc.cfg)
			if tc.set != nil {
				g := r.group()
				rp := r.ask(&protocol.AlterSyncStateSetRequest{GroupRef: gref, MasterID: 1, MasterEpoch: 1, SyncStateSetEpoch: g.SyncStateSetEpoch, SyncStateSet: tc.set})
				if rp.Status != protocol.StatusOK {
					t.Fatalf("shrink: %v", rp.Status)
				}
			}
			before := r.group()
			r.now = t0.Add(time.Second)
			for _, b := range tc.beats {
				r.ask(&protocol.ControllerHeartbeatRequest{GroupRef: gref, BrokerID: b.id, BrokerAddr: string(rune('a' + b.id - 1)),
					Epoch: b.epoch, MaxOffset: b.offset, MayLackAcked: b.lacks})
			}
			// The master's last heartbeat was at t0: alive until t0+3s.
			r.at(hbTimeout - time.Millisecond)
			r.settle()
			if g := r.group(); g.MasterEpoch != before.MasterEpoch {
				t.Fatalf("elected while the master lives: %+v", g)
			}
			r.at(hbTimeout)
			rd := r.collect()
			if tc.want == protocol.NoBroker {
				if len(rd.Proposals) != 0 {
					t.Fatalf("proposed %d entries with no candidate", len(rd.Proposals))
				}
				return
			}
			if len(rd.Proposals) != 1 {
				t.Fatalf("%d proposals", len(rd.Proposals))
			}
			cmd, _ := decodeCommand(rd.Proposals[0].Cmd)
			if cmd.NewMaster != tc.want || cmd.Unclean != tc.unclean || cmd.Lacking != tc.lacking || cmd.MasterEpoch != before.MasterEpoch || cmd.SetEpoch != before.SyncStateSetEpoch {
				t.Fatalf("decision %+v, want master %d unclean %v", cmd, tc.want, tc.unclean)
			}
			// Applied, it is the new state; the brokers hear of it.
			r.commit(rd.Proposals[0].Cmd)
			r.collect()
			g := r.group()
			if g.MasterID != tc.want || g.MasterEpoch != before.MasterEpoch+1 || g.SyncStateSetEpoch != before.SyncStateSetEpoch+1 ||
				!slices.Equal(g.SyncStateSet, []int64{tc.want}) {
				t.Fatalf("after the election: %+v", g)
			}
			if len(r.notes) == 0 || r.notes[len(r.notes)-1].Info.MasterID != tc.want || len(r.notes[len(r.notes)-1].Brokers) != 3 {
				t.Fatalf("notifications %+v", r.notes)
			}
		})
	}
}

func TestNewLeaderWaitsAHeartbeatTimeout(t *testing.T) {
	r := cluster3(t, Config{})
	// Leadership moves away and back (another node led meanwhile): the
	// heartbeats are forgotten, including the master's.
	r.core.Leader(t0.Add(10*time.Second), false, "other:9878")
	r.core.Leader(t0.Add(20*time.Second), true, "self:9878")
	r.now = t0.Add(20 * time.Second)
	r.beat(2, "b", 1, 50, 0) // a slave reaches the new leader first
	r.at(20*time.Second + hbTimeout - time.Millisecond)
	if rd := r.collect(); len(rd.Proposals) != 0 {
		t.Fatal("a new leader elected before knowing the heartbeats")
	}
	if !r.last.Timer.Equal(t0.Add(20*time.Second + hbTimeout)) {
		t.Fatalf("timer %v, want the end of the wait", r.last.Timer)
	}
	// An admin's election is refused during the wait too.
	if rp := r.ask(&protocol.ElectMasterRequest{GroupRef: gref}); rp.Status != protocol.StatusControllerElectMasterFailed {
		t.Fatalf("elect during the wait: %v", rp.Status)
	}
	r.now = t0.Add(21 * time.Second)
	r.beat(2, "b", 1, 50, 0)
	r.at(20*time.Second + hbTimeout)
	r.settle()
	if g := r.group(); g.MasterID != 2 || g.MasterEpoch != 2 {
		t.Fatalf("after the wait: %+v", g)
	}
}

func TestTimerFollowsTheMastersLease(t *testing.T) {
	r := cluster3(t, Config{})
	// Within the new leader's wait, the wait's end comes first.
	r.now = t0.Add(500 * time.Millisecond)
	r.beat(1, "a", 1, 10, 0)
	if want := t0.Add(hbTimeout); !r.last.Timer.Equal(want) {
		t.Fatalf("timer %v, want %v", r.last.Timer, want)
	}
	r.now = t0.Add(10 * time.Second)
	r.beat(1, "a", 1, 10, 0)
	if want := t0.Add(10*time.Second + hbTimeout); !r.last.Timer.Equal(want) {
		t.Fatalf("timer %v, want %v", r.last.Timer, want)
	}
}

func TestRacingElectionsApplyOnce(t *testing.T) {
	// Two leaders in turn decide on the same state (the first's entry not
	// yet applied when the second decides): only the first applies.
	r := cluster3(t, Config{})
	g := r.st.groups[groupKey{cl, grp}]
	first, second := electCommand(g, choice{id: 2, ok: true}), electCommand(g, choice{id: 3, ok: true})
	r.commit(encodeCommand(first))
	r.commit(encodeCommand(second))
	if g := r.group(); g.MasterID != 2 || g.MasterEpoch != 2 {
		t.Fatalf("%+v", g)
	}
}

func TestRepliesWaitForApply(t *testing.T) {
	r := cluster3(t, Config{})
	id := r.send(&protocol.AlterSyncStateSetRequest{GroupRef: gref, MasterID: 1, MasterEpoch: 1, SyncStateSetEpoch: 2, SyncStateSet: []int64{1, 2}})
	rd := r.collect()
	if _, ok := r.replies[id]; ok || len(rd.Proposals) != 1 {
		t.Fatalf("answered before the entry applied (%d proposals)", len(rd.Proposals))
	}
	r.commit(rd.Proposals[0].Cmd)
	r.collect()
	rp := r.replies[id]
	if info, _ := rp.Fields.(*protocol.ReplicaInfo); rp.Status != protocol.StatusOK || info == nil || info.SyncStateSetEpoch != 3 {
		t.Fatalf("reply %+v", rp)
	}
	if n := r.notes[len(r.notes)-1]; n.Info.SyncStateSetEpoch != 3 || !slices.Equal(n.Info.SyncStateSet, []int64{1, 2}) ||
		!slices.Equal(n.Brokers, []string{"a", "b", "c"}) {
		t.Fatalf("notification %+v", n)
	}
	// The same request again is fenced: its set epoch is gone.
	if rp := r.ask(&protocol.AlterSyncStateSetRequest{GroupRef: gref, MasterID: 1, MasterEpoch: 1, SyncStateSetEpoch: 2, SyncStateSet: []int64{1}}); rp.Status != protocol.StatusControllerFencedSyncStateSetEpoch {
		t.Fatalf("stale alter: %v", rp.Status)
	}
}

func TestReadsGoThroughReadIndex(t *testing.T) {
	r := cluster3(t, Config{})
	id := r.send(&protocol.GetReplicaInfoRequest{GroupRef: gref, BrokerID: 2})
	rd := r.collect()
	if _, ok := r.replies[id]; ok || len(rd.Reads) != 1 {
		t.Fatal("answered without a ReadIndex")
	}
	r.core.ReadDone(rd.Reads[0])
	r.collect()
	info, _ := r.replies[id].Fields.(*protocol.ReplicaInfo)
	if info == nil || info.BrokerID != 2 || info.MasterID != 1 || !info.Replicas[0].Alive || info.Replicas[1].Alive {
		t.Fatalf("read answer %+v", r.replies[id])
	}
	// A deposed leader answers its pending reads NOT_LEADER, never from its state.
	id = r.send(&protocol.GetReplicaInfoRequest{GroupRef: gref})
	rd = r.collect()
	r.core.Leader(r.now, false, "n1:9878")
	r.core.ReadDone(rd.Reads[0])
	r.collect()
	if rp := r.replies[id]; rp.Status != protocol.StatusControllerNotLeader || rp.Remark != "n1:9878" {
		t.Fatalf("deposed read: %+v", rp)
	}
	if rp := r.ask(&protocol.GetReplicaInfoRequest{GroupRef: gref}); rp.Status != protocol.StatusControllerNotLeader {
		t.Fatalf("follower read: %v", rp.Status)
	}
}

func TestFollowerAnswers(t *testing.T) {
	r := cluster3(t, Config{})
	r.core.Leader(r.now, false, "n2:9878")
	for _, req := range []protocol.Request{
		&protocol.ControllerHeartbeatRequest{GroupRef: gref, BrokerID: 1, BrokerAddr: "a"},
		&protocol.ControllerRegisterBrokerRequest{GroupRef: gref, Identity: "d", BrokerAddr: "d"},
		&protocol.AlterSyncStateSetRequest{GroupRef: gref, MasterID: 1, MasterEpoch: 1, SyncStateSetEpoch: 2, SyncStateSet: []int64{1}},
		&protocol.ElectMasterRequest{GroupRef: gref},
	} {
		if rp := r.ask(req); rp.Status != protocol.StatusControllerNotLeader || rp.Remark != "n2:9878" {
			t.Errorf("%T on a follower: %v %q", req, rp.Status, rp.Remark)
		}
	}
	rp := r.ask(&protocol.GetControllerMetadataRequest{})
	md, _ := rp.Fields.(*protocol.ControllerMetadata)
	if md == nil || md.IsLeader || md.LeaderAddr != "n2:9878" || len(md.Groups) != 1 || md.Groups[0].MasterID != 1 {
		t.Fatalf("metadata %+v", rp)
	}
	// A follower applies entries but tells nobody: the leader does.
	r.commit(encodeCommand(alter(1, 1, 2, 1)))
	if rd := r.collect(); len(rd.Notify) != 0 || r.group().SyncStateSetEpoch != 3 {
		t.Fatalf("follower after an entry: %d notifications, %+v", len(rd.Notify), r.group())
	}
	// A follower runs no elections, whatever the heartbeats.
	r.at(time.Hour)
	if rd := r.collect(); len(rd.Proposals) != 0 {
		t.Fatal("a follower proposed")
	}
}

func TestRequestRefusals(t *testing.T) {
	r := cluster3(t, Config{})
	cases := []struct {
		name string
		req  protocol.Request
		want protocol.Status
	}{
		{"heartbeat of an unknown id", &protocol.ControllerHeartbeatRequest{GroupRef: gref, BrokerID: 9, BrokerAddr: "z"}, protocol.StatusControllerBrokerNeedToBeRegistered},
		{"heartbeat from another address", &protocol.ControllerHeartbeatRequest{GroupRef: gref, BrokerID: 2, BrokerAddr: "z"}, protocol.StatusControllerBrokerNeedToBeRegistered},
		{"heartbeat of an unknown group", &protocol.ControllerHeartbeatRequest{GroupRef: protocol.GroupRef{ClusterName: cl, BrokerName: "q"}, BrokerID: 1, BrokerAddr: "a"}, protocol.StatusControllerBrokerNeedToBeRegistered},
		{"invalid alter", &protocol.AlterSyncStateSetRequest{GroupRef: gref, MasterID: 1}, protocol.StatusInvalidParameter},
		{"alter by a slave", &protocol.AlterSyncStateSetRequest{GroupRef: gref, MasterID: 2, MasterEpoch: 1, SyncStateSetEpoch: 2, SyncStateSet: []int64{2}}, protocol.StatusControllerInvalidMaster},
		{"elect while the master lives", &protocol.ElectMasterRequest{GroupRef: gref, BrokerID: 2}, protocol.StatusControllerMasterStillExist},
		{"elect in an unknown group", &protocol.ElectMasterRequest{GroupRef: protocol.GroupRef{ClusterName: cl, BrokerName: "q"}}, protocol.StatusControllerBrokerMetadataNotExist},
		{"read of an unknown group", &protocol.GetReplicaInfoRequest{GroupRef: protocol.GroupRef{ClusterName: cl, BrokerName: "q"}}, protocol.StatusControllerBrokerMetadataNotExist},
		{"a broker's request code", &protocol.GetMaxOffsetRequest{Topic: "t"}, protocol.StatusRequestCodeNotSupported},
	}
	for _, tc := range cases {
		if rp := r.ask(tc.req); rp.Status != tc.want {
			t.Errorf("%s: %v (%s), want %v", tc.name, rp.Status, rp.Remark, tc.want)
		}
	}
	if rp := r.beat(2, "b", 1, 5, 0); rp.Status != protocol.StatusOK ||
		*rp.Fields.(*protocol.ControllerHeartbeatResponse) != (protocol.ControllerHeartbeatResponse{MasterEpoch: 1, SyncStateSetEpoch: 2}) {
		t.Errorf("heartbeat: %+v", rp)
	}
	// Asking for the live master is an answer, not an election.
	if rp := r.ask(&protocol.ElectMasterRequest{GroupRef: gref}); rp.Status != protocol.StatusOK || rp.Fields.(*protocol.ReplicaInfo).MasterEpoch != 1 {
		t.Errorf("elect with a live master: %+v", rp)
	}
}

func TestElectRequestDesignated(t *testing.T) {
	r := cluster3(t, Config{})
	r.now = t0.Add(time.Second)
	r.beat(2, "b", 1, 5, 0)
	r.beat(3, "c", 1, 9, 0)
	r.now = t0.Add(hbTimeout + time.Second)
	r.beat(2, "b", 1, 5, 0)
	r.beat(3, "c", 1, 9, 0)
	// Broker 2 asked for, though 3 has the longer log: both are in the set.
	rp := r.ask(&protocol.ElectMasterRequest{GroupRef: gref, BrokerID: 2})
	if info, _ := rp.Fields.(*protocol.ReplicaInfo); rp.Status != protocol.StatusOK || info.MasterID != 2 || info.MasterEpoch != 2 {
		t.Fatalf("designated election: %+v", rp)
	}
}

func TestProposalTimeout(t *testing.T) {
	r := newRig(t, Config{RequestTimeout: time.Second})
	id := r.send(&protocol.ControllerRegisterBrokerRequest{GroupRef: gref, Identity: "a", BrokerAddr: "a"})
	rd := r.collect() // the proposal is lost: never committed
	if !rd.Timer.Equal(t0.Add(time.Second)) {
		t.Fatalf("timer %v", rd.Timer)
	}
	r.at(time.Second)
	r.collect()
	if rp := r.replies[id]; rp.Status != protocol.StatusSystemBusy {
		t.Fatalf("lost proposal: %+v", rp)
	}
	// If it commits later after all, nobody is answered twice.
	r.commit(rd.Proposals[0].Cmd)
	if rd := r.collect(); len(rd.Replies) != 0 {
		t.Fatalf("answered twice: %+v", rd.Replies)
	}
}

func TestOtherOriginsEntriesAnswerNothing(t *testing.T) {
	r := newRig(t, Config{Origin: 1})
	id := r.send(&protocol.ControllerRegisterBrokerRequest{GroupRef: gref, Identity: "a", BrokerAddr: "a"})
	rd := r.collect()
	// Another Core's entry with the same proposal ID commits first.
	other := &command{Op: opRegister, Origin: 2, ID: rd.Proposals[0].ID, Cluster: cl, Group: grp, Identity: "z", Addr: "z"}
	r.commit(encodeCommand(other))
	r.collect()
	if _, ok := r.replies[id]; ok {
		t.Fatal("answered with another Core's entry")
	}
	r.commit(rd.Proposals[0].Cmd)
	r.collect()
	if info := r.replies[id].Fields.(*protocol.ReplicaInfo); info.BrokerID != 2 {
		t.Fatalf("answer %+v", info)
	}
}

// TestHeartbeatAnswerWaitsForReadIndex: the answer renews the master's
// lease, so a leader answers only once raft confirmed it still leads; a
// leader deposed meanwhile answers NOT_LEADER, renewing nothing.
func TestHeartbeatAnswerWaitsForReadIndex(t *testing.T) {
	r := cluster3(t, Config{})
	hb := &protocol.ControllerHeartbeatRequest{GroupRef: gref, BrokerID: 1, BrokerAddr: "a", Epoch: 1}
	id := r.send(hb)
	rd := r.collect()
	if _, ok := r.replies[id]; ok || len(rd.Reads) != 1 {
		t.Fatalf("heartbeat answered without a ReadIndex (reads %v)", rd.Reads)
	}
	r.core.ReadDone(rd.Reads[0])
	r.collect()
	if rp := r.replies[id]; rp.Status != protocol.StatusOK {
		t.Fatalf("heartbeat after ReadIndex: %v %s", rp.Status, rp.Remark)
	}
	id = r.send(hb)
	rd = r.collect()
	r.core.Leader(r.now, false, "n1:9878")
	r.core.ReadDone(rd.Reads[0])
	r.collect()
	if rp := r.replies[id]; rp.Status != protocol.StatusControllerNotLeader {
		t.Fatalf("deposed leader answered a heartbeat %v", rp.Status)
	}
}

func TestDroppedAnswers(t *testing.T) {
	alterReq := func() protocol.Request {
		return &protocol.AlterSyncStateSetRequest{GroupRef: gref, MasterID: 1, MasterEpoch: 1, SyncStateSetEpoch: 2, SyncStateSet: []int64{1, 2}}
	}
	for _, tc := range []struct {
		name                 string
		req                  protocol.Request
		read, outcomeUnknown bool
		want                 protocol.Status
	}{
		{"proposal refused", alterReq(), false, false, protocol.StatusControllerNotLeader},
		{"proposal in flight", alterReq(), false, true, protocol.StatusSystemBusy},
		{"read", &protocol.GetReplicaInfoRequest{GroupRef: gref}, true, false, protocol.StatusControllerNotLeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cluster3(t, Config{})
			id := r.send(tc.req)
			rd := r.collect()
			var drop uint64
			switch {
			case tc.read && len(rd.Reads) == 1:
				drop = rd.Reads[0]
			case !tc.read && len(rd.Proposals) == 1:
				drop = rd.Proposals[0].ID
			default:
				t.Fatalf("%d proposals, %d reads", len(rd.Proposals), len(rd.Reads))
			}
			r.core.Dropped(drop, !tc.read, false) // the wrong kind answers nothing
			if r.collect(); r.replies[id] != (Reply{}) {
				t.Fatalf("answered by a drop of the other kind: %+v", r.replies[id])
			}
			r.core.Dropped(drop, tc.read, tc.outcomeUnknown)
			r.collect()
			if rp, ok := r.replies[id]; !ok || rp.Status != tc.want {
				t.Fatalf("reply %+v (answered %v), want %v", rp, ok, tc.want)
			}
			// Answered once: a late apply or read confirmation says nothing more.
			delete(r.replies, id)
			if tc.read {
				r.core.ReadDone(drop)
			} else {
				r.commit(rd.Proposals[0].Cmd)
			}
			if r.collect(); r.replies[id] != (Reply{}) {
				t.Fatalf("answered twice: %+v", r.replies[id])
			}
		})
	}
}

func TestDroppedElectionRetries(t *testing.T) {
	r := newRig(t, Config{})
	r.register("a", "a")
	r.settle()
	r.beat(1, "a", 0, 0, 0)
	r.core.Tick(r.now)
	rd := r.collect()
	if len(rd.Proposals) != 1 {
		t.Fatalf("%d proposals, want the first election", len(rd.Proposals))
	}
	r.core.Dropped(rd.Proposals[0].ID, false, false)
	r.core.Tick(r.now)
	if rd := r.collect(); len(rd.Proposals) != 1 {
		t.Fatalf("%d proposals after the election was refused, want it again", len(rd.Proposals))
	}
}

// TestMasterThatLostItsTail: a member elected on the heartbeat it sent
// before a power cut comes back saying its log may lack acknowledged
// messages, and refuses the role. It does not count as the master; the
// set before its election is electable again, whole members first, and a
// member that lacks is elected only as the best of them all, knowingly.
func TestMasterThatLostItsTail(t *testing.T) {
	r := cluster3(t, Config{})
	hb := func(id int64, epoch int32, off int64, lacks bool) {
		r.ask(&protocol.ControllerHeartbeatRequest{GroupRef: gref, BrokerID: id, BrokerAddr: string(rune('a' + id - 1)),
			Epoch: epoch, MaxOffset: off, MayLackAcked: lacks})
	}
	elect := func(at time.Duration) *command {
		t.Helper()
		r.at(at)
		rd := r.collect()
		if len(rd.Proposals) != 1 {
			t.Fatalf("at %v: %d proposals", at, len(rd.Proposals))
		}
		cmd, _ := decodeCommand(rd.Proposals[0].Cmd)
		r.commit(rd.Proposals[0].Cmd)
		r.collect()
		return cmd
	}
	// The master (1) dies at t0; 2 heartbeats once, then loses power.
	r.now = t0.Add(time.Second)
	hb(2, 1, 100, false)
	if cmd := elect(hbTimeout); cmd.NewMaster != 2 || cmd.Lacking || cmd.Recovery {
		t.Fatalf("first election %+v", cmd)
	}
	if g := r.group(); g.MasterEpoch != 2 || g.MasterMayLackAcked {
		t.Fatalf("after it: %+v", g)
	}
	// 2 is back without its tail, still at epoch 1: not the master. 1 is
	// not heard from, so 2 waits, and so would 3 if it lacked too.
	r.now = t0.Add(hbTimeout + time.Second)
	hb(2, 1, 60, true)
	hb(3, 1, 80, true)
	r.at(hbTimeout + time.Second)
	if rd := r.collect(); len(rd.Proposals) != 0 {
		t.Fatalf("elected a lacking member while 1 is not heard from: %d proposals", len(rd.Proposals))
	}
	// 1 comes back (it lacks too: an unclean stop) with the longest log:
	// every member of the old set is heard, the best is taken knowingly.
	hb(1, 1, 120, true)
	cmd := elect(hbTimeout + time.Second)
	if cmd.NewMaster != 1 || !cmd.Lacking || !cmd.Recovery {
		t.Fatalf("recovery election %+v", cmd)
	}
	g := r.group()
	if g.MasterID != 1 || g.MasterEpoch != 3 || !g.MasterMayLackAcked {
		t.Fatalf("after the recovery election: %+v", g)
	}
	// Elected knowingly, 1 still lacking and at epoch 1 counts as the
	// master until it begins epoch 3: no election follows.
	r.at(hbTimeout + 2*time.Second)
	hb(1, 1, 120, true)
	r.at(hbTimeout + 2*time.Second)
	if rd := r.collect(); len(rd.Proposals) != 0 {
		t.Fatalf("re-elected a master elected knowingly: %d proposals", len(rd.Proposals))
	}
	// A snapshot keeps what the next election needs.
	b, err := r.st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var back State
	if err := back.Restore(b); err != nil {
		t.Fatal(err)
	}
	if in, _ := back.Group(cl, grp); !in.MasterMayLackAcked || back.groups[groupKey{cluster: cl, name: grp}].recovery == nil {
		t.Fatalf("restored %+v", in)
	}
}

// TestNoLeaseRenewalWhileAnElectionMayCommit: a master's heartbeat that
// arrives while an election of its group is in the log, uncommitted, is
// answered without renewing its lease (its ReadIndex may be below the
// election's entry: the answer would let the old master write on past the
// new one's election), also after the election's request deadline, when
// the scan may propose again; once every such entry applied, or was
// dropped before entering the log, heartbeats renew again.
func TestNoLeaseRenewalWhileAnElectionMayCommit(t *testing.T) {
	for _, dropped := range []bool{false, true} {
		r := cluster3(t, Config{RequestTimeout: time.Second})
		r.at(hbTimeout + time.Millisecond)
		r.beat(2, "b", 1, 0, 0)
		r.beat(3, "c", 1, 0, 0)
		r.core.Tick(r.now)
		rd := r.collect()
		if len(rd.Proposals) != 1 {
			t.Fatalf("%d proposals for a silent master, want an election", len(rd.Proposals))
		}
		elect := rd.Proposals[0]
		masterBeat := func() Reply {
			t.Helper()
			id := r.send(&protocol.ControllerHeartbeatRequest{GroupRef: gref, BrokerID: 1, BrokerAddr: "a", Epoch: 1})
			for _, rid := range r.collect().Reads {
				r.core.ReadDone(rid)
			}
			r.collect()
			return r.replies[id]
		}
		if rp := masterBeat(); rp.Status != protocol.StatusSystemBusy {
			t.Fatalf("dropped=%v: the master's heartbeat with an election in the log: %v %q, want SYSTEM_BUSY", dropped, rp.Status, rp.Remark)
		}
		r.at(hbTimeout + 2*time.Second) // past the election's deadline
		if rp := masterBeat(); rp.Status != protocol.StatusSystemBusy {
			t.Fatalf("dropped=%v: past the election's deadline: %v %q, want SYSTEM_BUSY", dropped, rp.Status, rp.Remark)
		}
		if dropped {
			r.core.Dropped(elect.ID, false, false)
		} else {
			r.commit(elect.Cmd)
		}
		rp := masterBeat()
		hb, _ := rp.Fields.(*protocol.ControllerHeartbeatResponse)
		want := int32(map[bool]int{false: 2, true: 1}[dropped])
		if rp.Status != protocol.StatusOK || hb == nil || hb.MasterEpoch != want {
			t.Fatalf("dropped=%v: the heartbeat after the election resolved: %v %+v, want OK at master epoch %d", dropped, rp.Status, rp.Fields, want)
		}
	}
}
