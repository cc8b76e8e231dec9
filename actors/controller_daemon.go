package actors

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/wharfmq/wharf/actors/controller"
	"github.com/wharfmq/wharf/actors/raftnode"
	"github.com/wharfmq/wharf/actors/supervise"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage/vfs"
)

// ControllerStateMachine is a replicated state driven by committed entries
// in log order on every controller node: the controller's own is
// controller.State; tests of the raft plumbing plug in another through
// ControllerConfig.NewState. Apply must be deterministic and must not panic
// on bad bytes.
type ControllerStateMachine interface {
	Apply(index uint64, cmd []byte) (result []byte)
	Snapshot() ([]byte, error)
	Restore(snap []byte) error
}

// ControllerConfig is a controller node's behaviour.
type ControllerConfig struct {
	SelfID uint64            // this node's raft id
	Peers  map[uint64]string // every member's raft id -> controller address, this node's included
	FS     vfs.FS
	Dir    string // the raft log's directory
	// TickInterval (default 100 ms) and ElectionTimeout (default 1 s) are
	// raftnode.Config's.
	TickInterval    time.Duration
	ElectionTimeout time.Duration
	Seed            uint64 // the election timer's seed (the simulator's; production a random one)
	// SnapshotEvery compacts the log after this many applied entries
	// (default 10000).
	SnapshotEvery uint64
	// Core is the controller core's behaviour (heartbeat timeout, unclean
	// election); its Origin and Faults are set by the node.
	Core controller.Config
	// NewState, if set, replaces the controller's state with another state
	// machine (tests of the raft plumbing): there is then no Core, and
	// broker requests are answered REQUEST_CODE_NOT_SUPPORTED. Called
	// whenever the raft actor (re)starts, before the log is replayed.
	NewState func() ControllerStateMachine
	// Hooks for observers (tests), called on the raft actor (they must not block): every applied
	// command with its result and, for a proposal of this node, its id;
	// every read asked with ReadIndex, once the state machine has applied
	// its read index (the state may then be read, linearizably); every
	// dropped proposal or read; every change of leader, term or serving.
	OnApplied func(index uint64, cmd, result []byte, id uint64)
	OnRead    func(id uint64)
	OnDropped func(d raftnode.Dropped)
	OnStatus  func(st raftnode.Status)
}

func (c *ControllerConfig) norm() {
	if c.TickInterval <= 0 {
		c.TickInterval = 100 * time.Millisecond
	}
	if c.ElectionTimeout <= 0 {
		c.ElectionTimeout = time.Second
	}
	if c.SnapshotEvery == 0 {
		c.SnapshotEvery = 10000
	}
}

// Controller is a controller node: one actor around raftnode.Node, its Log
// on the FS seam, ticks from the Clock seam, and raft messages as oneway
// CONTROLLER_RAFT_MESSAGE frames over Env.Dial links, and the controller's
// State and Core, which the same actor owns (controller_core.go). It
// implements Handler for the controllers' listener: peers' raft messages
// and brokers' and admins' requests arrive on the same port.
type Controller struct {
	cfg      ControllerConfig
	env      Env
	limits   protocol.Limits
	log      *slog.Logger
	sys      *actor.ActorSystem
	k        *kit
	raft     *actor.PID
	io       *ctlLogGate
	stopOnce sync.Once
}

