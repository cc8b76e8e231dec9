package actors

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/actors/ctlagent"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

// The controller client actor: the shell around ctlagent.Agent, a broker's
// side of controller mode. It dials the controllers over Env.Dial (through
// Env.RunIO: a dial blocks) and carries the agent's requests on those
// links as Call-style requests; it feeds the agent the answers, lost
// links, pushed role changes (NOTIFY_BROKER_ROLE_CHANGED, on a link or on
// the broker's own port) and the master's view of its slaves (from the
// durability actor), and carries out its Ready:
//   - Role: the role supervisor makes the broker a master (the writer
//     starts the epoch in the store first) or a slave of the master's HA
//     address, without a restart; RoleApplied follows its answer.
//   - Writable: published as views.fence, which the writer checks at every
//     batch (SERVICE_NOT_AVAILABLE while fenced).
//   - AckSet: published as views.ackSet for the durability actor's gate.
//     An ALTER_SYNC_STATE_SET of the same Ready is held back until the
//     gate has taken the set: a send must never be acknowledged against
//     the old set once the controller may have applied the new one
//     (RocketMQ #5663).
// One timer stays armed at the agent's Deadline.

// Controller client messages.
type (
	agentDialed struct {
		addr string
		conn Conn
		err  error
	}
	ctlAnswer struct {
		addr   string
		link   uint64
		opaque uint32
		status protocol.Status
		remark string
		fields protocol.Fields
	}
	ctlClosed struct {
		addr string
		link uint64
	}
	agentTick   struct{}
	ctlNotified struct{} // a controller pushed NOTIFY_BROKER_ROLE_CHANGED
	// ctlSlaves is the master's slaves as its replicator sees them (from
	// the durability actor, at each change of their progress).
	ctlSlaves struct{ slaves []protocol.SlaveInfo }
)

// ctlHandler is the Handler of one link to a controller.
type ctlHandler struct {
	k      *kit
	limits protocol.Limits
	self   *actor.PID
	addr   string
}

func (h *ctlHandler) Deliver(in *Inbound) {
	for _, f := range in.Frames {
		if !f.IsResponse() {
			if f.Code == protocol.CodeNotifyBrokerRoleChanged {
				h.k.send(h.self, &ctlNotified{})
			}
			continue
		}
		m := &ctlAnswer{addr: h.addr, link: in.Conn.ID(), opaque: f.Opaque, status: f.Status, remark: f.Remark}
		if f.Status == protocol.StatusOK {
			m.fields = protocol.NewResponse(f.Code)
			if err := protocol.DecodeResponse(f, h.limits, m.fields); err != nil {
				in.Conn.Close("controller answer: " + err.Error())
				return
			}
		}
		h.k.send(h.self, m)
	}
}

func (h *ctlHandler) Disconnected(c Conn) { h.k.send(h.self, &ctlClosed{addr: h.addr, link: c.ID()}) }

// ctlCall is a request on the wire: the agent's id and kind.
type ctlCall struct {
	id       uint64
	kind     ctlagent.Kind
	addr     string
	link     uint64
	deadline time.Time
}

// ctlIdent is what a broker registers with.
type ctlIdent struct {
	ref          protocol.GroupRef
	identity     string
	brokerAddr   string
	haServerAddr string
}

type ctlClientActor struct {
	k      *kit
	p      *pids
	v      *views
	st     *storage.Store
	cfg    ctlagent.Config
	id     ctlIdent
	dial   func(addr string, h Handler) (Conn, error)
	limits protocol.Limits

	core    *ctlagent.Agent
	self    *actor.PID
	links   map[string]Conn
	dialing map[string][]ctlagent.Request // requests waiting for a dial
	calls   map[uint32]ctlCall
	opaque  uint32
	// held are AlterSet requests waiting for the gate to take the ack
	// set of seq.
	held   []ctlagent.Request
	seq    uint64
	master bool // the agent's last role was master
	// syncFlush: a slave's copy counts (for joining the SyncStateSet) only
	// once fsynced, as it does for acknowledgements.
	syncFlush bool
	priority  int32 // brokerElectionPriority
	// writable and leaseEnd are the agent's last word on writes.
	writable bool
	leaseEnd time.Time
	armed    time.Time
	stopArm  func() bool
}

