package actors

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/actors/supervise"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

// Broker is the wiring of one broker's actors over one Store. It
// implements Handler: the transport hands it read bursts, it routes each
// request to the actor that owns the state the request touches, and the
// actors answer through the request's Conn. Which file owns which decision
// is in doc.go.
//
// All actors are top-level actors whose guardian restarts them when they
// panic; their state is either in the store (so nothing acknowledged is
// lost) or rebuilt from it on restart.
type Broker struct {
	cfg    Config
	env    Env
	store  *storage.Store
	limits protocol.Limits
	log    *slog.Logger
	sys    *actor.ActorSystem
	props  []actor.PropsOption
	k      *kit
	p      *pids
	v      *views
	stats  *stats
	bursts burstPool // spare bursts of sends, back from the writer
	sends  sendQueue // bursts of sends on their way to the writer
	reg    *regMemo  // nil: no name server

	strategy actor.SupervisorStrategy
	depths   *mailboxDepths // nil: metrics off, mailboxes not counted
	bootTime time.Time
	stopOnce sync.Once
	stopping atomic.Bool // stop began: protoactor's dead letters are expected (stopQuiet)
}

// stats are the broker's counters, for GET_BROKER_RUNTIME_INFO.
type stats struct {
	msgPutTotal atomic.Int64 // writer
	msgGetTotal atomic.Int64 // dispatch actors
	bytesPut    atomic.Int64 // writer
	conns       atomic.Int64 // transport
}

// New builds a broker over an opened store. Start spawns its actors.
func New(cfg Config, env Env, store *storage.Store, limits protocol.Limits) *Broker {
	if env.Logger == nil {
		env.Logger = slog.New(slog.DiscardHandler)
	}
	// Sends keep their properties encoded: the writer turns them straight
	// into the log's encoding, without a Go map per message.
	limits.RawProperties = true
	b := &Broker{cfg: cfg, env: env, store: store, limits: limits, log: env.Logger, p: &pids{}, v: newViews(), stats: &stats{}}
	b.v.publishRole(b.startRole())
	if env.Metrics != nil {
		b.depths = newMailboxDepths(&b.sends)
	}
	return b
}

// startRole is the role the configuration starts the broker in.
func (b *Broker) startRole() roleState {
	if b.cfg.EnableControllerMode {
		// The controllers assign the role: until then a read-only
		// replica of nobody.
		return roleState{role: RoleSlave}
	}
	return roleState{role: b.cfg.BrokerRole, master: b.cfg.HAMasterAddress, brokerID: b.cfg.BrokerID}
}

// checkSeams refuses an Env or a store the broker cannot run on.
func (b *Broker) checkSeams() error {
	if b.env.Clock == nil || b.env.RunIO == nil {
		return errors.New("actors: Env.Clock and Env.RunIO are required")
	}
	if b.store != nil && b.cfg.EnableControllerMode != b.store.DispatchConfirmedOnly() {
		// Controller mode promises consumers nothing unconfirmed, across
		// restarts too: the store must keep to it when it opens and closes.
		return fmt.Errorf("actors: enableControllerMode is %v but the store was opened with DispatchConfirmedOnly %v",
			b.cfg.EnableControllerMode, b.store.DispatchConfirmedOnly())
	}
	return nil
}