// NewController builds a controller node; Start spawns its actor.
func NewController(cfg ControllerConfig, env Env, limits protocol.Limits) *Controller {
	if env.Logger == nil {
		env.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.norm()
	return &Controller{cfg: cfg, env: env, limits: limits, log: env.Logger, io: &ctlLogGate{}}
}

// Start spawns the raft actor, which opens the log through Env.RunIO.
func (c *Controller) Start() error {
	if c.env.Clock == nil || c.env.RunIO == nil || c.env.Dial == nil {
		return errors.New("actors: a controller needs Env.Clock, Env.RunIO and Env.Dial")
	}
	if c.cfg.FS == nil || c.cfg.Peers[c.cfg.SelfID] == "" {
		return errors.New("actors: a controller needs an FS and itself among its peers")
	}
	actorLog := c.log.With("lib", "protoactor")
	c.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return actorLog }))
	c.k = &kit{root: c.sys.Root, clock: c.env.Clock, runIO: c.env.RunIO, log: c.log, metrics: noMetrics{}}
	if c.env.Faults != nil {
		c.k.faults = *c.env.Faults
	}
	fatal := c.env.Fatal
	if fatal == nil {
		fatal = func(err error) { c.log.Error("controller actor failed for good", "err", err) }
	}
	strategy := supervise.New(supervise.Config{Clock: c.env.Clock, MaxRestarts: 10, Window: time.Minute,
		Fatal: func(child *actor.PID, reason any) {
			fatal(fmt.Errorf("actor %s keeps failing: %v", child.Id, reason))
		}})
	opts := []actor.PropsOption{actor.WithGuardian(strategy), actor.WithSupervisor(strategy)}
	if c.env.Dispatcher != nil {
		opts = append(opts, actor.WithDispatcher(c.env.Dispatcher))
	}
	// A restarted actor is a new incarnation: it recovers from the log, as
	// after a crash, and the gate refuses the old one's late writes.
	props := actor.PropsFromProducer(func() actor.Actor {
		return &raftActor{k: c.k, cfg: c.cfg, dial: c.env.Dial, gate: c.io, gen: c.io.next(), links: map[uint64]*ctlLink{}}
	}, opts...)
	pid, err := c.sys.Root.SpawnNamed(props, "raft")
	if err != nil {
		return fmt.Errorf("actors: spawn the controller's raft actor: %w", err)
	}
	c.raft = pid
	return nil
}

// Stop stops the actor. The transport must have stopped delivering first.
func (c *Controller) Stop() error {
	c.stop(func(pid *actor.PID) { _ = c.sys.Root.PoisonFuture(pid).Wait() })
	return nil
}

func (c *Controller) stop(poison func(pid *actor.PID)) {
	c.stopOnce.Do(func() {
		if c.raft != nil {
			poison(c.raft)
		}
		if c.sys != nil {
			c.sys.Shutdown()
		}
		c.io.retire()
	})
}

// Propose submits cmd under id; the outcome comes through OnApplied (with
// id) or OnDropped.
func (c *Controller) Propose(id uint64, cmd []byte) { c.k.send(c.raft, &ctlPropose{id: id, cmd: cmd}) }

// ReadIndex asks for a linearizable read under id; the outcome comes
// through OnRead or OnDropped.
func (c *Controller) ReadIndex(id uint64) { c.k.send(c.raft, &ctlRead{id: id}) }

// Deliver implements Handler: raft messages from peers and every other
// request go to the raft actor (the latter to its Core).
func (c *Controller) Deliver(in *Inbound) {
	if closed(in.Conn) {
		return
	}
	for _, f := range in.Frames {
		r := &request{conn: in.Conn, code: f.Code, opaque: f.Opaque, oneway: f.IsOneway()}
		req, err := protocol.DecodeRequest(f, c.limits)
		if err != nil {
			st := protocol.StatusOf(err)
			c.k.respond(r, st, err.Error(), nil)
			if st.ClosesConnection() {
				in.Conn.Close(err.Error())
				return
			}
			continue
		}
		rm, ok := req.(*protocol.ControllerRaftMessageRequest)
		if !ok {
			c.k.send(c.raft, &ctlBrokerRequest{r: r, req: req})
			continue
		}
		m, err := raftnode.DecodeMessage(rm.Data)
		if err != nil || c.cfg.Peers[m.GetFrom()] == "" || m.GetFrom() == c.cfg.SelfID || m.GetTo() != c.cfg.SelfID {
			in.Conn.Close(fmt.Sprintf("bad raft message from a peer: %v", err))
			return
		}
		c.k.send(c.raft, &ctlPeerMessage{m: m})
	}
}

// Disconnected implements Handler: a broker's connection no longer carries
// its notifications.
func (c *Controller) Disconnected(conn Conn) { c.k.send(c.raft, &ctlConnGone{conn: conn}) }

// ctlLogGate serializes the log's I/O jobs (they run on Env.RunIO, possibly
// in parallel) and lets only the newest actor incarnation's jobs touch the
// log: a restarted actor must not race its predecessor's last write.
type ctlLogGate struct {
	mu  sync.Mutex
	gen uint64
}

