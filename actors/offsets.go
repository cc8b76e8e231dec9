package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/actors/meta"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

// offsetMsg is a consumer offset request.
type offsetMsg struct {
	*request
	req protocol.Request
}

// persistTick is the interval write of consumer offsets.
type persistTick struct{}

// persistSoon is the group-commit timer of acknowledged commits.
type persistSoon struct{}

// offsetManager is the actor around meta.Offsets: it loads and writes
// consumerOffset.json, runs the core's timers (the interval write every
// flushConsumerOffsetInterval, the group-commit timer) and answers.
type offsetManager struct {
	k        *kit
	v        *views
	store    *storage.Store
	interval time.Duration
	core     *meta.Offsets
}

func newOffsetManager(k *kit, v *views, store *storage.Store, interval time.Duration) *offsetManager {
	if interval <= 0 {
		interval = 5 * time.Second
	}
	return &offsetManager{k: k, v: v, store: store, interval: interval}
}

func (o *offsetManager) path() string { return o.store.ConfigPath(storage.ConsumerOffsetsFile) }

func (o *offsetManager) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		o.core = meta.NewOffsets(meta.OffsetsConfig{
			AckBeforePersist: o.k.faults.CommitOffsetBeforePersist,
			Bounds:           o.v.queueBounds,
		})
		table := storage.ConsumerOffsetTable{Offsets: map[string]map[int32]int64{}}
		if _, err := storage.LoadJSON(o.store.FS(), o.path(), &table); err != nil {
			o.k.log.Error("loading consumer offsets failed", "err", err)
		}
		o.core.Load(table)
		o.k.after(o.interval, ctx.Self(), &persistTick{})
	case *offsetMsg:
		o.core.Handle(m.request, m.req, m.oneway)
	case *persistTick:
		o.core.Tick()
		o.k.after(o.interval, ctx.Self(), &persistTick{})
	case *persistSoon:
		o.core.SoonFired()
	case *topicDeleted:
		if m.err == nil {
			o.core.DropTopic(m.topic)
		}
	case *fillOffsets:
		o.fill(m)
	case *exportOffsets:
		if data, err := o.core.Export(); err == nil {
			ctx.Respond(&metaSnapshot{kind: "offsets", data: data})
		}
	case *importMeta:
		if err := o.core.Import(m.data); err != nil {
			o.k.log.Error("bad consumer offsets from the peer broker", "err", err)
		}
	case *actor.Stopping:
		o.core.Stop()
	}
	o.drain(ctx)
}

// drain runs the core's outputs: the write (reporting its outcome, which
// releases the commits that waited for it), the timer, the answers.
func (o *offsetManager) drain(ctx actor.Context) {
	if o.core == nil {
		return
	}
	for {
		rd := o.core.Ready()
		if rd.Save != nil {
			err := storage.SaveJSON(o.store.FS(), o.path(), rd.Save)
			if err != nil {
				o.k.log.Error("persisting consumer offsets failed", "err", err)
			}
			o.core.Persisted(err)
		}
		if rd.ArmSoon > 0 {
			o.k.after(rd.ArmSoon, ctx.Self(), &persistSoon{})
		}
		for _, r := range rd.Replies {
			o.k.respond(r.To.(*request), r.Status, r.Remark, r.Fields)
		}
		if rd.Save == nil {
			return
		}
	}
}

// fill completes group descriptions with committed offsets and lag; the
// offset manager runs it (it owns the offsets).
func (o *offsetManager) fill(m *fillOffsets) {
	committed := func(group string, q protocol.QueueRef) int64 {
		if off, ok := o.core.Committed(q.Topic, group, q.QueueID); ok {
			return off
		}
		return -1
	}
	if m.desc != nil {
		for i := range m.desc.Queues {
			gq := &m.desc.Queues[i]
			_, max := o.v.queueBounds(storage.QueueKey{Topic: gq.Topic, QueueID: gq.QueueID})
			gq.MaxOffset = max
			gq.CommittedOffset = committed(m.desc.Group, protocol.QueueRef{Topic: gq.Topic, QueueID: gq.QueueID})
			gq.Lag = max - max64(gq.CommittedOffset, 0)
		}
		if m.replyTo != nil {
			o.k.send(m.replyTo, &groupSnap{desc: m.desc})
			return
		}
		o.k.respond(m.request, protocol.StatusOK, "", m.desc)
		return
	}
	resp := &protocol.ConsumerGroupsResponse{Groups: []protocol.GroupSummary{}}
	for _, s := range m.list {
		gs := s.GroupSummary
		for _, q := range s.queues {
			_, max := o.v.queueBounds(storage.QueueKey{Topic: q.Topic, QueueID: q.QueueID})
			gs.Lag += max - max64(committed(gs.Group, q), 0)
		}
		resp.Groups = append(resp.Groups, gs)
	}
	o.k.respond(m.request, protocol.StatusOK, "", resp)
}