// Start spawns the actors.
func (b *Broker) Start() error {
	if err := b.checkSeams(); err != nil {
		return err
	}
	actorLog := slog.New(stopQuiet{Handler: b.log.Handler(), stopping: &b.stopping}).With("lib", "protoactor")
	b.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return actorLog }))
	b.k = &kit{root: b.sys.Root, clock: b.env.Clock, runIO: b.env.RunIO, lane: newIOLane(b.env.RunIO), log: b.log}
	b.k.metrics, b.k.timed = metricsOf(b.env)
	if b.env.Faults != nil {
		b.k.faults = *b.env.Faults
	}
	b.bootTime = b.env.Clock.Now()
	// Restart a panicking actor, at most 10 times a minute on the Clock
	// seam; beyond that, or at a broken invariant, the broker cannot go on
	// and says so (Env.Fatal), instead of running without the actor.
	fatal := b.env.Fatal
	if fatal == nil {
		fatal = func(err error) { b.log.Error("broker actor failed for good", "err", err) }
	}
	strategy := supervise.New(supervise.Config{Clock: b.env.Clock, MaxRestarts: 10, Window: time.Minute,
		Fatal: func(child *actor.PID, reason any) {
			fatal(fmt.Errorf("actor %s keeps failing or broke an invariant: %v", child.Id, reason))
		}})
	b.strategy = strategy
	b.props = []actor.PropsOption{actor.WithGuardian(strategy), actor.WithSupervisor(strategy)}
	if b.env.Dispatcher != nil {
		b.props = append(b.props, actor.WithDispatcher(b.env.Dispatcher))
	}
	var err error
	spawn := func(name string, producer func() actor.Actor) *actor.PID {
		if err != nil {
			return nil
		}
		var pid *actor.PID
		pid, err = b.sys.Root.SpawnNamed(actor.PropsFromProducer(producer, b.withMailbox(b.props, name)...), name)
		return pid
	}
	// The registrar before the topic manager, so that each table the
	// manager publishes reaches it.
	if err := b.startRegistrar(spawn); err != nil {
		return err
	}
	b.p.topics = spawn("topics", func() actor.Actor {
		return newTopicManager(b.k, b.p, b.v, b.store, b.cfg.DefaultTopicQueueNums, b.isSlave())
	})
	b.p.offsets = spawn("offsets", func() actor.Actor { return newOffsetManager(b.k, b.v, b.store, b.cfg.FlushConsumerOffsetInterval) })
	b.p.index = spawn("index", func() actor.Actor { return newIndexActor(b.k, b.store, b.cfg.MaxPullBytes) })
	b.p.groups = spawn("groups", func() actor.Actor {
		return &groupRouter{k: b.k, p: b.p, v: b.v, interval: b.cfg.ConsumerHeartbeatInterval, boot: b.bootTime, props: b.childProps("groups")}
	})
	// Controller mode: before any role, only what the store dispatched
	// when it opened, which was confirmed before the stop (storage's
	// DispatchConfirmedOnly): a former master's tail past its confirm
	// offset waits until the broker knows it is master again, or is cut.
	held := b.store.Dispatched()
	b.p.reput = spawn("reput", func() actor.Actor {
		return &reputActor{k: b.k, store: b.store, p: b.p, syncFlush: b.cfg.FlushDiskType == SyncFlush,
			controller: b.cfg.EnableControllerMode, held: held, interval: b.cfg.FlushIntervalConsumeQueue, queueProps: b.queueProps}
	})
	wd := writerDeps{k: b.k, p: b.p, v: b.v, sends: &b.sends, st: b.store, stats: b.stats, cfg: b.cfg, limits: b.limits, dialer: b.env.Dial, restart: b.env.Restart}
	start := b.startRole()
	// A restarted writer takes the role in force, not the one the broker
	// started with: the role may have changed at run time.
	// The durability actor first: the writer hands it appends and roles.
	b.p.durability = spawn("durability", func() actor.Actor { return newDurabilityActor(b.k, b.p, b.v, b.store, b.cfg) })
	b.p.writer = spawn("writer", func() actor.Actor { return newWriterActor(wd, b.v.currentRole()) })
	b.p.role = spawn("role", func() actor.Actor {
		return &roleActor{k: b.k, p: b.p, v: b.v, cur: start, scheduler: b.childProps("scheduler")(b.newScheduler)}
	})
	if b.depths != nil {
		// The snapshot the gauges and the status endpoints read
		// (snapshot.go): taken only when someone reads it.
		b.p.snapshot = spawn("snapshot", b.newSnapshot)
	}
	if err != nil {
		return fmt.Errorf("actors: spawn: %w", err)
	}
	// Last: it asks the role supervisor and the durability actor.
	return b.startController(spawn)
}

func (b *Broker) newSnapshot() actor.Actor {
	return &snapshotActor{k: b.k, p: b.p, v: b.v, store: b.store, stats: b.stats, cfg: b.cfg, boot: b.bootTime, depths: b.depths}
}

// newScheduler makes the delay scheduler (a master's: the role
// supervisor runs it).
func (b *Broker) newScheduler() actor.Actor {
	return newScheduler(b.k, b.p, b.v, b.store, len(b.cfg.DelayLevels))
}

// HAHandler is the Handler for the haListenPort: a master's slaves
// connect there (a slave refuses them).
func (b *Broker) HAHandler() Handler {
	return &haHandler{k: b.k, limits: b.limits, writer: func() *actor.PID { return b.p.durability }}
}

