package actors

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
	"github.com/wharfmq/wharf/storage/vfs"
)

// Broker is one broker's actors over one Store. It implements Handler: the
// transport hands it read bursts, it routes each request to the actor that
// owns the state the request touches, and the actors reply through the
// request's Conn.
//
// The actors: the CommitLogWriter (the only writer of the log), the
// FlushActor (group commit or interval flush), the Reput actor (turns new
// log records into ConsumeQueue entries and index keys, and writes
// checkpoints) with one DispatchActor per ConsumeQueue (entries, pulls, long
// polls) and one IndexActor, the TopicManager and the ConsumerOffsetManager.
// All are top-level actors whose guardian restarts them when they panic;
// their state is either in the store (so nothing acknowledged is lost) or
// rebuilt from it on restart.
type Broker struct {
	cfg    Config
	env    Env
	store  *storage.Store
	limits protocol.Limits
	log    *slog.Logger
	sys    *actor.ActorSystem
	props  []actor.PropsOption
	k      *kit

	p *pids

	haInSync    atomic.Int32                         // slaves within haMaxGapNotInSync (master)
	haSlaves    atomic.Pointer[[]protocol.SlaveInfo] // (master)
	haStatus    atomic.Pointer[string]               // (slave)
	haMasterMax atomic.Int64                         // (slave)

	v *views

	bootTime    time.Time
	msgPutTotal atomic.Int64
	msgGetTotal atomic.Int64
	bytesPut    atomic.Int64
	conns       atomic.Int64

	stopOnce sync.Once
}

// New builds a broker over an opened store. Start spawns its actors.
func New(cfg Config, env Env, store *storage.Store, limits protocol.Limits) *Broker {
	if env.RunIO == nil {
		env.RunIO = func(fn func()) { go fn() }
	}
	if env.Logger == nil {
		env.Logger = slog.New(slog.DiscardHandler)
	}
	// Sends keep their properties encoded: the writer turns them straight
	// into the log's encoding, without a Go map per message.
	limits.RawProperties = true
	b := &Broker{cfg: cfg, env: env, store: store, limits: limits, log: env.Logger, p: &pids{}}
	b.v = newViews()
	return b
}

// Start spawns the actors.
func (b *Broker) Start() error {
	actorLog := b.log.With("lib", "protoactor")
	b.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return actorLog }))
	b.k = &kit{root: b.sys.Root, clock: b.env.Clock, runIO: b.env.RunIO, log: b.log}
	if b.env.Faults != nil {
		b.k.faults = *b.env.Faults
	}
	b.bootTime = b.env.Clock.Now()
	// Restart a panicking actor; 10 restarts in total (no wall-clock window,
	// so the simulator stays deterministic), then stop it.
	strategy := actor.NewOneForOneStrategy(10, 0, actor.DefaultDecider)
	b.props = []actor.PropsOption{actor.WithGuardian(strategy)}
	if b.env.Dispatcher != nil {
		b.props = append(b.props, actor.WithDispatcher(b.env.Dispatcher))
	}
	var err error
	spawn := func(name string, producer func() actor.Actor) *actor.PID {
		if err != nil {
			return nil
		}
		var pid *actor.PID
		pid, err = b.sys.Root.SpawnNamed(actor.PropsFromProducer(producer, b.props...), name)
		return pid
	}
	b.p.topics = spawn("topics", func() actor.Actor { return &topicManager{b: b} })
	b.p.offsets = spawn("offsets", func() actor.Actor { return &offsetManager{b: b} })
	b.p.index = spawn("index", func() actor.Actor { return newIndexActor(b.k, b.store, b.cfg.MaxPullBytes) })
	b.p.groups = spawn("groups", func() actor.Actor { return &groupRouter{b: b} })
	b.p.reput = spawn("reput", func() actor.Actor {
		return &reputActor{k: b.k, store: b.store, p: b.p, syncFlush: b.cfg.FlushDiskType == SyncFlush,
			interval: b.cfg.FlushIntervalConsumeQueue, queueProps: b.queueProps}
	})
	if b.isSlave() {
		b.p.haClient = spawn("haclient", func() actor.Actor { return &haClient{b: b} })
	} else {
		b.p.replicator = spawn("replicator", func() actor.Actor { return &replicator{b: b} })
	}
	b.p.flusher = spawn("flush", func() actor.Actor { return &flushActor{b: b} })
	b.p.writer = spawn("writer", func() actor.Actor { return &writerActor{b: b} })
	if !b.isSlave() {
		b.p.scheduler = spawn("scheduler", func() actor.Actor { return &scheduler{b: b} })
	}
	if err != nil {
		return fmt.Errorf("actors: spawn: %w", err)
	}
	return nil
}

