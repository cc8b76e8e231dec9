package ha

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

func replConfig() ReplicatorConfig {
	return ReplicatorConfig{MaxGapNotInSync: 1 << 20, TransferBatchSize: 32 << 10,
		HousekeepingInterval: 20 * time.Second, MetadataInterval: 10 * time.Second}
}

// master is a master's store of about four small segments.
func master(t testing.TB) *storage.Store {
	st := openStore(t, smallSeg)
	fill(t, st, 1, 60, 1000)
	return st
}

// firstReportCase is a master and a new slave's first report.
type firstReportCase struct {
	name    string
	catchUp bool
	// setup returns the master and the slave's first report.
	setup func(t *testing.T) (*storage.Store, *protocol.HAReportRequest)
	start func(m *storage.CommitLog) int64 // where streaming starts
	// refused: a substring of the reason the slave is refused with.
	refused string
}

func lastSeg(m *storage.CommitLog) int64 { return m.MaxOffset() - m.MaxOffset()%m.SegmentSize() }

func firstReportCases() []firstReportCase { return append(acceptedCases(), refusedCases()...) }

// acceptedCases are slaves whose logs are prefixes of the master's.
func acceptedCases() []firstReportCase {
	return []firstReportCase{
		{name: "empty slave starts at the master's first offset",
			setup: func(t *testing.T) (*storage.Store, *protocol.HAReportRequest) {
				return master(t), reportOf(t, openStore(t, smallSeg))
			},
			start: func(m *storage.CommitLog) int64 { return 0 }},
		{name: "empty slave starts at the earliest retained offset",
			setup: func(t *testing.T) (*storage.Store, *protocol.HAReportRequest) {
				m := master(t)
				clean(t, m)
				return m, reportOf(t, openStore(t, smallSeg))
			},
			start: func(m *storage.CommitLog) int64 { return m.MinOffset() }},
		{name: "empty slave catches up from the last segment", catchUp: true,
			setup: func(t *testing.T) (*storage.Store, *protocol.HAReportRequest) {
				return master(t), reportOf(t, openStore(t, smallSeg))
			},
			start: lastSeg},
		{name: "matching prefix resumes at its end",
			setup: func(t *testing.T) (*storage.Store, *protocol.HAReportRequest) {
				m, s := master(t), openStore(t, smallSeg)
				copyLog(t, m, s, boundary(t, m, 2*smallSeg+5000))
				return m, reportOf(t, s)
			},
			start: func(m *storage.CommitLog) int64 { return -1 }}, // the slave's end
		{name: "matching prefix of less than the compared tail", catchUp: true,
			setup: func(t *testing.T) (*storage.Store, *protocol.HAReportRequest) {
				m, s := master(t), openStore(t, smallSeg)
				copyLog(t, m, s, boundary(t, m, 1))
				return m, reportOf(t, s)
			},
			start: func(m *storage.CommitLog) int64 { return -1 }},
		{name: "slave as long as the master gets nothing yet",
			setup: func(t *testing.T) (*storage.Store, *protocol.HAReportRequest) {
				m, s := master(t), openStore(t, smallSeg)
				copyLog(t, m, s, m.CommitLog().MaxOffset())
				return m, reportOf(t, s)
			},
			start: func(m *storage.CommitLog) int64 { return m.MaxOffset() }},
		{name: "slave ending at the master's earliest offset",
			setup: func(t *testing.T) (*storage.Store, *protocol.HAReportRequest) {
				m, s := master(t), openStore(t, smallSeg)
				copyLog(t, m, s, lastSeg(m.CommitLog()))
				clean(t, m)
				return m, reportOf(t, s)
			},
			start: func(m *storage.CommitLog) int64 { return m.MinOffset() }},
	}
}

