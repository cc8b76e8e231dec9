package actors

import (
	"sort"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

// The broker's snapshot: once a SnapshotInterval the snapshot actor
// gathers what the owners publish (views, the log's offsets, the stats,
// the groups' descriptions with their committed offsets) into one plain
// BrokerSnapshot, hands it to the Metrics seam (the gauges) and publishes
// it for Broker.Snapshot (the JSON status endpoints). Gauges come from it
// rather than from per-event calls, so the cores stay plain and a
// simulator records them deterministically. It runs only when Env.Metrics
// is set: without a reader it would only add messages.

// SnapshotInterval is how often the snapshot is taken.
const SnapshotInterval = time.Second

// BrokerSnapshot is the broker's state at TimestampMs. Field names are the
// JSON status endpoints' (camelCase, as on the wire); docs/OPERATIONS.md
// documents them. Readers must not modify it.
type BrokerSnapshot struct {
	TimestampMs     int64  `json:"timestampMs"`
	ClusterName     string `json:"clusterName"`
	BrokerName      string `json:"brokerName"`
	BrokerID        int64  `json:"brokerId"`
	BrokerRole      string `json:"brokerRole"`
	BrokerAddr      string `json:"brokerAddr"`
	HAServerAddr    string `json:"haServerAddr"`
	ControllerMode  bool   `json:"controllerMode"`
	Version         string `json:"version"`
	BootTimestampMs int64  `json:"bootTimestampMs"`
	UptimeMs        int64  `json:"uptimeMs"`

	CommitLog     LogSnapshot `json:"commitLog"`
	Connections   int64       `json:"connections"`
	MsgPutTotal   int64       `json:"msgPutTotal"`
	MsgGetTotal   int64       `json:"msgGetTotal"`
	BytesPutTotal int64       `json:"bytesPutTotal"`
	// MailboxDepths are the messages waiting in the actors' mailboxes (or
	// being handled; the writer's also counts the bursts of sends queued
	// for it), by actor kind (every queue's dispatch actor under
	// "dispatch", the group router and every coordinator under "groups").
	MailboxDepths map[string]int64 `json:"mailboxDepths"`

	Topics      []TopicSnapshot     `json:"topics"`
	Groups      []GroupSnapshot     `json:"groups"`
	Replication ReplicationSnapshot `json:"replication"`
}

// LogSnapshot is the CommitLog's offsets and sizes.
type LogSnapshot struct {
	MinOffset        int64 `json:"minOffset"`
	MaxOffset        int64 `json:"maxOffset"`
	FlushedOffset    int64 `json:"flushedOffset"`
	DispatchedOffset int64 `json:"dispatchedOffset"`
	// ConfirmOffset: controller mode, how far the log is confirmed (on the
	// SyncStateSet); 0 in classic mode.
	ConfirmOffset       int64 `json:"confirmOffset"`
	FlushBehindBytes    int64 `json:"flushBehindBytes"`
	DispatchBehindBytes int64 `json:"dispatchBehindBytes"`
	SizeBytes           int64 `json:"sizeBytes"` // maxOffset - minOffset
	DiskBytes           int64 `json:"diskBytes"` // segment files on disk (preallocated)
}

// TopicSnapshot is one topic and its queues.
type TopicSnapshot struct {
	Topic          string          `json:"topic"`
	ReadQueueNums  int32           `json:"readQueueNums"`
	WriteQueueNums int32           `json:"writeQueueNums"`
	Perm           int32           `json:"perm"`
	Queues         []QueueSnapshot `json:"queues"`
}

// QueueSnapshot is one queue's bounds (GET_MIN_OFFSET, GET_MAX_OFFSET).
type QueueSnapshot struct {
	QueueID   int32 `json:"queueId"`
	MinOffset int64 `json:"minOffset"`
	MaxOffset int64 `json:"maxOffset"`
}

// GroupSnapshot is one consumer group as DESCRIBE_CONSUMER_GROUP answers,
// with the age of each queue's oldest unconsumed message.
type GroupSnapshot struct {
	Group        string           `json:"group"`
	MessageModel string           `json:"messageModel"`
	Generation   int64            `json:"generation"`
	Members      []MemberSnapshot `json:"members"`
	Queues       []GroupQueueLag  `json:"queues"`
	Lag          int64            `json:"lag"` // messages, over every queue
}

// MemberSnapshot is one live member and the queues assigned to it.
type MemberSnapshot struct {
	ClientID        string     `json:"clientId"`
	Address         string     `json:"address"`
	LastHeartbeatMs int64      `json:"lastHeartbeatMs"`
	Queues          []QueueRef `json:"queues"`
}

// QueueRef names a topic queue.
type QueueRef struct {
	Topic   string `json:"topic"`
	QueueID int32  `json:"queueId"`
}

// GroupQueueLag is a group's position on one queue. LagMs is how long
// ago the oldest unconsumed message (the one at the committed offset) was
// stored; 0 with no lag. It is as old as the snapshot before (the store
// time is read by the queue's owner, between two snapshots).
type GroupQueueLag struct {
	Topic           string `json:"topic"`
	QueueID         int32  `json:"queueId"`
	Owner           string `json:"owner"`
	CommittedOffset int64  `json:"committedOffset"` // -1: none
	MaxOffset       int64  `json:"maxOffset"`
	Lag             int64  `json:"lag"`
	LagMs           int64  `json:"lagMs"`
}

// ReplicationSnapshot is the broker's place in its group.
type ReplicationSnapshot struct {
	BrokerRole string `json:"brokerRole"`
	Epoch      int32  `json:"epoch"`
	// Master (a slave's): its master's HA address; HAStatus its link.
	Master          string          `json:"master,omitempty"`
	HAStatus        string          `json:"haStatus,omitempty"`
	MasterMaxOffset int64           `json:"masterMaxOffset,omitempty"`
	Slaves          []SlaveSnapshot `json:"slaves"`
	InSyncSlaves    int             `json:"inSyncSlaves"`
	// ControllerBrokerID (controller mode): the brokerId the controllers
	// know this broker by (a master is brokerId 0 to clients).
	ControllerBrokerID int64 `json:"controllerBrokerId,omitempty"`
	// SyncStateSet (controller mode, a master): the controller brokerIds a
	// SYNC send is acknowledged by, this broker's included; nil otherwise.
	SyncStateSet []int64 `json:"syncStateSet,omitempty"`
}

// SlaveSnapshot is one of a master's slaves.
type SlaveSnapshot struct {
	BrokerID      int64  `json:"brokerId"`
	Address       string `json:"address"`
	AckedOffset   int64  `json:"ackedOffset"`
	FlushedOffset int64  `json:"flushedOffset"`
	LagBytes      int64  `json:"lagBytes"`
	InSync        bool   `json:"inSync"`
}

// Snapshot is the latest published snapshot, nil before the first (or
// with Env.Metrics nil: none is taken). Safe from any goroutine.
func (b *Broker) Snapshot() *BrokerSnapshot { return b.v.snapshot.Load() }

// snapTick takes the next snapshot.
type snapTick struct{}

// snapGroups asks the groups router for every group's description, each
// sent (completed by the offset manager) to replyTo as a groupSnap.
type snapGroups struct{ replyTo *actor.PID }

// groupNames are the groups the router knows: the others are gone.
type groupNames struct{ names []string }

// groupSnap is one group's description with committed offsets and lag.
type groupSnap struct {
	desc *protocol.ConsumerGroupDescription
}

// ageQuery asks queue key's dispatch actor (through reput) when the
// message at offset was stored; it answers replyTo with an ageReply.
type ageQuery struct {
	group   string
	key     storage.QueueKey
	offset  int64
	replyTo *actor.PID
}

type ageReply struct {
	group   string
	key     storage.QueueKey
	storeMs int64
}

type ageKey struct {
	group string
	key   storage.QueueKey
}

// snapshotActor is the shell of snapshotOf: it keeps the latest group
// descriptions and store times as they come, and builds the snapshot at
// every tick.
type snapshotActor struct {
	k      *kit
	p      *pids
	v      *views
	store  *storage.Store
	stats  *stats
	cfg    Config
	boot   time.Time
	depths *mailboxDepths
	groups map[string]*protocol.ConsumerGroupDescription
	ages   map[ageKey]int64
}

func (s *snapshotActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.groups, s.ages = map[string]*protocol.ConsumerGroupDescription{}, map[ageKey]int64{}
		s.k.send(ctx.Self(), &snapTick{})
	case *snapTick:
		s.publish()
		ctx.Send(s.p.groups, &snapGroups{replyTo: ctx.Self()})
		s.k.after(SnapshotInterval, ctx.Self(), &snapTick{})
	case *groupNames:
		s.prune(m.names)
	case *groupSnap:
		s.groups[m.desc.Group] = m.desc
		for _, q := range m.desc.Queues {
			if q.Lag <= 0 {
				continue
			}
			key := storage.QueueKey{Topic: q.Topic, QueueID: q.QueueID}
			lo, _ := s.v.queueBounds(key)
			ctx.Send(s.p.reput, &ageQuery{group: m.desc.Group, key: key, offset: max(q.CommittedOffset, lo), replyTo: ctx.Self()})
		}
	case *ageReply:
		s.ages[ageKey{m.group, m.key}] = m.storeMs
	}
}