// childProps are the props of actors spawned by other actors.
func (b *Broker) childProps(producer func() actor.Actor) *actor.Props {
	var opts []actor.PropsOption
	if b.env.Dispatcher != nil {
		opts = append(opts, actor.WithDispatcher(b.env.Dispatcher))
	}
	return actor.PropsFromProducer(producer, opts...)
}

// queueProps are the props of queue k's DispatchActor.
func (b *Broker) queueProps(k storage.QueueKey) *actor.Props {
	cfg := b.pullConfig()
	return b.childProps(func() actor.Actor { return newDispatchActor(b.k, b.store, b.p, b.v, k, cfg, &b.msgGetTotal) })
}

// Stop drains the actors in dependency order (writes first, then flush,
// dispatch, index, metadata) and closes the store, which writes a clean
// checkpoint and removes the abort file. The transport must have stopped
// delivering first.
func (b *Broker) Stop() error {
	var err error
	b.stopOnce.Do(func() {
		for _, pid := range []*actor.PID{b.p.scheduler, b.p.writer, b.p.haClient, b.p.flusher, b.p.replicator, b.p.reput, b.p.index, b.p.groups, b.p.topics, b.p.offsets} {
			if pid != nil {
				_ = b.sys.Root.PoisonFuture(pid).Wait()
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
}

func (b *Broker) respond(r *request, st protocol.Status, remark string, resp protocol.Fields) {
	b.k.respond(r, st, remark, resp)
}

// Deliver routes one read burst. It runs on the transport's goroutine and
// never blocks: every request becomes an actor message, except the ones that
// read only immutable or atomically published state.
func (b *Broker) Deliver(in *Inbound) {
	if closed(in.Conn) {
		return
	}
	var sends []*sendItem
	// One allocation per burst for what every request of it needs, instead
	// of several per request (a burst often holds hundreds of sends).
	reqs := make([]request, len(in.Frames))
	var items []sendItem
	var single []protocol.Message
	for i, f := range in.Frames {
		r := &reqs[i]
		*r = request{conn: in.Conn, code: f.Code, opaque: f.Opaque, oneway: f.IsOneway()}
		if f.IsResponse() {
			b.respond(r, protocol.StatusFrameIllegal, "a response frame sent to the broker", nil)
			in.Conn.Close("client sent a response frame")
			return
		}
		req, err := protocol.DecodeRequest(f, b.limits)
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
			if items == nil {
				items = make([]sendItem, 0, len(in.Frames)) // never grows: pointers into it stay valid
			}
			if single == nil {
				single = make([]protocol.Message, 0, len(in.Frames))
			}
			single = append(single, m.Message())
			items = append(items, sendItem{request: r, topic: m.Topic, queueID: m.QueueID, bornTs: m.BornTimestamp,
				msgs: single[len(single)-1 : len(single) : len(single)]})
			sends = append(sends, &items[len(items)-1])
		case *protocol.SendBatchRequest:
			if items == nil {
				items = make([]sendItem, 0, len(in.Frames))
			}
			items = append(items, sendItem{request: r, topic: m.Topic, queueID: m.QueueID, bornTs: m.BornTimestamp,
				msgs: m.Messages, batch: true})
			sends = append(sends, &items[len(items)-1])
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
		case *protocol.QueryConsumerOffsetRequest, *protocol.UpdateConsumerOffsetRequest, *protocol.GetConsumerOffsetsRequest:
			b.sys.Root.Send(b.p.offsets, &offsetMsg{request: r, req: req})
		case *protocol.CreateTopicRequest, *protocol.UpdateTopicRequest, *protocol.DeleteTopicRequest, *protocol.ListTopicsRequest:
			b.sys.Root.Send(b.p.topics, &topicMsg{request: r, req: req})
		case *protocol.GetBrokerRuntimeInfoRequest:
			b.respond(r, protocol.StatusOK, "", b.runtimeInfo())
		case *protocol.HeartbeatRequest, *protocol.UnregisterClientRequest, *protocol.DescribeConsumerGroupRequest, *protocol.GetConsumerGroupsRequest:
			b.sys.Root.Send(b.p.groups, &groupReq{request: r, req: req})
		case *protocol.ConsumerSendMsgBackRequest:
			if it := b.sendBack(r, m); it != nil {
				sends = append(sends, it)
			}
		default:
			b.respond(r, protocol.StatusRequestCodeNotSupported, fmt.Sprintf("request %v not supported", f.Code), nil)
		}
	}
	if len(sends) > 0 {
		b.sys.Root.Send(b.p.writer, &writeBatch{items: sends})
	}
}

// Connected counts a new connection (for stats).
func (b *Broker) Connected(Conn) { b.conns.Add(1) }

// Disconnected implements Handler. Held pulls of the connection expire on
// their own; writes to a closed connection are dropped by the transport.
func (b *Broker) Disconnected(Conn) { b.conns.Add(-1) }

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
	var slaves []protocol.SlaveInfo
	var replicated int64
	if p := b.haSlaves.Load(); p != nil {
		slaves = *p
		for _, s := range slaves {
			replicated = max(replicated, s.AckedOffset)
		}
	}
	var haStatus string
	if p := b.haStatus.Load(); p != nil {
		haStatus = *p
	}
	return &protocol.BrokerRuntimeInfo{
		Slaves:             slaves,
		ReplicatedOffset:   replicated,
		HAStatus:           haStatus,
		MasterMaxOffset:    b.haMasterMax.Load(),
		BrokerName:         b.cfg.BrokerName,
		BrokerID:           b.cfg.BrokerID,
		BrokerRole:         b.cfg.BrokerRole,
		Version:            Version,
		BootTimestamp:      b.bootTime.UnixMilli(),
		CommitLogMinOffset: cl.MinOffset(),
		CommitLogMaxOffset: cl.MaxOffset(),
		FlushedOffset:      cl.FlushedOffset(),
		MsgPutTotal:        b.msgPutTotal.Load(),
		MsgGetTotal:        b.msgGetTotal.Load(),
		BytesPutTotal:      b.bytesPut.Load(),
		TopicCount:         int32(len(topics)),
		ConnectionCount:    int32(b.conns.Load()),
		DiskUsedRatio:      b.diskUsed(),
		Extra: map[string]string{
			"flushDiskType": string(b.cfg.FlushDiskType),
			"dispatched":    fmt.Sprint(b.store.Dispatched()),
		},
	}
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

// encodeProperties turns a property map into the log's properties string,
// keys sorted so the same message always gives the same bytes.
func encodeProperties(props map[string]string) ([]byte, error) {
	if len(props) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	kv := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		kv = append(kv, k, props[k])
	}
	return storage.EncodeProperties(kv...)
}

// statusOfStoreError maps a store error to the status a producer gets.
func statusOfStoreError(err error) protocol.Status {
	switch {
	case errors.Is(err, storage.ErrDiskFull):
		return protocol.StatusDiskFull
	case errors.Is(err, storage.ErrIllegal):
		return protocol.StatusMessageIllegal
	default:
		return protocol.StatusServiceNotAvailable
	}
}

func parseHost(s string) netip.AddrPort {
	ap, _ := netip.ParseAddrPort(s)
	return ap
}

func (b *Broker) storeFS() vfs.FS { return b.store.FS() }

func (b *Broker) diskUsed() float64 {
	u, err := b.store.FS().Usage(b.store.Root())
	if err != nil {
		return 0
	}
	return u.UsedRatio()
}