// refusedCases are slaves the master must refuse.
func refusedCases() []firstReportCase {
	return []firstReportCase{
		{name: "brokerId 0 is a master's", refused: "brokerId 0 is not a slave's",
			setup: func(t *testing.T) (*storage.Store, *protocol.HAReportRequest) {
				r := reportOf(t, openStore(t, smallSeg))
				r.BrokerID = 0
				return master(t), r
			}},
		{name: "negative brokerId", refused: "brokerId -3 is not a slave's",
			setup: func(t *testing.T) (*storage.Store, *protocol.HAReportRequest) {
				r := reportOf(t, openStore(t, smallSeg))
				r.BrokerID = -3
				return master(t), r
			}},
		{name: "different segment size", refused: "slave mappedFileSizeCommitLog 32768 differs from the master's 16384",
			setup: func(t *testing.T) (*storage.Store, *protocol.HAReportRequest) {
				return master(t), reportOf(t, openStore(t, 2*smallSeg))
			}},
		{name: "slave longer than the master", refused: "is longer than the master's",
			setup: func(t *testing.T) (*storage.Store, *protocol.HAReportRequest) {
				m, s := master(t), openStore(t, smallSeg)
				copyLog(t, m, s, m.CommitLog().MaxOffset())
				fill(t, s, 2, 1, 10)
				return m, reportOf(t, s)
			}},
		{name: "slave ending before the master's earliest offset", refused: "before the master's earliest retained offset",
			setup: func(t *testing.T) (*storage.Store, *protocol.HAReportRequest) {
				m, s := master(t), openStore(t, smallSeg)
				copyLog(t, m, s, boundary(t, m, smallSeg+1))
				clean(t, m)
				return m, reportOf(t, s)
			}},
		{name: "diverged tail", refused: "differ from the master's: the logs diverged",
			setup: func(t *testing.T) (*storage.Store, *protocol.HAReportRequest) {
				s := openStore(t, smallSeg)
				fill(t, s, 99, 30, 1000) // the same sizes, other bytes
				return master(t), reportOf(t, s)
			}},
		{name: "diverged in the last record only", refused: "the logs diverged",
			setup: func(t *testing.T) (*storage.Store, *protocol.HAReportRequest) {
				m, s := master(t), openStore(t, smallSeg)
				copyLog(t, m, s, boundary(t, m, 3*smallSeg+1))
				s2 := openStore(t, smallSeg)
				copyLog(t, m, s2, 3*smallSeg)
				fill(t, s2, 7, 1, 1000) // where the master's record is, another
				r := reportOf(t, s2)
				if r.MaxOffset != s.CommitLog().MaxOffset() {
					t.Fatalf("the diverged slave ends at %d, the master's record at %d", r.MaxOffset, s.CommitLog().MaxOffset())
				}
				return m, r
			}},
	}
}

// TestFirstReport: a new slave's first report decides where streaming
// starts, or refuses the slave with HARefuse and a close, both with the
// reason.
func TestFirstReport(t *testing.T) {
	for _, tt := range firstReportCases() {
		t.Run(tt.name, func(t *testing.T) {
			m, rep := tt.setup(t)
			cfg := replConfig()
			cfg.CatchUpFromLastSegment = tt.catchUp
			r := NewReplicator(cfg, m.CommitLog(), quiet)
			r.Report(t0, 5, "slave:1", rep)
			rd := r.Ready()
			acked, _ := r.Acked(nil)
			if tt.refused != "" {
				checkRefused(t, rd, 5, tt.refused)
				if len(acked) != 0 {
					t.Fatalf("refused slave still counted: acked %v", acked)
				}
				return
			}
			start := tt.start(m.CommitLog())
			if start < 0 {
				start = rep.MaxOffset
			}
			if len(rd.Closes) != 0 || !rd.Progress {
				t.Fatalf("accepted slave: closes %v, progress %v", rd.Closes, rd.Progress)
			}
			if !reflect.DeepEqual(acked, []int64{start}) {
				t.Fatalf("acked %v, want [%d]", acked, start)
			}
			trs := transfers(t, rd.Sends, 5)
			switch {
			case start == m.CommitLog().MaxOffset() && len(trs) != 0:
				t.Fatalf("%d transfers to a slave that has everything", len(trs))
			case start < m.CommitLog().MaxOffset() && (len(trs) == 0 || trs[0].Offset != start):
				t.Fatalf("streaming does not start at %d: %d transfers", start, len(trs))
			}
			contiguous(t, trs, start)
		})
	}
}

