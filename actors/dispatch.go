package actors

import (
	"fmt"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/actors/dispatch"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

// pullMsg is a PULL_MESSAGE request.
type pullMsg struct {
	*request
	req *protocol.PullRequest
}

// Gone implements dispatch.Waiter: nobody reads the answer of a closed
// connection.
func (m *pullMsg) Gone() bool { return m.conn != nil && closed(m.conn) }

// pullTick expires held pulls.
type pullTick struct{}

// dispatchActor is the shell of one ConsumeQueue's core (dispatch.Queue):
// it applies the queue's entries, publishes its bounds, feeds pulls and
// ticks to the core and writes what it answers; it also flushes the queue
// for checkpoints and applies retention.
type dispatchActor struct {
	k     *kit
	store *storage.Store
	p     *pids
	v     *views
	key   storage.QueueKey
	q     *dispatch.Queue
	gets  *atomic.Int64 // messages handed to consumers (stats)
	flush dispatch.Flush
	// dropping: the topic was deleted; the queue is dropped once no flush
	// of it runs (see deltopic.go).
	dropping bool
}

// newDispatchActor returns the shell of queue k (its core is made here so
// that a restarted actor starts without held pulls it cannot answer).
func newDispatchActor(k *kit, store *storage.Store, p *pids, v *views, key storage.QueueKey, cfg dispatch.QueueConfig, gets *atomic.Int64) *dispatchActor {
	return &dispatchActor{k: k, store: store, p: p, v: v, key: key, q: dispatch.NewQueue(key, cfg, store), gets: gets}
}

func (d *dispatchActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		d.publish()
	case *queueEntries:
		if err := d.store.ApplyConsumeQueueBatch(d.key, m.Reqs); err != nil {
			d.k.log.Error("consume queue write failed", "queue", d.key.String(), "err", err)
		}
		d.publish()
		d.ready(ctx, d.q.Entries(d.k.now()))
	case *pullMsg:
		d.pull(ctx, m)
	case *scheduleScan:
		d.scheduleScan(ctx, m)
	case *searchMsg:
		lo, hi := d.store.ConsumeQueueBounds(d.key)
		off := dispatch.SearchOffset(lo, hi, m.req.Timestamp, d.storeTime)
		d.k.respond(m.request, protocol.StatusOK, "", &protocol.OffsetResponse{Offset: off})
	case *ageQuery:
		if ms, ok := d.storeTime(m.offset); ok {
			ctx.Send(m.replyTo, &ageReply{group: m.group, key: d.key, storeMs: ms})
		}
	case *pullTick:
		d.ready(ctx, d.q.Tick(d.k.now()))
	case *flushBarrier:
		d.flushBarrier(ctx, m)
	case *ownerFlushed:
		if m.ack.Err != nil {
			d.store.FailQueueFlush(d.key, m.ack.Err)
		}
		ctx.Send(m.replyTo, &barrierAck{m.ack})
		if minPhy, ok := d.flush.Finish(); ok && !d.dropping {
			d.deleteBefore(minPhy)
		}
		if d.dropping {
			d.finishDrop(ctx)
		}
	case *dropQueue:
		d.drop(ctx)
	case *deleteBefore:
		if !d.flush.Hold(m.minPhy) {
			d.deleteBefore(m.minPhy)
		}
	case *actor.Stopping:
		d.ready(ctx, d.q.Stop())
	}
}

// storeTime is when the message at queue offset off was stored (the
// snapshot's consumer lag in time); false if there is none.
func (d *dispatchActor) storeTime(off int64) (int64, bool) {
	e, err := d.store.QueueEntry(d.key, off)
	if err != nil || !e.Valid() {
		return 0, false
	}
	rec, err := d.store.CommitLog().ReadRecord(e.Offset, e.Size, false)
	if err != nil {
		return 0, false
	}
	return rec.StoreTimestamp, true
}

func (d *dispatchActor) pull(ctx actor.Context, m *pullMsg) {
	if m.Gone() {
		return // nobody would read the answer
	}
	if m.req.CommitOffset != nil {
		ctx.Send(d.p.offsets, &offsetMsg{request: &request{oneway: true}, req: &protocol.UpdateConsumerOffsetRequest{
			ConsumerGroup: m.req.ConsumerGroup, Topic: m.req.Topic, QueueID: m.req.QueueID, CommitOffset: *m.req.CommitOffset}})
	}
	d.ready(ctx, d.q.Pull(d.k.now(), m, m.req))
}