var errStaleIncarnation = errors.New("controller raft actor restarted: a stale incarnation's log job")

func (g *ctlLogGate) next() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gen++
	return g.gen
}

func (g *ctlLogGate) retire() { g.next() }

// run runs job if gen is still the newest incarnation.
func (g *ctlLogGate) run(gen uint64, job func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if gen != g.gen {
		return errStaleIncarnation
	}
	return job()
}

// Messages of the raft actor. gen is the incarnation that asked: a
// restarted actor ignores its predecessor's timers and I/O results.
type (
	ctlOpened struct {
		gen uint64
		log *raftnode.Log
		rec raftnode.Recovered
		err error
	}
	ctlTick        struct{ gen uint64 }
	ctlPeerMessage struct{ m *pb.Message }
	ctlPersisted   struct {
		gen uint64
		err error
	}
	ctlPropose struct {
		id  uint64
		cmd []byte
	}
	ctlRead   struct{ id uint64 }
	ctlDialed struct {
		gen  uint64
		peer uint64
		conn Conn
		err  error
	}
	ctlLinkDown struct {
		peer uint64
		conn Conn
	}
)

// raftActor is the shell around raftnode.Node: it feeds ticks, peer
// messages, proposals and finished writes, applies committed entries to the
// state machine, runs the Log's writes through kit.io one at a time, and
// sends raft messages over one outbound link per peer.
type raftActor struct {
	k     *kit
	cfg   ControllerConfig
	dial  func(addr string, h Handler) (Conn, error)
	gate  *ctlLogGate
	gen   uint64
	node  *raftnode.Node
	log   *raftnode.Log
	sm    ControllerStateMachine
	links map[uint64]*ctlLink
	reads []raftnode.Read // answered by raft, waiting for the state machine
	tick  func() bool
	cs    coreState
	term  uint64 // raft's, as last reported
	// applied is the state machine's last applied index; snap the last
	// compaction asked for.
	applied, snap uint64
}

type ctlLink struct {
	conn    Conn
	dialing bool
}

func (a *raftActor) Receive(ctx actor.Context) {
	now := a.k.now()
	if a.stale(ctx.Message()) {
		return
	}
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.open(ctx.Self())
		return
	case *ctlOpened:
		a.opened(ctx.Self(), m, now)
	case *ctlTick:
		a.tick = a.k.after(a.cfg.TickInterval, ctx.Self(), &ctlTick{gen: a.gen})
		if a.node != nil {
			a.node.Tick(now)
		}
	case *ctlPeerMessage:
		if a.node != nil {
			if err := a.node.Step(now, m.m); err != nil {
				a.k.log.Debug("raft message refused", "err", err)
			}
		}
	case *ctlPersisted:
		if m.err != nil {
			// raft cannot go on after a storage error: a restart
			// recovers from what the log holds.
			panic(fmt.Errorf("controller raft log: %w", m.err))
		}
		a.node.Persisted(now)
	case *ctlPropose:
		a.propose(m)
	case *ctlRead:
		a.read(m.id)
	case *ctlDialed:
		a.dialed(m)
	case *ctlBrokerRequest:
		a.brokerRequest(now, m)
	case *ctlCoreTick:
		a.coreTick(now)
	case *ctlConnGone:
		a.connGone(m.conn)
	case *ctlLinkDown:
		if l := a.links[m.peer]; l != nil && l.conn == m.conn {
			l.conn = nil
		}
	case *actor.Stopping, *actor.Restarting:
		a.shutdown()
		return
	default:
		return
	}
	a.settle(ctx.Self(), now)
}

// settle drains the node and runs the Core's output until neither has any.
func (a *raftActor) settle(self *actor.PID, now time.Time) {
	for {
		a.drain(self, now)
		if !a.coreOut(self, now) {
			return
		}
	}
}