func checkRefused(t *testing.T, rd ReplicatorReady, id uint64, want string) {
	t.Helper()
	if len(rd.Sends) != 1 || len(rd.Closes) != 1 {
		t.Fatalf("refusal: %d sends, %d closes; want one HARefuse and one close", len(rd.Sends), len(rd.Closes))
	}
	ref, ok := rd.Sends[0].Req.(*protocol.HARefuseRequest)
	if !ok || rd.Sends[0].Peer != id {
		t.Fatalf("refusal sends %T to %d", rd.Sends[0].Req, rd.Sends[0].Peer)
	}
	if !strings.Contains(ref.Reason, want) {
		t.Fatalf("refused with %q, want %q in it", ref.Reason, want)
	}
	if rd.Closes[0] != (Close{Peer: id, Reason: ref.Reason}) {
		t.Fatalf("close %+v, want peer %d closed with the refusal's reason", rd.Closes[0], id)
	}
}

// TestWindow: at most Window bytes go unacknowledged (plus the transfer
// that crosses it), streaming resumes as acknowledgements come, and stops
// at the log's end until it grows.
func TestWindow(t *testing.T) {
	m := openStore(t, bigSeg)
	fill(t, m, 3, 100, 60<<10) // about 6 MiB in 7 segments
	cfg := replConfig()
	cfg.TransferBatchSize = 128 << 10
	r := NewReplicator(cfg, m.CommitLog(), quiet)
	r.Report(t0, 1, "s", reportOf(t, openStore(t, bigSeg)))
	end := m.CommitLog().MaxOffset()
	sent := contiguous(t, transfers(t, r.Ready().Sends, 1), 0)
	if sent < Window || sent >= Window+int64(cfg.TransferBatchSize) {
		t.Fatalf("first burst sent %d bytes; want the window %d, at most one batch beyond", sent, Window)
	}
	// A report that acknowledges nothing new sends nothing.
	r.Report(t0, 1, "s", ack(0))
	if trs := transfers(t, r.Ready().Sends, 1); len(trs) != 0 {
		t.Fatalf("%d transfers beyond the window", len(trs))
	}
	acked := int64(0)
	for sent < end {
		acked = (acked + sent) / 2 // part of what is in flight
		r.Report(t0, 1, "s", ack(acked))
		trs := transfers(t, r.Ready().Sends, 1)
		next := contiguous(t, trs, sent)
		if next-acked > Window+int64(cfg.TransferBatchSize) || (next < end && next-acked < Window) {
			t.Fatalf("acked %d: sent up to %d (%d in flight), window %d", acked, next, next-acked, Window)
		}
		for _, tr := range trs {
			if len(tr.Data) > cfg.TransferBatchSize || tr.MasterMaxOffset != end {
				t.Fatalf("transfer of %d bytes (batch %d), master end %d (want %d)", len(tr.Data), cfg.TransferBatchSize, tr.MasterMaxOffset, end)
			}
		}
		sent = next
	}
	if sent != end {
		t.Fatalf("sent up to %d, the log ends at %d", sent, end)
	}
	r.Appended() // nothing new
	if rd := r.Ready(); len(rd.Sends) != 0 {
		t.Fatalf("%d sends with nothing to send", len(rd.Sends))
	}
	r.Report(t0, 1, "s", ack(end))
	r.Ready()
	fill(t, m, 4, 2, 100)
	r.Appended()
	if next := contiguous(t, transfers(t, r.Ready().Sends, 1), end); next != m.CommitLog().MaxOffset() {
		t.Fatalf("after an append sent up to %d, the log ends at %d", next, m.CommitLog().MaxOffset())
	}
}

