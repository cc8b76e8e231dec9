package actors

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/actors/register"
	"github.com/wharfmq/wharf/protocol"
)

// The registrar actor: the shell around register.Registrar, which keeps
// the broker registered with every name server of Config.NamesrvAddr. It
// dials each over Env.Dial (through Env.RunIO: a dial blocks), feeds the
// core the answers, lost links, topic table changes (the topic manager
// tells it at each publish) and role changes (the role supervisor tells
// it), and keeps one timer armed at the core's Deadline.

// caller is a connection that can carry a request wanting an answer (an
// outbound netio link): the answer comes back to the link's Handler with
// the same opaque. Conn.Send is oneway, and a name server answers
// registrations.
type caller interface {
	Call(opaque uint32, req protocol.Request)
}

// Registrar messages.
type (
	regDialed struct {
		addr string
		conn Conn
		err  error
	}
	regAnswer struct {
		addr   string
		link   uint64
		opaque uint32
		status protocol.Status
		resp   *protocol.RegisterBrokerResponse
	}
	regClosed struct {
		addr string
		link uint64
	}
	regTick   struct{}
	regTopics struct{} // the topic table was published again
	regRole   struct{} // the broker's role changed
)

// regMemo is what outlives a restart of the registrar actor: the data
// version it reached, so a restarted one never registers an older one
// than the name servers hold; and its view of each name server, for
// GET_BROKER_RUNTIME_INFO. Written by the registrar only.
type regMemo struct {
	version atomic.Pointer[protocol.DataVersion]
	status  atomic.Pointer[string]
}

// statusLine renders the registration with each name server, e.g.
// "ns-a:9876 registered, ns-b:9876 unreachable".
func statusLine(ss []register.Status) string {
	parts := make([]string, 0, len(ss))
	for _, s := range ss {
		state := "unreachable"
		switch {
		case s.Registered:
			state = "registered"
		case s.Up:
			state = "connected, not registered"
		}
		parts = append(parts, s.Addr+" "+state)
	}
	return strings.Join(parts, ", ")
}

// regHandler is the Handler of one link to a name server.
type regHandler struct {
	k       *kit
	limits  protocol.Limits
	self    *actor.PID
	addr    string
	leaving *atomic.Bool // the broker is stopping: UNREGISTER's answer closes the link
}

func (h *regHandler) Deliver(in *Inbound) {
	for _, f := range in.Frames {
		if !f.IsResponse() {
			continue // name servers push nothing a broker acts on yet
		}
		m := &regAnswer{addr: h.addr, link: in.Conn.ID(), opaque: f.Opaque, status: f.Status}
		if f.Status == protocol.StatusOK && (f.Code == protocol.CodeRegisterBroker || f.Code == protocol.CodeBrokerHeartbeat) {
			var resp protocol.RegisterBrokerResponse
			if err := protocol.DecodeResponse(f, h.limits, &resp); err != nil {
				in.Conn.Close("name server answer: " + err.Error())
				return
			}
			m.resp = &resp
		}
		if h.leaving.Load() && f.Code == protocol.CodeUnregisterBroker {
			in.Conn.Close("the broker stopped")
			return
		}
		h.k.send(h.self, m)
	}
}

func (h *regHandler) Disconnected(c Conn) {
	if !h.leaving.Load() { // else the registrar is gone
		h.k.send(h.self, &regClosed{addr: h.addr, link: c.ID()})
	}
}

type registrarActor struct {
	k       *kit
	v       *views
	cfg     register.Config
	dial    func(addr string, h Handler) (Conn, error)
	limits  protocol.Limits
	memo    *regMemo
	leaving atomic.Bool
	// autoCreate is the AutoCreateTopic route registered when the broker
	// creates topics on first send; nil when it does not.
	autoCreate *protocol.TopicConfig
	ctl        bool // controller mode
	haveTopics bool

	core  *register.Registrar
	self  *actor.PID
	links map[string]Conn
	armed time.Time
	stop  func() bool
}