// ready carries out what the core decided, in the order dispatch.Ready
// asks for.
func (d *dispatchActor) ready(ctx actor.Context, rd dispatch.Ready) {
	for _, w := range rd.Dropped {
		parked(w.(*pullMsg).conn, -1)
		d.k.metrics.LongPolls(-1)
	}
	for _, a := range rd.Answers {
		m := a.To.(*pullMsg)
		if a.Unpark {
			parked(m.conn, -1)
			d.k.metrics.LongPolls(-1)
		}
		if a.Status == protocol.StatusOK {
			d.gets.Add(int64(len(a.Records)))
			d.k.metrics.Pulled(m.req.Topic, len(a.Records), rawBytes(a.Records))
			d.k.respondRecords(m.request, a.Status, a.Remark, &Records{Kind: RecordsPull, Raw: a.Records, Pull: a.Pull})
			continue
		}
		var fields protocol.Fields
		if a.Pull != nil {
			fields = a.Pull
		}
		d.k.respond(m.request, a.Status, a.Remark, fields)
	}
	for _, w := range rd.Parked {
		parked(w.(*pullMsg).conn, 1)
		d.k.metrics.LongPolls(1)
	}
	if !rd.Arm.IsZero() {
		d.k.after(rd.Arm.Sub(d.k.now()), ctx.Self(), &pullTick{})
	}
}

// flushBarrier flushes the queue for a checkpoint. The msync runs off the
// actor: pulls and new entries are served meanwhile (a synchronous flush
// held them for milliseconds at every checkpoint).
func (d *dispatchActor) flushBarrier(ctx actor.Context, m *flushBarrier) {
	mark, job, err := d.store.FlushQueueJob(d.key)
	if err != nil || job == nil || d.flush.Running() {
		if err == nil && job != nil { // cannot happen: the Reput actor waits for every ack
			err = fmt.Errorf("consume queue %s: a flush is still running", d.key)
			d.store.FailQueueFlush(d.key, err)
		}
		ctx.Respond(&barrierAck{dispatch.Ack{ID: m.id, Mark: mark, Err: err}})
		return
	}
	runFlush(d.k, ctx.Self(), &d.flush, job, &ownerFlushed{ack: dispatch.Ack{ID: m.id, Mark: mark}, replyTo: ctx.Sender()})
}

func (d *dispatchActor) deleteBefore(minPhy int64) {
	if _, err := d.store.DeleteQueueBefore(d.key, minPhy); err != nil {
		d.k.log.Error("retention of consume queue failed", "queue", d.key.String(), "err", err)
	}
	d.publish()
}

func (d *dispatchActor) publish() {
	min, max := d.store.ConsumeQueueBounds(d.key)
	d.v.publishBounds(d.key, min, max)
}

// pullConfig is the Queue core's part of the broker's Config.
func (b *Broker) pullConfig() dispatch.QueueConfig {
	c := dispatch.QueueConfig{MaxMsgs: b.cfg.MaxPullBatch, MaxBytes: b.cfg.MaxPullBytes, LongPolling: b.cfg.LongPollingEnable,
		ShortPolling: b.cfg.ShortPollingTime, MaxSuspend: b.cfg.MaxPullSuspend}
	// A consumer reading far behind the head (more than
	// accessMessageInMemoryMaxRatio of memory) would make the master read
	// from disk.
	if b.cfg.SlaveReadEnable && !b.isSlave() && b.cfg.TotalMemory > 0 {
		c.SuggestSlaveBeyond = b.cfg.TotalMemory / 100 * int64(b.cfg.AccessMessageInMemoryMaxRatio)
	}
	return c
}

// readTopics is what a read of a queue is checked against.
func (v *views) readTopics() dispatch.Topics {
	return dispatch.Topics{Table: v.topicsSnapshot(), OnDisk: v.knownQueues}
}

// routePull answers a pull of a topic or queue the broker does not have,
// or may not read, at once; the others go to their DispatchActor (through
// the Reput actor, which spawns it).
func (b *Broker) routePull(r *request, m *protocol.PullRequest) {
	if st, remark := b.v.readTopics().Read(m.Topic, m.QueueID, true); st != protocol.StatusOK {
		b.respond(r, st, remark, nil)
		return
	}
	b.sys.Root.Send(b.p.reput, &pullMsg{request: r, req: m})
}

// searchMsg is SEARCH_OFFSET_BY_TIMESTAMP, for the queue's dispatch actor
// (through reput, which starts it if need be).
type searchMsg struct {
	*request
	req *protocol.SearchOffsetRequest
}

func (b *Broker) searchOffset(r *request, m *protocol.SearchOffsetRequest) {
	if st, remark := b.v.readTopics().Read(m.Topic, m.QueueID, false); st != protocol.StatusOK {
		b.respond(r, st, remark, nil)
		return
	}
	b.sys.Root.Send(b.p.reput, &searchMsg{request: r, req: m})
}

// queueOffset answers GET_MIN_OFFSET (max false) or GET_MAX_OFFSET from the
// bounds the DispatchActors publish.
func (b *Broker) queueOffset(r *request, topic string, queueID int32, max bool) {
	if st, remark := b.v.readTopics().Read(topic, queueID, false); st != protocol.StatusOK {
		b.respond(r, st, remark, nil)
		return
	}
	lo, hi := b.v.queueBounds(storage.QueueKey{Topic: topic, QueueID: queueID})
	off := lo
	if max {
		off = hi
	}
	b.respond(r, protocol.StatusOK, "", &protocol.OffsetResponse{Offset: off})
}
