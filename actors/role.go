package actors

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/actors/ctlagent"
	"github.com/wharfmq/wharf/actors/ha"
	"github.com/wharfmq/wharf/protocol"
)

// Broker roles.
const (
	RoleAsyncMaster = "ASYNC_MASTER"
	RoleSyncMaster  = "SYNC_MASTER"
	RoleSlave       = "SLAVE"
)

// roleState is a broker's role: runtime state, owned by the role
// supervisor and carried out by the writer.
type roleState struct {
	role     string
	master   string // a slave's master, host:haListenPort
	brokerID int64
	// epoch is the master epoch the controller gave the role (controller
	// mode; 0 in classic mode, and before the controller assigned one, when
	// the broker is a slave of nobody).
	epoch int32
	gen   int // set by the writer (views.nextGen): a dial or timer of an older role is stale
}

func (r roleState) slave() bool { return r.role == RoleSlave }

// same reports whether r and o are one role (gen aside).
func (r roleState) same(o roleState) bool {
	r.gen, o.gen = 0, 0
	return r == o
}

// ctlRoleState is the role the controller's agent asks for. A master is
// brokerId 0 for clients and name servers, as in RocketMQ's controller
// mode; a slave keeps the id the controller assigned (its master's
// replicator knows it by that id).
func ctlRoleState(r ctlagent.Role) roleState {
	if r.Master {
		return roleState{role: RoleSyncMaster, epoch: r.Epoch}
	}
	return roleState{role: RoleSlave, master: r.MasterAddr, brokerID: r.BrokerID, epoch: r.Epoch}
}

// ctlRole is a role the controller client asks for (to the role
// supervisor); it answers ctlRoleApplied once the writer took it.
type ctlRole struct{ r ctlagent.Role }

// ctlRoleApplied tells the controller client a role was carried out.
type ctlRoleApplied struct{ r ctlagent.Role }

// ctlRoleFailed tells the controller client a role could not be taken
// (the epoch file could not be written).
type ctlRoleFailed struct {
	r   ctlagent.Role
	err error
}

// setRole asks the writer to take a new role (from the role supervisor).
type setRole struct {
	to    roleState
	reply *actor.PID
	req   *request
	ctl   *ctlagent.Role // the controller's role being carried out, if any
}

// roleSet answers a setRole.
type roleSet struct {
	req  *request
	from roleState
	to   roleState
	err  error
	ctl  *ctlagent.Role
}

// roleMsg is an UPDATE_BROKER_ROLE request (to the role supervisor).
type roleMsg struct {
	*request
	req *protocol.UpdateBrokerRoleRequest
}

// validRole checks a requested role change against the current role.
func validRole(cur roleState, req *protocol.UpdateBrokerRoleRequest) (roleState, error) {
	next := roleState{role: req.BrokerRole, brokerID: cur.brokerID}
	switch req.BrokerRole {
	case RoleAsyncMaster, RoleSyncMaster:
		if req.HAMasterAddress != "" {
			return cur, fmt.Errorf("a %s has no master: haMasterAddress must be empty", req.BrokerRole)
		}
		next.brokerID = 0
	case RoleSlave:
		if !hostPort(req.HAMasterAddress) {
			return cur, fmt.Errorf("a SLAVE needs haMasterAddress host:port of its master's haListenPort, not %q", req.HAMasterAddress)
		}
		next.master = req.HAMasterAddress
		switch {
		case req.BrokerID > 0:
			next.brokerID = req.BrokerID
		case req.BrokerID < 0:
			return cur, fmt.Errorf("brokerId %d: a slave's is > 0", req.BrokerID)
		case cur.brokerID == 0:
			next.brokerID = 1 // a master becoming a slave
		}
	default:
		return cur, fmt.Errorf("brokerRole %q: want ASYNC_MASTER, SYNC_MASTER or SLAVE", req.BrokerRole)
	}
	return next, nil
}

// enterRole starts the cores of the writer's current role.
// drain, if set, is why the sends waiting for the gate are answered now.
func (a *writerActor) enterRole(now time.Time, drain string) {
	a.k.send(a.p.durability, &durabilityRole{mode: a.gateMode(), master: !a.role.slave(), drain: drain})
	switch {
	case a.role.slave() && a.role.master == "":
		// Controller mode before the controller named a master: a
		// read-only replica that follows nobody.
	case a.role.slave():
		a.fol = ha.NewFollower(ha.FollowerConfig{BrokerName: a.cfg.BrokerName, BrokerID: a.role.brokerID, MasterAddr: a.role.master,
			HousekeepingInterval: a.cfg.HAHousekeepingInterval, MetadataInterval: a.cfg.HAMetadataInterval,
			ReconnectMax: a.cfg.HAReconnectMaxInterval, SkipTruncation: a.k.faults.SkipTruncation}, a.st, a.k.log)
		a.fol.Start(now)
	default:
		a.prepare()
	}
}