func (a *ctlClientActor) Receive(ctx actor.Context) {
	now := a.k.now()
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.self = ctx.Self()
		a.links, a.dialing, a.calls = map[string]Conn{}, map[string][]ctlagent.Request{}, map[uint32]ctlCall{}
		// A restarted agent knows nothing: no writes until it hears the
		// controller again.
		a.v.publishFence("not the master of the current epoch: this broker has no role from the controllers yet", time.Time{})
		core, err := ctlagent.New(a.cfg)
		if err != nil {
			panic(err) // Broker.Start checked the config: this is a bug
		}
		a.core = core
		a.core.Start(now, a.storeState())
	case *actor.Restarting, *actor.Stopping:
		for addr, l := range a.links {
			l.Close("the controller client stops")
			delete(a.links, addr)
		}
		return
	default:
		if !a.handle(ctx, now, m) {
			return
		}
	}
	a.drain(ctx, now)
}

// handle feeds one message to the agent.
func (a *ctlClientActor) handle(ctx actor.Context, now time.Time, msg any) bool {
	switch m := msg.(type) {
	case *agentTick:
		a.armed, a.stopArm = time.Time{}, nil
		a.expire(now)
		a.core.Tick(now, a.storeState())
	case *agentDialed:
		a.dialed(now, m)
	case *ctlAnswer:
		a.answer(now, m)
	case *ctlClosed:
		a.closed(now, m)
	case *ctlNotified:
		a.core.Notified(now)
	case *ctlSlaves:
		a.core.Tick(now, a.storeState()) // Slaves judges against the log's end now
		a.core.Slaves(now, slaveProgress(m.slaves, a.syncFlush))
	case *ctlRoleApplied:
		a.core.RoleApplied(now, m.r)
	case *ctlRoleFailed:
		// The agent has no input for a role not taken: start over (the
		// supervisor restarts this actor, whose new agent asks again),
		// and a store that keeps failing ends the broker (Env.Fatal).
		panic(fmt.Sprintf("controller client: role %+v not taken: %v", m.r, m.err))
	case *ackSetTaken:
		if m.seq == a.seq {
			held := a.held
			a.held = nil
			for _, r := range held {
				a.call(r)
			}
		}
	default:
		return false
	}
	return true
}

// storeState is the store as the agent needs it.
func (a *ctlClientActor) storeState() ctlagent.StoreState {
	last, _ := a.st.LastEpoch()
	return ctlagent.StoreState{Epoch: last.Epoch, MaxOffset: a.st.CommitLog().MaxOffset(), ConfirmOffset: a.v.confirmOffset(),
		MayLackAcked: a.st.MayLackAcked()}
}

// slaveProgress is the slaves' progress as the agent counts it: under
// SYNC_FLUSH a copy is held once fsynced, so a slave joins the SyncStateSet
// on what it has flushed, as the gate counts its acknowledgements.
func slaveProgress(ss []protocol.SlaveInfo, syncFlush bool) []ctlagent.SlaveProgress {
	out := make([]ctlagent.SlaveProgress, 0, len(ss))
	for _, s := range ss {
		held := s.AckedOffset
		if syncFlush {
			held = min(held, s.FlushedOffset)
		}
		out = append(out, ctlagent.SlaveProgress{BrokerID: s.BrokerID, Acked: held, Connected: true})
	}
	return out
}

