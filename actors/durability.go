package actors

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/actors/flush"
	"github.com/wharfmq/wharf/actors/gate"
	"github.com/wharfmq/wharf/actors/ha"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

// The durability actor owns everything that makes an appended send
// durable, and the one decision of when its answer goes out: the flush
// policy (flush.Policy: when to fsync), the acknowledgement gate
// (gate.Gate) and, on a master, the replicator (ha.Replicator: the slaves'
// connections on the haListenPort, streaming, their acknowledgements). The
// gate's inputs (the flushed offset, every slave's acknowledged offset) all
// arrive here; the log's end is the CommitLog's own, which only the writer
// moves.
//
// It runs beside the writer, not in it: its mailbox holds fsync
// completions and slaves' reports, not a queue of sends, so a group commit
// is answered the moment its fsync returns; and reading and sending the
// log to slaves, and writing the answers, take the other core instead of
// the appender's time. (With both in one actor, SYNC_FLUSH-64 lost a tenth
// of its throughput and sync-master-64 a third.)

// appended tells the durability actor the log grew (from the writer: a
// master's sends, a slave's copy of its master's bytes). waits are the
// sends whose answers wait for the gate, in log order.
type appended struct{ waits []*pendingReply }

// pendingReply is a send the gate holds: where to answer, the answer if
// the gate says OK, and the log offset its data ends at. The request is a
// copy: the one it was made from lives in its read burst, which the writer
// gives back for reuse once the burst is appended (see burstPool).
type pendingReply struct {
	request
	ok  protocol.Fields
	end int64
}

// durabilityRole tells the durability actor the broker's role changed:
// the gate's new mode, whether this broker replicates to slaves, and, if
// drain is set, that the sends waiting now are answered at once (a master
// demoted: their durability is no longer this broker's to promise).
type durabilityRole struct {
	mode   gate.Mode
	master bool
	drain  string
}

// flushDone reports a finished fsync.
type flushDone struct {
	flushed int64
	err     error
	took    time.Duration // for the metrics seam
	from    int64         // the flushed offset before
	more    bool          // a SYNC_FLUSH series goes on (flush.Next): not its end
	// by is the policy that started the flush. A restarted actor has a
	// new one, and the end of a series its predecessor started is not
	// its own: telling its policy would let a second series start beside
	// the running one (and, at each end after, another beside the next).
	by *flush.Policy
}

// flushTick drives ASYNC_FLUSH.
type flushTick struct{}

// ackSetChanged tells the durability actor that the controller client
// published a new ack set (views.ackSet); it answers ackSetTaken with seq
// once its gate judges sends by it.
type ackSetChanged struct {
	seq   uint64
	reply *actor.PID
}

// ackSetTaken answers ackSetChanged.
type ackSetTaken struct{ seq uint64 }

// slaveFlushed tells a slave's writer (its follower) that the log's flush
// moved: the follower reports it to the master (controller mode).
type slaveFlushed struct{}

// gateTick is a gate deadline.
type gateTick struct{ at time.Time }

type durabilityActor struct {
	k         *kit
	p         *pids
	v         *views
	st        *storage.Store
	cfg       Config
	self      *actor.PID
	gate      *gate.Gate
	flush     *flush.Policy
	repl      *ha.Replicator // nil unless the broker is a master
	peers     map[uint64]Conn
	gateArmed time.Time
	acked     []int64
	byID      []gate.SlaveAck
	confirm   int64 // the confirm offset last sent (controller mode, master)
}

func newDurabilityActor(k *kit, p *pids, v *views, st *storage.Store, cfg Config) *durabilityActor {
	return &durabilityActor{k: k, p: p, v: v, st: st, cfg: cfg}
}

