package ha

import (
	"testing"

	"github.com/wharfmq/wharf/protocol"
)

// TestFollowerReportsFlushed: a report carries how far the slave's log is
// fsynced, never past its end; Flushed reports again only when the flush
// moved past what the last report said, and not before a link exists or
// while the epoch handshake runs.
func TestFollowerReportsFlushed(t *testing.T) {
	m, s := master(t), openStore(t, smallSeg)
	f := NewFollower(folConfig(), s, quiet)
	f.Flushed()
	if rd := f.Ready(); len(rd.Sends) != 0 {
		t.Fatalf("Flushed without a link sent %v", rd.Sends)
	}
	f = linked(t, s, 3)
	end := boundary(t, m, 3*smallSeg/2)
	var reqs []protocol.Request
	for off := int64(0); off < end; {
		chunk, err := m.CommitLog().ReadRecords(off, int(end-off))
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, &protocol.HATransferRequest{Offset: off, MasterMaxOffset: end, ConfirmOffset: off, Data: chunk})
		off += int64(len(chunk))
	}
	f.Receive(t0, 3, reqs)
	for _, req := range f.Ready().Sends {
		if rep := req.(*protocol.HAReportRequest); rep.FlushedOffset != 0 {
			t.Fatalf("nothing flushed, the report after a transfer says %d", rep.FlushedOffset)
		}
	}
	if got, want := f.ConfirmOffset(), reqs[len(reqs)-1].(*protocol.HATransferRequest).Offset; got != want {
		t.Fatalf("confirm offset heard %d, want the last transfer's %d", got, want)
	}
	steps := []struct {
		flushTo int64 // 0: no flush before Flushed
		report  bool
	}{
		{flushTo: 0, report: false},           // nothing moved
		{flushTo: smallSeg / 2, report: true}, // a partial flush
		{flushTo: 0, report: false},           // reported already
		{flushTo: end, report: true},
	}
	for i, st := range steps {
		if st.flushTo > 0 {
			if _, err := s.Flush(st.flushTo); err != nil {
				t.Fatal(err)
			}
		}
		f.Flushed()
		rd := f.Ready()
		if !st.report {
			if len(rd.Sends) != 0 {
				t.Fatalf("step %d: reported %v with nothing new flushed", i, rd.Sends)
			}
			continue
		}
		rep := reported(t, rd.Sends)
		if fl := s.CommitLog().FlushedOffset(); rep.FlushedOffset != fl || rep.FlushedOffset > rep.MaxOffset || fl == 0 {
			t.Fatalf("step %d: report says flushed %d (end %d), the log is flushed to %d", i, rep.FlushedOffset, rep.MaxOffset, fl)
		}
	}
}

// TestFollowerFlushedDuringHandshake: a slave with epochs reports nothing
// on a flush until the master answered its handshake (a report then would
// be a second handshake).
func TestFollowerFlushedDuringHandshake(t *testing.T) {
	s := openStore(t, smallSeg)
	if err := s.StartEpoch(1, 0); err != nil {
		t.Fatal(err)
	}
	fill(t, s, 1, 5, 500)
	f := NewFollower(folConfig(), s, quiet)
	f.Start(t0)
	f.Ready()
	f.Dialed(t0, 3, nil)
	if rep := reported(t, f.Ready().Sends); len(rep.Epochs) == 0 {
		t.Fatal("no handshake")
	}
	if _, err := s.Flush(s.CommitLog().MaxOffset()); err != nil {
		t.Fatal(err)
	}
	f.Flushed()
	if rd := f.Ready(); len(rd.Sends) != 0 {
		t.Fatalf("reported %v during the handshake", rd.Sends)
	}
}

// TestReplicatorFlushed: each slave's flushed offset, as its reports say,
// is in Slaves; it never moves back, an empty slave's starts where
// streaming starts (it will never hold what lies below), and a report of
// more flushed than held is refused.
func TestReplicatorFlushed(t *testing.T) {
	type rep struct{ max, flushed int64 } // flushed -1: one byte past max
	cases := []struct {
		name    string
		reports []rep // after the first report of an empty slave
		want    int64
		refused string
	}{
		{name: "first report of an empty slave", want: 0},
		{name: "flushed follows", reports: []rep{{4000, 0}, {8000, 4000}}, want: 4000},
		{name: "all flushed", reports: []rep{{8000, 8000}}, want: 8000},
		{name: "never back", reports: []rep{{8000, 6000}, {8000, 2000}}, want: 6000},
		{name: "more flushed than held", reports: []rep{{4000, -1}}, refused: "flushed, past its log's end"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := master(t)
			r := NewReplicator(replConfig(), m.CommitLog(), quiet)
			r.Report(t0, 1, "s", reportOf(t, openStore(t, smallSeg)))
			contiguous(t, transfers(t, r.Ready().Sends, 1), 0)
			for _, p := range c.reports {
				max := boundary(t, m, p.max)
				fl := p.flushed
				switch fl {
				case p.max:
					fl = max // everything held
				case -1:
					fl = max + 1
				}
				r.Report(t0, 1, "s", &protocol.HAReportRequest{BrokerName: "b", BrokerID: 1, MaxOffset: max, FlushedOffset: fl})
			}
			rd := r.Ready()
			if c.refused != "" {
				checkRefused(t, rd, 1, c.refused)
				return
			}
			want := c.want
			if n := len(c.reports); n > 0 && c.reports[n-1].flushed == c.reports[n-1].max {
				want = boundary(t, m, want)
			}
			ss := r.Slaves()
			if len(ss) != 1 || ss[0].FlushedOffset != want || ss[0].FlushedOffset > ss[0].AckedOffset {
				t.Fatalf("slaves %+v, want one flushed to %d", ss, want)
			}
		})
	}
}

// TestEmptySlaveFlushedFromStart: an empty slave that starts at the
// master's earliest retained offset counts as flushed below it.
func TestEmptySlaveFlushedFromStart(t *testing.T) {
	m := master(t)
	clean(t, m)
	r := NewReplicator(replConfig(), m.CommitLog(), quiet)
	r.Report(t0, 1, "s", reportOf(t, openStore(t, smallSeg)))
	if ss := r.Slaves(); len(ss) != 1 || ss[0].FlushedOffset != m.CommitLog().MinOffset() {
		t.Fatalf("slaves %+v, want flushed from %d", ss, m.CommitLog().MinOffset())
	}
}

// TestTransfersCarryConfirmOffset: every transfer carries the confirm
// offset the master set last.
func TestTransfersCarryConfirmOffset(t *testing.T) {
	m := master(t)
	r := NewReplicator(replConfig(), m.CommitLog(), quiet)
	r.SetConfirmOffset(1234)
	r.Report(t0, 1, "s", reportOf(t, openStore(t, smallSeg)))
	trs := transfers(t, r.Ready().Sends, 1)
	for i, tr := range trs {
		if tr.ConfirmOffset != 1234 {
			t.Fatalf("transfer %d carries confirm offset %d, want 1234", i, tr.ConfirmOffset)
		}
	}
}