// prune forgets the groups (and their store times) not in names.
func (s *snapshotActor) prune(names []string) {
	keep := make(map[string]bool, len(names))
	for _, n := range names {
		keep[n] = true
	}
	for g := range s.groups {
		if !keep[g] {
			delete(s.groups, g)
		}
	}
	for a := range s.ages {
		if !keep[a.group] {
			delete(s.ages, a)
		}
	}
}

// publish builds the snapshot, hands it to the seam and publishes it.
func (s *snapshotActor) publish() {
	now := s.k.now()
	cl := s.store.CommitLog()
	role := s.v.currentRole()
	haStatus, masterMax := s.v.followerSnapshot()
	in := snapInput{
		now: now, boot: s.boot, cfg: s.cfg, role: role,
		log: LogSnapshot{MinOffset: cl.MinOffset(), MaxOffset: cl.MaxOffset(), FlushedOffset: cl.FlushedOffset(),
			DispatchedOffset: s.store.Dispatched(), ConfirmOffset: s.v.confirmOffset(), DiskBytes: cl.DiskBytes()},
		conns: s.stats.conns.Load(), puts: s.stats.msgPutTotal.Load(), gets: s.stats.msgGetTotal.Load(),
		bytesPut: s.stats.bytesPut.Load(), depths: s.depths.snapshot(),
		topics: s.v.topicsSnapshot(), bounds: s.v.queueBounds, known: s.v.knownQueues,
		groups: s.groups, ages: s.ages,
		slaves: s.v.slavesSnapshot(), ackSet: s.v.ackSetSnapshot(), ctlID: s.v.ctlID.Load(), haStatus: haStatus, masterMax: masterMax,
	}
	snap := snapshotOf(in)
	s.v.snapshot.Store(snap)
	s.k.metrics.Snapshot(snap)
}