// stale reports whether msg answers an earlier incarnation of the actor.
func (a *raftActor) stale(msg any) bool {
	switch m := msg.(type) {
	case *ctlOpened:
		return m.gen != a.gen
	case *ctlTick:
		return m.gen != a.gen
	case *ctlPersisted:
		return m.gen != a.gen
	case *ctlCoreTick:
		return m.gen != a.gen
	case *ctlDialed:
		if m.gen != a.gen && m.conn != nil {
			m.conn.Close("dialed by a previous incarnation")
		}
		return m.gen != a.gen
	}
	return false
}

func (a *raftActor) open(self *actor.PID) {
	gate, gen, fsys, dir := a.gate, a.gen, a.cfg.FS, a.cfg.Dir
	a.k.io(self, func() any {
		out := ctlOpened{gen: gen}
		out.err = gate.run(gen, func() (err error) {
			out.log, out.rec, err = raftnode.OpenLog(fsys, dir, 0)
			return err
		})
		return &out
	})
}

func (a *raftActor) opened(self *actor.PID, m *ctlOpened, now time.Time) {
	if m.err != nil {
		panic(fmt.Errorf("controller raft log: open: %w", m.err))
	}
	peers := make([]uint64, 0, len(a.cfg.Peers))
	for id := range a.cfg.Peers {
		peers = append(peers, id)
	}
	slices.Sort(peers)
	node, err := raftnode.NewNode(raftnode.Config{ID: a.cfg.SelfID, Peers: peers, TickInterval: a.cfg.TickInterval,
		ElectionTimeout: a.cfg.ElectionTimeout, Seed: a.cfg.Seed}, m.rec, now)
	if err != nil {
		panic(fmt.Errorf("controller raft node: %w", err))
	}
	a.node, a.log = node, m.log
	if a.cfg.NewState != nil {
		a.sm = a.cfg.NewState()
	} else {
		a.sm = a.newCore(now)
	}
	a.tick = a.k.after(a.cfg.TickInterval, self, &ctlTick{gen: a.gen})
}

func (a *raftActor) dropped(d raftnode.Dropped) {
	if a.cs.core != nil {
		a.cs.core.Dropped(d.ID, d.Read, d.Reason == raftnode.LeadershipLost)
	}
	if a.cfg.OnDropped != nil {
		a.cfg.OnDropped(d)
	}
}

func (a *raftActor) propose(m *ctlPropose) {
	if a.node == nil {
		a.dropped(raftnode.Dropped{ID: m.id, Reason: raftnode.NotLeader})
		return
	}
	a.node.Propose(m.id, m.cmd)
}

func (a *raftActor) read(id uint64) {
	if a.node == nil {
		a.dropped(raftnode.Dropped{ID: id, Read: true, Reason: raftnode.NotLeader})
		return
	}
	a.node.ReadIndex(id)
}

// serveReads reports the reads whose index the state machine has reached.
func (a *raftActor) serveReads(more []raftnode.Read) {
	a.reads = append(a.reads, more...)
	kept := a.reads[:0]
	for _, r := range a.reads {
		switch {
		case r.Index > a.applied:
			kept = append(kept, r)
		default:
			if a.cs.core != nil {
				a.cs.core.ReadDone(r.ID)
			}
			if a.cfg.OnRead != nil {
				a.cfg.OnRead(r.ID)
			}
		}
	}
	a.reads = kept
}

// drain hands the node's outputs to where they go, until it has none.
func (a *raftActor) drain(self *actor.PID, now time.Time) {
	if a.node == nil {
		return
	}
	for {
		rd := a.node.Ready()
		if rd.Empty() {
			return
		}
		a.absorb(rd, now)
		for _, m := range rd.Messages {
			a.send(self, m)
		}
		if !rd.Persist.Empty() {
			a.persist(self, rd.Persist)
			return // the node hands out nothing that depends on it before Persisted
		}
	}
}

