package ha

import (
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

// wire connects a Replicator and a Follower as the shells would: what one
// sends, the other receives, on connection id.
type wire struct {
	t        *testing.T
	r        *Replicator
	f        *Follower
	id       uint64
	now      time.Time
	imported int // metadata the follower took in
	// slave, if set, is the follower's store: the wire cuts it when the
	// follower asks (Truncate), as the shell would.
	slave     *storage.Store
	transfers []*protocol.HATransferRequest // every transfer carried
}

// step carries the replicator's sends to the follower and the follower's
// to the replicator once; false: neither had anything to send.
func (w *wire) step() bool {
	w.t.Helper()
	rr := w.r.Ready()
	if len(rr.Closes) != 0 {
		w.t.Fatalf("the master closes the slave: %+v", rr.Closes)
	}
	reqs := make([]protocol.Request, 0, len(rr.Sends))
	for _, s := range rr.Sends {
		if s.Peer != w.id {
			w.t.Fatalf("a send to %d, the link is %d", s.Peer, w.id)
		}
		reqs = append(reqs, s.Req)
		if tr, ok := s.Req.(*protocol.HATransferRequest); ok {
			w.transfers = append(w.transfers, tr)
		}
	}
	if rr.Metadata { // after taking the sends: rr is valid until the next call
		w.r.Broadcast(&protocol.HAMetadataRequest{Kind: "topics", Data: []byte("{}")})
	}
	if len(reqs) > 0 {
		w.f.Receive(w.now, w.id, reqs)
	}
	fr := w.f.Ready()
	if fr.Close != "" {
		w.t.Fatalf("the slave closes the link: %s", fr.Close)
	}
	w.imported += len(fr.Imports)
	fr.Sends = slices.Clone(fr.Sends) // the follower's next Ready reuses them
	if fr.Truncate {
		if w.slave == nil {
			w.t.Fatalf("the follower asks for a cut to %d", fr.TruncateTo)
		}
		w.slave.StopWrites()
		w.f.Truncated(w.now, w.slave.TruncateTo(fr.TruncateTo))
		if rd := w.f.Ready(); rd.Close != "" || len(rd.Sends) != 1 {
			w.t.Fatalf("after the cut: %+v", rd)
		} else {
			fr.Sends = append(fr.Sends, rd.Sends...)
		}
	}
	for _, req := range fr.Sends {
		w.r.Report(w.now, w.id, "slave:1", req.(*protocol.HAReportRequest))
	}
	return len(reqs) > 0 || len(fr.Sends) > 0 || rr.Metadata
}

// settle steps until both sides are quiet.
func (w *wire) settle() {
	w.t.Helper()
	for i := 0; w.step(); i++ {
		if i > 100_000 {
			w.t.Fatal("replication does not settle")
		}
	}
}

// dial opens a new link id.
func (w *wire) dial(id uint64) {
	w.t.Helper()
	if rd := w.f.Ready(); !rd.Dial {
		w.t.Fatalf("the follower does not dial: %+v", rd)
	}
	w.id = id
	w.f.Dialed(w.now, id, nil)
}

// fillUpTo appends n messages of random sizes up to maxBody.
func fillUpTo(t *testing.T, st *storage.Store, rng *rand.Rand, n, maxBody int) {
	for i := 0; i < n; i++ {
		fill(t, st, rng.Int63(), 1, 1+rng.Intn(maxBody))
	}
}

// TestRoundTrip wires a Replicator and a Follower over two stores and
// checks the slave's log becomes the master's byte for byte, with appends
// interleaved with transfers in flight, heartbeats, and a reconnect that
// loses what was in flight.
func TestRoundTrip(t *testing.T) {
	const seg = 256 << 10
	tests := []struct {
		name    string
		catchUp bool
		clean   bool // retention removed the master's older segments
		from    func(m *storage.CommitLog) int64
	}{
		{name: "from the first offset", from: func(m *storage.CommitLog) int64 { return 0 }},
		{name: "from the retained start", clean: true, from: func(m *storage.CommitLog) int64 { return m.MinOffset() }},
		{name: "from the last segment", catchUp: true,
			from: func(m *storage.CommitLog) int64 { return m.MaxOffset() - m.MaxOffset()%m.SegmentSize() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(42))
			m, s := openStore(t, seg), openStore(t, seg)
			fillUpTo(t, m, rng, 150, 60<<10) // about 4.5 MiB: more than the window
			if tt.clean {
				clean(t, m)
			}
			from := tt.from(m.CommitLog())
			cfg := replConfig()
			cfg.CatchUpFromLastSegment = tt.catchUp
			cfg.TransferBatchSize = 64 << 10
			w := &wire{t: t, r: NewReplicator(cfg, m.CommitLog(), quiet), f: NewFollower(folConfig(), s, quiet), now: t0}
			w.f.Start(w.now)
			w.dial(1)
			for round := 0; round < 6; round++ {
				// Appends while transfers are in flight.
				fillUpTo(t, m, rng, 1+rng.Intn(20), 20<<10)
				w.r.Appended()
				w.step()
				fillUpTo(t, m, rng, 1+rng.Intn(5), 2<<10)
				w.r.Appended()
				w.now = w.now.Add(3 * time.Second)
				w.r.Tick(w.now)
				w.f.Tick(w.now)
				if round == 2 { // the link breaks with transfers in flight
					w.r.Appended()
					w.r.Ready()
					w.r.Gone(w.id)
					w.f.Gone(w.id)
					if rd := w.f.Ready(); rd.RetryIn != firstRetry {
						t.Fatalf("the slave does not retry: %+v", rd)
					}
					w.f.Reconnect(w.now)
					w.dial(w.id + 1)
				}
				w.settle()
				sameLog(t, m, s)
			}
			if got := s.CommitLog().MinOffset(); got != from {
				t.Fatalf("the slave's log starts at %d, want %d", got, from)
			}
			if acked, n := w.r.Acked(nil); len(acked) != 1 || acked[0] != m.CommitLog().MaxOffset() || n != 1 {
				t.Fatalf("acked %v (%d in sync), the master ends at %d", acked, n, m.CommitLog().MaxOffset())
			}
			if w.imported == 0 {
				t.Fatal("no metadata reached the slave")
			}
			if _, err := s.Dispatch(s.CommitLog().MaxOffset(), nil); err != nil {
				t.Fatal(err)
			}
			if err := storage.Check(s); err != nil {
				t.Fatal(err)
			}
		})
	}
}