// TestTransferBatchSize: a transfer holds whole records up to the batch
// size (at least 4 KiB, and at least one record), never crossing a
// segment.
func TestTransferBatchSize(t *testing.T) {
	tests := []struct {
		batch, body int
		max         int // the largest transfer allowed
	}{
		{batch: 0, body: 1000, max: 4 << 10},
		{batch: 100, body: 1000, max: 4 << 10},
		{batch: 10 << 10, body: 1000, max: 10 << 10},
		{batch: 64 << 10, body: 1000, max: smallSeg},
		{batch: 4 << 10, body: 3500, max: 3500 + 200}, // one record each
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("batch %d body %d", tt.batch, tt.body), func(t *testing.T) {
			m := openStore(t, smallSeg)
			fill(t, m, 5, 30, tt.body)
			cfg := replConfig()
			cfg.TransferBatchSize = tt.batch
			r := NewReplicator(cfg, m.CommitLog(), quiet)
			r.Report(t0, 1, "s", reportOf(t, openStore(t, smallSeg)))
			trs := transfers(t, r.Ready().Sends, 1)
			if end := contiguous(t, trs, 0); end != m.CommitLog().MaxOffset() {
				t.Fatalf("sent up to %d, the log ends at %d", end, m.CommitLog().MaxOffset())
			}
			for _, tr := range trs {
				end := tr.Offset + int64(len(tr.Data))
				if len(tr.Data) > tt.max || tr.Offset/smallSeg != (end-1)/smallSeg {
					t.Fatalf("transfer [%d, %d): want at most %d bytes within a segment", tr.Offset, end, tt.max)
				}
				if end%smallSeg == 0 || end == m.CommitLog().MaxOffset() {
					continue
				}
				// Full: the next record would not have fitted.
				if next := boundary(t, m, end+1) - end; len(tr.Data)+int(next) <= tt.max {
					t.Fatalf("transfer [%d, %d) left out the next record of %d bytes (max %d)", tr.Offset, end, next, tt.max)
				}
			}
		})
	}
}

// TestAckBeyondSent: a slave acknowledging bytes it was never sent is
// refused.
func TestAckBeyondSent(t *testing.T) {
	m := master(t)
	r := NewReplicator(replConfig(), m.CommitLog(), quiet)
	r.Report(t0, 1, "s", reportOf(t, openStore(t, smallSeg)))
	end := contiguous(t, transfers(t, r.Ready().Sends, 1), 0)
	r.Report(t0, 1, "s", ack(end))
	if rd := r.Ready(); len(rd.Sends)+len(rd.Closes) != 0 {
		t.Fatalf("an ack of what was sent: %v", rd)
	}
	r.Report(t0, 1, "s", ack(end+1))
	rd := r.Ready()
	checkRefused(t, rd, 1, fmt.Sprintf("acknowledged offset %d, but only %d was sent", end+1, end))
	if !rd.Progress {
		t.Fatal("a refused slave left the acked offsets as they were")
	}
	if acked, n := r.Acked(nil); len(acked) != 0 || n != 0 {
		t.Fatalf("refused slave still counted: %v, %d in sync", acked, n)
	}
}

