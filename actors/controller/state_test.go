package controller

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/wharfmq/wharf/protocol"
)

const cl, grp = "c", "g"

func reg(identity, addr string) *command {
	return &command{Op: opRegister, Cluster: cl, Group: grp, Identity: identity, Addr: addr, HAAddr: addr + "-ha"}
}

func alter(master int64, mEpoch, sEpoch int32, set ...int64) *command {
	return &command{Op: opAlter, Cluster: cl, Group: grp, MasterID: master, MasterEpoch: mEpoch, SetEpoch: sEpoch, Set: set}
}

func elect(newMaster int64, mEpoch, sEpoch int32, unclean bool) *command {
	return &command{Op: opElect, Cluster: cl, Group: grp, NewMaster: newMaster, MasterEpoch: mEpoch, SetEpoch: sEpoch, Unclean: unclean}
}

// applyAll applies cmds from index 1 and returns the decoded results.
func applyAll(t *testing.T, s *State, cmds ...*command) []*result {
	t.Helper()
	var out []*result
	for _, c := range cmds {
		out = append(out, applyOne(t, s, c))
	}
	return out
}

func applyOne(t *testing.T, s *State, c *command) *result {
	t.Helper()
	b := s.Apply(s.Applied()+1, encodeCommand(c))
	r, err := decodeResult(b)
	if err != nil {
		t.Fatalf("result of %+v: %v", c, err)
	}
	return r
}

// groupLine is a group's state in one line, for table tests.
func groupLine(s *State) string {
	in, ok := s.Group(cl, grp)
	if !ok {
		return "none"
	}
	var reps []string
	for _, r := range in.Replicas {
		reps = append(reps, fmt.Sprintf("%d=%s", r.BrokerID, r.BrokerAddr))
	}
	return fmt.Sprintf("master=%d@%d set=%v@%d replicas=%s", in.MasterID, in.MasterEpoch, in.SyncStateSet, in.SyncStateSetEpoch, strings.Join(reps, ","))
}

// three registered brokers; 1 elected (epoch 1, set {1}), then set {1,2,3} (set epoch 2).
func threeBrokers() []*command {
	return []*command{reg("A", "a"), reg("B", "b"), reg("C", "c"), elect(1, 0, 0, false), alter(1, 1, 1, 1, 2, 3)}
}