// isSlave reports the broker's current role.
func (b *Broker) isSlave() bool { return b.v.currentRole().slave() }

// childProps makes the props of actors of kind spawned by other actors.
func (b *Broker) childProps(kind string) func(producer func() actor.Actor) *actor.Props {
	opts := []actor.PropsOption{actor.WithSupervisor(b.strategy)}
	if b.env.Dispatcher != nil {
		opts = append(opts, actor.WithDispatcher(b.env.Dispatcher))
	}
	opts = b.withMailbox(opts, kind)
	return func(producer func() actor.Actor) *actor.Props { return actor.PropsFromProducer(producer, opts...) }
}

// withMailbox adds to opts a mailbox that counts kind's depth, if
// mailboxes are counted (metrics on); the default mailbox otherwise.
func (b *Broker) withMailbox(opts []actor.PropsOption, kind string) []actor.PropsOption {
	mw := b.depths.middleware(kind)
	if mw == nil {
		return opts
	}
	return append(opts[:len(opts):len(opts)], actor.WithMailbox(actor.Unbounded(mw)))
}

// queueProps are the props of queue k's DispatchActor.
func (b *Broker) queueProps(k storage.QueueKey) *actor.Props {
	cfg := b.pullConfig()
	return b.childProps("dispatch")(func() actor.Actor { return newDispatchActor(b.k, b.store, b.p, b.v, k, cfg, &b.stats.msgGetTotal) })
}

// Stop drains the actors in dependency order (writes first, then flush,
// dispatch, index, metadata) and closes the store, which writes a clean
// checkpoint and removes the abort file. The transport must have stopped
// delivering first.
func (b *Broker) Stop() error {
	return b.stop(func(pid *actor.PID) { _ = b.sys.Root.PoisonFuture(pid).Wait() })
}

// stop is Stop with the wait for each actor's end given: poison returns
// once pid has stopped. Tests on virtual time cannot block in a future's
// Wait (the mailbox runs on the goroutine that waits), so they step their
// loop until the actor is gone instead.
func (b *Broker) stop(poison func(pid *actor.PID)) error {
	var err error
	b.stopOnce.Do(func() {
		b.stopping.Store(true)
		// The role supervisor first: it stops the scheduler, its child.
		// The registrar first: it unregisters while the broker still serves.
		for _, pid := range []*actor.PID{b.p.snapshot, b.p.registrar, b.p.ctl, b.p.role, b.p.writer, b.p.durability, b.p.reput, b.p.index, b.p.groups, b.p.topics, b.p.offsets} {
			if pid != nil {
				poison(pid)
			}
		}
		b.sys.Shutdown()
		err = b.store.Close()
	})
	return err
}

// after sends msg to pid after d on the Clock.
func (b *Broker) after(d time.Duration, pid *actor.PID, msg any) func() bool {
	return b.k.after(d, pid, msg)
}

func (b *Broker) nowMs() int64 { return b.env.Clock.Now().UnixMilli() }

// request is what every routed request carries: where to answer.
type request struct {
	conn   Conn
	code   protocol.Code
	opaque uint32
	oneway bool
	at     time.Time // when its burst arrived; zero unless metrics want latencies
}

func (b *Broker) respond(r *request, st protocol.Status, remark string, resp protocol.Fields) {
	b.k.respond(r, st, remark, resp)
}

