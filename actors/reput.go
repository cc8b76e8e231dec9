package actors

import (
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/actors/dispatch"
	"github.com/wharfmq/wharf/storage"
)

// logAppended tells the Reput actor that the log grew (ASYNC_FLUSH:
// consumers see messages as soon as they are in the page cache).
type logAppended struct{}

// confirmMoved (controller mode) lifts the Reput actor's limit to offset:
// a master's confirm offset (from the durability actor), a slave's log
// end (from the writer, which appends its master's bytes). Consumers see
// nothing past it.
type confirmMoved struct{ offset int64 }

// queueEntries carries new records of one queue to its DispatchActor: it
// is the queue's share of a dispatch.Batch, sent as a pointer into the
// batch's Queues (no message to make per queue and batch).
type queueEntries = dispatch.QueueBatch

// indexEntries carries new records to the IndexActor. Both share a
// dispatch.Batch, which nobody writes once it is sent.
type indexEntries struct{ reqs []storage.DispatchRequest }

// checkpointTick starts a checkpoint.
type checkpointTick struct{}

// flushBarrier asks a DispatchActor or the IndexActor to flush: every entry
// the Reput actor sent before it (mailboxes are FIFO) is covered.
type flushBarrier struct{ id int64 }

// barrierAck answers a flushBarrier.
type barrierAck struct{ dispatch.Ack }

// deleteBefore tells queue and index owners the log's new start.
type deleteBefore struct{ minPhy int64 }

// ownerFlushed reports to a DispatchActor or the IndexActor that the work
// of its flush job (run off the actor) finished.
type ownerFlushed struct {
	ack     dispatch.Ack
	replyTo *actor.PID
}

// runFlush runs a queue owner's or the index's flush job off the actor;
// its outcome comes back to self as an ownerFlushed.
func runFlush(k *kit, self *actor.PID, f *dispatch.Flush, job func() error, done *ownerFlushed) {
	f.Start()
	k.background(self, func() any {
		done.ack.Err = job()
		return done
	})
}

// checkpointWritten reports that the checkpoint file (written off the
// Reput actor) is done.
type checkpointWritten struct{ err error }

// reputActor is the shell of the Reput core (dispatch.Reput): it reads new
// log records into per-queue batches for the DispatchActors (which it
// spawns, one per queue) and the IndexActor, and writes checkpoints once
// the barrier over all of them completes.
type reputActor struct {
	k         *kit
	store     *storage.Store
	p         *pids
	syncFlush bool
	// controller mode: nothing is dispatched past the limit confirmMoved
	// lifts, which starts at held, what the store dispatched when it
	// opened (confirmed before the stop: storage's DispatchConfirmedOnly).
	controller bool
	held       int64
	interval   time.Duration // flushIntervalConsumeQueue: between checkpoints
	queueProps func(storage.QueueKey) *actor.Props
	core       *dispatch.Reput
	queues     map[storage.QueueKey]*actor.PID
	drops      *dispatch.Drops // deleted topics' queues being dropped (deltopic.go)
}