func (a *durabilityActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.self = ctx.Self()
		a.start()
	case *appended:
		a.appended(ctx, m)
	case *flushDone:
		a.flushDone(ctx, m)
	case *flushTick:
		cl := a.st.CommitLog()
		if target, ok := a.flush.Tick(a.k.now(), cl.MaxOffset(), cl.FlushedOffset()); ok {
			a.startFlush(target)
		}
		a.k.after(a.flush.TickEvery(), a.self, &flushTick{})
	case *gateTick:
		if m.at.Equal(a.gateArmed) {
			a.gateArmed = time.Time{}
		}
		a.gate.Tick(a.k.now())
		a.drainGate()
	case *durabilityRole:
		a.setRole(ctx, m)
	case *ackSetChanged:
		a.gate.SetAckSet(a.k.now(), a.v.ackSetSnapshot())
		a.drainGate()
		ctx.Send(m.reply, &ackSetTaken{seq: m.seq})
	case *haIn:
		a.in(ctx, m)
	case *haGone:
		delete(a.peers, m.conn.ID())
		if a.repl != nil {
			a.repl.Gone(m.conn.ID())
			a.drainRepl(ctx)
		}
	case *haTick:
		if a.repl != nil {
			a.repl.Tick(a.k.now())
			a.drainRepl(ctx)
		}
		a.confirm = -1 // again: a restarted Reput actor waits for it
		a.publishConfirm()
		a.k.after(a.cfg.HASendHeartbeatInterval, a.self, &haTick{})
	case *metaSnapshot:
		if a.repl != nil {
			a.repl.Broadcast(&protocol.HAMetadataRequest{Kind: m.kind, Data: m.data})
			a.drainRepl(ctx)
		}
	case *actor.Stopping:
		a.stop()
	case *panicForTest:
		panic("durability: panic requested by a test")
	}
}

func (a *durabilityActor) start() {
	a.peers = map[uint64]Conn{}
	now := a.k.now()
	role := a.v.currentRole()
	a.flush = flush.New(flush.Config{Sync: a.cfg.FlushDiskType == SyncFlush, Interval: a.cfg.FlushIntervalCommitLog,
		LeastPages: a.cfg.FlushCommitLogLeastPages, ThoroughInterval: a.cfg.FlushCommitLogThoroughInterval,
		Chunk: asyncFlushChunk, MaxChunks: asyncFlushMaxChunks, NeverFlush: a.k.faults.AsyncNeverFlush}, now)
	a.gate = gate.New(gateMode(a.cfg, a.k.faults, role), a.st.CommitLog().FlushedOffset())
	a.gate.SetAckSet(now, a.v.ackSetSnapshot())
	if !role.slave() {
		a.startReplicating()
	}
	if d := a.flush.TickEvery(); d > 0 {
		a.k.after(d, a.self, &flushTick{})
	}
	a.k.after(a.cfg.HASendHeartbeatInterval, a.self, &haTick{})
}

// gateMode is the gate's mode for a role.
func gateMode(cfg Config, f Faults, role roleState) gate.Mode {
	return gate.Mode{SyncFlush: cfg.FlushDiskType == SyncFlush, SyncMaster: role.role == RoleSyncMaster, Controller: cfg.EnableControllerMode,
		InSyncReplicas: cfg.InSyncReplicas, FlushTimeout: cfg.SyncFlushTimeout, SlaveTimeout: cfg.SlaveTimeout,
		AckBeforeFlush: f.AckBeforeFlush, NoFlushTimeout: f.NoFlushTimeout, AckBeforeReplica: f.AckBeforeReplica,
		AckOldSet: f.AckOldSyncStateSet}
}

func (a *durabilityActor) startReplicating() {
	a.repl = ha.NewReplicator(ha.ReplicatorConfig{MaxGapNotInSync: a.cfg.HAMaxGapNotInSync, TransferBatchSize: a.cfg.HATransferBatchSize,
		CatchUpFromLastSegment: a.cfg.HACatchUpFromLastSegment, HousekeepingInterval: a.cfg.HAHousekeepingInterval,
		MetadataInterval: a.cfg.HAMetadataInterval, Epochs: a.st.Epochs}, a.st.CommitLog(), a.k.log)
}

