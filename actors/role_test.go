package actors

import (
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
	"github.com/wharfmq/wharf/storage/vfs"
)

// heldIO runs the broker's blocking work only when the test says so.
type heldIO struct {
	mu   sync.Mutex
	jobs []func()
}

func (h *heldIO) run(fn func()) {
	h.mu.Lock()
	h.jobs = append(h.jobs, fn)
	h.mu.Unlock()
}

// release runs every job held so far (each sends its result to its actor
// before release returns).
func (h *heldIO) release() int {
	h.mu.Lock()
	jobs := h.jobs
	h.jobs = nil
	h.mu.Unlock()
	for _, fn := range jobs {
		fn()
	}
	return len(jobs)
}

// TestDemotionDuringSegmentPreparation: a master demoted while the next
// CommitLog segment is being prepared off the writer must not keep the
// prepared segment (an open, preallocated file under a temporary name)
// once the preparation reports back: it is adopted for the follower's
// roll or removed.
func TestDemotionDuringSegmentPreparation(t *testing.T) {
	fsys := vfs.NewMem()
	st, _, err := storage.Open(fsys, testStoreConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	io := &heldIO{}
	b := New(cfg, Env{Clock: wallClock{}, RunIO: io.run}, st, protocol.DefaultLimits())
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Stop() })
	h := &harness{t: t, b: b, conn: newConn(), store: st}

	// The master prepared its first segment at start; the job is held.
	ops := h.send(&protocol.UpdateBrokerRoleRequest{BrokerRole: RoleSlave, HAMasterAddress: "127.0.0.1:1"})
	h.ok(ops[0], nil)
	if n := io.release(); n == 0 {
		t.Fatal("no segment preparation was pending at the demotion")
	}
	// A send goes through the writer after the preparation's report.
	ops = h.send(sendReq("T", 0, "x"))
	if f := h.conn.await(t, ops[0], 5*time.Second); f.Status != protocol.StatusNotMaster {
		t.Fatalf("send to the demoted broker: %v %q", f.Status, f.Remark)
	}
	names, err := fsys.List("/s/commitlog")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasSuffix(n, ".prepared") {
			t.Errorf("prepared segment %s left behind after the demotion (files %v)", n, names)
		}
	}
}
