package actors

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

// logAppended tells the Reput actor that the log grew (ASYNC_FLUSH:
// consumers see messages as soon as they are in the page cache).
type logAppended struct{}

// queueEntries carries new records of one queue to its DispatchActor.
type queueEntries struct{ reqs []storage.DispatchRequest }

// indexEntries carries new records to the IndexActor.
type indexEntries struct{ reqs []storage.DispatchRequest }

// checkpointTick starts a checkpoint.
type checkpointTick struct{}

// flushBarrier asks a DispatchActor or the IndexActor to flush: every entry
// the Reput actor sent before it (mailboxes are FIFO) is covered.
type flushBarrier struct{ id int64 }

// barrierAck answers a flushBarrier.
type barrierAck struct {
	id      int64
	mark    storage.QueueMark
	indexed int64
	isIndex bool
	err     error
}

// deleteBefore tells queue and index owners the log's new start.
type deleteBefore struct{ minPhy int64 }

// ownerFlushed reports to a DispatchActor or the IndexActor that the work
// of its flush job (run off the actor) finished.
type ownerFlushed struct {
	id      int64
	replyTo *actor.PID
	mark    storage.QueueMark
	indexed int64
	err     error
}

// checkpointWritten reports that the checkpoint file (written off the
// Reput actor) is done.
type checkpointWritten struct{ err error }

// ownerFlush is the state of a queue or index owner's checkpoint flush: at
// most one runs at a time, off the actor, and retention of the owner's
// files waits for it (a file must not be closed while it is being synced).
type ownerFlush struct {
	running  bool
	deferred *deleteBefore
}

// start runs job off the actor and then sends done, with job's error, to
// the actor.
func (o *ownerFlush) start(b *Broker, ctx actor.Context, job func() error, done *ownerFlushed) {
	o.running = true
	self, root := ctx.Self(), b.sys.Root
	b.env.RunIO(func() {
		done.err = job()
		root.Send(self, done)
	})
}

// finish ends a flush and returns a deleteBefore that waited for it.
func (o *ownerFlush) finish() *deleteBefore {
	o.running = false
	d := o.deferred
	o.deferred = nil
	return d
}

// hold returns true (and keeps m for later) while a flush runs.
func (o *ownerFlush) hold(m *deleteBefore) bool {
	if !o.running {
		return false
	}
	if o.deferred == nil || m.minPhy > o.deferred.minPhy {
		o.deferred = m
	}
	return true
}

// pullMsg is a PULL_MESSAGE request.
type pullMsg struct {
	*request
	req *protocol.PullRequest
}

// queryMsg is a QUERY_MESSAGE request.
type queryMsg struct {
	*request
	req *protocol.QueryMessageRequest
}

// reputActor turns new log records into dispatch requests for the
// DispatchActors and the IndexActor, and writes checkpoints. It owns the
// reput position. Under SYNC_FLUSH it dispatches only flushed records, so no
// consumer ever sees a message the broker could lose.
type reputActor struct {
	b         *Broker
	pos       int64
	visible   int64
	lastTs    int64
	queues    map[storage.QueueKey]*actor.PID
	barrier   int64 // id of the checkpoint in progress, 0 if none
	waiting   int
	marks     []storage.QueueMark
	indexed   int64
	cpPos     int64
	cpTs      int64 // store time of the last record below cpPos
	cpFailed  bool
	seq       int64
	lastBatch int // records in the last dispatch, to size the next
}

func (r *reputActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		r.pos = r.b.store.Dispatched()
		r.visible = r.pos
		r.queues = map[storage.QueueKey]*actor.PID{}
		for _, k := range r.b.store.Queues() {
			r.queue(ctx, k)
		}
		if r.b.cfg.FlushDiskType != SyncFlush {
			r.visible = r.b.store.CommitLog().MaxOffset()
		} else {
			r.visible = r.b.store.CommitLog().FlushedOffset()
		}
		r.dispatch(ctx)
		r.b.after(r.b.cfg.FlushIntervalConsumeQueue, ctx.Self(), &checkpointTick{})
	case *logAppended:
		r.visible = r.b.store.CommitLog().MaxOffset()
		r.dispatch(ctx)
	case *logFlushed:
		if m.offset > r.visible {
			r.visible = m.offset
			r.dispatch(ctx)
		}
	case *pullMsg:
		ctx.Forward(r.queue(ctx, storage.QueueKey{Topic: m.req.Topic, QueueID: m.req.QueueID}))
	case *scheduleScan:
		ctx.Forward(r.queue(ctx, storage.QueueKey{Topic: storage.ScheduleTopic, QueueID: m.queue}))
	case *deleteBefore:
		for _, k := range sortedKeys(r.queues) {
			ctx.Send(r.queues[k], m)
		}
		ctx.Send(r.b.p.index, m)
	case *checkpointTick:
		r.startCheckpoint(ctx)
		r.b.after(r.b.cfg.FlushIntervalConsumeQueue, ctx.Self(), &checkpointTick{})
	case *barrierAck:
		r.ack(ctx, m)
	case *checkpointWritten:
		r.barrier = 0
		if m.err != nil && !errors.Is(m.err, storage.ErrStoreClosed) {
			r.b.log.Error("checkpoint failed", "err", m.err)
		}
	case *actor.Stopping:
		// Everything visible is dispatched; the store's Close dispatches the
		// rest and writes the clean checkpoint.
		r.b.store.SetDispatched(r.pos, r.lastTs)
	}
}