// appended follows a growth of the log: flush it (SYNC_FLUSH), admit the
// sends that wait, stream it to the slaves.
func (a *durabilityActor) appended(ctx actor.Context, m *appended) {
	now := a.k.now()
	cl := a.st.CommitLog()
	if target, ok := a.flush.Appended(cl.MaxOffset(), cl.FlushedOffset()); ok {
		a.startFlush(target)
	}
	for _, w := range m.waits {
		if v, decided := a.gate.Admit(now, w, w.end, true); decided {
			answerVerdict(a.k, now, &w.request, w.ok, v)
		}
	}
	a.drainGate()
	if a.repl != nil {
		a.repl.Appended()
		a.drainRepl(ctx)
	}
}

// answerVerdict answers a send the way the gate decided. An unconfirmed
// send is stored: its answer names it (id, queue, offset) as an OK does.
// now is the answer's time for the latency metric (one clock read for
// every answer of a release).
func answerVerdict(k *kit, now time.Time, r *request, ok protocol.Fields, v gate.Verdict) {
	if v.Status == protocol.StatusOK || v.Status.Unconfirmed() {
		k.respondAt(now, r, v.Status, v.Remark, ok)
		return
	}
	k.respondAt(now, r, v.Status, v.Remark, nil)
}

// drainGate answers what the gate released and arms its next deadline.
func (a *durabilityActor) drainGate() {
	rd := a.gate.Ready()
	var now time.Time
	if len(rd.Verdicts) > 0 {
		now = a.k.now()
	}
	for _, v := range rd.Verdicts {
		p := v.Token.(*pendingReply)
		answerVerdict(a.k, now, &p.request, p.ok, v)
	}
	if !rd.Deadline.IsZero() && (a.gateArmed.IsZero() || rd.Deadline.Before(a.gateArmed)) {
		a.gateArmed = rd.Deadline
		a.k.after(rd.Deadline.Sub(a.k.now()), a.self, &gateTick{at: rd.Deadline})
	}
	a.publishConfirm()
}

// publishConfirm hands a master's confirm offset (controller mode), when
// it moved, to the Reput actor (consumers see nothing past it), to the
// replicator (transfers carry it) and to the controller heartbeat. Every
// input of the gate that can move it ends in drainGate, which calls this.
// The floor is the start of the master's newest epoch: the writer records
// its epoch at its log's end before the epoch's first write, so what lies
// below is what this broker held when it was elected (an older epoch's
// start, before the writer recorded its own, is lower: never unsafe).
func (a *durabilityActor) publishConfirm() {
	if !a.cfg.EnableControllerMode || a.repl == nil {
		return // a slave's limit comes from its writer
	}
	last, _ := a.st.LastEpoch()
	c := a.gate.Confirm(a.st.CommitLog().MaxOffset(), last.StartOffset)
	if c == a.confirm {
		return
	}
	a.confirm = c
	a.repl.SetConfirmOffset(c)
	a.v.publishConfirm(c)
	a.k.send(a.p.reput, &confirmMoved{offset: c})
}

// asyncFlushChunk is the most one ASYNC_FLUSH msync covers (flush.Config.Chunk):
// about half a millisecond of writeback on the disks measured, so the P it
// holds is back before a paced consumer notices.
const asyncFlushChunk = 512 << 10

// asyncFlushMaxChunks is the most msyncs an interval flush is cut into
// (flush.Config.MaxChunks): a 10 MB/s log's 5 MB per interval still goes
// in chunks of about asyncFlushChunk, a 300 MB/s log's 150 MB in 19 MB.
const asyncFlushMaxChunks = 8