func (a *registrarActor) Receive(ctx actor.Context) {
	now := a.k.now()
	m := ctx.Message()
	switch m.(type) {
	case *actor.Started:
		a.self, a.links = ctx.Self(), map[string]Conn{}
		// The first registration waits for the topic manager's first
		// table (it publishes one as it loads topics.json), or a broker
		// restarting would register no topics and empty its routes for a
		// moment. A restarted registrar has the table already.
		a.haveTopics = a.memo.version.Load() != nil
		if !a.ready() {
			return
		}
		a.start(now)
	case *actor.Restarting:
		a.closeLinks("the registrar restarts")
		return
	case *actor.Stopping:
		a.leave(now)
		return
	}
	if a.core == nil {
		if _, ok := m.(*regTopics); ok {
			a.haveTopics = true
		}
		if a.ready() {
			a.start(now)
			a.drain()
			a.arm(now)
		}
		return
	}
	if a.handle(now, m) {
		a.drain()
		a.arm(now)
	}
}

// ready reports whether the first registration may go out: once the topic
// manager published its first table and, in controller mode, once the
// controller assigned a role (before that the broker has no brokerId to
// register with, and id 0 would make it a master to clients).
func (a *registrarActor) ready() bool {
	return a.haveTopics && (!a.ctl || a.v.currentRole().epoch > 0)
}

// handle feeds one message to the core.
func (a *registrarActor) handle(now time.Time, msg any) bool {
	switch m := msg.(type) {
	case *regTopics:
		a.core.Topics(now, a.topics())
	case *regRole:
		r := a.v.currentRole()
		a.core.Role(now, r.role, r.brokerID, r.epoch)
	case *regDialed:
		a.dialed(now, m)
	case *regAnswer:
		if c := a.links[m.addr]; c != nil && c.ID() == m.link {
			a.core.Answer(now, m.addr, m.opaque, m.status, m.resp)
		}
	case *regClosed:
		if c := a.links[m.addr]; c != nil && c.ID() == m.link {
			delete(a.links, m.addr)
			a.core.Closed(now, m.addr, m.link)
		}
	case *regTick:
		a.armed, a.stop = time.Time{}, nil
		a.core.Tick(now)
	default:
		return false
	}
	return true
}

func (a *registrarActor) start(now time.Time) {
	cfg := a.cfg
	if v := a.memo.version.Load(); v != nil {
		cfg.Version = *v
	}
	r := a.v.currentRole()
	cfg.Role, cfg.Identity.BrokerID = r.role, r.brokerID
	core, err := register.New(cfg)
	if err != nil {
		panic(err) // Broker.Start checked the config: this is a bug
	}
	a.core = core
	a.core.Start(now, a.topics())
}

// topics is the published topic table as the name servers take it, with
// the AutoCreateTopic route when the broker creates topics on first send.
func (a *registrarActor) topics() []protocol.TopicConfig {
	table := a.v.topicsSnapshot()
	out := make([]protocol.TopicConfig, 0, len(table)+1)
	for _, tc := range table {
		out = append(out, protocol.TopicConfig{Topic: tc.TopicName, ReadQueueNums: tc.ReadQueueNums,
			WriteQueueNums: tc.WriteQueueNums, Perm: tc.Perm})
	}
	if _, real := table[protocol.AutoCreateTopic]; a.autoCreate != nil && !real {
		out = append(out, *a.autoCreate)
	}
	return out
}

func (a *registrarActor) dialed(now time.Time, m *regDialed) {
	if m.err == nil {
		if _, ok := m.conn.(caller); !ok {
			m.conn.Close("this transport cannot carry requests that want an answer")
			a.k.log.Error("name server link cannot carry registrations", "namesrv", m.addr)
			a.core.Dialed(now, m.addr, 0, errNoCall)
			return
		}
		a.links[m.addr] = m.conn
		a.core.Dialed(now, m.addr, m.conn.ID(), nil)
		return
	}
	a.k.log.Debug("name server unreachable", "namesrv", m.addr, "err", m.err)
	a.core.Dialed(now, m.addr, 0, m.err)
}

// errNoCall: a link without caller, refused like a failed dial.
var errNoCall = errors.New("the link cannot carry requests that want an answer")

// drain carries out what the core asks: close, send, dial.
func (a *registrarActor) drain() {
	rd := a.core.Ready()
	for _, c := range rd.Closes {
		if l := a.links[c.Addr]; l != nil && l.ID() == c.Link {
			delete(a.links, c.Addr)
			l.Close(c.Reason)
			a.k.log.Warn("name server link closed", "namesrv", c.Addr, "reason", c.Reason)
		}
	}
	for _, c := range rd.Calls {
		if l, ok := a.links[c.Addr].(caller); ok {
			l.Call(c.Opaque, c.Req)
		}
	}
	for _, addr := range rd.Dials {
		a.connect(addr)
	}
	v := a.core.Version()
	a.memo.version.Store(&v)
	if line := statusLine(a.core.Statuses()); a.memo.status.Load() == nil || *a.memo.status.Load() != line {
		a.memo.status.Store(&line)
	}
	if rd.Done {
		a.closeLinks("the broker stopped")
	}
}