// queue returns the DispatchActor of k, spawning it if needed.
func (r *reputActor) queue(ctx actor.Context, k storage.QueueKey) *actor.PID {
	if pid, ok := r.queues[k]; ok {
		return pid
	}
	pid := ctx.Spawn(r.b.childProps(func() actor.Actor { return &dispatchActor{b: r.b, key: k} }))
	r.queues[k] = pid
	return pid
}

// dispatch hands every record in [pos, visible) to its queue and the index.
func (r *reputActor) dispatch(ctx actor.Context) {
	if r.visible <= r.pos {
		return
	}
	perQueue := map[storage.QueueKey][]storage.DispatchRequest{}
	all := make([]storage.DispatchRequest, 0, r.lastBatch+r.lastBatch/4) // sized like the last batch: no regrowth
	topic := ""
	next, err := r.b.store.ForEachRecord(r.pos, r.visible, false, func(off int64, rec *storage.Record) error {
		d := storage.NewDispatchRequestTopic(off, rec, topic)
		topic = d.Key.Topic
		perQueue[d.Key] = append(perQueue[d.Key], d)
		all = append(all, d)
		r.lastTs = d.StoreTimestamp
		return nil
	})
	if err != nil {
		// The writer only publishes whole records, so this is a bug or
		// corruption of the running log: stop dispatching rather than skip.
		r.b.log.Error("reput: cannot decode the log; dispatch stopped", "offset", next, "err", err)
	}
	// In key order, not map order: the simulator needs the same sends in
	// the same order for the same seed.
	for _, k := range sortedKeys(perQueue) {
		ctx.Send(r.queue(ctx, k), &queueEntries{reqs: perQueue[k]})
	}
	if len(all) > 0 {
		ctx.Send(r.b.p.index, &indexEntries{reqs: all})
	}
	r.lastBatch = len(all)
	r.pos = next
	r.b.store.SetDispatched(r.pos, r.lastTs)
}

func (r *reputActor) startCheckpoint(ctx actor.Context) {
	if r.barrier != 0 {
		return // the previous one is still being acknowledged
	}
	r.seq++
	r.barrier = r.seq
	r.cpPos, r.cpTs = r.pos, r.lastTs
	r.marks = r.marks[:0]
	r.cpFailed = false
	r.waiting = len(r.queues) + 1
	for _, k := range sortedKeys(r.queues) {
		ctx.Request(r.queues[k], &flushBarrier{id: r.barrier})
	}
	ctx.Request(r.b.p.index, &flushBarrier{id: r.barrier})
}

func (r *reputActor) ack(ctx actor.Context, m *barrierAck) {
	if m.id != r.barrier {
		return
	}
	if m.err != nil {
		r.b.log.Error("checkpoint: flush failed", "err", m.err)
		r.cpFailed = true
	}
	if m.isIndex {
		r.indexed = m.indexed
	} else if m.mark.Key.Topic != "" {
		r.marks = append(r.marks, m.mark)
	}
	r.waiting--
	if r.waiting > 0 {
		return
	}
	if r.cpFailed {
		r.barrier = 0
		return
	}
	// Written off the actor (it fsyncs): dispatching goes on meanwhile. The
	// next checkpoint starts only after this one is written.
	st, self, root := r.b.store, ctx.Self(), r.b.sys.Root
	pos, indexed, ts, marks := r.cpPos, r.indexed, r.cpTs, slices.Clone(r.marks)
	r.b.env.RunIO(func() {
		root.Send(self, &checkpointWritten{err: st.WriteCheckpointAt(pos, indexed, ts, marks)})
	})
}

// heldPull is a pull waiting for a message (long polling).
type heldPull struct {
	*pullMsg
	expr     protocol.TagExpr
	deadline time.Time
}