// setRole switches the writer to a new role without a restart: a master
// that becomes a slave answers the sends still waiting for copies (they are
// stored, their durability unconfirmed), closes its slaves and starts
// following its master; a slave that becomes a master stops following and
// keeps assigning queue offsets where the log's table says (it was kept by
// every append of the master's bytes).
func (a *writerActor) setRole(ctx actor.Context, m *setRole) {
	now, from := a.k.now(), a.role
	if err := a.startEpoch(m.to); err != nil {
		a.k.log.Error("cannot take the role: the epoch could not be started", "role", m.to.role, "epoch", m.to.epoch, "err", err)
		ctx.Send(m.reply, &roleSet{req: m.req, from: from, to: from, err: err, ctl: m.ctl})
		return
	}
	// Leave the old role's cores.
	drain := ""
	if !from.slave() && m.to.slave() {
		drain = "role changed to " + m.to.role
		// Sends appended but not yet handed over wait with the others
		// and are answered by the drain.
		if len(a.waits) > 0 {
			ctx.Send(a.p.durability, &appended{waits: a.waits})
			a.waits = nil
		}
	}
	if a.fol != nil {
		a.fol.Stop("this broker is no longer a slave of " + from.master)
		a.drainFollower(ctx)
		a.fol, a.link = nil, nil
	}
	a.role = m.to
	a.role.gen = a.v.nextGen()
	a.v.publishRole(a.role)
	// Enter the new one's.
	switch {
	case m.to.slave():
		a.enterRole(now, drain)
		a.drainFollower(ctx)
	case from.slave():
		a.enterRole(now, "")
	default: // ASYNC_MASTER <-> SYNC_MASTER: the same cores, another promise
		ctx.Send(a.p.durability, &durabilityRole{mode: a.gateMode(), master: true})
	}
	a.k.log.Info("broker role changed", "from", from.role, "to", m.to.role, "master", m.to.master, "brokerId", m.to.brokerID)
	ctx.Send(m.reply, &roleSet{req: m.req, from: from, to: a.role, ctl: m.ctl})
}

// startEpoch records, durably, the epoch a controller-mode master takes,
// at the log's end, before its first append of it: the writer is the
// log's one appender, so nothing of the epoch is written before. (It
// fsyncs on the writer, once per election, as the follower does for an
// epoch its master's transfers start.)
func (a *writerActor) startEpoch(to roleState) error {
	if to.slave() || to.epoch <= 0 {
		return nil
	}
	if last, ok := a.st.LastEpoch(); ok && last.Epoch == to.epoch {
		// This master restarted within its own epoch (the controllers
		// did not elect another meanwhile: only they name an epoch's
		// master, one per epoch): the epoch goes on where its log ends.
		return nil
	}
	if err := a.st.StartEpoch(to.epoch, a.st.CommitLog().MaxOffset()); err != nil {
		return err
	}
	// The controllers elected this log, as it is, the truth of the epoch.
	a.clearMayLackAcked("elected master of epoch " + strconv.Itoa(int(to.epoch)))
	return nil
}

// clearMayLackAcked drops the store's mark that its log may lack
// acknowledged messages, once that is known not to matter (why). It runs
// on the writer, once per mark: a removal and a directory fsync. A failure
// keeps the mark, which only costs availability (the controllers elect
// this replica only as the best of its whole SyncStateSet), and is retried
// at the next occasion.
func (a *writerActor) clearMayLackAcked(why string) {
	if !a.st.MayLackAcked() {
		return
	}
	if err := a.st.ClearMayLackAcked(); err != nil {
		a.k.log.Error("cannot clear the store's may-lack-acknowledged mark", "why", why, "err", err)
		return
	}
	a.k.log.Info("the log holds every acknowledged message again", "why", why)
}

