package actors

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wharfmq/wharf/internal/vtime"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage/vfs"
)

// validRole: which role changes are accepted, and the state they lead to.
func TestValidRole(t *testing.T) {
	master := roleState{role: RoleAsyncMaster}
	slave := roleState{role: RoleSlave, master: "10.0.0.1:10912", brokerID: 2}
	cases := []struct {
		name string
		cur  roleState
		req  protocol.UpdateBrokerRoleRequest
		want roleState
		err  string
	}{
		{"master to sync master", master, protocol.UpdateBrokerRoleRequest{BrokerRole: RoleSyncMaster},
			roleState{role: RoleSyncMaster}, ""},
		{"master to slave gets brokerId 1", master, protocol.UpdateBrokerRoleRequest{BrokerRole: RoleSlave, HAMasterAddress: "h:10912"},
			roleState{role: RoleSlave, master: "h:10912", brokerID: 1}, ""},
		{"master to slave with a chosen id", master, protocol.UpdateBrokerRoleRequest{BrokerRole: RoleSlave, HAMasterAddress: "h:1", BrokerID: 7},
			roleState{role: RoleSlave, master: "h:1", brokerID: 7}, ""},
		{"slave keeps its id for another master", slave, protocol.UpdateBrokerRoleRequest{BrokerRole: RoleSlave, HAMasterAddress: "h:2"},
			roleState{role: RoleSlave, master: "h:2", brokerID: 2}, ""},
		{"slave promoted gets id 0", slave, protocol.UpdateBrokerRoleRequest{BrokerRole: RoleAsyncMaster},
			roleState{role: RoleAsyncMaster}, ""},
		{"slave without a master", master, protocol.UpdateBrokerRoleRequest{BrokerRole: RoleSlave}, master, "haMasterAddress"},
		{"slave with a bad port", master, protocol.UpdateBrokerRoleRequest{BrokerRole: RoleSlave, HAMasterAddress: "h:70000"}, master, "haMasterAddress"},
		{"slave with a negative id", master, protocol.UpdateBrokerRoleRequest{BrokerRole: RoleSlave, HAMasterAddress: "h:1", BrokerID: -1}, master, "brokerId"},
		{"master with a master address", slave, protocol.UpdateBrokerRoleRequest{BrokerRole: RoleSyncMaster, HAMasterAddress: "h:1"}, slave, "no master"},
		{"unknown role", master, protocol.UpdateBrokerRoleRequest{BrokerRole: "LEADER"}, master, "brokerRole"},
	}
	for _, c := range cases {
		got, err := validRole(c.cur, &c.req)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: err %v, want one about %q", c.name, err, c.err)
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case got != c.want:
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// A running master becomes a slave and back, through UPDATE_BROKER_ROLE:
// as a slave it refuses sends and reports its role; promoted again it
// assigns queue offsets where the log left off.
func TestRoleChangeAtRunTime(t *testing.T) {
	h := startBroker(t, vfs.NewMem(), nil)
	var sr protocol.SendResponse
	for i := 0; i < 3; i++ {
		h.ok(h.send(sendReq("t", 0, fmt.Sprint(i)))[0], &sr)
	}
	h.ok(h.send(&protocol.UpdateBrokerRoleRequest{BrokerRole: RoleSlave, HAMasterAddress: "127.0.0.1:1"})[0], nil)
	var info protocol.BrokerRuntimeInfo
	h.ok(h.send(&protocol.GetBrokerRuntimeInfoRequest{})[0], &info)
	if info.BrokerRole != RoleSlave || info.BrokerID != 1 {
		t.Fatalf("after demotion: role %s id %d", info.BrokerRole, info.BrokerID)
	}
	if f := h.conn.await(t, h.send(sendReq("t", 0, "refused"))[0], 5*time.Second); f.Status != protocol.StatusNotMaster {
		t.Fatalf("a slave answered a send with %v %q", f.Status, f.Remark)
	}
	f := h.conn.await(t, h.send(&protocol.UpdateBrokerRoleRequest{BrokerRole: "LEADER"})[0], 5*time.Second)
	if f.Status != protocol.StatusInvalidParameter {
		t.Fatalf("a bad role: %v", f.Status)
	}
	h.ok(h.send(&protocol.UpdateBrokerRoleRequest{BrokerRole: RoleSyncMaster})[0], nil)
	h.ok(h.send(&protocol.GetBrokerRuntimeInfoRequest{})[0], &info)
	if info.BrokerRole != RoleSyncMaster || info.BrokerID != 0 {
		t.Fatalf("after promotion: role %s id %d", info.BrokerRole, info.BrokerID)
	}
	// SYNC_MASTER without a slave: stored, answered SLAVE_NOT_AVAILABLE;
	// WAIT=false is answered OK at once, at the next queue offset.
	if f := h.conn.await(t, h.send(sendReq("t", 0, "no slave"))[0], 5*time.Second); f.Status != protocol.StatusSlaveNotAvailable {
		t.Fatalf("SYNC_MASTER without a slave: %v", f.Status)
	}
	h.ok(h.send(&protocol.UpdateBrokerRoleRequest{BrokerRole: RoleAsyncMaster})[0], nil)
	h.ok(h.send(sendReq("t", 0, "after"))[0], &sr)
	if sr.QueueOffset != 4 {
		t.Fatalf("queue offset after the role changes: %d, want 4 (3 sends, one SLAVE_NOT_AVAILABLE but stored)", sr.QueueOffset)
	}
}

// A writer restarted after a panic resumes the role in force, not the one
// the broker started with.
func TestRestartedWriterKeepsTheRoleInForce(t *testing.T) {
	h := startBroker(t, vfs.NewMem(), nil)
	h.ok(h.send(&protocol.UpdateBrokerRoleRequest{BrokerRole: RoleSlave, HAMasterAddress: "127.0.0.1:1"})[0], nil)
	h.b.sys.Root.Send(h.b.p.writer, &panicForTest{})
	if f := h.conn.await(t, h.send(sendReq("t", 0, "x"))[0], 5*time.Second); f.Status != protocol.StatusNotMaster {
		t.Fatalf("after the writer's restart a slave answered a send with %v", f.Status)
	}
	var info protocol.BrokerRuntimeInfo
	h.ok(h.send(&protocol.GetBrokerRuntimeInfoRequest{})[0], &info)
	if info.BrokerRole != RoleSlave {
		t.Fatalf("role %s after the writer's restart", info.BrokerRole)
	}
}

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
	cfg := DefaultConfig()
	cfg.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	io := &heldIO{}
	h := startAt(t, fsys, cfg, vtime.NewFIFO(testEpoch), Env{RunIO: io.run})

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

// A broker started as a slave dials its master at once, not at its first
// replication heartbeat (haSendHeartbeatInterval, 5 s by default): a
// SYNC_MASTER has no copy to count until it does.
func TestSlaveDialsAtStart(t *testing.T) {
	var dialed []string
	env := Env{Dial: func(addr string, h Handler) (Conn, error) {
		dialed = append(dialed, addr)
		return nil, fmt.Errorf("no master in this test")
	}}
	h := startBrokerEnv(t, vfs.NewMem(), func(c *Config) {
		c.BrokerRole, c.BrokerID, c.HAMasterAddress = RoleSlave, 1, "127.0.0.1:10912"
		c.HASendHeartbeatInterval = time.Hour
	}, env)
	if !h.loop.RunUntil(func() bool { return len(dialed) > 0 }, 5*time.Second) {
		t.Fatal("a slave did not dial its master at start")
	}
	if dialed[0] != "127.0.0.1:10912" {
		t.Fatalf("dialed %s", dialed[0])
	}
}

// idConn is a link with an id of its own, for tests that dial more than
// once.
type idConn struct {
	haConn
	id uint64
}

func (c *idConn) ID() uint64 { return c.id }

// A link that closes before the writer hears it opened (a master killed
// as it accepts the slave: the link's haGone reaches the writer before its
// haDialed) is a failed dial: the slave dials again after the backoff
// instead of taking the dead link as its own and waiting on it for good.
func TestSlaveRedialsALinkThatClosedAsItOpened(t *testing.T) {
	var mu sync.Mutex
	var links []*idConn
	env := Env{Dial: func(addr string, h Handler) (Conn, error) {
		mu.Lock()
		defer mu.Unlock()
		c := &idConn{id: uint64(100 + len(links))}
		links = append(links, c)
		if len(links) == 1 {
			c.Close("the master went away") // closed, as a transport does, then reported
			h.Disconnected(c)               // before Dial returns, so before haDialed
		}
		return c, nil
	}}
	h := startBrokerEnv(t, vfs.NewMem(), func(c *Config) {
		c.BrokerRole, c.BrokerID, c.HAMasterAddress = RoleSlave, 1, "127.0.0.1:10912"
		c.HASendHeartbeatInterval = 100 * time.Millisecond
	}, env)
	second := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(links) >= 2 && links[1].lastReport() != nil
	}
	if !h.loop.RunUntil(second, 10*time.Second) {
		s, _ := h.b.v.followerSnapshot()
		t.Fatalf("the slave did not dial again after its link closed as it opened: %d dials, status %q", len(links), s)
	}
	if r := links[0].lastReport(); r != nil {
		t.Fatalf("the slave reported on the link that had closed: %+v", r)
	}
}