// Deliver routes one read burst. It runs on the transport's goroutine and
// never blocks: every request becomes an actor message, except the ones that
// read only immutable or atomically published state. The sends of a burst
// go to the writer as one batch.
func (b *Broker) Deliver(in *Inbound) {
	if closed(in.Conn) {
		return
	}
	bu := b.bursts.get(len(in.Frames))
	var at time.Time
	if b.k.timed {
		at = b.k.now()
	}
	// A burst of sends only may give its bytes back once the writer is
	// done with it; anything routed elsewhere may hold them longer.
	sendsOnly := in.Release != nil
	for i, f := range in.Frames {
		r := &bu.reqs[i]
		*r = request{conn: in.Conn, code: f.Code, opaque: f.Opaque, oneway: f.IsOneway(), at: at}
		if f.IsResponse() {
			b.respond(r, protocol.StatusFrameIllegal, "a response frame sent to the broker", nil)
			in.Conn.Close("client sent a response frame")
			return
		}
		req, err := bu.decode(f, b.limits)
		if err != nil {
			st := protocol.StatusOf(err)
			b.respond(r, st, err.Error(), nil)
			if st.ClosesConnection() {
				in.Conn.Close(err.Error())
				return
			}
			continue
		}
		switch m := req.(type) {
		case *protocol.SendRequest:
			bu.send(r, m)
		case *protocol.SendBatchRequest:
			bu.batch(r, m)
		case *protocol.ConsumerSendMsgBackRequest:
			sendsOnly = false
			if it := b.sendBack(r, m); it != nil {
				bu.sends = append(bu.sends, it)
			}
		default:
			sendsOnly = false
			b.route(r, req)
		}
	}
	if len(bu.sends) == 0 {
		return // nothing went to the writer; the burst is the collector's
	}
	wb := &bu.wb
	*wb = writeBatch{items: bu.sends}
	if sendsOnly {
		// The writer gives the bytes back, and then the burst itself.
		wb.release, wb.burst, bu.pool = in.Release, bu, &b.bursts
	}
	if b.sends.push(wb) {
		b.sys.Root.Send(b.p.writer, &sendsQueued{})
	}
}

// route hands every request but a send to the actor that owns what it
// touches (or answers it from published state).
func (b *Broker) route(r *request, req protocol.Request) {
	switch m := req.(type) {
	case *protocol.PullRequest:
		b.routePull(r, m)
	case *protocol.QueryMessageRequest:
		b.sys.Root.Send(b.p.index, &queryMsg{request: r, req: m})
	case *protocol.ViewMessageRequest:
		b.viewMessage(r, m)
	case *protocol.GetMaxOffsetRequest:
		b.queueOffset(r, m.Topic, m.QueueID, true)
	case *protocol.GetMinOffsetRequest:
		b.queueOffset(r, m.Topic, m.QueueID, false)
	case *protocol.SearchOffsetRequest:
		b.searchOffset(r, m)
	case *protocol.QueryConsumerOffsetRequest, *protocol.UpdateConsumerOffsetRequest, *protocol.GetConsumerOffsetsRequest:
		b.sys.Root.Send(b.p.offsets, &offsetMsg{request: r, req: req})
	case *protocol.CreateTopicRequest, *protocol.UpdateTopicRequest, *protocol.DeleteTopicRequest, *protocol.ListTopicsRequest:
		b.sys.Root.Send(b.p.topics, &topicMsg{request: r, req: req})
	case *protocol.NotifyBrokerRoleChangedRequest:
		if b.p.ctl != nil {
			b.sys.Root.Send(b.p.ctl, &ctlNotified{})
		}
		b.respond(r, protocol.StatusOK, "", nil)
	case *protocol.UpdateBrokerRoleRequest:
		b.sys.Root.Send(b.p.role, &roleMsg{request: r, req: m})
	case *protocol.GetBrokerRuntimeInfoRequest:
		b.respond(r, protocol.StatusOK, "", b.runtimeInfo())
	case *protocol.HeartbeatRequest, *protocol.UnregisterClientRequest, *protocol.DescribeConsumerGroupRequest, *protocol.GetConsumerGroupsRequest,
		*protocol.ClientHeartbeatRequest, *protocol.GetConsumerListRequest, *protocol.LockBatchRequest:
		b.sys.Root.Send(b.p.groups, &groupReq{request: r, req: req})
	default:
		b.respond(r, protocol.StatusRequestCodeNotSupported, fmt.Sprintf("request %v not supported", r.code), nil)
	}
}

// Connected counts a new connection (for stats).
func (b *Broker) Connected(Conn) {
	b.stats.conns.Add(1)
	if b.k != nil {
		b.k.metrics.Connections(1)
	}
}

// Disconnected implements Handler. Held pulls of the connection expire on
// their own; writes to a closed connection are dropped by the transport.
// The groups router hears of it: the client-coordinated members the
// connection carried leave at once.
func (b *Broker) Disconnected(c Conn) {
	b.stats.conns.Add(-1)
	if b.k != nil {
		b.k.metrics.Connections(-1)
	}
	if b.p.groups != nil {
		b.sys.Root.Send(b.p.groups, &connClosed{id: c.ID()})
	}
}