func (r *reputActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		cl := r.store.CommitLog()
		r.core = dispatch.NewReput(r.syncFlush, r.store.Dispatched(), cl.MaxOffset(), cl.FlushedOffset())
		r.queues = map[storage.QueueKey]*actor.PID{}
		r.drops = dispatch.NewDrops()
		if r.controller {
			r.core.Limit(r.held)
		}
		for _, k := range r.store.Queues() {
			r.queue(ctx, k)
		}
		r.dispatch(ctx)
		r.k.after(r.interval, ctx.Self(), &checkpointTick{})
	case *logAppended:
		r.core.Appended(r.store.CommitLog().MaxOffset())
		r.dispatch(ctx)
	case *logFlushed:
		r.core.Flushed(m.offset)
		r.dispatch(ctx)
	case *confirmMoved:
		// Dispatching wakes the pulls held for the queues it feeds: a long
		// poll wakes when the confirm offset moves, not at the append.
		r.core.Limit(m.offset)
		r.dispatch(ctx)
	case *pullMsg:
		r.toQueue(ctx, storage.QueueKey{Topic: m.req.Topic, QueueID: m.req.QueueID}, m)
	case *searchMsg:
		r.toQueue(ctx, storage.QueueKey{Topic: m.req.Topic, QueueID: m.req.QueueID}, m)
	case *ageQuery:
		if pid, ok := r.queues[m.key]; ok {
			ctx.Send(pid, m) // a queue not started has no message to date
		}
	case *scheduleScan:
		r.forwardToQueue(ctx, storage.QueueKey{Topic: storage.ScheduleTopic, QueueID: m.queue})
	case *topicCut:
		r.cut(ctx, m)
	case *queueDropped:
		r.queueDropped(ctx, m)
	case *deleteBefore:
		for _, k := range dispatch.SortedKeys(r.queues) {
			ctx.Send(r.queues[k], m)
		}
		ctx.Send(r.p.index, m)
	case *checkpointTick:
		r.startCheckpoint(ctx)
		r.k.after(r.interval, ctx.Self(), &checkpointTick{})
	case *barrierAck:
		r.ack(ctx, m)
	case *checkpointWritten:
		r.core.Written()
		if m.err != nil && !errors.Is(m.err, storage.ErrStoreClosed) {
			r.k.log.Error("checkpoint failed", "err", m.err)
		}
	case *actor.Stopping:
		// The queue owners are this actor's children and stop with it,
		// dropping entries still in their mailboxes: the store's Close
		// dispatches again from the last position every owner confirmed
		// (idempotently), then writes the clean checkpoint. Setting the
		// handed position here lost those entries for good after a clean
		// stop right behind a burst of sends.
		r.store.SetDispatched(r.core.Confirmed())
	}
}

// queue returns the DispatchActor of k, spawning it if needed.
func (r *reputActor) queue(ctx actor.Context, k storage.QueueKey) *actor.PID {
	if pid, ok := r.queues[k]; ok {
		return pid
	}
	pid := ctx.Spawn(r.queueProps(k))
	r.queues[k] = pid
	return pid
}

// dispatch hands every visible record not yet dispatched to its queue and
// the index.
func (r *reputActor) dispatch(ctx actor.Context) {
	r.core.LogStart(r.store.CommitLog().MinOffset())
	if !r.core.Pending() {
		return
	}
	b, err := r.core.Dispatch(r.store)
	if err != nil {
		// The writer only publishes whole records, so this is a bug or
		// corruption of the running log: stop dispatching rather than skip.
		pos, _ := r.core.Position()
		r.k.log.Error("reput: cannot decode the log; dispatch stopped", "offset", pos, "err", err)
	}
	for i := range b.Queues {
		r.toQueue(ctx, b.Queues[i].Key, &b.Queues[i])
	}
	if len(b.All) > 0 {
		ctx.Send(r.p.index, &indexEntries{reqs: b.All})
	}
	r.store.SetDispatched(r.core.Position())
}

func (r *reputActor) startCheckpoint(ctx actor.Context) {
	if r.drops.Busy() {
		return // entries held for fresh owners are in no queue yet: the next tick
	}
	id, ok := r.core.StartCheckpoint(len(r.queues))
	if !ok {
		return // the previous one is still being acknowledged
	}
	for _, k := range dispatch.SortedKeys(r.queues) {
		ctx.Request(r.queues[k], &flushBarrier{id: id})
	}
	ctx.Request(r.p.index, &flushBarrier{id: id})
}

func (r *reputActor) ack(ctx actor.Context, m *barrierAck) {
	if m.Err != nil {
		r.k.log.Error("checkpoint: flush failed", "err", m.Err)
	}
	cp, write := r.core.Ack(m.Ack)
	if !write {
		return
	}
	// Written off the actor (it fsyncs): dispatching goes on meanwhile. The
	// next checkpoint starts only after this one is written.
	st := r.store
	r.k.background(ctx.Self(), func() any {
		return &checkpointWritten{err: st.WriteCheckpointAt(cp.Pos, cp.Indexed, cp.Ts, cp.Marks)}
	})
}
