package actors

import (
	"fmt"
	"net/netip"
	"runtime"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/actors/gate"
	"github.com/wharfmq/wharf/actors/ha"
	"github.com/wharfmq/wharf/actors/writer"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

// The writer actor owns the CommitLog's appends: it is the log's only
// appender in every role (a master appends sends, a slave its master's
// bytes, through ha.Follower in replication.go), and it runs retention and
// segment preparation. Its core, writer.Writer, checks and appends a read
// burst as one batch. A send that need not wait for durability (the gate's
// own rule, gate.Mode.Waits) is answered here at once; the others go to the
// durability actor (durability.go), whose gate answers them once flushed
// or replicated as the mode promises.

// writerDeps is what the writer actor is given.
type writerDeps struct {
	k      *kit
	p      *pids
	v      *views
	sends  *sendQueue // the transport's bursts of sends
	st     *storage.Store
	stats  *stats
	cfg    Config // the role fields are the start's; the actor's role state wins
	limits protocol.Limits
	dialer func(addr string, h Handler) (Conn, error)
	// restart is Env.Restart (nil: none).
	restart func(reason string)
}

// segmentPrepared reports a segment created ahead of need off the writer.
type segmentPrepared struct {
	seg *storage.PreparedSegment
	err error
}

// segmentDirSynced reports the directory sync after an adopted segment's
// rename, run off the writer.
type segmentDirSynced struct {
	start int64
	err   error
}

// notifyTick hands what was appended to the durability actor (self-sent,
// so that it comes after the sends already queued: one notification per
// mailbox run, whose flush and transfer cover all of them).
type notifyTick struct{}

type writerActor struct {
	writerDeps
	self       *actor.PID
	role       roleState
	w          *writer.Writer
	fol        *ha.Follower // a slave's
	link       Conn         // a slave's link to its master
	preparing  bool
	notifySoon bool            // a notifyTick is queued
	toldReput  bool            // this message's write told the Reput actor (yieldToReput)
	waits      []*pendingReply // sends waiting for the gate, not yet handed over
	items      []writer.Item
	itemPtrs   []*writer.Item
	corked     []corker      // the connections a batch's answers are held on
	queued     []*writeBatch // the bursts taken from the sendQueue
	merged     writeBatch    // their items, as one batch
}

func newWriterActor(d writerDeps, role roleState) *writerActor {
	return &writerActor{writerDeps: d, role: role}
}

func (a *writerActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.start(ctx)
	case *sendsQueued:
		a.writeQueued(ctx)
		a.yieldToReput()
	case *writeBatch:
		a.write(ctx, m)
		a.written(m)
	case *notifyTick:
		a.notifySoon = false
		ctx.Send(a.p.durability, &appended{waits: a.waits})
		a.waits = nil
	case *segmentPrepared:
		a.adopt(m)
	case *segmentDirSynced:
		if m.err != nil {
			a.k.log.Warn("syncing the commitlog directory after a segment was adopted failed; the roll into the segment syncs it again", "err", m.err)
		} else {
			a.st.CommitLog().NextDirSynced(m.start)
		}
	case *cleanTick:
		a.clean()
		a.k.after(a.cfg.CleanResourceInterval, a.self, &cleanTick{})
	case *setRole:
		a.setRole(ctx, m)
	case *cutTopic:
		a.cutTopic(ctx, m)
	case *actor.Stopping:
		a.stop()
	case *panicForTest:
		panic("writer: panic requested by a test")
	default:
		a.replication(ctx, m)
	}
}

func (a *writerActor) start(ctx actor.Context) {
	a.self = ctx.Self()
	a.role.gen = a.v.nextGen()
	now := a.k.now()
	a.w = writer.New(writer.Config{StoreHost: a.cfg.StoreHost, AutoCreateTopicEnable: a.cfg.AutoCreateTopicEnable,
		DefaultTopicQueueNums: a.cfg.DefaultTopicQueueNums, DelayLevels: a.cfg.DelayLevels}, a.st)
	if a.cfg.CleanResourceInterval > 0 {
		a.k.after(a.cfg.CleanResourceInterval, a.self, &cleanTick{})
	}
	a.k.after(a.cfg.HASendHeartbeatInterval, a.self, &haTick{})
	if !a.cfg.EnableControllerMode || a.cfg.FlushDiskType == SyncFlush {
		// Only a controller's election reads the mark, and under
		// SYNC_FLUSH every acknowledged copy was fsynced first.
		a.clearMayLackAcked("acknowledged copies are fsynced, or no controller elects")
	}
	a.enterRole(now, "")
	if a.fol != nil {
		a.drainFollower(ctx) // a slave dials its master now, not at the first heartbeat
	}
}