// absorb applies a Ready's state changes and reports its results.
func (a *raftActor) absorb(rd raftnode.Ready, now time.Time) {
	if rd.Restore != nil {
		if err := a.restore(rd.Restore.GetData()); err != nil {
			panic(fmt.Errorf("controller state: restore snapshot at %d: %w", rd.Restore.GetMetadata().GetIndex(), err))
		}
		a.applied = rd.Restore.GetMetadata().GetIndex()
		a.snap = max(a.snap, a.applied)
	}
	for _, e := range rd.Committed {
		result := a.sm.Apply(e.Index, e.Data)
		a.applied = e.Index
		if a.cs.core != nil {
			a.cs.core.Applied(e.Index, e.Data, result)
		}
		if a.cfg.OnApplied != nil {
			a.cfg.OnApplied(e.Index, e.Data, result, e.ID)
		}
	}
	a.applied = max(a.applied, rd.Applied) // a new leader's empty entry reaches no state machine
	if len(rd.Committed) > 0 && a.applied >= a.snap+a.cfg.SnapshotEvery {
		a.compact()
	}
	a.serveReads(rd.Reads)
	if rd.Status != nil {
		a.leader(now, *rd.Status)
		if a.cfg.OnStatus != nil {
			a.cfg.OnStatus(*rd.Status)
		}
	}
	for _, d := range rd.Dropped {
		a.dropped(d)
	}
}

// restore restores the state machine from a snapshot's data. Empty data is
// raftnode's bootstrap snapshot (index 1, the voters only): the empty state
// a new state machine already is, which only a node that applied nothing
// may be given.
func (a *raftActor) restore(data []byte) error {
	if len(data) > 0 {
		return a.sm.Restore(data)
	}
	if a.applied > 1 {
		return fmt.Errorf("an empty snapshot after index %d was applied", a.applied)
	}
	return nil
}

func (a *raftActor) compact() {
	data, err := a.sm.Snapshot()
	if err != nil {
		a.k.log.Error("controller state: snapshot failed; the log keeps growing", "err", err)
		return
	}
	if err := a.node.Compact(a.applied, data); err != nil {
		panic(fmt.Errorf("controller raft node: %w", err))
	}
	a.snap = a.applied
}

func (a *raftActor) persist(self *actor.PID, p raftnode.Persist) {
	gate, gen, l := a.gate, a.gen, a.log
	a.k.io(self, func() any {
		return &ctlPersisted{gen: gen, err: gate.run(gen, func() error { return l.Save(p) })}
	})
}

// send writes m to its peer's link, dialing it first if needed; raft
// retransmits what is dropped meanwhile.
func (a *raftActor) send(self *actor.PID, m *pb.Message) {
	peer := m.GetTo()
	addr := a.cfg.Peers[peer]
	if addr == "" || peer == a.cfg.SelfID {
		return
	}
	l := a.links[peer]
	if l == nil {
		l = &ctlLink{}
		a.links[peer] = l
	}
	if l.conn != nil && !closed(l.conn) {
		l.conn.Send(&protocol.ControllerRaftMessageRequest{Data: raftnode.EncodeMessage(m)})
		return
	}
	if l.dialing {
		return
	}
	l.conn, l.dialing = nil, true
	dial, root, gen := a.dial, a.k.root, a.gen
	a.k.io(self, func() any {
		conn, err := dial(addr, &ctlLinkHandler{root: root, self: self, peer: peer})
		return &ctlDialed{gen: gen, peer: peer, conn: conn, err: err}
	})
}

func (a *raftActor) dialed(m *ctlDialed) {
	l := a.links[m.peer]
	l.dialing = false
	if m.err != nil {
		a.k.log.Debug("controller peer unreachable", "peer", m.peer, "err", m.err)
		return
	}
	l.conn = m.conn
}

func (a *raftActor) shutdown() {
	if a.tick != nil {
		a.tick()
	}
	if a.cs.timer != nil {
		a.cs.timer()
	}
	for _, l := range a.links {
		if l.conn != nil {
			l.conn.Close("controller stopping")
		}
	}
	// The log is closed by the next incarnation's gate check failing any
	// late write; closing it here could race a write in flight.
}

// ctlLinkHandler receives on an outbound peer link: peers answer nothing,
// so only the link's end matters.
type ctlLinkHandler struct {
	root *actor.RootContext
	self *actor.PID
	peer uint64
}

func (h *ctlLinkHandler) Deliver(*Inbound) {}
func (h *ctlLinkHandler) Disconnected(c Conn) {
	h.root.Send(h.self, &ctlLinkDown{peer: h.peer, conn: c})
}