func TestStateApply(t *testing.T) {
	cases := []struct {
		name  string
		setup []*command
		cmd   *command
		want  protocol.Status
		after string
	}{
		{"first register gets id 1", nil, reg("A", "a"), protocol.StatusOK, "master=0@0 set=[]@0 replicas=1=a"},
		{"ids follow identities", []*command{reg("A", "a")}, reg("B", "b"), protocol.StatusOK, "master=0@0 set=[]@0 replicas=1=a,2=b"},
		{"same identity keeps its id at a new address", []*command{reg("A", "a"), reg("B", "b")}, reg("A", "a2"),
			protocol.StatusOK, "master=0@0 set=[]@0 replicas=1=a2,2=b"},
		{"a wiped store is a new replica", []*command{reg("A", "a")}, reg("A2", "a"), protocol.StatusOK, "master=0@0 set=[]@0 replicas=1=a,2=a"},
		{"register without identity", nil, &command{Op: opRegister, Cluster: cl, Group: grp, Addr: "a"},
			protocol.StatusControllerInvalidRequest, "none"},
		{"first election: any replica", []*command{reg("A", "a"), reg("B", "b")}, elect(2, 0, 0, false),
			protocol.StatusOK, "master=2@1 set=[2]@1 replicas=1=a,2=b"},
		{"elect an unregistered broker", []*command{reg("A", "a")}, elect(5, 0, 0, false),
			protocol.StatusControllerBrokerMetadataNotExist, "master=0@0 set=[]@0 replicas=1=a"},
		{"expand the set", threeBrokers()[:4], alter(1, 1, 1, 1, 3), protocol.StatusOK, "master=1@1 set=[1 3]@2 replicas=1=a,2=b,3=c"},
		{"set is stored sorted", threeBrokers()[:4], alter(1, 1, 1, 3, 1), protocol.StatusOK, "master=1@1 set=[1 3]@2 replicas=1=a,2=b,3=c"},
		{"alter fenced by master epoch", threeBrokers(), alter(1, 0, 2, 1), protocol.StatusControllerFencedMasterEpoch,
			"master=1@1 set=[1 2 3]@2 replicas=1=a,2=b,3=c"},
		{"alter fenced by set epoch", threeBrokers(), alter(1, 1, 1, 1), protocol.StatusControllerFencedSyncStateSetEpoch,
			"master=1@1 set=[1 2 3]@2 replicas=1=a,2=b,3=c"},
		{"alter by a non-master", threeBrokers(), alter(2, 1, 2, 2), protocol.StatusControllerInvalidMaster,
			"master=1@1 set=[1 2 3]@2 replicas=1=a,2=b,3=c"},
		{"alter before any master", []*command{reg("A", "a")}, alter(1, 0, 0, 1), protocol.StatusControllerInvalidMaster,
			"master=0@0 set=[]@0 replicas=1=a"},
		{"set without the master", threeBrokers(), alter(1, 1, 2, 2, 3), protocol.StatusControllerInvalidReplicas,
			"master=1@1 set=[1 2 3]@2 replicas=1=a,2=b,3=c"},
		{"set with an unregistered broker", threeBrokers(), alter(1, 1, 2, 1, 9), protocol.StatusControllerInvalidReplicas,
			"master=1@1 set=[1 2 3]@2 replicas=1=a,2=b,3=c"},
		{"alter of an unknown group", nil, alter(1, 1, 1, 1), protocol.StatusControllerBrokerMetadataNotExist, "none"},
		{"elect from the set", threeBrokers(), elect(3, 1, 2, false), protocol.StatusOK, "master=3@2 set=[3]@3 replicas=1=a,2=b,3=c"},
		{"elect on a stale master epoch", append(threeBrokers(), elect(2, 1, 2, false)), elect(3, 1, 2, false),
			protocol.StatusControllerFencedMasterEpoch, "master=2@2 set=[2]@3 replicas=1=a,2=b,3=c"},
		{"elect on a stale set epoch", append(threeBrokers(), alter(1, 1, 2, 1)), elect(3, 1, 2, false),
			protocol.StatusControllerFencedSyncStateSetEpoch, "master=1@1 set=[1]@3 replicas=1=a,2=b,3=c"},
		{"elect outside the set", append(threeBrokers(), alter(1, 1, 2, 1)), elect(3, 1, 3, false),
			protocol.StatusControllerInvalidReplicas, "master=1@1 set=[1]@3 replicas=1=a,2=b,3=c"},
		{"unclean elect outside the set", append(threeBrokers(), alter(1, 1, 2, 1)), elect(3, 1, 3, true),
			protocol.StatusOK, "master=3@2 set=[3]@4 replicas=1=a,2=b,3=c"},
		{"unknown op", nil, &command{Op: "drop", Cluster: cl, Group: grp}, protocol.StatusControllerInvalidRequest, "none"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var s State
			for i, r := range applyAll(t, &s, tc.setup...) {
				if r.Status != protocol.StatusOK {
					t.Fatalf("setup %d: %v %s", i, r.Status, r.Remark)
				}
			}
			r := applyOne(t, &s, tc.cmd)
			if r.Status != tc.want {
				t.Errorf("status %v (%s), want %v", r.Status, r.Remark, tc.want)
			}
			if got := groupLine(&s); got != tc.after {
				t.Errorf("state\n got %s\nwant %s", got, tc.after)
			}
			if r.Status != protocol.StatusOK && r.Changed {
				t.Error("a refusal says it changed the group")
			}
		})
	}
}

func TestApplyResultInfo(t *testing.T) {
	var s State
	rs := applyAll(t, &s, threeBrokers()...)
	if rs[1].Info.BrokerID != 2 || rs[1].Changed {
		t.Errorf("register B: %+v", rs[1])
	}
	if !rs[3].Changed || rs[3].Info.MasterAddr != "a" || rs[3].Info.MasterHAAddr != "a-ha" {
		t.Errorf("elect: %+v", rs[3].Info)
	}
	// The master moving is a change brokers must hear of; a slave moving is not.
	if r := applyOne(t, &s, reg("B", "b2")); r.Changed {
		t.Error("a slave's move is a change")
	}
	if r := applyOne(t, &s, reg("A", "a2")); !r.Changed || r.Info.MasterAddr != "a2" {
		t.Errorf("master's move: %+v", r)
	}
}

func TestApplyBadBytes(t *testing.T) {
	var s State
	applyAll(t, &s, threeBrokers()...)
	before, _ := s.Snapshot()
	for _, b := range [][]byte{{0xc1}, {0x92, 1, 2}, []byte("not msgpack"), {0x81, 0xa2, 'o', 'p', 0x07}, {0xdf, 0xff, 0xff, 0xff, 0xff}} {
		r, err := decodeResult(s.Apply(s.Applied()+1, b))
		if err != nil || r.Status != protocol.StatusControllerInvalidRequest {
			t.Errorf("%x: %v %+v", b, err, r)
		}
	}
	after, _ := s.Snapshot()
	var a, b State
	_ = a.Restore(before)
	_ = b.Restore(after)
	if groupLine(&a) != groupLine(&b) {
		t.Errorf("bad bytes changed the state:\n%s\n%s", groupLine(&a), groupLine(&b))
	}
	if s.Apply(s.Applied()+1, nil) != nil {
		t.Error("an empty entry has a result")
	}
}