// gateMode is the gate's mode for the current role.
func (a *writerActor) gateMode() gate.Mode { return gateMode(a.cfg, a.k.faults, a.role) }

func (a *writerActor) write(ctx actor.Context, wb *writeBatch) {
	if a.role.slave() {
		why := fmt.Sprintf("broker %s (brokerId %d) is a read-only slave; send to its master", a.cfg.BrokerName, a.role.brokerID)
		if a.role.master == "" {
			why = fmt.Sprintf("broker %s has no role from the controllers yet; send to its group's master", a.cfg.BrokerName)
		}
		for _, it := range wb.items {
			a.refuse(ctx, it, protocol.StatusNotMaster, why)
		}
		return
	}
	if why := a.v.fenced(a.k.now()); why != "" {
		// Controller mode: not (or no longer) the master of the current
		// epoch, or the master lease ran out. Internal sends are told
		// they were not stored, and retried later.
		for _, it := range wb.items {
			if it.notify != nil {
				ctx.Send(it.notify, &internalStored{tag: it.tag, err: fmt.Errorf("not stored: %s", why)})
				continue
			}
			a.k.respond(it.request, protocol.StatusServiceNotAvailable, why, nil)
		}
		return
	}
	now := a.k.now()
	res := a.w.Write(now, a.v.topicsSnapshot(), a.toItems(wb.items))
	a.published(ctx, res)
	if res.Stored > 0 {
		// Consumers first: the Reput actor dispatches (on another worker)
		// while the answers are written, so a held pull is not answered a
		// batch's answer writes later than it could be (e2e-10k).
		a.visible(ctx)
	}
	a.answerAll(ctx, wb.items, res.Outcomes)
	if res.Stored > 0 {
		a.durable(ctx)
	}
	a.prepare()
}

// writeQueued appends every burst waiting in the sendQueue as one batch
// (see sendQueue), then gives the bursts back.
func (a *writerActor) writeQueued(ctx actor.Context) {
	a.queued = a.sends.take(a.queued[:0])
	wbs := a.queued
	switch len(wbs) {
	case 0:
	case 1:
		a.write(ctx, wbs[0])
	default:
		a.merged.items = a.merged.items[:0]
		for _, wb := range wbs {
			a.merged.items = append(a.merged.items, wb.items...)
		}
		a.write(ctx, &a.merged)
		clear(a.merged.items)
	}
	for _, wb := range wbs {
		a.written(wb)
	}
	clear(wbs)
}

// written gives back what a written batch holds: its burst's bytes, then
// the burst itself (wb may live in it: not to be read afterwards).
func (a *writerActor) written(wb *writeBatch) {
	if wb.release != nil {
		clear(a.items) // they alias the burst's bytes
		wb.release()
	}
	if bu := wb.burst; bu != nil {
		bu.recycle()
	}
}

// answerAll answers a written batch, its connections corked meanwhile so
// that each one's answers leave together. The uncork is deferred: a panic
// (the writer restarts) must not leave a connection holding its answers.
func (a *writerActor) answerAll(ctx actor.Context, items []*sendItem, outcomes []writer.Outcome) {
	done := a.k.now() // the batch's answers' end, for the latency metric
	var run storedRun
	a.corked = corkAll(a.corked, items)
	defer func() { a.corked = uncorkAll(a.corked) }()
	for i, it := range items {
		if outcomes[i].Stored {
			run.add(a.k.metrics, it.topic, len(it.msgs), bodyBytes(it.msgs))
		}
		a.answer(ctx, done, it, outcomes[i])
	}
	run.flush(a.k.metrics)
}

