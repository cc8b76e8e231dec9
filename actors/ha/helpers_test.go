package ha

import (
	"bytes"
	"fmt"
	"log/slog"
	"math/rand"
	"net/netip"
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
	"github.com/wharfmq/wharf/storage/vfs"
)

var (
	t0    = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	quiet = slog.New(slog.DiscardHandler)
	host  = netip.MustParseAddrPort("10.0.0.1:10911")
)

const (
	smallSeg = 16 << 10 // most tests: segments of a few records
	bigSeg   = 1 << 20  // window tests: more than Window in a few segments
)

// openStore opens an empty store with segments of segSize bytes on its
// own in-memory FS.
func openStore(t testing.TB, segSize int64) *storage.Store {
	t.Helper()
	cfg := storage.DefaultConfig("/store")
	cfg.MappedFileSizeCommitLog = segSize
	cfg.MappedFileSizeConsumeQueue = 32 << 10
	cfg.MaxMessageSize = int(min(segSize/4, 256<<10))
	cfg.MaxHashSlotNum = 16
	cfg.MaxIndexNum = 64
	cfg.StoreHost = host
	st, rep, err := storage.Open(vfs.NewMem(), cfg)
	if err != nil {
		t.Fatalf("open store: %v (report %v)", err, rep)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// fill appends n messages with bodies of size bytes (0: random sizes up
// to 2000), their content drawn from seed.
func fill(t testing.TB, st *storage.Store, seed int64, n, size int) {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	for i := 0; i < n; i++ {
		sz := size
		if sz == 0 {
			sz = 1 + rng.Intn(2000)
		}
		body := make([]byte, sz)
		rng.Read(body)
		m := &storage.Message{Topic: "t", QueueID: int32(i % 3), Body: body, BornTimestamp: t0.UnixMilli(), BornHost: host}
		out, err := st.AppendBatch([]*storage.Message{m}, t0.UnixMilli()+int64(i), nil)
		if err != nil || out[0].Err != nil {
			t.Fatalf("append %d: %v %v", i, err, out)
		}
	}
}

// copyLog appends the master's bytes [slave end, upTo) to the slave, as
// replication would: the slave's log becomes a prefix of the master's.
func copyLog(t testing.TB, master, slave *storage.Store, upTo int64) {
	t.Helper()
	m, s := master.CommitLog(), slave.CommitLog()
	for off := s.MaxOffset(); off < upTo; {
		chunk, err := m.ReadRecords(off, int(upTo-off))
		if err != nil || len(chunk) == 0 {
			t.Fatalf("read the master's records at %d: %v", off, err)
		}
		if err := s.AppendRaw(off, chunk); err != nil {
			t.Fatalf("append the master's records at %d: %v", off, err)
		}
		off += int64(len(chunk))
	}
}

// boundary is the first record boundary at or after off in st's log.
func boundary(t testing.TB, st *storage.Store, off int64) int64 {
	t.Helper()
	cl := st.CommitLog()
	p := off - off%cl.SegmentSize()
	for p < off {
		chunk, err := cl.ReadRecords(p, 1)
		if err != nil || len(chunk) == 0 {
			t.Fatalf("no record at %d: %v", p, err)
		}
		p += int64(len(chunk))
	}
	return p
}

// clean deletes every segment of st but the last (retention, forced).
func clean(t testing.TB, st *storage.Store) {
	t.Helper()
	if _, err := st.Clean(t0.Add(1000*time.Hour), true); err != nil {
		t.Fatal(err)
	}
	if st.CommitLog().MinOffset() == 0 {
		t.Fatal("retention deleted nothing")
	}
}

// sameLog fails unless the slave's log ends where the master's does and
// every byte it holds is the master's at the same offset.
func sameLog(t testing.TB, master, slave *storage.Store) {
	t.Helper()
	if err := diffLog(master.CommitLog(), slave.CommitLog()); err != nil {
		t.Fatal(err)
	}
}

func diffLog(m, s *storage.CommitLog) error {
	if s.MaxOffset() != m.MaxOffset() {
		return fmt.Errorf("the slave's log ends at %d, the master's at %d", s.MaxOffset(), m.MaxOffset())
	}
	for off := s.MinOffset(); off < s.MaxOffset(); {
		n := int(min(off-off%s.SegmentSize()+s.SegmentSize(), s.MaxOffset()) - off)
		a, err := m.Read(off, n)
		if err != nil {
			return fmt.Errorf("master: %w", err)
		}
		b, err := s.Read(off, n)
		if err != nil {
			return fmt.Errorf("slave: %w", err)
		}
		if !bytes.Equal(a, b) {
			return fmt.Errorf("the logs differ in [%d, %d)", off, off+int64(n))
		}
		off += int64(n)
	}
	return nil
}

// reportOf is the report a Follower over st sends when its link opens.
func reportOf(t testing.TB, st *storage.Store) *protocol.HAReportRequest {
	t.Helper()
	f := NewFollower(FollowerConfig{BrokerName: "b", BrokerID: 1, MasterAddr: "master:10912"}, st, quiet)
	f.Start(t0)
	f.Ready()
	f.Dialed(t0, 1, nil)
	rd := f.Ready()
	if len(rd.Sends) != 1 {
		t.Fatalf("a new link sent %d requests, want one report", len(rd.Sends))
	}
	return rd.Sends[0].(*protocol.HAReportRequest)
}

// transfers returns the transfers among sends, failing on anything else
// or a send to another peer than id.
func transfers(t testing.TB, sends []Send, id uint64) []*protocol.HATransferRequest {
	t.Helper()
	var out []*protocol.HATransferRequest
	for _, s := range sends {
		tr, ok := s.Req.(*protocol.HATransferRequest)
		if !ok || s.Peer != id {
			t.Fatalf("send %T to %d, want transfers to %d", s.Req, s.Peer, id)
		}
		out = append(out, tr)
	}
	return out
}

// contiguous checks that trs are back to back from from and returns where
// they end.
func contiguous(t testing.TB, trs []*protocol.HATransferRequest, from int64) int64 {
	t.Helper()
	for _, tr := range trs {
		if tr.Offset != from {
			t.Fatalf("transfer at %d, want %d", tr.Offset, from)
		}
		from += int64(len(tr.Data))
	}
	return from
}

// ack is a later report of a slave whose log ends at off.
func ack(off int64) *protocol.HAReportRequest {
	return &protocol.HAReportRequest{BrokerName: "b", BrokerID: 1, MaxOffset: off}
}