// viewMessage answers VIEW_MESSAGE_BY_ID from the log directly: log reads of
// written ranges are safe from any goroutine.
func (b *Broker) viewMessage(r *request, m *protocol.ViewMessageRequest) {
	host, off, err := protocol.ParseOffsetMsgID(m.MsgID)
	if err != nil {
		b.respond(r, protocol.StatusMessageIllegal, err.Error(), nil)
		return
	}
	if host != b.cfg.StoreHost {
		b.respond(r, protocol.StatusQueryNotFound, fmt.Sprintf("message id names broker %v, this is %v", host, b.cfg.StoreHost), nil)
		return
	}
	rec, err := b.store.CommitLog().ReadRecord(off, 0, true)
	var raw []byte
	if err == nil {
		raw, err = b.store.CommitLog().Read(off, int(rec.TotalSize))
	}
	if err != nil {
		b.respond(r, protocol.StatusQueryNotFound, fmt.Sprintf("no message at offset %d: %v", off, err), nil)
		return
	}
	b.k.respondRecords(r, protocol.StatusOK, "", &Records{Kind: RecordsView, Raw: [][]byte{raw}})
}

func (b *Broker) runtimeInfo() *protocol.BrokerRuntimeInfo {
	cl := b.store.CommitLog()
	topics := b.v.topicsSnapshot()
	slaves := b.v.slavesSnapshot()
	var replicated int64
	for _, s := range slaves {
		replicated = max(replicated, s.AckedOffset)
	}
	role := b.v.currentRole()
	haStatus, masterMax := b.v.followerSnapshot()
	if !role.slave() {
		haStatus, masterMax = "", 0
	}
	info := &protocol.BrokerRuntimeInfo{
		Slaves:             slaves,
		ReplicatedOffset:   replicated,
		HAStatus:           haStatus,
		MasterMaxOffset:    masterMax,
		BrokerName:         b.cfg.BrokerName,
		BrokerID:           role.brokerID,
		BrokerRole:         role.role,
		Version:            Version,
		BootTimestamp:      b.bootTime.UnixMilli(),
		CommitLogMinOffset: cl.MinOffset(),
		CommitLogMaxOffset: cl.MaxOffset(),
		FlushedOffset:      cl.FlushedOffset(),
		MsgPutTotal:        b.stats.msgPutTotal.Load(),
		MsgGetTotal:        b.stats.msgGetTotal.Load(),
		BytesPutTotal:      b.stats.bytesPut.Load(),
		TopicCount:         int32(len(topics)),
		ConnectionCount:    int32(b.stats.conns.Load()),
		DiskUsedRatio:      b.diskUsed(),
		Extra: map[string]string{
			"flushDiskType": string(b.cfg.FlushDiskType),
			"dispatched":    fmt.Sprint(b.store.Dispatched()),
		},
	}
	if ns := b.nameServerStatus(); ns != "" {
		info.Extra["namesrv"] = ns
	}
	return info
}

// Version is the broker's version string.
const Version = "0.1.0"

// recordToExt converts a stored record into a message with its properties
// as a map, for the broker's own re-sends (retries, due delayed messages).
// Body aliases the record's bytes. Answers to clients do not come through
// here: they carry the records and the connection's codec converts them.
func recordToExt(r *storage.Record) protocol.MessageExt {
	var props map[string]string
	storage.EachProperty(r.Properties, func(k, v []byte) {
		if props == nil {
			props = map[string]string{}
		}
		props[string(k)] = string(v)
	})
	return protocol.MessageExt{
		Message:         protocol.Message{Topic: string(r.Topic), Flag: r.Flag, Body: r.Body, Properties: props},
		QueueID:         r.QueueID,
		QueueOffset:     r.QueueOffset,
		CommitLogOffset: r.PhysicalOffset,
		StoreSize:       r.TotalSize,
		BornTimestamp:   r.BornTimestamp,
		StoreTimestamp:  r.StoreTimestamp,
		BornHost:        r.BornHost.String(),
		StoreHost:       r.StoreHost.String(),
		MsgID:           protocol.OffsetMsgID(r.StoreHost, r.PhysicalOffset),
		ReconsumeTimes:  r.ReconsumeTimes,
		SysFlag:         r.SysFlag,
		BodyCRC:         r.BodyCRC,
	}
}

func (b *Broker) diskUsed() float64 {
	u, err := b.store.FS().Usage(b.store.Root())
	if err != nil {
		return 0
	}
	return u.UsedRatio()
}