// toItems converts the batch for the core, reusing one slice of items.
func (a *writerActor) toItems(items []*sendItem) []*writer.Item {
	a.items, a.itemPtrs = a.items[:0], a.itemPtrs[:0]
	var last Conn // a burst's sends share their connection: its address is parsed once
	var host netip.AddrPort
	for _, it := range items {
		if it.conn != last {
			last, host = it.conn, netip.AddrPort{}
			if it.conn != nil {
				host, _ = netip.ParseAddrPort(it.conn.RemoteAddr())
			}
		}
		a.items = append(a.items, writer.Item{Topic: it.topic, QueueID: it.queueID, BornTs: it.bornTs, BornHost: host,
			Msgs: it.msgs, Batch: it.batch, SendBack: it.sendBack, Reconsume: it.reconsume})
	}
	for i := range a.items {
		a.itemPtrs = append(a.itemPtrs, &a.items[i])
	}
	return a.itemPtrs
}

// published makes what a write changed visible: topics it auto-created
// are added to the published table at once (so that the send's answer
// never comes before a pull can see its topic) and handed to the topic
// manager, which owns the table and persists them. And the counters.
func (a *writerActor) published(ctx actor.Context, res *writer.Result) {
	if len(res.Created) > 0 {
		a.v.addTopics(res.Created)
		for _, tc := range res.Created {
			ctx.Send(a.p.topics, &ensureTopic{cfg: tc})
		}
	}
	a.stats.msgPutTotal.Add(int64(res.Stored))
	a.stats.bytesPut.Add(res.Bytes)
	if res.AppendErr != nil {
		a.k.log.Error("commitlog append failed: refusing writes", "err", res.AppendErr)
	}
}

// answer routes one item's outcome: refused items are answered now, stored
// ones go through the gate; internal items tell their sender.
func (a *writerActor) answer(ctx actor.Context, now time.Time, it *sendItem, o writer.Outcome) {
	if it.notify != nil {
		switch {
		case o.Stored:
			ctx.Send(it.notify, &internalStored{tag: it.tag, end: o.End})
		case o.NotAppended:
			ctx.Send(it.notify, &internalStored{tag: it.tag, err: fmt.Errorf("not stored: %s", o.Remark)})
		default:
			a.refuse(ctx, it, o.Status, o.Remark)
		}
		return
	}
	if !o.Stored {
		a.k.respondAt(now, it.request, o.Status, o.Remark, nil)
		return
	}
	// The gate's rule: a send that need not wait for durability is
	// answered OK here at once; the others go to the gate, in the
	// durability actor, which answers them.
	if !a.gateMode().Waits(!it.oneway && it.msgs[0].WaitStoreMsgOK()) {
		a.k.respondAt(now, it.request, protocol.StatusOK, "", o.Fields)
		return
	}
	a.waits = append(a.waits, &pendingReply{request: *it.request, ok: o.Fields, end: o.End})
}

// refuse answers an item that cannot be written. An internal item (a due
// delayed message whose topic is gone, say) is dropped with a log line so
// its sender does not wait forever.
func (a *writerActor) refuse(ctx actor.Context, it *sendItem, st protocol.Status, remark string) {
	if it.notify != nil {
		a.k.log.Error("internal write dropped", "topic", it.topic, "status", st.String(), "reason", remark)
		ctx.Send(it.notify, &internalStored{tag: it.tag, end: a.st.CommitLog().MaxOffset()})
		return
	}
	a.k.respond(it.request, st, remark, nil)
}

// appended follows a growth of the log: make it visible to consumers and
// hand it to the durability actor.
func (a *writerActor) appended(ctx actor.Context) {
	a.visible(ctx)
	a.durable(ctx)
}

// visible makes a growth of the log visible to consumers: under
// ASYNC_FLUSH at once; under SYNC_FLUSH once flushed, which the durability
// actor tells the Reput actor.
func (a *writerActor) visible(ctx actor.Context) {
	if a.cfg.FlushDiskType != SyncFlush {
		ctx.Send(a.p.reput, &logAppended{})
		a.toldReput = true
	}
}

