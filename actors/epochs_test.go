package actors

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
	"github.com/wharfmq/wharf/storage/vfs"
)

// haConn is a slave's link to a master played by the test: it records
// what the slave sends.
type haConn struct {
	mu     sync.Mutex
	sent   []protocol.Request
	closed string
}

func (c *haConn) ID() uint64         { return 77 }
func (c *haConn) RemoteAddr() string { return "127.0.0.1:10912" }
func (c *haConn) Reply(Response)     {}
func (c *haConn) Send(req protocol.Request) {
	c.mu.Lock()
	c.sent = append(c.sent, req)
	c.mu.Unlock()
}
func (c *haConn) Closed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed != ""
}

func (c *haConn) Close(reason string) {
	c.mu.Lock()
	c.closed = reason
	c.mu.Unlock()
}

// lastReport is the newest report the slave sent, nil if none.
func (c *haConn) lastReport() *protocol.HAReportRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.sent) - 1; i >= 0; i-- {
		if r, ok := c.sent[i].(*protocol.HAReportRequest); ok {
			return r
		}
	}
	return nil
}

// divergedStores writes a master's store and a slave's that copied its
// epoch 1, then led an epoch 2 of its own while the master took epoch 3.
// It returns the offset where they part.
func divergedStores(t *testing.T, mfs, sfs vfs.FS) (master *storage.Store, common int64) {
	t.Helper()
	m, _, err := storage.Open(mfs, testStoreConfig())
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := storage.Open(sfs, testStoreConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	appendTo := func(st *storage.Store, n int, body string) {
		for i := range n {
			msg := &storage.Message{Topic: "orders", QueueID: int32(i % 2), Body: []byte(body)}
			if _, err := st.AppendBatch([]*storage.Message{msg}, int64(1000+i), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, st := range []*storage.Store{m, s} {
		if err := st.StartEpoch(1, 0); err != nil {
			t.Fatal(err)
		}
	}
	appendTo(m, 20, "common")
	data, err := m.CommitLog().ReadRecords(0, 1<<20)
	if err != nil || s.CommitLog().AppendRaw(0, data) != nil || int64(len(data)) != m.CommitLog().MaxOffset() {
		t.Fatalf("copy the common part: %v", err)
	}
	common = m.CommitLog().MaxOffset()
	if s.StartEpoch(2, common) != nil || m.StartEpoch(3, common) != nil {
		t.Fatal("start the parting epochs")
	}
	appendTo(s, 7, "the slave's own, never the master's")
	appendTo(m, 9, "the master's epoch 3")
	return m, common
}

// TestDivergedSlaveCutAtRestart: a slave whose log went on past the point
// it shares with its master stops replicating, records the cut and makes
// it when the broker starts again; then its handshake finds nothing to cut.
func TestDivergedSlaveCutAtRestart(t *testing.T) {
	mfs, sfs := vfs.NewMem(), vfs.NewMem()
	master, common := divergedStores(t, mfs, sfs)
	defer master.Close()
	var conn *haConn
	var handler Handler
	var restarted string
	env := Env{Dial: func(addr string, h Handler) (Conn, error) {
		conn, handler = &haConn{}, h
		return conn, nil
	}, Restart: func(why string) { restarted = why }}
	slave := func(c *Config) {
		c.BrokerRole, c.BrokerID, c.HAMasterAddress = RoleSlave, 1, "127.0.0.1:10912"
		c.HASendHeartbeatInterval = time.Hour
	}
	answer := func(h *harness) {
		t.Helper()
		if !h.loop.RunUntil(func() bool { return conn != nil && conn.lastReport() != nil }, 5*time.Second) {
			t.Fatal("the slave sent no report")
		}
		if rep := conn.lastReport(); len(rep.Epochs) == 0 {
			t.Fatalf("the slave's first report carries no epochs: %+v", rep)
		}
		buf, err := protocol.AppendRequest(nil, 1, 0, &protocol.HAEpochsRequest{
			Epochs: toWireEpochs(master.Epochs()), MaxOffset: master.CommitLog().MaxOffset()})
		if err != nil {
			t.Fatal(err)
		}
		f, err := protocol.DecodeFrame(buf, protocol.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		conn.mu.Lock()
		conn.sent = nil
		conn.mu.Unlock()
		handler.Deliver(&Inbound{Conn: conn, Frames: []*protocol.Frame{f}})
	}

	h := startBrokerEnv(t, sfs, slave, env)
	end := h.store.CommitLog().MaxOffset()
	answer(h)
	stopped := func() bool { s, _ := h.b.v.followerSnapshot(); return strings.Contains(s, "restart") }
	if !h.loop.RunUntil(stopped, 5*time.Second) {
		s, _ := h.b.v.followerSnapshot()
		t.Fatalf("the diverged slave did not stop for a cut: status %q", s)
	}
	if h.store.CommitLog().MaxOffset() != end {
		t.Fatalf("the running slave's log changed: %d, was %d", h.store.CommitLog().MaxOffset(), end)
	}
	if !strings.Contains(restarted, "cut back") {
		t.Fatalf("the slave did not ask to be restarted for the cut (Env.Restart got %q)", restarted)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}

	conn = nil
	h = startBrokerEnv(t, sfs, slave, env)
	if got := h.store.CommitLog().MaxOffset(); got != common {
		t.Fatalf("after the restart the slave's log ends at %d, want the common point %d", got, common)
	}
	// Epoch 2 keeps its entry, with no byte: the master's epoch 3 replaces it.
	if want := []storage.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: common}}; !slices.Equal(h.store.Epochs(), want) {
		t.Fatalf("epochs after the cut %v, want %v", h.store.Epochs(), want)
	}
	answer(h)
	plain := func() bool { r := conn.lastReport(); return r != nil && len(r.Epochs) == 0 }
	if !h.loop.RunUntil(plain, 5*time.Second) {
		t.Fatalf("after the cut the handshake did not end: sent %v, closed %q", conn.sent, conn.closed)
	}
	if r := conn.lastReport(); r.MaxOffset != common || r.Epoch != 2 {
		t.Fatalf("the report after the handshake: %+v", r)
	}
}

func toWireEpochs(entries []storage.EpochEntry) []protocol.HAEpoch {
	var out []protocol.HAEpoch
	for _, e := range entries {
		out = append(out, protocol.HAEpoch{Epoch: e.Epoch, StartOffset: e.StartOffset})
	}
	return out
}