func TestApplyReplayIgnored(t *testing.T) {
	var s State
	applyAll(t, &s, threeBrokers()...)
	before := groupLine(&s)
	if s.Apply(3, encodeCommand(elect(3, 1, 2, false))) != nil || groupLine(&s) != before {
		t.Errorf("a replayed index was applied: %s", groupLine(&s))
	}
	if s.Applied() != 5 {
		t.Errorf("applied %d", s.Applied())
	}
}

func TestSnapshotRestore(t *testing.T) {
	var s State
	applyAll(t, &s, threeBrokers()...)
	applyOne(t, &s, &command{Op: opRegister, Cluster: "c2", Group: "x", Identity: "X", Addr: "x"})
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var r State
	if err := r.Restore(snap); err != nil {
		t.Fatal(err)
	}
	snap2, _ := r.Snapshot()
	if !bytes.Equal(snap, snap2) || r.Applied() != s.Applied() {
		t.Fatal("restore then snapshot differs")
	}
	// Both continue alike: ids, epochs and identities survived.
	next := []*command{reg("D", "d"), reg("A", "a3"), elect(2, 1, 2, false), alter(2, 2, 3, 2, 4)}
	for _, c := range next {
		x, y := s.Apply(s.Applied()+1, encodeCommand(c)), r.Apply(r.Applied()+1, encodeCommand(c))
		if !bytes.Equal(x, y) {
			t.Fatalf("%+v: results differ after restore", c)
		}
	}
	if groupLine(&s) != "master=2@2 set=[2 4]@4 replicas=1=a3,2=b,3=c,4=d" || groupLine(&s) != groupLine(&r) {
		t.Fatalf("after restore: %s vs %s", groupLine(&s), groupLine(&r))
	}
}

func TestRestoreRefusesBadSnapshots(t *testing.T) {
	good := snapshot{Version: snapshotVersion, Applied: 9, Groups: []snapGroup{{Cluster: cl, Name: grp, NextID: 3,
		MasterID: 1, MasterEpoch: 1, Set: []int64{1}, SetEpoch: 1,
		Replicas: []snapReplica{{ID: 1, Identity: "A", Addr: "a"}, {ID: 2, Identity: "B", Addr: "b"}}}}}
	mutate := map[string]func(*snapshot){
		"version":             func(s *snapshot) { s.Version = 2 },
		"master unregistered": func(s *snapshot) { s.Groups[0].MasterID = 7 },
		"set unregistered":    func(s *snapshot) { s.Groups[0].Set = []int64{1, 7} },
		"set without master":  func(s *snapshot) { s.Groups[0].Set = []int64{2} },
		"id beyond next":      func(s *snapshot) { s.Groups[0].NextID = 2 },
		"identity twice":      func(s *snapshot) { s.Groups[0].Replicas[1].Identity = "A" },
		"group twice":         func(s *snapshot) { s.Groups = append(s.Groups, s.Groups[0]) },
		"master at epoch 0":   func(s *snapshot) { s.Groups[0].MasterEpoch = 0 },
		"no master, a set":    func(s *snapshot) { s.Groups[0].MasterID, s.Groups[0].MasterEpoch = 0, 0 },
	}
	enc := func(s snapshot) []byte { b, _ := protocol.MarshalValue(&s); return b }
	var st State
	if err := st.Restore(enc(good)); err != nil {
		t.Fatalf("good snapshot: %v", err)
	}
	want := groupLine(&st)
	for name, m := range mutate {
		s := good
		s.Groups = slices.Clone(good.Groups)
		s.Groups[0].Replicas = slices.Clone(good.Groups[0].Replicas)
		m(&s)
		if err := st.Restore(enc(s)); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if groupLine(&st) != want {
			t.Errorf("%s: a refused restore changed the state", name)
		}
	}
	for _, b := range [][]byte{nil, {0xc1}, []byte("junk")} {
		if err := st.Restore(b); err == nil {
			t.Errorf("%x accepted", b)
		}
	}
}

// FuzzApply: whatever the bytes, Apply does not panic, two States given the
// same entries return the same results, and a snapshot restores.
func FuzzApply(f *testing.F) {
	for _, c := range threeBrokers() {
		f.Add(encodeCommand(c))
	}
	f.Add([]byte{0xc1})
	f.Fuzz(func(t *testing.T, b []byte) {
		var x, y State
		applyAll(t, &x, threeBrokers()...)
		applyAll(t, &y, threeBrokers()...)
		if !bytes.Equal(x.Apply(6, b), y.Apply(6, b)) {
			t.Fatal("results differ")
		}
		snap, err := x.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		var z State
		if err := z.Restore(snap); err != nil {
			t.Fatalf("own snapshot: %v", err)
		}
		_ = z.Restore(b)
	})
}
