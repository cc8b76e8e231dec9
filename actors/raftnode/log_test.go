package raftnode

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/wharfmq/wharf/storage/vfs"
)

var errCrashed = errors.New("crashed")

func ent(index, term uint64, data string) *pb.Entry {
	return &pb.Entry{Index: new(index), Term: new(term), Type: pb.EntryNormal.Enum(), Data: []byte(data)}
}

func hs(term, vote, commit uint64) *pb.HardState {
	return &pb.HardState{Term: new(term), Vote: new(vote), Commit: new(commit)}
}

func snap(index, term uint64, data string) *pb.Snapshot {
	return &pb.Snapshot{Data: []byte(data), Metadata: &pb.SnapshotMetadata{Index: new(index), Term: new(term),
		ConfState: pb.EnsureConfState(&pb.ConfState{Voters: []uint64{1, 2, 3}})}}
}

// model applies p to rec as the log's contract says, record by record; it
// returns every state in between (what a crash inside Save may leave).
func model(rec Recovered, p Persist) []Recovered {
	states := []Recovered{rec}
	if p.Snapshot != nil {
		after := Recovered{HardState: rec.HardState, Snapshot: p.Snapshot, Entries: slicesClone(p.Entries)}
		if p.HardState != nil {
			after.HardState = p.HardState
		}
		return append(states, after)
	}
	if p.HardState != nil {
		rec.HardState = p.HardState
		states = append(states, rec)
	}
	for _, e := range p.Entries {
		first := rec.Snapshot.GetMetadata().GetIndex() + 1
		rec.Entries = append(slicesClone(rec.Entries[:e.GetIndex()-first]), e)
		states = append(states, rec)
	}
	return states
}

func slicesClone(es []*pb.Entry) []*pb.Entry { return append([]*pb.Entry(nil), es...) }

func describe(r Recovered) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "hs(%d,%d,%d)", r.HardState.GetTerm(), r.HardState.GetVote(), r.HardState.GetCommit())
	if r.Snapshot != nil {
		m := r.Snapshot.GetMetadata()
		fmt.Fprintf(&b, " snap(%d,%d,%q,%v)", m.GetIndex(), m.GetTerm(), r.Snapshot.GetData(), m.GetConfState().GetVoters())
	}
	for _, e := range r.Entries {
		fmt.Fprintf(&b, " %d/%d:%s", e.GetIndex(), e.GetTerm(), e.GetData())
	}
	return b.String()
}

// workload drives a Log the way a Node does: a bootstrap snapshot, appends,
// conflicting overwrites, hard-state-only saves (some unsynced) and
// compactions. It returns the states a crash may leave: the model's states
// since the last synced Save.
func workload(fsys vfs.FS, seed uint64, saves int) (candidates []Recovered, err error) {
	rng := rand.New(rand.NewPCG(seed, 1))
	cur := Recovered{}
	candidates = []Recovered{cur}
	l, _, err := OpenLog(fsys, logDir, 300)
	if err != nil {
		return candidates, err
	}
	term := uint64(1)
	for i := 0; i < saves; i++ {
		p := nextPersist(rng, cur, &term, i)
		states := model(cur, p)
		candidates = append(candidates, states[1:]...)
		if err := l.Save(p); err != nil {
			return candidates, err
		}
		cur = states[len(states)-1]
		if p.Sync { // else a crash may still lose it, or keep a prefix
			candidates = []Recovered{cur}
		}
	}
	return candidates, l.Close()
}

func nextPersist(rng *rand.Rand, cur Recovered, term *uint64, i int) Persist {
	if i == 0 {
		return Persist{Snapshot: snap(1, 1, ""), Sync: true}
	}
	first := cur.Snapshot.GetMetadata().GetIndex() + 1
	last := first + uint64(len(cur.Entries)) - 1
	switch r := rng.IntN(10); {
	case r == 0 && last >= first: // compaction at an applied index
		at := first + uint64(rng.IntN(int(last-first+1)))
		t := cur.Entries[at-first].GetTerm()
		return Persist{Snapshot: snap(at, t, fmt.Sprintf("state@%d", at)), Entries: cur.Entries[at-first+1:], Sync: true}
	case r == 3: // only the commit index moved: raft does not need a sync
		h := cur.HardState
		return Persist{HardState: hs(h.GetTerm(), h.GetVote(), last), Sync: false}
	case r == 1: // a vote in a new term, no entries
		*term++
		return Persist{HardState: hs(*term, uint64(1+rng.IntN(3)), first-1), Sync: true}
	default:
		from := last + 1
		if r == 2 && last >= first { // a new leader overwrites a suffix
			*term++
			from = first + uint64(rng.IntN(int(last-first+1)))
		}
		var ents []*pb.Entry
		for k := range 1 + rng.IntN(4) {
			ents = append(ents, ent(from+uint64(k), *term, fmt.Sprintf("c%d.%d", i, k)))
		}
		return Persist{HardState: hs(*term, 1, from-1), Entries: ents, Sync: true}
	}
}

