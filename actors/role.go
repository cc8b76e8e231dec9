package actors

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

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
	gen      int // set by the writer (views.nextGen): a dial or timer of an older role is stale
}

func (r roleState) slave() bool { return r.role == RoleSlave }

// setRole asks the writer to take a new role (from the role supervisor).
type setRole struct {
	to    roleState
	reply *actor.PID
	req   *request
}

// roleSet answers a setRole.
type roleSet struct {
	req  *request
	from roleState
	to   roleState
	err  error
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
	case a.role.slave():
		a.fol = ha.NewFollower(ha.FollowerConfig{BrokerName: a.cfg.BrokerName, BrokerID: a.role.brokerID, MasterAddr: a.role.master,
			HousekeepingInterval: a.cfg.HAHousekeepingInterval, MetadataInterval: a.cfg.HAMetadataInterval,
			ReconnectMax: a.cfg.HAReconnectMaxInterval}, a.st, a.k.log)
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
	ctx.Send(m.reply, &roleSet{req: m.req, from: from, to: a.role})
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
	case *roleSet:
		r.changing = false
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
		r.k.respond(m.req, protocol.StatusOK, "", nil)
	}
}

func (r *roleActor) request(ctx actor.Context, m *roleMsg) {
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