// TestClosingIgnored: reports still in flight on a connection the master
// refused or closed are ignored until the connection is gone: a refused
// slave does not start over as a new one on the same connection.
func TestClosingIgnored(t *testing.T) {
	m := master(t)
	cfg := replConfig()
	r := NewReplicator(cfg, m.CommitLog(), quiet)
	empty := reportOf(t, openStore(t, smallSeg))
	bad := *empty
	bad.BrokerID = 0
	r.Report(t0, 1, "s", &bad)  // refused ...
	r.Report(t0, 1, "s", empty) // ... and the next report in its burst too
	checkRefused(t, r.Ready(), 1, "brokerId 0")
	r.Report(t0, 2, "s", empty)
	end := contiguous(t, transfers(t, r.Ready().Sends, 2), 0)
	r.Tick(t0.Add(cfg.HousekeepingInterval + 1)) // closes 2
	r.Report(t0.Add(cfg.HousekeepingInterval+2), 2, "s", ack(end))
	if rd := r.Ready(); len(rd.Closes) != 1 || len(rd.Sends) != 0 {
		t.Fatalf("a report after the close: %+v", rd)
	}
	if acked, _ := r.Acked(nil); len(acked) != 0 {
		t.Fatalf("closed slaves counted: %v", acked)
	}
	r.Gone(1)
	r.Report(t0, 1, "s", empty) // once gone, an id is new again
	if acked, _ := r.Acked(nil); len(acked) != 1 {
		t.Fatalf("a new slave on a gone connection's id: acked %v", acked)
	}
}

// connect makes ids new slaves that have the master's whole log.
func connect(t *testing.T, r *Replicator, m *storage.Store, now time.Time, ids ...uint64) {
	t.Helper()
	s := openStore(t, smallSeg)
	copyLog(t, m, s, m.CommitLog().MaxOffset())
	rep := reportOf(t, s)
	for _, id := range ids {
		r.Report(now, id, fmt.Sprint("slave:", id), rep)
	}
	if rd := r.Ready(); len(rd.Sends)+len(rd.Closes) != 0 {
		t.Fatalf("up-to-date slaves: %v", rd)
	}
}

func TestGone(t *testing.T) {
	m := master(t)
	r := NewReplicator(replConfig(), m.CommitLog(), quiet)
	connect(t, r, m, t0, 1, 2)
	r.Gone(3) // never a slave
	if rd := r.Ready(); rd.Progress {
		t.Fatal("an unknown connection's close changed the progress")
	}
	r.Gone(1)
	if rd := r.Ready(); !rd.Progress || len(rd.Closes) != 0 {
		t.Fatalf("gone slave: %+v", rd)
	}
	if infos := r.Slaves(); len(infos) != 1 || infos[0].Address != "slave:2" {
		t.Fatalf("slaves after one is gone: %+v", infos)
	}
}

// TestTick: housekeeping closes slaves silent for HousekeepingInterval;
// metadata is due every MetadataInterval while there are slaves.
func TestTick(t *testing.T) {
	m := master(t)
	cfg := replConfig()
	r := NewReplicator(cfg, m.CommitLog(), quiet)
	r.Tick(t0)
	if rd := r.Ready(); rd.Metadata || len(rd.Closes) != 0 {
		t.Fatalf("no slaves: %+v", rd)
	}
	connect(t, r, m, t0, 1, 2)
	hk, mi := cfg.HousekeepingInterval, cfg.MetadataInterval
	end := m.CommitLog().MaxOffset()
	steps := []struct {
		at       time.Duration
		report   uint64 // a slave that reports first (0: none)
		metadata bool
		closes   []uint64
	}{
		{at: 0, metadata: true},
		{at: mi - 1},
		{at: mi, report: 2, metadata: true},
		{at: hk, metadata: true},               // slave 1 silent for exactly hk: kept
		{at: hk + 1, closes: []uint64{1}},      // slave 1 silent beyond hk
		{at: mi + hk, metadata: true},          // slave 2, heard at mi, kept
		{at: mi + hk + 1, closes: []uint64{2}}, // and now closed: no metadata
		{at: 10 * mi},                          // no slaves: no metadata
	}
	for _, s := range steps {
		now := t0.Add(s.at)
		if s.report != 0 {
			r.Report(now, s.report, "", ack(end))
			r.Ready()
		}
		r.Tick(now)
		rd := r.Ready()
		var closed []uint64
		for _, c := range rd.Closes {
			if c.Reason != "no report within haHousekeepingInterval" {
				t.Fatalf("at %v: close %+v", s.at, c)
			}
			closed = append(closed, c.Peer)
		}
		if rd.Metadata != s.metadata || !reflect.DeepEqual(closed, s.closes) || !rd.Progress {
			t.Fatalf("at %v: metadata %v closes %v progress %v; want metadata %v closes %v",
				s.at, rd.Metadata, closed, rd.Progress, s.metadata, s.closes)
		}
	}
}