func (a *registrarActor) closeLinks(reason string) {
	for addr, l := range a.links {
		l.Close(reason)
		delete(a.links, addr)
	}
}

// connect dials addr off the actor.
func (a *registrarActor) connect(addr string) {
	dial, self := a.dial, a.self
	h := &regHandler{k: a.k, limits: a.limits, self: self, addr: addr, leaving: &a.leaving}
	a.k.io(self, func() any {
		c, err := dial(addr, h)
		return &regDialed{addr: addr, conn: c, err: err}
	})
}

// arm keeps one timer set at the core's Deadline.
func (a *registrarActor) arm(now time.Time) {
	d, ok := a.core.Deadline()
	if !ok || d.Equal(a.armed) {
		return
	}
	if a.stop != nil {
		a.stop()
	}
	a.armed = d
	a.stop = a.k.after(max(d.Sub(now), 0), a.self, &regTick{})
}

// leave unregisters from every name server up, without waiting: an actor
// that is stopping receives nothing more. Each link closes at its answer
// (its handler sees leaving), and a name server that never answers sees
// the link close when the process ends; either removes the broker from
// its routes at once.
func (a *registrarActor) leave(now time.Time) {
	if a.stop != nil {
		a.stop()
	}
	if a.core == nil {
		return
	}
	a.leaving.Store(true)
	a.core.Stop(now)
	a.drain()
}

// registrarConfig is the core's configuration from the broker's.
func (b *Broker) registrarConfig() register.Config {
	addr := b.cfg.BrokerAddr
	if addr == "" {
		addr = b.cfg.StoreHost.String()
	}
	return register.Config{
		Identity:          protocol.BrokerIdentity{ClusterName: b.cfg.BrokerClusterName, BrokerName: b.cfg.BrokerName, BrokerAddr: addr},
		HAServerAddr:      b.cfg.HAServerAddr,
		RemotingAddr:      b.cfg.RemotingAddr,
		Role:              b.cfg.BrokerRole,
		NameServers:       b.cfg.NamesrvAddr,
		Version:           protocol.DataVersion{Timestamp: b.bootTime.UnixMilli()},
		HeartbeatInterval: b.cfg.BrokerHeartbeatInterval,
		Lease:             b.cfg.HeartbeatTimeout,
		RegisterPeriod:    b.cfg.RegisterNameServerPeriod,
	}
}

// startRegistrar spawns the registrar if the broker has name servers.
func (b *Broker) startRegistrar(spawn func(string, func() actor.Actor) *actor.PID) error {
	if len(b.cfg.NamesrvAddr) == 0 {
		return nil // standalone
	}
	if b.env.Dial == nil {
		return errors.New("actors: namesrvAddr needs Env.Dial")
	}
	cfg := b.registrarConfig()
	if _, err := register.New(cfg); err != nil {
		return fmt.Errorf("actors: name servers: %w", err)
	}
	memo := &regMemo{}
	b.reg = memo
	var auto *protocol.TopicConfig
	if b.cfg.AutoCreateTopicEnable {
		n := b.cfg.DefaultTopicQueueNums
		auto = &protocol.TopicConfig{Topic: protocol.AutoCreateTopic, ReadQueueNums: n, WriteQueueNums: n,
			Perm: protocol.PermRead | protocol.PermWrite}
	}
	pid := spawn("registrar", func() actor.Actor {
		return &registrarActor{k: b.k, v: b.v, cfg: cfg, dial: b.env.Dial, limits: b.limits, memo: memo, autoCreate: auto,
			ctl: b.cfg.EnableControllerMode}
	})
	if pid == nil {
		return errors.New("actors: spawn the registrar")
	}
	b.p.registrar = pid
	return nil
}

// nameServerStatus is the registration with each name server ("" when
// standalone).
func (b *Broker) nameServerStatus() string {
	if b.reg == nil {
		return ""
	}
	if p := b.reg.status.Load(); p != nil {
		return *p
	}
	return "starting"
}
