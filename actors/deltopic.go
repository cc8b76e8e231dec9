package actors

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/actors/dispatch"
	"github.com/wharfmq/wharf/storage"
)

// Deleting a topic crosses four owners, in this order:
//
//  1. the topic manager (meta.Topics) takes the topic out of the table and
//     publishes it, so sends no longer find it, and sends cutTopic to the
//     writer;
//  2. the writer, the log's only appender, records the topic's watermark
//     durably (storage.Store.DeleteTopic: the log's end; below it the
//     topic's records are gone for good) and drops the topic's entries of
//     the queue-offset table, so the next send of the topic gets queue
//     offset 0; it sends topicCut to the Reput actor;
//  3. the Reput actor (dispatch.Drops) has every DispatchActor of the
//     topic answer its held pulls TOPIC_NOT_EXIST, remove its ConsumeQueue
//     and stop; what arrives for those queues meanwhile (pulls, and the
//     records of the re-created topic, replayed from the watermark) waits
//     for fresh DispatchActors, spawned once the old ones are gone;
//  4. when the last one is gone the Reput actor sends topicDeleted to the
//     topic manager, which writes the table and answers, and to the offset
//     manager, which forgets the groups' offsets of the topic.
//
// A slave follows its master: the master sends its watermarks with the
// other metadata, and the slave's writer runs step 2 with the master's
// watermark (its log may be behind or ahead of it), then steps 3 and 4.

// cutTopic asks the writer to cut a deleted topic's records away (at < 0:
// at the log's end; a slave passes its master's watermark).
type cutTopic struct {
	topic string
	at    int64
}

// topicCut tells the Reput actor that the records of topic below at are
// gone.
type topicCut struct {
	topic string
	at    int64
}

// dropQueue tells a DispatchActor to drop its ConsumeQueue and stop.
type dropQueue struct{}

// queueDropped tells the Reput actor that a DispatchActor dropped its
// queue (err: it could not remove the files) and is stopping.
type queueDropped struct {
	key storage.QueueKey
	err error
}

// topicDeleted tells the topic and offset managers that a topic's
// deletion is done.
type topicDeleted struct {
	topic string
	err   error
}

// deletedKind is the kind of the HA metadata that carries the master's
// watermarks (JSON of storage.Deleted).
const deletedKind = "deletedTopics"

// cutTopic is the writer's step: it owns the log and its queue-offset
// table, so the watermark is taken and the table changed here, between
// two appends.
func (a *writerActor) cutTopic(ctx actor.Context, m *cutTopic) {
	if m.at < 0 && a.role.slave() {
		ctx.Send(a.p.topics, &topicDeleted{topic: m.topic, err: errors.New("this broker became a slave")})
		return
	}
	at, err := a.st.DeleteTopic(m.topic, m.at)
	if err != nil {
		a.k.log.Error("deleting a topic failed", "topic", m.topic, "err", err)
		if at == 0 { // nothing recorded: the topic is not deleted
			ctx.Send(a.p.topics, &topicDeleted{topic: m.topic, err: err})
			return
		}
	}
	a.k.log.Info("topic deleted", "topic", m.topic, "watermark", at)
	ctx.Send(a.p.reput, &topicCut{topic: m.topic, at: at})
}

// importDeleted is a slave's writer applying its master's watermarks.
func (a *writerActor) importDeleted(ctx actor.Context, data []byte) {
	var master storage.Deleted
	if err := json.Unmarshal(data, &master); err != nil {
		a.k.log.Error("bad deleted topics from the master", "err", err)
		return
	}
	mine := a.st.Deleted()
	for _, topic := range sortedTopics(master) {
		if w, ok := mine[topic]; !ok || w < master[topic] {
			a.cutTopic(ctx, &cutTopic{topic: topic, at: master[topic]})
		}
	}
}

// deletedMetadata is the master's watermarks for its slaves.
func deletedMetadata(st *storage.Store) ([]byte, bool) {
	d := st.Deleted()
	if len(d) == 0 {
		return nil, false
	}
	data, err := json.Marshal(d)
	return data, err == nil
}

func sortedTopics(d storage.Deleted) []string {
	out := make([]string, 0, len(d))
	for t := range d {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// cut is the Reput actor's step: drop the topic's queues, and replay what
// its re-created queues got before this message came.
func (r *reputActor) cut(ctx actor.Context, m *topicCut) {
	var owned []storage.QueueKey
	for _, k := range dispatch.SortedKeys(r.queues) {
		if k.Topic == m.topic {
			owned = append(owned, k)
		}
	}
	drop, done := r.drops.Cut(m.topic, owned)
	for _, k := range drop {
		ctx.Send(r.queues[k], &dropQueue{})
		delete(r.queues, k)
	}
	replay, err := r.core.Replay(r.store, m.topic, m.at)
	if err != nil {
		r.k.log.Error("reput: cannot read the log again after a topic's deletion", "topic", m.topic, "err", err)
	}
	for i := range replay {
		r.toQueue(ctx, replay[i].Key, &replay[i])
	}
	r.deleted(ctx, done)
}

// queueDropped hands a dropped queue's held messages to its fresh owner.
func (r *reputActor) queueDropped(ctx actor.Context, m *queueDropped) {
	held, done := r.drops.Dropped(m.key, m.err)
	for _, msg := range held {
		r.toQueue(ctx, m.key, msg)
	}
	r.deleted(ctx, done)
}

func (r *reputActor) deleted(ctx actor.Context, done []dispatch.Done) {
	for _, d := range done {
		ctx.Send(r.p.topics, &topicDeleted{topic: d.Topic, err: d.Err})
		ctx.Send(r.p.offsets, &topicDeleted{topic: d.Topic, err: d.Err})
	}
}

// heldFor is a message held for a fresh DispatchActor, with the sender a
// forwarded request must keep.
type heldFor struct {
	msg    any
	sender *actor.PID
}

// toQueue sends msg to k's DispatchActor, or holds it while k's queue is
// being dropped.
func (r *reputActor) toQueue(ctx actor.Context, k storage.QueueKey, msg any) {
	if r.drops.Hold(k, msg) {
		return
	}
	if h, ok := msg.(*heldFor); ok {
		ctx.RequestWithCustomSender(r.queue(ctx, k), h.msg, h.sender)
		return
	}
	ctx.Send(r.queue(ctx, k), msg)
}

// forwardToQueue is toQueue for a request whose answer goes to its sender.
func (r *reputActor) forwardToQueue(ctx actor.Context, k storage.QueueKey) {
	if r.drops.Hold(k, &heldFor{msg: ctx.Message(), sender: ctx.Sender()}) {
		return
	}
	ctx.Forward(r.queue(ctx, k))
}

// drop is a DispatchActor's step: answer the held pulls, then (once no
// flush of the queue runs) remove the queue, its published bounds, and
// stop.
func (d *dispatchActor) drop(ctx actor.Context) {
	d.dropping = true
	d.ready(ctx, d.q.Drop())
	if !d.flush.Running() {
		d.finishDrop(ctx)
	}
}

func (d *dispatchActor) finishDrop(ctx actor.Context) {
	err := d.store.DropConsumeQueue(d.key)
	if err != nil {
		d.k.log.Error("dropping the consume queue of a deleted topic failed", "queue", d.key.String(), "err", err)
		err = fmt.Errorf("queue %s: %w", d.key, err)
	}
	d.v.dropBounds(d.key)
	ctx.Send(ctx.Parent(), &queueDropped{key: d.key, err: err})
	ctx.Stop(ctx.Self())
}
