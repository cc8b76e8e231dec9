package ha

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

func mustEpoch(t testing.TB, st *storage.Store, epoch int32) int64 {
	t.Helper()
	at := st.CommitLog().MaxOffset()
	if err := st.StartEpoch(epoch, at); err != nil {
		t.Fatal(err)
	}
	return at
}

// epochWire is a master over m (with its epochs) and a follower over s,
// linked as 1.
func epochWire(t *testing.T, m, s *storage.Store) *wire {
	t.Helper()
	cfg := replConfig()
	cfg.Epochs = m.Epochs
	w := &wire{t: t, r: NewReplicator(cfg, m.CommitLog(), quiet), f: NewFollower(folConfig(), s, quiet), now: t0, slave: s}
	w.f.Start(w.now)
	w.dial(1)
	return w
}

// caughtUp checks that the slave's log and epochs are the master's and the
// slave's store is consistent.
func caughtUp(t *testing.T, m, s *storage.Store) {
	t.Helper()
	sameLog(t, m, s)
	if !slices.Equal(s.Epochs(), m.Epochs()) {
		t.Fatalf("the slave's epochs %v, the master's %v", s.Epochs(), m.Epochs())
	}
	if _, err := s.Dispatch(s.CommitLog().MaxOffset(), nil); err != nil {
		t.Fatal(err)
	}
	if err := storage.Check(s); err != nil {
		t.Fatal(err)
	}
}

// TestTransfersKeepToOneEpoch: a new slave copies a log of three epochs;
// no transfer crosses an epoch's start, each names its epoch, and the
// slave ends with the master's epoch entries.
func TestTransfersKeepToOneEpoch(t *testing.T) {
	m, s := openStore(t, smallSeg), openStore(t, smallSeg)
	mustEpoch(t, m, 1)
	fill(t, m, 1, 7, 700)
	mustEpoch(t, m, 2)
	mustEpoch(t, m, 3) // 2 had no write: 3 replaces it
	fill(t, m, 2, 30, 0)
	mustEpoch(t, m, 5)
	fill(t, m, 3, 9, 300)
	w := epochWire(t, m, s)
	w.settle()
	caughtUp(t, m, s)
	entries := m.Epochs()
	if len(entries) != 3 {
		t.Fatalf("master epochs %v", entries)
	}
	seen := map[int32]bool{}
	for _, tr := range w.transfers {
		ep, bound := epochAt(entries, tr.Offset)
		if tr.Epoch != ep.Epoch || tr.EpochStartOffset != ep.StartOffset || tr.Offset+int64(len(tr.Data)) > bound {
			t.Fatalf("transfer [%d, %d) of epoch %d from %d; the log's epoch there is %v, the next starts at %d",
				tr.Offset, tr.Offset+int64(len(tr.Data)), tr.Epoch, tr.EpochStartOffset, ep, bound)
		}
		seen[tr.Epoch] = true
	}
	if len(seen) != 3 {
		t.Fatalf("transfers named epochs %v, want all three", seen)
	}
}

// divergence builds a master and a slave that share a prefix and then
// parted, by how.
func divergence(t *testing.T, how string) (m, s *storage.Store, common int64) {
	m, s = openStore(t, smallSeg), openStore(t, smallSeg)
	mustEpoch(t, m, 1)
	mustEpoch(t, s, 1)
	fill(t, m, 1, 25, 0)
	copyLog(t, m, s, m.CommitLog().MaxOffset())
	switch how {
	case "the slave led an epoch the master never saw":
		// The slave was master of epoch 2 and wrote on its own; the
		// master took epoch 3 where both had stopped.
		common = mustEpoch(t, s, 2)
		fill(t, s, 7, 12, 0)
		mustEpoch(t, m, 3)
		fill(t, m, 8, 20, 0)
	case "the slave holds what the master lost":
		// Both were in epoch 1; the master lost its unflushed tail (the
		// slave had it) and took epoch 2 at its shorter end (#7689).
		fill(t, m, 9, 6, 0)
		copyLog(t, m, s, m.CommitLog().MaxOffset())
		common = boundary(t, m, m.CommitLog().MaxOffset()-3000)
		m.StopWrites()
		if err := m.TruncateTo(common); err != nil {
			t.Fatal(err)
		}
		m.ResumeWrites()
		mustEpoch(t, m, 2)
		fill(t, m, 10, 15, 0)
	default:
		t.Fatalf("no divergence %q", how)
	}
	return m, s, common
}