// snapInput is what snapshotOf reads: plain values and the views'
// readers.
type snapInput struct {
	now, boot         time.Time
	cfg               Config
	role              roleState
	log               LogSnapshot
	conns, puts, gets int64
	bytesPut          int64
	depths            map[string]int64
	topics            map[string]storage.TopicConfig
	bounds            func(storage.QueueKey) (int64, int64)
	known             func(topic string) int32
	groups            map[string]*protocol.ConsumerGroupDescription
	ages              map[ageKey]int64
	slaves            []protocol.SlaveInfo
	ackSet            []int64
	ctlID             int64
	haStatus          string
	masterMax         int64
}

// snapshotOf builds a snapshot from in; everything is sorted, so equal
// inputs give equal snapshots.
func snapshotOf(in snapInput) *BrokerSnapshot {
	addr := in.cfg.BrokerAddr
	if addr == "" && in.cfg.StoreHost.IsValid() {
		addr = in.cfg.StoreHost.String()
	}
	lg := in.log
	lg.FlushBehindBytes = max(lg.MaxOffset-lg.FlushedOffset, 0)
	lg.DispatchBehindBytes = max(lg.MaxOffset-lg.DispatchedOffset, 0)
	lg.SizeBytes = lg.MaxOffset - lg.MinOffset
	return &BrokerSnapshot{
		TimestampMs: in.now.UnixMilli(), ClusterName: in.cfg.BrokerClusterName, BrokerName: in.cfg.BrokerName,
		BrokerID: in.role.brokerID, BrokerRole: in.role.role, BrokerAddr: addr, HAServerAddr: in.cfg.HAServerAddr,
		ControllerMode: in.cfg.EnableControllerMode, Version: Version,
		BootTimestampMs: in.boot.UnixMilli(), UptimeMs: in.now.Sub(in.boot).Milliseconds(),
		CommitLog: lg, Connections: in.conns, MsgPutTotal: in.puts, MsgGetTotal: in.gets, BytesPutTotal: in.bytesPut,
		MailboxDepths: in.depths,
		Topics:        topicsOf(in),
		Groups:        groupsOf(in),
		Replication:   replicationOf(in),
	}
}

