package actors

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/actors/namesrv"
	"github.com/wharfmq/wharf/actors/supervise"
	"github.com/wharfmq/wharf/protocol"
)

// NameServerConfig is the name server's behaviour.
type NameServerConfig struct {
	// Lease is the lease of a broker that asks for none (0: namesrv.DefaultLease).
	Lease time.Duration
}

// NameServer is a name server: one actor around the route table
// (namesrv.Table), fed by the transport. It implements Handler. The table
// lives in memory only: name servers are stateless, and brokers register
// again (a heartbeat answered Unknown tells them to) after a restart.
type NameServer struct {
	cfg      NameServerConfig
	env      Env
	limits   protocol.Limits
	log      *slog.Logger
	sys      *actor.ActorSystem
	k        *kit
	table    *actor.PID
	stopOnce sync.Once
}

// NewNameServer builds a name server; Start spawns its actor.
func NewNameServer(cfg NameServerConfig, env Env, limits protocol.Limits) *NameServer {
	if env.Logger == nil {
		env.Logger = slog.New(slog.DiscardHandler)
	}
	return &NameServer{cfg: cfg, env: env, limits: limits, log: env.Logger}
}

// Start spawns the route table's actor.
func (n *NameServer) Start() error {
	if n.env.Clock == nil || n.env.RunIO == nil {
		return errors.New("actors: Env.Clock and Env.RunIO are required")
	}
	actorLog := n.log.With("lib", "protoactor")
	n.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return actorLog }))
	n.k = &kit{root: n.sys.Root, clock: n.env.Clock, runIO: n.env.RunIO, log: n.log, metrics: noMetrics{}}
	// Restart a panicking actor, at most 10 times a minute; beyond that
	// the name server cannot be trusted to go on (Env.Fatal).
	fatal := n.env.Fatal
	if fatal == nil {
		fatal = func(err error) { n.log.Error("name server actor failed for good", "err", err) }
	}
	strategy := supervise.New(supervise.Config{Clock: n.env.Clock, MaxRestarts: 10, Window: time.Minute,
		Fatal: func(child *actor.PID, reason any) {
			fatal(fmt.Errorf("actor %s keeps failing: %v", child.Id, reason))
		}})
	opts := []actor.PropsOption{actor.WithGuardian(strategy), actor.WithSupervisor(strategy)}
	if n.env.Dispatcher != nil {
		opts = append(opts, actor.WithDispatcher(n.env.Dispatcher))
	}
	// A restarted actor starts with an empty table: brokers' next
	// heartbeats are answered Unknown and they register again.
	props := actor.PropsFromProducer(func() actor.Actor {
		return &routeActor{k: n.k, core: namesrv.New(namesrv.Config{Lease: n.cfg.Lease})}
	}, opts...)
	pid, err := n.sys.Root.SpawnNamed(props, "routes")
	if err != nil {
		return fmt.Errorf("actors: spawn the route table: %w", err)
	}
	n.table = pid
	return nil
}

// Stop stops the actor. The transport must have stopped delivering first.
func (n *NameServer) Stop() error {
	n.stop(func(pid *actor.PID) { _ = n.sys.Root.PoisonFuture(pid).Wait() })
	return nil
}

// stop is Stop with the wait given (tests on virtual time step their loop).
func (n *NameServer) stop(poison func(pid *actor.PID)) {
	n.stopOnce.Do(func() {
		if n.table != nil {
			poison(n.table)
		}
		if n.sys != nil {
			n.sys.Shutdown()
		}
	})
}

// nsRequest is one decoded name-server request.
type nsRequest struct {
	*request
	req  protocol.Request
	conn uint64
}

// nsConnClosed: a connection closed; brokers registered on it are dead.
type nsConnClosed struct{ conn uint64 }

// nsScan: a lease may have ended.
type nsScan struct{}

// Deliver implements Handler: it decodes each frame and hands it to the
// route table's actor.
func (n *NameServer) Deliver(in *Inbound) {
	if closed(in.Conn) {
		return
	}
	for _, f := range in.Frames {
		r := &request{conn: in.Conn, code: f.Code, opaque: f.Opaque, oneway: f.IsOneway()}
		if f.IsResponse() {
			n.k.respond(r, protocol.StatusFrameIllegal, "a response frame sent to the name server", nil)
			in.Conn.Close("peer sent a response frame")
			return
		}
		req, err := protocol.DecodeRequest(f, n.limits)
		if err != nil {
			st := protocol.StatusOf(err)
			n.k.respond(r, st, err.Error(), nil)
			if st.ClosesConnection() {
				in.Conn.Close(err.Error())
				return
			}
			continue
		}
		n.k.send(n.table, &nsRequest{request: r, req: req, conn: in.Conn.ID()})
	}
}