// TestHeartbeat: a tick sends a transfer of no bytes, at the next offset
// to send and in its epoch, to every slave nothing was streamed to since
// the previous tick, so that an idle master is heard within
// haHousekeepingInterval; a slave that was streamed to gets none.
func TestHeartbeat(t *testing.T) {
	m := master(t)
	r := NewReplicator(replConfig(), m.CommitLog(), quiet)
	connect(t, r, m, t0, 1, 2)
	end := m.CommitLog().MaxOffset()
	beats := func(at time.Duration) map[uint64]*protocol.HATransferRequest {
		r.Tick(t0.Add(at))
		got := map[uint64]*protocol.HATransferRequest{}
		for _, s := range r.Ready().Sends {
			tr, ok := s.Req.(*protocol.HATransferRequest)
			if !ok || len(tr.Data) != 0 || got[s.Peer] != nil {
				t.Fatalf("at %v: a tick sent %T (%d bytes) to %d", at, s.Req, len(tr.Data), s.Peer)
			}
			got[s.Peer] = tr
		}
		return got
	}
	hb := beats(time.Second)
	for _, id := range []uint64{1, 2} {
		if tr := hb[id]; tr == nil || tr.Offset != end || tr.MasterMaxOffset != end || tr.Epoch != lastEpoch(r.epochs()).Epoch {
			t.Fatalf("idle slave %d: heartbeat %+v, want one at the log's end %d", id, tr, end)
		}
	}
	fill(t, m, 9, 1, 100)
	r.Appended()
	if sends := r.Ready().Sends; len(sends) != 2 {
		t.Fatalf("an append sent %d requests to two slaves", len(sends))
	}
	if hb := beats(2 * time.Second); len(hb) != 0 {
		t.Fatalf("heartbeats to slaves streamed to since the last tick: %v", hb)
	}
	if hb := beats(3 * time.Second); len(hb) != 2 || hb[1].Offset != m.CommitLog().MaxOffset() {
		t.Fatalf("idle again: heartbeats %v, want two at %d", hb, m.CommitLog().MaxOffset())
	}
}