// pullTick expires held pulls.
type pullTick struct{}

// dispatchActor owns one ConsumeQueue: it applies its entries, serves its
// pulls and holds long polls until a message arrives or they time out.
type dispatchActor struct {
	b          *Broker
	key        storage.QueueKey
	held       []*heldPull
	timerArmed time.Time
	flush      ownerFlush
}

func (d *dispatchActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		d.publish()
	case *queueEntries:
		for i := range m.reqs {
			if err := d.b.store.ApplyConsumeQueue(&m.reqs[i]); err != nil {
				d.b.log.Error("consume queue write failed", "queue", d.key.String(), "err", err)
				break
			}
		}
		d.publish()
		d.serveHeld(ctx)
	case *pullMsg:
		d.pull(ctx, m)
	case *scheduleScan:
		d.scheduleScan(ctx, m)
	case *pullTick:
		d.timerArmed = time.Time{}
		d.serveHeld(ctx)
	case *flushBarrier:
		// The msync runs off the actor: pulls and new entries are served
		// meanwhile (a synchronous flush held them for milliseconds at
		// every checkpoint).
		mark, job, err := d.b.store.FlushQueueJob(d.key)
		if err != nil || job == nil || d.flush.running {
			if err == nil && job != nil { // cannot happen: the Reput actor waits for every ack
				err = fmt.Errorf("consume queue %s: a flush is still running", d.key)
				d.b.store.FailQueueFlush(d.key, err)
			}
			ctx.Respond(&barrierAck{id: m.id, mark: mark, err: err})
			return
		}
		d.flush.start(d.b, ctx, job, &ownerFlushed{id: m.id, replyTo: ctx.Sender(), mark: mark})
	case *ownerFlushed:
		if m.err != nil {
			d.b.store.FailQueueFlush(d.key, m.err)
		}
		ctx.Send(m.replyTo, &barrierAck{id: m.id, mark: m.mark, err: m.err})
		if del := d.flush.finish(); del != nil {
			d.deleteBefore(del)
		}
	case *deleteBefore:
		if !d.flush.hold(m) {
			d.deleteBefore(m)
		}
	case *actor.Stopping:
		for _, h := range d.held {
			parked(h.conn, -1)
			d.notFound(h.pullMsg)
		}
		d.held = nil
	}
}

func (d *dispatchActor) deleteBefore(m *deleteBefore) {
	if _, err := d.b.store.DeleteQueueBefore(d.key, m.minPhy); err != nil {
		d.b.log.Error("retention of consume queue failed", "queue", d.key.String(), "err", err)
	}
	d.publish()
}

func (d *dispatchActor) publish() {
	min, max := d.b.store.ConsumeQueueBounds(d.key)
	d.b.v.publishBounds(d.key, min, max)
}

func (d *dispatchActor) pull(ctx actor.Context, m *pullMsg) {
	if m.conn != nil && closed(m.conn) {
		return // nobody would read the answer
	}
	if m.req.CommitOffset != nil {
		ctx.Send(d.b.p.offsets, &offsetMsg{request: &request{oneway: true}, req: &protocol.UpdateConsumerOffsetRequest{
			ConsumerGroup: m.req.ConsumerGroup, Topic: m.req.Topic, QueueID: m.req.QueueID, CommitOffset: *m.req.CommitOffset}})
	}
	expr, err := protocol.ParseTagExpr(m.req.Subscription)
	if err != nil {
		d.b.respond(m.request, protocol.StatusSubscriptionParseFailed, err.Error(), nil)
		return
	}
	h := &heldPull{pullMsg: m, expr: expr}
	if d.try(h) {
		return
	}
	suspend := time.Duration(m.req.SuspendTimeoutMillis) * time.Millisecond
	if !d.b.cfg.LongPollingEnable && suspend > 0 {
		suspend = min(suspend, d.b.cfg.ShortPollingTime)
	}
	suspend = min(suspend, d.b.cfg.MaxPullSuspend)
	if suspend <= 0 {
		d.notFound(m)
		return
	}
	h.deadline = d.b.env.Clock.Now().Add(suspend)
	d.held = append(d.held, h)
	parked(h.conn, 1)
	d.arm(ctx, h.deadline)
}