// TestLogCrashLoop crashes the workload after its k-th file-system
// operation, for every k, under three write-back models: recovery must give
// the state after the last completed synced Save, or a state within the
// Saves after it, never less and never anything else.
func TestLogCrashLoop(t *testing.T) {
	counter := &vfs.Counter{}
	const saves = 80
	if _, err := workload(vfs.NewFaulty(vfs.NewMem(), counter), 1, saves); err != nil {
		t.Fatalf("clean run: %v", err)
	}
	total := counter.Count()
	if total < 200 {
		t.Fatalf("workload did only %d file-system operations", total)
	}
	opts := []vfs.CrashOptions{{}, {UnsyncedKeepRatio: 0.5, TornLastPage: true}, {UnsyncedKeepRatio: 1}}
	for k := 0; k < total; k++ {
		for oi, o := range opts {
			mem := vfs.NewMem()
			var img *vfs.Mem
			inj := vfs.OnOp(func(n int, _ vfs.Op) error {
				if n == k {
					img = mem.Crash(int64(k*3+oi), o)
				}
				if n >= k {
					return errCrashed
				}
				return nil
			})
			cands, err := workload(vfs.NewFaulty(mem, inj), 1, saves)
			if !errors.Is(err, errCrashed) {
				t.Fatalf("k=%d: workload ended with %v, want the crash", k, err)
			}
			checkRecovers(t, img, cands, fmt.Sprintf("k=%d/%d opts=%+v", k, total, o))
		}
	}
}

func checkRecovers(t *testing.T, img vfs.FS, cands []Recovered, label string) {
	t.Helper()
	l, rec, err := OpenLog(img, logDir, 300)
	if err != nil {
		t.Fatalf("%s: recovery: %v", label, err)
	}
	got := describe(Recovered{HardState: rec.HardState, Snapshot: rec.Snapshot, Entries: rec.Entries})
	ok := false
	for _, c := range cands {
		ok = ok || describe(c) == got || c.Snapshot == nil && rec.Snapshot == nil
	}
	if !ok {
		var want bytes.Buffer
		for _, c := range cands {
			want.WriteString("\n  " + describe(c))
		}
		t.Fatalf("%s: recovered\n  %s\nwant one of%s", label, got, want.String())
	}
	// The recovered log takes appends again and recovers them.
	next := uint64(2)
	if rec.Snapshot != nil {
		next = rec.Snapshot.GetMetadata().GetIndex() + uint64(len(rec.Entries)) + 1
		if err := l.Save(Persist{Entries: []*pb.Entry{ent(next, 99, "after")}, Sync: true}); err != nil {
			t.Fatalf("%s: append after recovery: %v", label, err)
		}
		_, again, err := OpenLog(img, logDir, 300)
		if err != nil || len(again.Entries) == 0 || string(again.Entries[len(again.Entries)-1].GetData()) != "after" {
			t.Fatalf("%s: append after recovery not recovered (%v): %s", label, err, describe(again))
		}
	}
}