// startFlush runs one fsync of the log up to target, off the actor.
// SYNC_FLUSH's answers wait for it: it runs at once, as a series (see
// flushSeries). ASYNC_FLUSH's interval flush is background work and queues
// on the lane (iolane.go), so it never holds a P in the same instant as a
// checkpoint's ConsumeQueue flushes.
func (a *durabilityActor) startFlush(target int64) {
	if a.flush.Follows() {
		a.flushSeries(target)
		return
	}
	st, k, by := a.st, a.k, a.flush
	a.k.background(a.self, func() any { d := fsyncTo(st, k, target); d.by = by; return d })
}

// fsyncTo makes the log durable up to target and says how it went. It runs
// off the actor.
func fsyncTo(st *storage.Store, k *kit, target int64) *flushDone {
	t0, from := k.now(), st.CommitLog().FlushedOffset()
	flushed, err := st.Flush(target)
	return &flushDone{flushed: flushed, err: err, took: k.now().Sub(t0), from: from}
}

// flushSeries runs SYNC_FLUSH's group commit off the actor: an fsync up to
// target, then, while flush.Next says so, one up to the log's end as it is
// when the previous returns, so the disk never waits for this actor (its
// mailbox run, the answers it writes) between two fsyncs. Each fsync is a
// RunIO of its own (the simulator's disk model times each) and is reported
// before the next starts, so the reports arrive in log order; the last one
// (more unset) ends the series, and flushDone hands it to the policy.
func (a *durabilityActor) flushSeries(target int64) {
	st, k, self, by := a.st, a.k, a.self, a.flush
	var step func(target int64)
	step = func(target int64) {
		d := fsyncTo(st, k, target)
		next, more := flush.Next(target, st.CommitLog().MaxOffset(), d.flushed, d.err)
		d.more, d.by = more, by
		k.send(self, d)
		if more {
			k.runIO(func() { step(next) })
		}
	}
	k.runIO(func() { step(target) })
}

// flushDone follows a finished fsync. A series' next fsync is already
// running (flushSeries); the one the policy starts after a series' end or
// an ASYNC_FLUSH chunk starts before the answers go out: each answer is a
// socket write on this goroutine, and the ~30 an fsync released kept the
// disk idle for a median 0.45 ms after each 0.6 ms fsync (docs/BENCHMARKS.md,
// "Issue 17: SYNC_FLUSH against the raw group commit"). The answers still wait for
// the fsync that covers them: the gate releases only what m.flushed covers.
func (a *durabilityActor) flushDone(ctx actor.Context, m *flushDone) {
	now := a.k.now()
	cl := a.st.CommitLog()
	a.k.metrics.Fsync(m.took, m.flushed-m.from, m.flushed-cl.MinOffset())
	if !m.more && m.by == a.flush {
		if target, ok := a.flush.Done(cl.MaxOffset(), m.flushed, m.err); ok {
			a.startFlush(target)
		}
	}
	a.gate.Flushed(now, m.flushed)
	if m.err != nil {
		a.k.log.Error("commitlog fsync failed: data since the last successful flush may be lost; refusing writes", "err", m.err, "flushed", m.flushed)
		a.gate.FlushFailed(now, m.err)
	}
	if a.cfg.FlushDiskType == SyncFlush {
		ctx.Send(a.p.reput, &logFlushed{offset: m.flushed})
	}
	if a.cfg.EnableControllerMode && a.repl == nil {
		ctx.Send(a.p.writer, &slaveFlushed{}) // a SYNC_FLUSH master counts this copy once fsynced
	}
	a.drainGate()
}

func (a *durabilityActor) setRole(ctx actor.Context, m *durabilityRole) {
	now := a.k.now()
	if m.drain != "" {
		a.gate.Drain(now, m.drain)
	}
	a.gate.SetMode(now, m.mode)
	switch {
	case m.master && a.repl == nil:
		a.startReplicating()
	case !m.master && a.repl != nil:
		a.repl.CloseAll("this broker is no longer a master")
		a.drainRepl(ctx)
		a.repl = nil
		a.gate.Replicas(now, nil, 0)
		a.gate.SlaveAcks(now, nil)
		a.v.publishSlaves(nil)
	}
	a.drainGate()
}