// try serves h if there is something to answer; false means hold it.
func (d *dispatchActor) try(h *heldPull) bool {
	b := d.b
	req := h.req
	max := int(req.MaxMsgNums)
	if max <= 0 || max > b.cfg.MaxPullBatch {
		max = b.cfg.MaxPullBatch
	}
	maxBytes := int(req.MaxMsgBytes)
	if maxBytes <= 0 || maxBytes > b.cfg.MaxPullBytes {
		maxBytes = b.cfg.MaxPullBytes
	}
	var filter func(int64) bool
	if !h.expr.All {
		filter = h.expr.MatchesCode
	}
	res, err := b.store.GetMessages(d.key, req.QueueOffset, max, maxBytes, filter)
	if err != nil {
		b.respond(h.request, protocol.StatusSystemError, err.Error(), nil)
		return true
	}
	resp := &protocol.PullResponse{NextBeginOffset: res.NextBeginOffset, MinOffset: res.MinOffset, MaxOffset: res.MaxOffset}
	// A consumer reading far behind the head (more than
	// accessMessageInMemoryMaxRatio of memory) would make the master read
	// from disk: suggest it reads from a slave instead.
	if b.cfg.SlaveReadEnable && !b.isSlave() && b.cfg.TotalMemory > 0 && res.LastPhyOffset > 0 &&
		res.MaxPhyOffset-res.LastPhyOffset > b.cfg.TotalMemory/100*int64(b.cfg.AccessMessageInMemoryMaxRatio) {
		resp.SuggestWhichBrokerID = 1
	}
	switch res.Status {
	case storage.GetFound:
		recs := res.Records
		if !h.expr.All {
			// The queue matched the tags hash; a hash collision must not
			// reach the consumer.
			recs = make([][]byte, 0, len(res.Records))
			for _, raw := range res.Records {
				rec, err := storage.DecodeRecord(raw, false)
				if err != nil {
					b.respond(h.request, protocol.StatusSystemError, fmt.Sprintf("decode record: %v", err), nil)
					return true
				}
				if h.expr.Matches(recordProperty(&rec, protocol.PropertyTags)) {
					recs = append(recs, raw)
				}
			}
		}
		if len(recs) == 0 {
			b.respond(h.request, protocol.StatusPullRetryImmediately, "no message matched the subscription", resp)
			return true
		}
		b.stats.msgGetTotal.Add(int64(len(recs)))
		b.k.respondRecords(h.request, protocol.StatusOK, "", &Records{Kind: RecordsPull, Raw: recs, Pull: resp})
		return true
	case storage.GetNoMatchedMessage:
		b.respond(h.request, protocol.StatusPullRetryImmediately, "no message matched the subscription", resp)
		return true
	case storage.GetOffsetTooSmall, storage.GetOffsetOverflowBadly:
		b.respond(h.request, protocol.StatusPullOffsetMoved,
			fmt.Sprintf("offset %d outside [%d, %d]", req.QueueOffset, res.MinOffset, res.MaxOffset), resp)
		return true
	}
	return false // no message yet: NO_MESSAGE_IN_QUEUE, OVERFLOW_ONE, NO_MATCHED_LOGIC_QUEUE
}

func (d *dispatchActor) notFound(m *pullMsg) {
	min, max := d.b.store.ConsumeQueueBounds(d.key)
	next := m.req.QueueOffset
	d.b.respond(m.request, protocol.StatusPullNotFound, "no new message",
		&protocol.PullResponse{NextBeginOffset: next, MinOffset: min, MaxOffset: max})
}

// serveHeld answers held pulls that have a message or have timed out.
func (d *dispatchActor) serveHeld(ctx actor.Context) {
	if len(d.held) == 0 {
		return
	}
	now := d.b.env.Clock.Now()
	keep := d.held[:0]
	var earliest time.Time
	for _, h := range d.held {
		parked(h.conn, -1) // taken out: answered below, or parked again
		if h.conn != nil && closed(h.conn) {
			continue
		}
		if d.try(h) {
			continue
		}
		if !now.Before(h.deadline) {
			d.notFound(h.pullMsg)
			continue
		}
		parked(h.conn, 1)
		if earliest.IsZero() || h.deadline.Before(earliest) {
			earliest = h.deadline
		}
		keep = append(keep, h)
	}
	clear(d.held[len(keep):])
	d.held = keep
	if !earliest.IsZero() {
		d.arm(ctx, earliest)
	}
}

// arm makes sure a pullTick arrives by deadline.
func (d *dispatchActor) arm(ctx actor.Context, deadline time.Time) {
	if !d.timerArmed.IsZero() && !d.timerArmed.After(deadline) {
		return
	}
	d.timerArmed = deadline
	d.b.after(deadline.Sub(d.b.env.Clock.Now()), ctx.Self(), &pullTick{})
}

