package ha

import (
	"bytes"
	"cmp"
	"strings"
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

func folConfig() FollowerConfig {
	return FollowerConfig{BrokerName: "b", BrokerID: 1, MasterAddr: "master:10912",
		HousekeepingInterval: 20 * time.Second, MetadataInterval: 10 * time.Second}
}

// linked returns a follower of st with link id open since t0, its first
// report consumed.
func linked(t *testing.T, st *storage.Store, id uint64) *Follower {
	t.Helper()
	f := NewFollower(folConfig(), st, quiet)
	f.Start(t0)
	f.Ready()
	f.Dialed(t0, id, nil)
	if rd := f.Ready(); len(rd.Sends) != 1 {
		t.Fatalf("a new link sent %v, want one report", rd.Sends)
	}
	return f
}

// reported returns the one report among sends.
func reported(t *testing.T, sends []protocol.Request) *protocol.HAReportRequest {
	t.Helper()
	if len(sends) != 1 {
		t.Fatalf("sent %d requests, want one report", len(sends))
	}
	rep, ok := sends[0].(*protocol.HAReportRequest)
	if !ok {
		t.Fatalf("sent %T, want a report", sends[0])
	}
	return rep
}

// TestFollowerDial: Start dials; failed dials retry after 250ms, 500ms,
// ... doubling up to ReconnectMax (default 1s); a link resets the backoff.
func TestFollowerDial(t *testing.T) {
	ms := func(ds ...time.Duration) []time.Duration {
		for i := range ds {
			ds[i] *= time.Millisecond
		}
		return ds
	}
	for _, tt := range []struct {
		max   time.Duration
		waits []time.Duration // the retries of failed dials in a row
	}{
		{0, ms(250, 500, 1000, 1000, 1000)},
		{10 * time.Second, ms(250, 500, 1000, 2000, 4000, 8000, 10000, 10000)},
		{100 * time.Millisecond, ms(100, 100, 100)},
	} {
		cfg := folConfig()
		cfg.ReconnectMax = tt.max
		f := NewFollower(cfg, openStore(t, smallSeg), quiet)
		f.Start(t0)
		if rd := f.Ready(); !rd.Dial || rd.DialAddr != "master:10912" || rd.RetryIn != 0 {
			t.Fatalf("start: %+v", rd)
		}
		f.Start(t0)
		f.Reconnect(t0)
		if rd := f.Ready(); rd.Dial {
			t.Fatal("a second dial while one is in flight")
		}
		fail := func(want time.Duration) {
			t.Helper()
			f.Dialed(t0, 0, errDial)
			rd := f.Ready()
			if rd.RetryIn != want || rd.Dial || len(rd.Sends) != 0 || !strings.Contains(f.Status(), "connecting to master master:10912: refused") {
				t.Fatalf("max %v: failed dial: retry in %v (want %v), %+v, status %q", tt.max, rd.RetryIn, want, rd, f.Status())
			}
			f.Reconnect(t0)
			if rd := f.Ready(); !rd.Dial {
				t.Fatal("the retry does not dial")
			}
		}
		for _, d := range tt.waits {
			fail(d)
		}
		f.Dialed(t0, 7, nil)
		rd := f.Ready()
		if rep := reported(t, rd.Sends); rep.MaxOffset != 0 || rep.BrokerID != 1 || rep.SegmentSize != smallSeg || rd.RetryIn != 0 {
			t.Fatalf("link open: %+v, report %+v", rd, rep)
		}
		if f.Link() != 7 || !strings.HasPrefix(f.Status(), "connected to master") {
			t.Fatalf("link %d, status %q", f.Link(), f.Status())
		}
		f.Reconnect(t0)
		f.Gone(8) // not the link
		if rd := f.Ready(); rd.Dial || rd.RetryIn != 0 || f.Link() != 7 {
			t.Fatalf("reconnect or another connection's close while linked: %+v", rd)
		}
		f.Gone(7)
		if rd := f.Ready(); rd.RetryIn != tt.waits[0] || f.Link() != 0 || !strings.HasPrefix(f.Status(), "disconnected") {
			t.Fatalf("link closed: %+v, status %q", rd, f.Status())
		}
		f.Reconnect(t0)
		f.Ready()
		fail(tt.waits[1]) // the backoff starts over after a link
	}
}

// TestFollowerRejoinBound: however long a master is away, the slave dials
// it again within ReconnectMax of its coming back (on virtual time: the
// shell arms RetryIn and calls Reconnect when it fires).
func TestFollowerRejoinBound(t *testing.T) {
	for _, tt := range []struct {
		max, down time.Duration
	}{
		{0, 300 * time.Millisecond},
		{0, 7 * time.Second},
		{0, 90 * time.Second},
		{2 * time.Second, 33 * time.Second},
		{300 * time.Millisecond, 5 * time.Second},
	} {
		cfg := folConfig()
		cfg.ReconnectMax = tt.max
		bound := cmp.Or(tt.max, DefaultReconnectMax)
		f := NewFollower(cfg, openStore(t, smallSeg), quiet)
		f.Start(t0)
		f.Ready()
		f.Dialed(t0, 3, nil)
		f.Gone(3) // the master stopped at t0 and listens again at t0+down
		back := t0.Add(tt.down)
		now := t0
		for {
			rd := f.Ready()
			if rd.RetryIn <= 0 || rd.RetryIn > bound {
				t.Fatalf("max %v: retry in %v, want in (0, %v]", tt.max, rd.RetryIn, bound)
			}
			now = now.Add(rd.RetryIn)
			f.Reconnect(now)
			if rd := f.Ready(); !rd.Dial {
				t.Fatal("the retry does not dial")
			}
			if !now.Before(back) {
				break
			}
			f.Dialed(now, 0, errDial)
		}
		if late := now.Sub(back); late > bound {
			t.Errorf("max %v, master away %v: dialed %v after it came back, want within %v", tt.max, tt.down, late, bound)
		}
	}
}

var errDial = dialError("refused")

type dialError string

func (e dialError) Error() string { return string(e) }

// transferSetup is a master, a slave and where the master's transfers to
// the slave start.
type transferSetup struct {
	master, slave *storage.Store
	from          int64 // where the transfers start
}

// transferCase is one TestFollowerTransfer case.
type transferCase struct {
	name  string
	setup func(t *testing.T) transferSetup
	// damage changes the first transfer's bytes.
	damage func(b []byte) []byte
	close  string // a substring of the close's reason; "" the link stays
	stop   bool   // replication stopped (no retry)
}

func transferCases() []transferCase {
	return []transferCase{
		{name: "empty log from the start", setup: func(t *testing.T) transferSetup {
			return transferSetup{master(t), openStore(t, smallSeg), 0}
		}},
		{name: "empty log starts at the master's offset", setup: func(t *testing.T) transferSetup {
			m := master(t)
			clean(t, m)
			return transferSetup{m, openStore(t, smallSeg), m.CommitLog().MinOffset()}
		}},
		{name: "log with a prefix", setup: func(t *testing.T) transferSetup {
			m, s := master(t), openStore(t, smallSeg)
			copyLog(t, m, s, boundary(t, m, smallSeg+3000))
			return transferSetup{m, s, s.CommitLog().MaxOffset()}
		}},
		{name: "transfer behind the log's end", close: "transfer at 0, log ends at", setup: func(t *testing.T) transferSetup {
			m, s := master(t), openStore(t, smallSeg)
			copyLog(t, m, s, boundary(t, m, 5000))
			return transferSetup{m, s, 0}
		}},
		{name: "transfer beyond the log's end", close: "log ends at", setup: func(t *testing.T) transferSetup {
			m, s := master(t), openStore(t, smallSeg)
			copyLog(t, m, s, boundary(t, m, 5000))
			return transferSetup{m, s, boundary(t, m, 10000)}
		}},
		{name: "empty log, transfer within a segment", close: "start the empty log at the master's offset", stop: true,
			setup: func(t *testing.T) transferSetup {
				m := master(t)
				return transferSetup{m, openStore(t, smallSeg), boundary(t, m, 1)}
			}},
		{name: "damaged bytes", close: "appending the master's bytes at 0", stop: true,
			damage: func(b []byte) []byte { b = bytes.Clone(b); b[100] ^= 1; return b },
			setup:  func(t *testing.T) transferSetup { return transferSetup{master(t), openStore(t, smallSeg), 0} }},
	}
}

// TestFollowerTransfer: a transfer at the log's end appends the master's
// bytes at the same offsets (an empty log starts where the master's
// does) and reports the new end; one out of step closes the link; bytes
// the log cannot take stop replication.
func TestFollowerTransfer(t *testing.T) {
	for _, tt := range transferCases() {
		t.Run(tt.name, func(t *testing.T) {
			su := tt.setup(t)
			m, s := su.master.CommitLog(), su.slave.CommitLog()
			before := s.MaxOffset()
			f := linked(t, su.slave, 3)
			var reqs []protocol.Request
			for off := su.from; off < m.MaxOffset(); {
				chunk, err := m.ReadRecords(off, 5000)
				if err != nil {
					t.Fatal(err)
				}
				if len(reqs) == 0 && tt.damage != nil {
					chunk = tt.damage(chunk)
				}
				reqs = append(reqs, &protocol.HATransferRequest{Offset: off, MasterMaxOffset: m.MaxOffset(), Data: chunk})
				off += int64(len(chunk))
			}
			f.Receive(t0, 3, reqs)
			rd := f.Ready()
			if tt.close != "" {
				if !strings.Contains(rd.Close, tt.close) || rd.Appended || len(rd.Sends) != 0 || s.MaxOffset() != before {
					t.Fatalf("close %q (want %q), appended %v, %d sends, log end %d (was %d)", rd.Close, tt.close, rd.Appended, len(rd.Sends), s.MaxOffset(), before)
				}
				f.Gone(3)
				f.Reconnect(t0)
				if rd := f.Ready(); rd.Dial == tt.stop || (rd.RetryIn != 0) == tt.stop {
					t.Fatalf("after the close (stopped %v): %+v", tt.stop, rd)
				}
				return
			}
			if rd.Close != "" || !rd.Appended || len(rd.Sends) != len(reqs) {
				t.Fatalf("close %q, appended %v, %d reports for %d transfers", rd.Close, rd.Appended, len(rd.Sends), len(reqs))
			}
			for i, req := range rd.Sends {
				tr := reqs[i].(*protocol.HATransferRequest)
				if rep := req.(*protocol.HAReportRequest); rep.MaxOffset != tr.Offset+int64(len(tr.Data)) {
					t.Fatalf("report %d says %d, the transfer ends at %d", i, rep.MaxOffset, tr.Offset+int64(len(tr.Data)))
				}
			}
			sameLog(t, su.master, su.slave)
			if s.MinOffset() != m.MinOffset() || f.MasterMaxOffset() != m.MaxOffset() {
				t.Fatalf("slave log from %d (master's from %d), master end heard %d", s.MinOffset(), m.MinOffset(), f.MasterMaxOffset())
			}
			// Its own queues and index follow from the copied records.
			if _, err := su.slave.Dispatch(s.MaxOffset(), nil); err != nil {
				t.Fatal(err)
			}
			if err := storage.Check(su.slave); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestFollowerRefuse: the master's refusal stops replication: no retry,
// no dial, until an operator acts.
func TestFollowerRefuse(t *testing.T) {
	f := linked(t, openStore(t, smallSeg), 3)
	f.Receive(t0, 3, []protocol.Request{&protocol.HARefuseRequest{Reason: "the logs diverged"}})
	f.Ready()
	if !strings.Contains(f.Status(), "the logs diverged") {
		t.Fatalf("status %q", f.Status())
	}
	f.Gone(3)
	f.Reconnect(t0)
	f.Start(t0)
	if rd := f.Ready(); rd.Dial || rd.RetryIn != 0 {
		t.Fatalf("a refused slave retries: %+v", rd)
	}
}

// TestFollowerRefuseNotMaster: a broker that is not a master (yet)
// refuses with NotMaster: the slave dials it again after the backoff.
func TestFollowerRefuseNotMaster(t *testing.T) {
	f := linked(t, openStore(t, smallSeg), 3)
	f.Receive(t0, 3, []protocol.Request{&protocol.HARefuseRequest{Reason: "broker b is a slave", NotMaster: true}})
	f.Ready()
	if !strings.Contains(f.Status(), "not a master") {
		t.Fatalf("status %q", f.Status())
	}
	f.Gone(3)
	if rd := f.Ready(); rd.RetryIn <= 0 {
		t.Fatalf("no retry after a NotMaster refusal: %+v", rd)
	}
	f.Reconnect(t0)
	if rd := f.Ready(); !rd.Dial {
		t.Fatalf("no dial on the retry: %+v", rd)
	}
}

// TestFollowerTick: the heartbeat reports (acknowledging) and asks for
// the offsets export every MetadataInterval; a master silent for
// HousekeepingInterval gets its link closed.
func TestFollowerTick(t *testing.T) {
	cfg := folConfig()
	hk, mi := cfg.HousekeepingInterval, cfg.MetadataInterval
	f := NewFollower(cfg, openStore(t, smallSeg), quiet)
	f.Tick(t0)
	if rd := f.Ready(); len(rd.Sends) != 0 || rd.ExportOffsets || rd.Close != "" {
		t.Fatalf("tick without a link: %+v", rd)
	}
	f = linked(t, openStore(t, smallSeg), 3)
	steps := []struct {
		at     time.Duration
		heard  bool // the master sends something first
		export bool
		close  bool
	}{
		{at: 0, export: true},
		{at: mi - 1},
		{at: mi, export: true},
		{at: hk, heard: true, export: true},
		{at: 2 * hk, export: true}, // silent for exactly hk
		{at: 2*hk + mi + 1, heard: true, export: true},
		{at: 3*hk + mi + 2, close: true}, // silent beyond hk
	}
	for _, s := range steps {
		now := t0.Add(s.at)
		if s.heard {
			f.Receive(now, 3, []protocol.Request{&protocol.HAMetadataRequest{Kind: "topics", Data: []byte("{}")}})
			if rd := f.Ready(); len(rd.Imports) != 1 || rd.Imports[0].Kind != "topics" {
				t.Fatalf("at %v: imports %v", s.at, rd.Imports)
			}
		}
		f.Tick(now)
		rd := f.Ready()
		if rd.ExportOffsets != s.export || (rd.Close != "") != s.close || len(rd.Sends) != map[bool]int{false: 1, true: 0}[s.close] {
			t.Fatalf("at %v: export %v close %q sends %d; want export %v close %v", s.at, rd.ExportOffsets, rd.Close, len(rd.Sends), s.export, s.close)
		}
		if !s.close {
			reported(t, rd.Sends)
		}
	}
}

// TestFollowerStop: Stop closes the link for good.
func TestFollowerStop(t *testing.T) {
	f := NewFollower(folConfig(), openStore(t, smallSeg), quiet)
	f.Stop("no longer a slave")
	f.Start(t0)
	if rd := f.Ready(); rd.Dial || rd.Close != "" {
		t.Fatalf("stopped without a link: %+v", rd)
	}
	f = linked(t, openStore(t, smallSeg), 3)
	f.Stop("no longer a slave")
	if rd := f.Ready(); rd.Close != "no longer a slave" {
		t.Fatalf("stop: %+v", rd)
	}
	f.Gone(3)
	f.Reconnect(t0)
	if rd := f.Ready(); rd.Dial || rd.RetryIn != 0 {
		t.Fatalf("a stopped follower retries: %+v", rd)
	}
}

// TestFollowerOtherConnection: only the link's requests count.
func TestFollowerOtherConnection(t *testing.T) {
	m, s := master(t), openStore(t, smallSeg)
	f := linked(t, s, 3)
	chunk, _ := m.CommitLog().ReadRecords(0, 5000)
	f.Receive(t0, 4, []protocol.Request{&protocol.HATransferRequest{Data: chunk},
		&protocol.HARefuseRequest{Reason: "not the link"}})
	if rd := f.Ready(); len(rd.Sends) != 0 || rd.Close != "" || rd.Appended || s.CommitLog().MaxOffset() != 0 {
		t.Fatalf("another connection's requests: %+v", rd)
	}
	if strings.Contains(f.Status(), "refused") {
		t.Fatalf("status %q", f.Status())
	}
}

// TestFollowerHeartbeat: a transfer of no bytes is the master's heartbeat.
// It keeps the link (a tick HousekeepingInterval after the last bytes but
// within it of the heartbeat does not close), it is not reported on (a
// report would be answered by another heartbeat), and it moves neither the
// log nor the confirm offset heard.
func TestFollowerHeartbeat(t *testing.T) {
	st := openStore(t, smallSeg)
	f := linked(t, st, 3)
	hk := folConfig().HousekeepingInterval
	beat := &protocol.HATransferRequest{Offset: 0, MasterMaxOffset: 5000, Epoch: 4, ConfirmOffset: 5000}
	f.Receive(t0.Add(hk/2), 3, []protocol.Request{beat})
	if rd := f.Ready(); len(rd.Sends) != 0 || rd.Appended || rd.Close != "" {
		t.Fatalf("a heartbeat: %d sends, appended %v, close %q", len(rd.Sends), rd.Appended, rd.Close)
	}
	if st.CommitLog().MaxOffset() != 0 || f.HeardConfirm() != 0 {
		t.Fatalf("a heartbeat moved the log to %d, the confirm heard to %d", st.CommitLog().MaxOffset(), f.HeardConfirm())
	}
	f.Tick(t0.Add(hk + 1))
	if rd := f.Ready(); rd.Close != "" {
		t.Fatalf("closed %q although the master was heard %v ago", rd.Close, hk/2+1)
	}
	f.Tick(t0.Add(hk/2 + hk + 1))
	if rd := f.Ready(); rd.Close == "" {
		t.Fatal("kept a link the master was silent on beyond HousekeepingInterval")
	}
}