// drain carries out the agent's Ready and arms its next Tick.
func (a *ctlClientActor) drain(ctx actor.Context, now time.Time) {
	rd := a.core.Ready()
	if rd.Role != nil {
		a.master = rd.Role.Master
		a.v.ctlID.Store(rd.Role.BrokerID) // for the snapshot's SyncStateSet
		a.k.log.Info("the controller assigns a role", "master", rd.Role.Master, "masterAddr", rd.Role.MasterAddr,
			"brokerId", rd.Role.BrokerID, "epoch", rd.Role.Epoch)
		ctx.Send(a.p.role, &ctlRole{r: *rd.Role})
	}
	if rd.LeaseEnd != nil {
		a.leaseEnd = *rd.LeaseEnd
	}
	if rd.Writable != nil {
		a.writable = *rd.Writable
	}
	if rd.Writable != nil || rd.LeaseEnd != nil {
		// The writer checks the lease's end itself at every batch: this
		// actor's tick at that instant may come late.
		a.v.publishFence(a.fenceReason(a.writable), a.leaseEnd)
	}
	hold := false
	if rd.AckSet != nil {
		a.seq++
		a.v.publishAckSet(*rd.AckSet)
		ctx.Send(a.p.durability, &ackSetChanged{seq: a.seq, reply: a.self})
		hold = true
	}
	for _, r := range rd.Requests {
		if r.Kind == ctlagent.AlterSet && (hold || a.held != nil) {
			a.held = append(a.held, r)
			continue
		}
		a.call(r)
	}
	a.arm(now, rd.Deadline)
}

// fenceReason is why a broker refuses sends, "" when it may take them.
func (a *ctlClientActor) fenceReason(writable bool) string {
	switch {
	case writable:
		return ""
	case a.master:
		return "not the master of the current epoch, or its master lease expired (the controllers did not answer in time)"
	default:
		return "not the master of the current epoch: the controllers made another broker master"
	}
}

// call puts one request on the link to its controller, dialling it first
// if needed.
func (a *ctlClientActor) call(r ctlagent.Request) {
	if l := a.links[r.To]; l != nil && closed(l) {
		delete(a.links, r.To) // it closed before its agentDialed arrived: its ctlClosed was dropped
	}
	l, ok := a.links[r.To].(caller)
	if !ok {
		if _, busy := a.dialing[r.To]; !busy {
			a.connect(r.To)
		}
		a.dialing[r.To] = append(a.dialing[r.To], r)
		return
	}
	a.opaque++
	a.calls[a.opaque] = ctlCall{id: r.ID, kind: r.Kind, addr: r.To, link: a.links[r.To].ID(),
		deadline: a.k.now().Add(a.requestTimeout())}
	l.Call(a.opaque, a.wire(r))
}

func (a *ctlClientActor) requestTimeout() time.Duration {
	if a.cfg.RequestTimeout > 0 {
		return a.cfg.RequestTimeout
	}
	return ctlagent.DefaultRequestTimeout
}

// wire is the protocol request for one of the agent's.
func (a *ctlClientActor) wire(r ctlagent.Request) protocol.Request {
	switch r.Kind {
	case ctlagent.Register:
		return &protocol.ControllerRegisterBrokerRequest{GroupRef: a.id.ref, Identity: a.id.identity,
			BrokerAddr: a.id.brokerAddr, HAServerAddr: a.id.haServerAddr}
	case ctlagent.Heartbeat:
		return &protocol.ControllerHeartbeatRequest{GroupRef: a.id.ref, BrokerID: r.BrokerID, BrokerAddr: a.id.brokerAddr,
			Epoch: r.Epoch, MaxOffset: r.MaxOffset, ConfirmOffset: r.ConfirmOffset, ElectionPriority: a.priority,
			MayLackAcked: r.MayLackAcked}
	case ctlagent.GetInfo:
		return &protocol.GetReplicaInfoRequest{GroupRef: a.id.ref, BrokerID: r.BrokerID}
	default:
		return &protocol.AlterSyncStateSetRequest{GroupRef: a.id.ref, MasterID: r.BrokerID, MasterEpoch: r.MasterEpoch,
			SyncStateSetEpoch: r.SetEpoch, SyncStateSet: slices.Clone(r.NewSet)}
	}
}

// connect dials addr off the actor.
func (a *ctlClientActor) connect(addr string) {
	dial, self := a.dial, a.self
	h := &ctlHandler{k: a.k, limits: a.limits, self: self, addr: addr}
	a.k.io(self, func() any {
		c, err := dial(addr, h)
		return &agentDialed{addr: addr, conn: c, err: err}
	})
}