// TestDivergedSlaveTruncatesAndCatchesUp: a slave whose log went on past
// what the master holds is cut back to the last common point before it
// copies anything, then becomes the master's byte for byte.
func TestDivergedSlaveTruncatesAndCatchesUp(t *testing.T) {
	for _, how := range []string{"the slave led an epoch the master never saw", "the slave holds what the master lost"} {
		t.Run(how, func(t *testing.T) {
			m, s, common := divergence(t, how)
			if err := diffLog(m.CommitLog(), s.CommitLog()); err == nil {
				t.Fatal("the logs did not diverge")
			}
			w := epochWire(t, m, s)
			w.settle()
			caughtUp(t, m, s)
			if len(w.transfers) == 0 || w.transfers[0].Offset != common {
				t.Fatalf("replication started at %v, want the common point %d", w.transfers[:min(1, len(w.transfers))], common)
			}
			// Later appends of the master's epoch keep flowing.
			fill(t, m, 11, 5, 0)
			w.r.Appended()
			w.settle()
			caughtUp(t, m, s)
		})
	}
}

// TestNoCommonEpochStops: a slave that shares no epoch with the master
// stops replicating with a clear reason and keeps its log as it was.
func TestNoCommonEpochStops(t *testing.T) {
	m, s := openStore(t, smallSeg), openStore(t, smallSeg)
	mustEpoch(t, m, 2)
	fill(t, m, 1, 10, 0)
	mustEpoch(t, s, 1)
	fill(t, s, 2, 10, 0)
	end := s.CommitLog().MaxOffset()
	cfg := replConfig()
	cfg.Epochs = m.Epochs
	r := NewReplicator(cfg, m.CommitLog(), quiet)
	f := NewFollower(folConfig(), s, quiet)
	f.Start(t0)
	f.Ready()
	f.Dialed(t0, 1, nil)
	rep := reported(t, f.Ready().Sends)
	if len(rep.Epochs) != 1 || rep.Epoch != 1 {
		t.Fatalf("the handshake report carries epochs %v, epoch %d", rep.Epochs, rep.Epoch)
	}
	r.Report(t0, 1, "slave:1", rep)
	rr := r.Ready()
	answer, ok := rr.Sends[0].Req.(*protocol.HAEpochsRequest)
	if len(rr.Sends) != 1 || !ok {
		t.Fatalf("the master answers %+v, want its epochs", rr.Sends)
	}
	f.Receive(t0, 1, []protocol.Request{answer})
	rd := f.Ready()
	if rd.Truncate || !strings.Contains(rd.Close, "shares no epoch") || !strings.Contains(f.Status(), "shares no epoch") {
		t.Fatalf("no common epoch: %+v, status %q", rd, f.Status())
	}
	if s.CommitLog().MaxOffset() != end {
		t.Fatalf("the slave's log changed: ends at %d, was %d", s.CommitLog().MaxOffset(), end)
	}
	f.Reconnect(t0.Add(time.Minute)) // stopped for good
	if rd := f.Ready(); rd.Dial {
		t.Fatal("the slave dials again after no common epoch")
	}
}

// handshaken is a follower of s linked as 1 whose handshake with a master
// holding the same epochs is done.
func handshaken(t *testing.T, s *storage.Store) *Follower {
	t.Helper()
	f := NewFollower(folConfig(), s, quiet)
	f.Start(t0)
	f.Ready()
	f.Dialed(t0, 1, nil)
	f.Ready()
	f.Receive(t0, 1, []protocol.Request{&protocol.HAEpochsRequest{Epochs: toWire(s.Epochs()), MaxOffset: s.CommitLog().MaxOffset()}})
	if rep := reported(t, f.Ready().Sends); len(rep.Epochs) != 0 {
		t.Fatalf("after the handshake the report still carries epochs %v", rep.Epochs)
	}
	return f
}