// caughtUp clears the mark on a slave whose log reached the confirm offset
// its master sent since this start: everything acknowledged, before the
// crash too, lies below that offset (the confirm offset never moves back,
// and an acknowledged send is below it), so the log lacks nothing any
// more.
func (a *writerActor) caughtUp() {
	if a.fol == nil || !a.st.MayLackAcked() {
		return
	}
	if c := a.fol.HeardConfirm(); c > 0 && a.st.CommitLog().MaxOffset() >= c {
		a.clearMayLackAcked("caught up with the master's confirm offset " + strconv.FormatInt(c, 10))
	}
}

// roleActor is the role supervisor: it owns the broker's role, carries out
// UPDATE_BROKER_ROLE through the writer, and runs the cores only a master
// has beside the writer's (the delay scheduler).
type roleActor struct {
	k         *kit
	p         *pids
	v         *views
	cur       roleState
	scheduler *actor.Props
	changing  bool
	// pendingCtl is the latest role the controller client (p.ctl, in
	// controller mode) asked for while another change was running.
	pendingCtl *ctlagent.Role
}

func (r *roleActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		// A restarted supervisor takes the role in force (the writer
		// publishes each role it takes).
		r.cur = r.v.currentRole()
		if !r.cur.slave() {
			r.startScheduler(ctx)
		}
	case *roleMsg:
		r.request(ctx, m)
	case *ctlRole:
		r.fromController(ctx, m.r)
	case *roleSet:
		r.roleSet(ctx, m)
	}
}

// roleSet follows a role the writer took (or could not take).
func (r *roleActor) roleSet(ctx actor.Context, m *roleSet) {
	r.changing = false
	defer r.nextCtl(ctx)
	if m.err != nil {
		r.k.respond(m.req, protocol.StatusSystemError, m.err.Error(), nil)
		if m.ctl != nil {
			ctx.Send(r.p.ctl, &ctlRoleFailed{r: *m.ctl, err: m.err})
		}
		return
	}
	r.cur = m.to
	ctx.Send(r.p.topics, &topicsRole{slave: m.to.slave()})
	if r.p.registrar != nil {
		ctx.Send(r.p.registrar, &regRole{}) // re-registers at once
	}
	switch {
	case m.to.slave() && !m.from.slave():
		ctx.Poison(r.p.scheduler)
		r.p.scheduler = nil
	case !m.to.slave() && m.from.slave():
		r.startScheduler(ctx)
	}
	if m.ctl != nil {
		ctx.Send(r.p.ctl, &ctlRoleApplied{r: *m.ctl})
	}
	r.k.respond(m.req, protocol.StatusOK, "", nil)
}

// fromController carries out a role the controller assigned, after the
// change in progress if there is one (the latest one asked wins).
func (r *roleActor) fromController(ctx actor.Context, cr ctlagent.Role) {
	if r.changing {
		r.pendingCtl = &cr
		return
	}
	next := ctlRoleState(cr)
	if next.same(r.cur) {
		ctx.Send(r.p.ctl, &ctlRoleApplied{r: cr})
		return
	}
	r.changing = true
	ctx.Send(r.p.writer, &setRole{to: next, reply: ctx.Self(), ctl: &cr})
}

func (r *roleActor) nextCtl(ctx actor.Context) {
	if cr := r.pendingCtl; cr != nil && !r.changing {
		r.pendingCtl = nil
		r.fromController(ctx, *cr)
	}
}

func (r *roleActor) request(ctx actor.Context, m *roleMsg) {
	if r.p.ctl != nil {
		r.k.respond(m.request, protocol.StatusNoPermission, "controller mode: the controllers assign this broker's role", nil)
		return
	}
	if r.changing {
		r.k.respond(m.request, protocol.StatusSystemBusy, "a role change is in progress", nil)
		return
	}
	next, err := validRole(r.cur, m.req)
	if err != nil {
		r.k.respond(m.request, protocol.StatusInvalidParameter, err.Error(), nil)
		return
	}
	if next.role == r.cur.role && next.master == r.cur.master && next.brokerID == r.cur.brokerID {
		r.k.respond(m.request, protocol.StatusOK, "", nil)
		return
	}
	r.changing = true
	ctx.Send(r.p.writer, &setRole{to: next, reply: ctx.Self(), req: m.request})
}

func (r *roleActor) startScheduler(ctx actor.Context) {
	r.p.scheduler = ctx.Spawn(r.scheduler)
}

// hostPort reports whether s is host:port with a port in 1..65535.
func hostPort(s string) bool {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 {
		return false
	}
	p, err := strconv.Atoi(s[i+1:])
	return err == nil && p > 0 && p < 65536
}