// Disconnected implements Handler: a broker whose connection closed is
// out of the routes at once.
func (n *NameServer) Disconnected(c Conn) { n.k.send(n.table, &nsConnClosed{conn: c.ID()}) }

// routeActor is the shell around namesrv.Table: it feeds requests,
// closed connections and lease scans, answers, and keeps one timer armed
// at the table's next lease end.
type routeActor struct {
	k     *kit
	core  *namesrv.Table
	armed time.Time   // the deadline the timer is set for (zero: none)
	stop  func() bool // cancels it
}

func (a *routeActor) Receive(ctx actor.Context) {
	now := a.k.now()
	switch m := ctx.Message().(type) {
	case *nsRequest:
		a.handle(m, now)
	case *nsConnClosed:
		a.logDead("broker connection closed: out of the routes", a.core.ConnClosed(m.conn, now))
	case *nsScan:
		a.armed, a.stop = time.Time{}, nil
		a.logDead("broker lease expired: out of the routes", a.core.Expire(now))
	case *actor.Stopping:
		if a.stop != nil {
			a.stop()
		}
		return
	default:
		return
	}
	a.arm(ctx.Self(), now)
}

func (a *routeActor) logDead(msg string, dead []protocol.BrokerIdentity) {
	for _, id := range dead {
		a.k.log.Info(msg, "cluster", id.ClusterName, "group", id.BrokerName, "brokerId", id.BrokerID, "addr", id.BrokerAddr,
			"version", a.core.Version())
	}
}

// arm sets the timer for the table's next lease end if it is not set
// for that time already.
func (a *routeActor) arm(self *actor.PID, now time.Time) {
	d, ok := a.core.Deadline()
	if !ok || d.Equal(a.armed) {
		return
	}
	if a.stop != nil {
		a.stop()
	}
	a.armed = d
	a.stop = a.k.after(max(d.Sub(now), 0), self, &nsScan{})
}

func (a *routeActor) handle(m *nsRequest, now time.Time) {
	ok := protocol.StatusOK
	switch req := m.req.(type) {
	case *protocol.RegisterBrokerRequest:
		resp, err := a.core.Register(&namesrv.Registration{RegisterBrokerRequest: *req, Conn: m.conn}, now)
		if err != nil {
			a.k.respond(m.request, protocol.StatusInvalidParameter, err.Error(), nil)
			return
		}
		if resp.Changed {
			a.k.log.Info("broker registered", "cluster", req.ClusterName, "group", req.BrokerName, "brokerId", req.BrokerID,
				"addr", req.BrokerAddr, "role", req.BrokerRole, "topics", len(req.Topics), "version", a.core.Version())
		}
		a.k.respond(m.request, ok, "", &resp)
	case *protocol.BrokerHeartbeatRequest:
		resp := a.core.Heartbeat(req, m.conn, now)
		a.k.respond(m.request, ok, "", &resp)
	case *protocol.UnregisterBrokerRequest:
		if a.core.Unregister(req.BrokerIdentity, now) {
			a.k.log.Info("broker unregistered", "group", req.BrokerName, "brokerId", req.BrokerID, "addr", req.BrokerAddr)
		}
		a.k.respond(m.request, ok, "", nil)
	case *protocol.GetRouteInfoRequest:
		rd, found := a.core.Route(req.Topic)
		if !found {
			a.k.respond(m.request, protocol.StatusTopicNotExist, fmt.Sprintf("no route for topic %q", req.Topic), nil)
			return
		}
		a.k.respond(m.request, ok, "", rd)
	case *protocol.GetBrokerClusterInfoRequest:
		a.k.respond(m.request, ok, "", a.core.Cluster())
	case *protocol.GetAllTopicListRequest:
		list := &protocol.TopicNameList{}
		for _, t := range a.core.Topics() {
			list.Topics = append(list.Topics, protocol.TopicName{Topic: t})
		}
		a.k.respond(m.request, ok, "", list)
	case *protocol.DeleteTopicInNamesrvRequest:
		if !a.core.DeleteTopic(req.Topic, req.ClusterName, now) {
			a.k.respond(m.request, protocol.StatusTopicNotExist, fmt.Sprintf("no route for topic %q", req.Topic), nil)
			return
		}
		a.k.respond(m.request, ok, "", nil)
	default:
		a.k.respond(m.request, protocol.StatusRequestCodeNotSupported, fmt.Sprintf("request %v not supported by a name server", m.code), nil)
	}
}