// TestStaleEpochTransferRefused: a transfer of an epoch older than the
// slave's newest is refused: the link closes and nothing is appended. So is
// one that disagrees on where the current epoch began.
func TestStaleEpochTransferRefused(t *testing.T) {
	m := openStore(t, smallSeg)
	fill(t, m, 1, 4, 500)
	data, err := m.CommitLog().ReadRecords(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		tr    protocol.HATransferRequest
		close string
	}{
		{"an older epoch", protocol.HATransferRequest{Epoch: 2, EpochStartOffset: 0}, "the master is stale"},
		{"classic mode after epochs", protocol.HATransferRequest{Epoch: 0}, "the master is stale"},
		{"the same epoch from elsewhere", protocol.HATransferRequest{Epoch: 3, EpochStartOffset: 100}, "started at 100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t, smallSeg)
			mustEpoch(t, s, 3)
			f := handshaken(t, s)
			tr := tc.tr
			tr.Data, tr.MasterMaxOffset = data, int64(len(data))
			f.Receive(t0, 1, []protocol.Request{&tr})
			rd := f.Ready()
			if !strings.Contains(rd.Close, tc.close) || rd.Appended || len(rd.Sends) != 0 {
				t.Fatalf("%+v: closes %q, appended %v, sends %v", tc.tr, rd.Close, rd.Appended, rd.Sends)
			}
			if s.CommitLog().MaxOffset() != 0 {
				t.Fatalf("the slave appended a refused transfer: its log ends at %d", s.CommitLog().MaxOffset())
			}
		})
	}
	t.Run("a newer epoch is recorded before its bytes", func(t *testing.T) {
		s := openStore(t, smallSeg)
		mustEpoch(t, s, 3)
		f := handshaken(t, s)
		f.Receive(t0, 1, []protocol.Request{&protocol.HATransferRequest{Epoch: 4, Data: data, MasterMaxOffset: int64(len(data))}})
		if rd := f.Ready(); rd.Close != "" || !rd.Appended {
			t.Fatalf("a newer epoch's transfer: %+v", rd)
		}
		if want := []storage.EpochEntry{{Epoch: 4, StartOffset: 0}}; !slices.Equal(s.Epochs(), want) {
			t.Fatalf("epochs %v, want %v (epoch 3 held no byte)", s.Epochs(), want)
		}
	})
}

// TestStaleMasterRefusesSlave: a slave that knows a newer epoch than the
// master's is refused by the master (fencing the other way).
func TestStaleMasterRefusesSlave(t *testing.T) {
	m := openStore(t, smallSeg)
	mustEpoch(t, m, 2)
	fill(t, m, 1, 5, 200)
	cfg := replConfig()
	cfg.Epochs = m.Epochs
	r := NewReplicator(cfg, m.CommitLog(), quiet)
	for _, rep := range []*protocol.HAReportRequest{
		{BrokerName: "b", BrokerID: 1, SegmentSize: smallSeg, Epoch: 3, Epochs: []protocol.HAEpoch{{Epoch: 3, StartOffset: 0}}},
		{BrokerName: "b", BrokerID: 1, SegmentSize: smallSeg, Epoch: 3},
	} {
		r.Report(t0, 7, "slave:1", rep)
		rd := r.Ready()
		refuse, ok := rd.Sends[0].Req.(*protocol.HARefuseRequest)
		if len(rd.Sends) != 1 || !ok || !strings.Contains(refuse.Reason, "stale") || len(rd.Closes) != 1 {
			t.Fatalf("a slave of a newer epoch: %+v", rd)
		}
		r.Gone(7)
	}
	// A slave of the same epoch is served.
	r.Report(t0, 8, "slave:1", &protocol.HAReportRequest{BrokerName: "b", BrokerID: 1, SegmentSize: smallSeg, Epoch: 2})
	if trs := transfers(t, r.Ready().Sends, 8); len(trs) == 0 || trs[0].Epoch != 2 {
		t.Fatalf("the slave of the master's epoch gets %v", trs)
	}
}

// TestEmptySlaveStartsMidEpoch: a new slave that starts at the master's
// last segment records the epoch its first bytes belong to (which began
// before them) and every later one.
func TestEmptySlaveStartsMidEpoch(t *testing.T) {
	m, s := openStore(t, smallSeg), openStore(t, smallSeg)
	mustEpoch(t, m, 1)
	fill(t, m, 1, 20, 1500)
	e2 := mustEpoch(t, m, 2)
	fill(t, m, 2, 30, 1500)
	cfg := replConfig()
	cfg.Epochs = m.Epochs
	cfg.CatchUpFromLastSegment = true
	w := &wire{t: t, r: NewReplicator(cfg, m.CommitLog(), quiet), f: NewFollower(folConfig(), s, quiet), now: t0, slave: s}
	w.f.Start(w.now)
	w.dial(1)
	w.settle()
	start := s.CommitLog().MinOffset()
	if start <= e2 {
		t.Fatalf("the slave starts at %d, not after epoch 2's start %d", start, e2)
	}
	mustEpoch(t, m, 3)
	fill(t, m, 3, 5, 300)
	w.r.Appended()
	w.settle()
	if _, err := s.Dispatch(s.CommitLog().MaxOffset(), nil); err != nil {
		t.Fatal(err)
	}
	if err := storage.Check(s); err != nil {
		t.Fatal(err)
	}
	if want := m.Epochs()[1:]; !slices.Equal(s.Epochs(), want) {
		t.Fatalf("the slave's epochs %v, want %v", s.Epochs(), want)
	}
	sameLog(t, m, s)
}