// in handles a read burst of the replication port.
func (a *durabilityActor) in(ctx actor.Context, m *haIn) {
	if a.repl == nil {
		// A slave's replication port: nobody may replicate from it. It
		// may become a master at any moment (the controllers may have told
		// the slave first), so the slave is told to dial again.
		m.conn.Send(&protocol.HARefuseRequest{Reason: fmt.Sprintf("broker %s is a slave; replicate from its master", a.cfg.BrokerName), NotMaster: true})
		m.conn.Close("replication requested from a slave")
		return
	}
	a.peers[m.conn.ID()] = m.conn
	now := a.k.now()
	for _, req := range m.reqs {
		switch r := req.(type) {
		case *protocol.HAReportRequest:
			a.repl.Report(now, m.conn.ID(), m.conn.RemoteAddr(), r)
		case *protocol.HAMetadataRequest:
			if r.Kind == "offsets" { // a slave's consumer offsets: merged, never lost
				ctx.Send(a.p.offsets, &importMeta{kind: r.Kind, data: r.Data})
			}
		default:
			m.conn.Close(fmt.Sprintf("unexpected %v on the replication port", req.RequestCode()))
			return
		}
	}
	a.drainRepl(ctx)
}

// drainRepl carries out what the replicator asks for and tells the gate
// the slaves' progress.
func (a *durabilityActor) drainRepl(ctx actor.Context) {
	rd := a.repl.Ready()
	for _, s := range rd.Sends {
		if c := a.peers[s.Peer]; c != nil {
			c.Send(s.Req)
		}
	}
	for _, c := range rd.Closes {
		if conn := a.peers[c.Peer]; conn != nil {
			conn.Close(c.Reason)
			delete(a.peers, c.Peer)
		}
	}
	if rd.Progress {
		var inSync int
		a.acked, inSync = a.repl.Acked(a.acked[:0])
		a.gate.Replicas(a.k.now(), a.acked, inSync)
		slaves := a.repl.Slaves()
		if a.cfg.EnableControllerMode {
			a.slaveAcks(ctx, slaves)
		}
		a.drainGate()
		a.v.publishSlaves(slaves)
	}
	if rd.Metadata {
		if data, err := json.Marshal(a.v.topicsSnapshot()); err == nil {
			a.repl.Broadcast(&protocol.HAMetadataRequest{Kind: "topics", Data: data})
		}
		if data, ok := deletedMetadata(a.st); ok {
			a.repl.Broadcast(&protocol.HAMetadataRequest{Kind: deletedKind, Data: data})
		}
		ctx.Request(a.p.offsets, &exportOffsets{})
		a.drainRepl(ctx)
	}
}

// slaveAcks hands the gate each slave's acknowledged offset by broker id
// (controller mode) and tells the controller client their progress (it
// shrinks and expands the SyncStateSet).
func (a *durabilityActor) slaveAcks(ctx actor.Context, slaves []protocol.SlaveInfo) {
	a.byID = a.byID[:0]
	for _, s := range slaves {
		a.byID = append(a.byID, gate.SlaveAck{BrokerID: s.BrokerID, Acked: s.AckedOffset, Flushed: s.FlushedOffset})
	}
	a.gate.SlaveAcks(a.k.now(), a.byID)
	if a.p.ctl != nil {
		ctx.Send(a.p.ctl, &ctlSlaves{slaves: slaves})
	}
}

// stop flushes what was appended and answers every waiting send (OK if
// the final flush covered it), and closes the slaves.
func (a *durabilityActor) stop() {
	cl := a.st.CommitLog()
	now := a.k.now()
	flushed, err := a.st.Flush(cl.MaxOffset())
	a.gate.Flushed(now, flushed)
	if err != nil {
		a.gate.FlushFailed(now, err)
	}
	a.gate.Stop(now)
	a.drainGate()
	for _, c := range a.peers {
		c.Close("broker stopping")
	}
}