// yieldToReput lets the mailbox run this write batch readied go first.
// Under load the writer's mailbox run goes on for milliseconds (one burst
// after another), and the Reput actor's run, readied by visible onto this
// goroutine's P (the runtime's runnext), waited for all of it: no other P
// steals it while the event loop holds one in epoll_wait and the I/O lane
// one in msync (a 3.8 ms wait in async-256's trace, docs/BENCHMARKS.md).
// Not under SYNC_FLUSH, where visible tells nobody: yielding to the
// durability actor there cost 6 % of sync-flush-64's throughput.
func (a *writerActor) yieldToReput() {
	if a.toldReput {
		a.toldReput = false
		runtime.Gosched()
	}
}

// durable hands a growth of the log to the durability actor (flush, gate,
// slaves) once this mailbox run's appends are answered or queued: the
// waits the answers left (see answer).
func (a *writerActor) durable(ctx actor.Context) {
	if len(a.waits) > 0 {
		// Sends wait for it: at once, as group commit wants the fsync
		// started (or the gate's admission made) without delay.
		ctx.Send(a.p.durability, &appended{waits: a.waits})
		a.waits = nil
		return
	}
	if !a.notifySoon {
		a.notifySoon = true
		ctx.Send(a.self, &notifyTick{})
	}
}

// prepare keeps the pages just ahead of the log's end populated and creates
// the next segment, both off the actor, so appends and the roll-over do not
// wait for page faults or fallocate. Not on a slave: its follower appends
// the master's bytes and rolls segments itself, and a segment prepared
// here would race that roll.
func (a *writerActor) prepare() {
	if a.role.slave() {
		return
	}
	cl := a.st.CommitLog()
	if warm := cl.WarmAhead(); warm != nil {
		a.k.runIO(warm)
	}
	start, need := cl.NextSegmentStart()
	if !need || a.preparing || cl.Err() != nil {
		return
	}
	a.preparing = true
	a.k.io(a.self, func() any {
		seg, err := cl.CreateSegment(start)
		return &segmentPrepared{seg: seg, err: err}
	})
}

func (a *writerActor) adopt(m *segmentPrepared) {
	a.preparing = false
	if m.err != nil {
		a.k.log.Warn("preparing the next commitlog segment failed; the writer will create it when needed", "err", m.err)
		return
	}
	// Adopted even if the broker became a slave while it was prepared:
	// AdoptSegment discards it unless it is still the next segment, which
	// the follower's roll then takes. Dropping it here instead would leak
	// an open, preallocated file under its temporary name.
	cl := a.st.CommitLog()
	if err := cl.AdoptSegment(m.seg); err != nil {
		a.k.log.Warn("adopting a prepared commitlog segment failed", "err", err)
	} else if start, need := cl.NextSegmentStart(); !need && start == m.seg.Start() {
		// The rename's directory entry is made durable off the writer (a
		// roll into the segment that comes first syncs it itself).
		a.k.io(a.self, func() any { return &segmentDirSynced{start: start, err: cl.SyncDir()} })
	}
	if a.role.slave() {
		return
	}
	if warm := a.st.CommitLog().WarmAhead(); warm != nil {
		a.k.runIO(warm) // the window may reach into the new segment
	}
}

// clean runs one retention pass: only the log's appender may change its
// segment list.
func (a *writerActor) clean() {
	rep, err := a.st.CleanCommitLog(a.k.now(), false)
	if err != nil {
		a.k.log.Error("retention failed", "err", err)
		return
	}
	if rep.DeletedSegments > 0 {
		a.k.log.Info("retention deleted commitlog segments", "segments", rep.DeletedSegments, "min_offset", rep.MinOffset, "disk_used", rep.UsedRatio)
	}
	if rep.DiskFull {
		a.k.log.Error("disk full: refusing writes", "disk_used", rep.UsedRatio)
	}
	a.k.send(a.p.reput, &deleteBefore{minPhy: rep.MinOffset})
}

// stop hands the sends still waiting to the durability actor (which stops
// next: a final flush, then every waiting send answered) and closes a
// slave's link.
func (a *writerActor) stop() {
	if len(a.waits) > 0 {
		a.k.send(a.p.durability, &appended{waits: a.waits})
		a.waits = nil
	}
	if a.link != nil {
		a.link.Close("slave stopping")
	}
}