// indexActor owns the IndexFile: it indexes new records and answers queries
// by key.
type indexActor struct {
	b     *Broker
	flush ownerFlush
	// The index is flushed at most every indexFlushEvery checkpoints;
	// the checkpoints between record the extent of the last flush, so a
	// crash re-indexes at most that many checkpoint intervals of records.
	// Its slots are spread over the whole file: flushing them every second
	// wrote hundreds of random pages and doubled the broker's tail latency.
	barriers int   // checkpoints since the last flush
	flushed  int64 // MaxPhyOffset at the last successful flush; -1: none yet
}

// indexFlushEvery is how many checkpoints (flushIntervalConsumeQueue
// apart) pass between flushes of the index.
const indexFlushEvery = 10

func (x *indexActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *indexEntries:
		for i := range m.reqs {
			if err := x.b.store.ApplyIndex(&m.reqs[i]); err != nil {
				x.b.log.Error("index write failed", "err", err)
				break
			}
		}
	case *queryMsg:
		x.query(m)
	case *flushBarrier:
		if x.barriers++; x.flushed >= 0 && x.barriers < indexFlushEvery && !x.flush.running {
			ctx.Respond(&barrierAck{id: m.id, indexed: x.flushed, isIndex: true})
			return
		}
		x.barriers = 0
		indexed, job, err := x.b.store.FlushIndexJob()
		if err == nil && job == nil {
			x.flushed = indexed // nothing unflushed: durable as it is
		}
		if err != nil || job == nil || x.flush.running {
			if err == nil && job != nil {
				err = errors.New("index: a flush is still running")
				x.b.store.FailIndexFlush(err)
			}
			ctx.Respond(&barrierAck{id: m.id, indexed: indexed, isIndex: true, err: err})
			return
		}
		x.flush.start(x.b, ctx, job, &ownerFlushed{id: m.id, replyTo: ctx.Sender(), indexed: indexed})
	case *ownerFlushed:
		if m.err != nil {
			x.b.store.FailIndexFlush(m.err)
		} else {
			x.flushed = m.indexed
		}
		ctx.Send(m.replyTo, &barrierAck{id: m.id, indexed: m.indexed, isIndex: true, err: m.err})
		if del := x.flush.finish(); del != nil {
			x.deleteBefore(del)
		}
	case *deleteBefore:
		if !x.flush.hold(m) {
			x.deleteBefore(m)
		}
	}
}

func (x *indexActor) deleteBefore(m *deleteBefore) {
	if _, err := x.b.store.DeleteIndexBefore(m.minPhy); err != nil {
		x.b.log.Error("retention of index failed", "err", err)
	}
}

func (x *indexActor) query(m *queryMsg) {
	if m.conn != nil && closed(m.conn) {
		return
	}
	req := m.req
	max := int(req.MaxNum)
	if max <= 0 || max > 64 {
		max = 64 // RocketMQ's maxMsgsNumBatch
	}
	end := req.EndTimestamp
	if end <= 0 {
		end = x.b.nowMs() + 1000
	}
	recs, err := x.b.store.QueryByKey(req.Topic, req.Key, req.BeginTimestamp, end, max)
	if err != nil {
		x.b.respond(m.request, protocol.StatusSystemError, err.Error(), nil)
		return
	}
	if len(recs) == 0 {
		x.b.respond(m.request, protocol.StatusQueryNotFound, fmt.Sprintf("no message with key %q in topic %q", req.Key, req.Topic), nil)
		return
	}
	raws := make([][]byte, 0, len(recs))
	bytes := 0
	for i := range recs {
		// Keep the answer within the frame and outbound limits, as pulls do.
		if len(raws) > 0 && bytes+int(recs[i].TotalSize) > x.b.cfg.MaxPullBytes {
			break
		}
		raw, err := x.b.store.CommitLog().Read(recs[i].PhysicalOffset, int(recs[i].TotalSize))
		if err != nil {
			continue // deleted by retention since the query
		}
		bytes += int(recs[i].TotalSize)
		raws = append(raws, raw)
	}
	x.b.k.respondRecords(m.request, protocol.StatusOK, "", &Records{Kind: RecordsQuery, Raw: raws})
}

// recordProperty returns one property of a stored record ("" if absent).
func recordProperty(r *storage.Record, key string) string {
	v := ""
	storage.EachProperty(r.Properties, func(k, val []byte) {
		if v == "" && string(k) == key {
			v = string(val)
		}
	})
	return v
}

// sortedKeys returns the keys of m in (topic, queue) order.
func sortedKeys[V any](m map[storage.QueueKey]V) []storage.QueueKey {
	keys := make([]storage.QueueKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b storage.QueueKey) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.QueueID) - int(b.QueueID)
	})
	return keys
}