// topicsOf lists the topic table's topics with the bounds of each queue
// (of the read or write queues, whichever are more, or of the queues the
// log has on a slave that has not synced the table yet).
func topicsOf(in snapInput) []TopicSnapshot {
	out := make([]TopicSnapshot, 0, len(in.topics))
	for name, tc := range in.topics {
		n := max(tc.ReadQueueNums, tc.WriteQueueNums, in.known(name))
		ts := TopicSnapshot{Topic: name, ReadQueueNums: tc.ReadQueueNums, WriteQueueNums: tc.WriteQueueNums,
			Perm: int32(tc.Perm), Queues: make([]QueueSnapshot, 0, n)}
		for q := int32(0); q < n; q++ {
			lo, hi := in.bounds(storage.QueueKey{Topic: name, QueueID: q})
			ts.Queues = append(ts.Queues, QueueSnapshot{QueueID: q, MinOffset: lo, MaxOffset: hi})
		}
		out = append(out, ts)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out
}

// groupsOf converts the latest descriptions, adding each queue's age.
func groupsOf(in snapInput) []GroupSnapshot {
	out := make([]GroupSnapshot, 0, len(in.groups))
	for _, d := range in.groups {
		g := GroupSnapshot{Group: d.Group, MessageModel: d.MessageModel, Generation: d.Generation,
			Members: make([]MemberSnapshot, 0, len(d.Members)), Queues: make([]GroupQueueLag, 0, len(d.Queues))}
		for _, m := range d.Members {
			ms := MemberSnapshot{ClientID: m.ClientID, Address: m.Address, LastHeartbeatMs: m.LastHeartbeatMs,
				Queues: make([]QueueRef, 0, len(m.Queues))}
			for _, q := range m.Queues {
				ms.Queues = append(ms.Queues, QueueRef{Topic: q.Topic, QueueID: q.QueueID})
			}
			g.Members = append(g.Members, ms)
		}
		for _, q := range d.Queues {
			gq := GroupQueueLag{Topic: q.Topic, QueueID: q.QueueID, Owner: q.Owner, CommittedOffset: q.CommittedOffset,
				MaxOffset: q.MaxOffset, Lag: q.Lag}
			if stored, ok := in.ages[ageKey{d.Group, storage.QueueKey{Topic: q.Topic, QueueID: q.QueueID}}]; ok && q.Lag > 0 {
				gq.LagMs = max(in.now.UnixMilli()-stored, 0)
			}
			g.Lag += q.Lag
			g.Queues = append(g.Queues, gq)
		}
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}

// replicationOf is the broker's replication state: a master's slaves and
// SyncStateSet, a slave's link.
func replicationOf(in snapInput) ReplicationSnapshot {
	r := ReplicationSnapshot{BrokerRole: in.role.role, Epoch: in.role.epoch, Slaves: make([]SlaveSnapshot, 0, len(in.slaves))}
	if in.cfg.EnableControllerMode {
		r.ControllerBrokerID = in.ctlID
	}
	if in.role.slave() {
		r.Master, r.HAStatus, r.MasterMaxOffset = in.role.master, in.haStatus, in.masterMax
		return r
	}
	for _, s := range in.slaves {
		r.Slaves = append(r.Slaves, SlaveSnapshot{BrokerID: s.BrokerID, Address: s.Address, AckedOffset: s.AckedOffset,
			FlushedOffset: s.FlushedOffset, LagBytes: s.LagBytes, InSync: s.InSync})
		if s.InSync {
			r.InSyncSlaves++
		}
	}
	sort.Slice(r.Slaves, func(i, j int) bool { return r.Slaves[i].BrokerID < r.Slaves[j].BrokerID })
	if in.cfg.EnableControllerMode {
		set := append([]int64{in.ctlID}, in.ackSet...)
		sort.Slice(set, func(i, j int) bool { return set[i] < set[j] })
		r.SyncStateSet = set
	}
	return r
}

// mailboxDepths count, per actor kind, the messages posted to its
// mailboxes and not yet handled: protoactor has no public mailbox length,
// so a mailbox middleware counts them (only with metrics on).
type mailboxDepths struct {
	kinds []string
	n     []paddedCount
	// sends are the bursts of sends waiting for the writer beside its
	// mailbox (sendQueue): counted as the writer's, one per burst, as they
	// were when each burst was a message of its own.
	sends *sendQueue
}

// paddedCount is a counter on a cache line of its own: the kinds' counters
// are bumped from every core, and sharing lines would make each bump of one
// kind evict the others'.
type paddedCount struct {
	atomic.Int64
	_ [56]byte
}

// mailboxKinds are the kinds counted; an actor of another name is not.
// A message counts until its handler returns, so the snapshot actor,
// which reads the counts while handling its tick, is left out.
var mailboxKinds = []string{"writer", "durability", "reput", "dispatch", "index", "topics", "offsets", "groups",
	"role", "scheduler", "registrar", "ctlclient"}

func newMailboxDepths(sends *sendQueue) *mailboxDepths {
	return &mailboxDepths{kinds: mailboxKinds, n: make([]paddedCount, len(mailboxKinds)), sends: sends}
}

// middleware is kind's counter as a mailbox middleware, nil for a kind
// not counted (or d nil: metrics off).
func (d *mailboxDepths) middleware(kind string) actor.MailboxMiddleware {
	if d == nil {
		return nil
	}
	for i, k := range d.kinds {
		if k == kind {
			return depthCounter{&d.n[i].Int64}
		}
	}
	return nil
}

func (d *mailboxDepths) snapshot() map[string]int64 {
	out := make(map[string]int64, len(d.kinds))
	for i, k := range d.kinds {
		out[k] = max(d.n[i].Load(), 0)
	}
	if d.sends != nil {
		out["writer"] += int64(d.sends.len())
	}
	return out
}

// depthCounter is one kind's mailbox middleware.
type depthCounter struct{ n *atomic.Int64 }

func (depthCounter) MailboxStarted()       {}
func (c depthCounter) MessagePosted(any)   { c.n.Add(1) }
func (c depthCounter) MessageReceived(any) { c.n.Add(-1) }
func (depthCounter) MailboxEmpty()         {}