// TestAcked: every slave's acknowledged offset in connection order, and
// how many are within MaxGapNotInSync of the log's end.
func TestAcked(t *testing.T) {
	m := master(t)
	end := m.CommitLog().MaxOffset()
	var bounds []int64 // record ends
	for off := int64(0); off < end; {
		off = boundary(t, m, off+1)
		bounds = append(bounds, off)
	}
	edgeOff, farOff := bounds[len(bounds)-10], bounds[len(bounds)-11]
	cfg := replConfig()
	cfg.MaxGapNotInSync = end - edgeOff // edge is exactly the gap behind
	r := NewReplicator(cfg, m.CommitLog(), quiet)
	if acked, n := r.Acked(nil); len(acked) != 0 || n != 0 {
		t.Fatalf("no slaves: %v, %d", acked, n)
	}
	behind := func(to int64) *protocol.HAReportRequest {
		s := openStore(t, smallSeg)
		copyLog(t, m, s, to)
		return reportOf(t, s)
	}
	reps := map[uint64]*protocol.HAReportRequest{9: behind(end), 4: behind(edgeOff), 7: behind(farOff), 2: behind(0)}
	for id, rep := range reps {
		r.Report(t0, id, fmt.Sprint("slave:", id), rep)
	}
	r.Ready()
	acked, n := r.Acked(make([]int64, 0, 4))
	if want := []int64{0, edgeOff, farOff, end}; !reflect.DeepEqual(acked, want) || n != 2 { // ids 2, 4, 7, 9
		t.Fatalf("acked %v, %d in sync; want %v, 2 in sync (gap %d)", acked, n, want, cfg.MaxGapNotInSync)
	}
	infos := r.Slaves()
	if len(infos) != 4 || infos[1].Address != "slave:4" || !infos[1].InSync || infos[2].InSync || infos[2].LagBytes != end-farOff {
		t.Fatalf("slaves %+v", infos)
	}
	// The lagging ones are in sync once they acknowledge what they were
	// sent; an older report does not move an acknowledgement back.
	r.Report(t0, 7, "", ack(end))
	r.Report(t0, 2, "", ack(edgeOff))
	r.Report(t0, 9, "", ack(farOff))
	if rd := r.Ready(); !rd.Progress || len(rd.Closes) != 0 {
		t.Fatalf("acks: %+v", rd)
	}
	if acked, n = r.Acked(acked[:0]); !reflect.DeepEqual(acked, []int64{edgeOff, edgeOff, end, end}) || n != 4 {
		t.Fatalf("after acks: acked %v, %d in sync", acked, n)
	}
}

// TestBroadcastAndCloseAll: metadata goes to every slave; CloseAll closes
// every slave with the reason and forgets them.
func TestBroadcastAndCloseAll(t *testing.T) {
	m := master(t)
	r := NewReplicator(replConfig(), m.CommitLog(), quiet)
	r.Broadcast(&protocol.HAMetadataRequest{Kind: "topics"})
	if rd := r.Ready(); len(rd.Sends) != 0 {
		t.Fatalf("broadcast to no slaves sent %d", len(rd.Sends))
	}
	connect(t, r, m, t0, 8, 3, 5)
	req := &protocol.HAMetadataRequest{Kind: "topics", Data: []byte("{}")}
	r.Broadcast(req)
	rd := r.Ready()
	want := []Send{{3, req}, {5, req}, {8, req}}
	if !reflect.DeepEqual(rd.Sends, want) {
		t.Fatalf("broadcast sends %v, want %v", rd.Sends, want)
	}
	r.CloseAll("role changed")
	rd = r.Ready()
	if !reflect.DeepEqual(rd.Closes, []Close{{3, "role changed"}, {5, "role changed"}, {8, "role changed"}}) || !rd.Progress {
		t.Fatalf("close all: %+v", rd)
	}
	if acked, _ := r.Acked(nil); len(acked) != 0 {
		t.Fatalf("closed slaves still counted: %v", acked)
	}
}

// TestSendOrder: sends across slaves come in connection order whatever
// the map's order, so the simulator replays a seed exactly.
func TestSendOrder(t *testing.T) {
	for run := 0; run < 8; run++ {
		m := master(t)
		r := NewReplicator(replConfig(), m.CommitLog(), quiet)
		ids := []uint64{17, 3, 11, 5, 2, 13}
		connect(t, r, m, t0, ids...)
		fill(t, m, int64(run), 3, 100)
		r.Appended()
		var got []uint64
		for _, s := range r.Ready().Sends {
			got = append(got, s.Peer)
		}
		if want := []uint64{2, 3, 5, 11, 13, 17}; !reflect.DeepEqual(got, want) {
			t.Fatalf("run %d: sends to %v, want %v", run, got, want)
		}
		r.Tick(t0.Add(time.Hour))
		var closed []uint64
		for _, c := range r.Ready().Closes {
			closed = append(closed, c.Peer)
		}
		if want := []uint64{2, 3, 5, 11, 13, 17}; !reflect.DeepEqual(closed, want) {
			t.Fatalf("run %d: closes %v, want %v", run, closed, want)
		}
	}
}