func (a *ctlClientActor) dialed(now time.Time, m *agentDialed) {
	queued := a.dialing[m.addr]
	delete(a.dialing, m.addr)
	if m.err == nil {
		if _, ok := m.conn.(caller); !ok {
			m.conn.Close("this transport cannot carry requests that want an answer")
			m.err = errNoCall
		}
	}
	if m.err != nil {
		a.k.log.Debug("controller unreachable", "controller", m.addr, "err", m.err)
		for _, r := range queued {
			a.core.Failed(now, r.ID)
		}
		return
	}
	if old := a.links[m.addr]; old != nil {
		old.Close("a newer link to the controller")
	}
	a.links[m.addr] = m.conn
	for _, r := range queued {
		a.call(r)
	}
}

// answer maps a controller's answer onto the agent's terms.
func (a *ctlClientActor) answer(now time.Time, m *ctlAnswer) {
	c, ok := a.calls[m.opaque]
	if !ok || c.addr != m.addr || c.link != m.link {
		return
	}
	delete(a.calls, m.opaque)
	ans := ctlagent.Answer{ID: c.id}
	switch m.status {
	case protocol.StatusOK:
		ans.Status = ctlagent.OK
		switch f := m.fields.(type) {
		case *protocol.ReplicaInfo:
			ans.BrokerID = f.BrokerID
			ans.Info = agentInfo(f)
		case *protocol.ControllerHeartbeatResponse:
			ans.MasterEpoch = f.MasterEpoch // a newer one renews no lease
			if inf, ok := a.core.Info(); ok && (f.MasterEpoch != inf.MasterEpoch || f.SyncStateSetEpoch != inf.SetEpoch) {
				defer a.core.Notified(now) // the group moved on: read its info now
			}
		}
	case protocol.StatusControllerNotLeader:
		ans.Status, ans.Leader = ctlagent.NotLeader, m.remark
	case protocol.StatusControllerBrokerNeedToBeRegistered:
		ans.Status = ctlagent.Unregistered
	case protocol.StatusControllerFencedMasterEpoch, protocol.StatusControllerFencedSyncStateSetEpoch,
		protocol.StatusControllerInvalidMaster:
		ans.Status = ctlagent.Fenced
	default:
		a.k.log.Debug("controller refused a request", "controller", m.addr, "kind", c.kind, "status", m.status, "remark", m.remark)
		ans.Status = ctlagent.Refused
	}
	a.core.Answer(now, ans)
}

// agentInfo is a replica info in the agent's terms: the master's address
// is its HA address, where slaves replicate from.
func agentInfo(f *protocol.ReplicaInfo) *ctlagent.Info {
	return &ctlagent.Info{MasterID: f.MasterID, MasterAddr: f.MasterHAAddr, MasterEpoch: f.MasterEpoch,
		Set: slices.Clone(f.SyncStateSet), SetEpoch: f.SyncStateSetEpoch, MasterMayLackAcked: f.MasterMayLackAcked}
}

// closed fails every request in flight on a lost link.
func (a *ctlClientActor) closed(now time.Time, m *ctlClosed) {
	if l := a.links[m.addr]; l != nil && l.ID() == m.link {
		delete(a.links, m.addr)
	}
	for _, op := range a.callOrder() {
		if c := a.calls[op]; c.addr == m.addr && c.link == m.link {
			delete(a.calls, op)
			a.core.Failed(now, c.id)
		}
	}
}

// callOrder is the calls in flight in the order they were made. Every
// walk over them that has effects goes in this order, not the map's: the
// agent's Failed moves it to the next controller, so the order of failures
// decides where each retry goes, and the simulator replays a seed only if
// that order is the same every run.
func (a *ctlClientActor) callOrder() []uint32 { return slices.Sorted(maps.Keys(a.calls)) }