func TestLogCutsTornTailOnly(t *testing.T) {
	mem := vfs.NewMem()
	l, _, err := OpenLog(mem, logDir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	must(t, l.Save(Persist{Snapshot: snap(1, 1, "s"), Sync: true}))
	must(t, l.Save(Persist{HardState: hs(2, 1, 1), Entries: []*pb.Entry{ent(2, 2, "a"), ent(3, 2, "b")}, Sync: true}))
	must(t, l.Close())
	name := path.Join(logDir, segName(1))
	f, err := mem.Open(name)
	must(t, err)
	size := f.Size()
	// A half-written record after the synced ones.
	junk := appendRecord(nil, recEntry, encodeEntry(ent(4, 2, "torn")))
	_, err = f.WriteAt(junk[:len(junk)-2], size)
	must(t, err)
	must(t, f.Close())
	_, rec, err := OpenLog(mem, logDir, 1<<20)
	must(t, err)
	if got := describe(rec); got != `hs(2,1,1) snap(1,1,"s",[1 2 3]) 2/2:a 3/2:b` || rec.TornBytes != int64(len(junk)-2) {
		t.Fatalf("after a torn tail: %s, torn %d", got, rec.TornBytes)
	}
	// Damage before the newest segment is an error, not a silent cut.
	l, _, err = OpenLog(mem, logDir, 10)
	must(t, err)
	must(t, l.Save(Persist{Entries: []*pb.Entry{ent(4, 2, "c")}, Sync: true})) // rolls to segment 2
	must(t, l.Close())
	f, err = mem.Open(name)
	must(t, err)
	_, err = f.WriteAt([]byte{0xff}, size-1)
	must(t, err)
	must(t, f.Close())
	if _, _, err := OpenLog(mem, logDir, 10); err == nil {
		t.Fatal("a damaged older segment recovered without an error")
	}
}

func TestLogCompactionDropsOldSegments(t *testing.T) {
	mem := vfs.NewMem()
	l, _, err := OpenLog(mem, logDir, 64)
	must(t, err)
	must(t, l.Save(Persist{Snapshot: snap(1, 1, ""), Sync: true}))
	for i := uint64(2); i < 40; i++ {
		must(t, l.Save(Persist{HardState: hs(1, 1, i-1), Entries: []*pb.Entry{ent(i, 1, "x")}, Sync: true}))
	}
	names, _ := mem.List(logDir)
	if len(names) < 5 {
		t.Fatalf("%d segments; the test wants several", len(names))
	}
	must(t, l.Save(Persist{Snapshot: snap(30, 1, "state"), Entries: []*pb.Entry{ent(31, 1, "y")}, Sync: true}))
	names, _ = mem.List(logDir)
	if len(names) != 1 {
		t.Fatalf("after compaction: segments %v, want only the new base", names)
	}
	_, rec, err := OpenLog(mem, logDir, 64)
	must(t, err)
	if got := describe(rec); got != `hs(1,1,38) snap(30,1,"state",[1 2 3]) 31/1:y` {
		t.Fatalf("after compaction: %s", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// FuzzLogSegment feeds arbitrary bytes to recovery as a log's segments: it
// must return an error or a log that obeys its rules, never panic or
// allocate without bound.
func FuzzLogSegment(f *testing.F) {
	base := appendRecord(nil, recHardState, encodeHardState(hs(3, 2, 4)))
	base = appendRecord(base, recSnapshot, encodeSnapshot(snap(2, 1, "data")))
	base = appendRecord(base, recEntry, encodeEntry(ent(3, 1, "a")))
	f.Add(base, []byte(nil))
	f.Add(base, appendRecord(appendRecord(nil, recHardState, encodeHardState(hs(3, 2, 4))), recEntry, encodeEntry(ent(4, 3, "b"))))
	f.Add(base[:len(base)-3], []byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, seg1, seg2 []byte) {
		mem := vfs.NewMem()
		must(t, mem.MkdirAll(logDir))
		for i, seg := range [][]byte{seg1, seg2} {
			if len(seg) == 0 {
				continue
			}
			fl, err := mem.Create(path.Join(logDir, segName(uint64(i+1))), 0)
			must(t, err)
			_, err = fl.WriteAt(seg, 0)
			must(t, err)
			must(t, fl.Close())
		}
		_, rec, err := OpenLog(mem, logDir, 0)
		if err != nil {
			return
		}
		if rec.Snapshot == nil {
			if len(rec.Entries) > 0 {
				t.Fatal("entries without a snapshot")
			}
			return
		}
		next := rec.Snapshot.GetMetadata().GetIndex() + 1
		for _, e := range rec.Entries {
			if e.GetIndex() != next {
				t.Fatalf("entry %d, want %d", e.GetIndex(), next)
			}
			next++
		}
	})
}

// FuzzRecordPayloads checks the payload decoders on arbitrary bytes and that
// whatever they accept encodes back to the same bytes.
func FuzzRecordPayloads(f *testing.F) {
	f.Add(encodeEntry(ent(3, 1, "a")))
	f.Add(encodeSnapshot(snap(2, 1, "data")))
	f.Add(encodeHardState(hs(1, 2, 3)))
	f.Fuzz(func(t *testing.T, b []byte) {
		if e, err := decodeEntry(b); err == nil {
			if again, err := decodeEntry(encodeEntry(e)); err != nil || describe(Recovered{Snapshot: nil, Entries: []*pb.Entry{e}}) !=
				describe(Recovered{Entries: []*pb.Entry{again}}) {
				t.Fatalf("entry does not round-trip: %v", err)
			}
		}
		if s, err := decodeSnapshot(b); err == nil {
			if again, err := decodeSnapshot(encodeSnapshot(s)); err != nil || describe(Recovered{Snapshot: s}) != describe(Recovered{Snapshot: again}) {
				t.Fatalf("snapshot does not round-trip: %v", err)
			}
		}
		if h, err := decodeHardState(b); err == nil && !bytes.Equal(encodeHardState(h), b) {
			// Uvarints have one shortest form; a longer one may decode, so
			// compare the decoded values instead.
			again, err := decodeHardState(encodeHardState(h))
			if err != nil || describe(Recovered{HardState: h}) != describe(Recovered{HardState: again}) {
				t.Fatalf("hard state does not round-trip: %v", err)
			}
		}
		_, _, _, _ = readRecord(b)
	})
}