// expire forgets calls the agent has timed out already (it ignores their
// late answers), so the map stays bounded while a controller is silent,
// and closes the link they went on: a controller that leaves a request
// unanswered for the request timeout is unreachable however its socket
// looks (a dead process behind a proxy, a silent network), and the next
// request to it dials again instead of writing into the void.
func (a *ctlClientActor) expire(now time.Time) {
	for _, op := range a.callOrder() {
		c := a.calls[op]
		if now.Before(c.deadline) {
			continue
		}
		delete(a.calls, op)
		if l := a.links[c.addr]; l != nil && l.ID() == c.link {
			delete(a.links, c.addr)
			l.Close("no answer from the controller within the request timeout")
		}
	}
}

// arm keeps one timer set at the agent's Deadline.
func (a *ctlClientActor) arm(now, d time.Time) {
	if d.IsZero() || d.Equal(a.armed) {
		return
	}
	if a.stopArm != nil {
		a.stopArm()
	}
	a.armed = d
	a.stopArm = a.k.after(max(d.Sub(now), 0), a.self, &agentTick{})
}

// ctlIdentityFile is where a broker keeps the identity it registers with,
// under the store's config directory: generated once, so the broker keeps
// its brokerId across restarts, and a wiped store is a new replica.
const ctlIdentityFile = "controllerIdentity.json"

type ctlIdentityDoc struct {
	Identity string `json:"identity"`
}

// loadIdentity returns the store's broker identity, generating and
// saving it (atomically, through the FS seam) the first time.
func loadIdentity(st *storage.Store, rnd io.Reader) (string, error) {
	name := storage.ConfigPath(st.Root(), ctlIdentityFile)
	var doc ctlIdentityDoc
	ok, err := storage.LoadJSON(st.FS(), name, &doc)
	if err != nil {
		return "", fmt.Errorf("controller identity: %w", err)
	}
	if ok && doc.Identity != "" {
		return doc.Identity, nil
	}
	if rnd == nil {
		rnd = rand.Reader
	}
	var b [16]byte
	if _, err := io.ReadFull(rnd, b[:]); err != nil {
		return "", fmt.Errorf("controller identity: draw: %w", err)
	}
	doc.Identity = hex.EncodeToString(b[:])
	if err := storage.SaveJSON(st.FS(), name, &doc); err != nil {
		return "", fmt.Errorf("controller identity: %w", err)
	}
	return doc.Identity, nil
}

// startController spawns the controller client in controller mode.
func (b *Broker) startController(spawn func(string, func() actor.Actor) *actor.PID) error {
	if !b.cfg.EnableControllerMode {
		return nil
	}
	if b.env.Dial == nil {
		return errors.New("actors: enableControllerMode needs Env.Dial")
	}
	cfg := ctlagent.Config{Controllers: b.cfg.ControllerAddr, HeartbeatInterval: b.cfg.ControllerHeartbeatInterval,
		Lease: b.cfg.MasterLease, RequestTimeout: b.cfg.ControllerRequestTimeout, SlaveNotCatchup: b.cfg.HAMaxTimeSlaveNotCatchup,
		NoLease: b.k.faults.NoLease}
	if _, err := ctlagent.New(cfg); err != nil {
		return fmt.Errorf("actors: controller mode: %w", err)
	}
	identity, err := loadIdentity(b.store, b.env.Rand)
	if err != nil {
		return fmt.Errorf("actors: %w", err)
	}
	addr := b.cfg.BrokerAddr
	if addr == "" {
		addr = b.cfg.StoreHost.String()
	}
	id := ctlIdent{ref: protocol.GroupRef{ClusterName: b.cfg.BrokerClusterName, BrokerName: b.cfg.BrokerName},
		identity: identity, brokerAddr: addr, haServerAddr: b.cfg.HAServerAddr}
	pid := spawn("ctlclient", func() actor.Actor {
		return &ctlClientActor{k: b.k, p: b.p, v: b.v, st: b.store, cfg: cfg, id: id, dial: b.env.Dial, limits: b.limits,
			syncFlush: b.cfg.FlushDiskType == SyncFlush, priority: b.cfg.BrokerElectionPriority}
	})
	if pid == nil {
		return errors.New("actors: spawn the controller client")
	}
	b.p.ctl = pid
	return nil
}
