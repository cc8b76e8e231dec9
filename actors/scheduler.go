package actors

import (
	"fmt"
	"slices"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/actors/delay"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
	"github.com/wharfmq/wharf/storage/cq"
)

// DelayOffsetsFile is the scheduler's progress file.
const DelayOffsetsFile = delay.ProgressFile

// scheduleScan asks a schedule queue's DispatchActor for entries.
type scheduleScan struct {
	queue int32
	from  int64
	max   int
}

// scheduleEntries answers a scheduleScan.
type scheduleEntries struct {
	queue   int32
	from    int64
	entries []cq.Entry
	min     int64
}

type scheduleTick struct{}

// scheduler is the actor around delay.Scheduler (see package delay for how
// delayed messages wait and are delivered): it ticks the core, asks the
// schedule queues' DispatchActors for entries, reads due messages and hands
// them to the writer, and writes delayOffset.json.
type scheduler struct {
	k      *kit
	p      *pids
	v      *views
	store  *storage.Store
	levels int
	core   *delay.Scheduler
}

func newScheduler(k *kit, p *pids, v *views, store *storage.Store, levels int) *scheduler {
	return &scheduler{k: k, p: p, v: v, store: store, levels: levels}
}

func (s *scheduler) path() string { return s.store.ConfigPath(DelayOffsetsFile) }

func (s *scheduler) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.core = delay.New(s.levels)
		var p delay.Progress
		if _, err := storage.LoadJSON(s.store.FS(), s.path(), &p); err != nil {
			s.k.log.Error("loading delay offsets failed", "err", err)
		}
		s.core.Load(p)
		s.k.after(delay.TickInterval, ctx.Self(), &scheduleTick{})
	case *scheduleTick:
		s.core.Tick(s.k.now(), s.store.CommitLog().FlushedOffset(), s.queueMax)
		s.k.after(delay.TickInterval, ctx.Self(), &scheduleTick{})
	case *scheduleEntries:
		s.core.Entries(s.k.now(), m.queue, m.from, m.entries)
	case *internalStored:
		if m.err != nil {
			// Not stored (the store refuses writes): the core looks again later.
			s.k.log.Warn("re-storing due delayed messages failed; will retry", "err", m.err)
		}
		s.core.Stored(m.tag.(delay.Batch), m.end, m.err)
	case *actor.Stopping:
		s.core.Stop()
	}
	s.drain(ctx)
}

func (s *scheduler) queueMax(q int32) int64 {
	_, max := s.v.queueBounds(storage.QueueKey{Topic: storage.ScheduleTopic, QueueID: q})
	return max
}

// drain runs the core's outputs until it has none.
func (s *scheduler) drain(ctx actor.Context) {
	if s.core == nil {
		return
	}
	for {
		rd := s.core.Ready()
		if rd.Save == nil && len(rd.Scans) == 0 && len(rd.Restores) == 0 {
			return
		}
		if rd.Save != nil {
			err := storage.SaveJSON(s.store.FS(), s.path(), rd.Save)
			if err != nil {
				s.k.log.Error("saving delay offsets failed", "err", err)
			}
			s.core.Persisted(err)
		}
		for _, sc := range rd.Scans {
			ctx.Request(s.p.reput, &scheduleScan{queue: sc.Queue, from: sc.From, max: sc.Max})
		}
		for _, r := range rd.Restores {
			s.restore(ctx, r)
		}
	}
}

// restore re-stores due messages in their real topics, as one write batch.
func (s *scheduler) restore(ctx actor.Context, r delay.Restore) {
	var items []*sendItem
	for _, e := range r.Entries {
		rec, err := s.store.CommitLog().ReadRecord(e.Offset, e.Size, false)
		if err != nil {
			s.k.log.Error("delayed message unreadable; skipped", "offset", e.Offset, "err", err)
			continue
		}
		ext := recordToExt(&rec)
		topic, qid, props, ok := delay.Unwrap(ext.Properties)
		if !ok {
			s.k.log.Error("delayed message without REAL_TOPIC; skipped", "offset", e.Offset)
			continue
		}
		if s.store.Deleted().Covers([]byte(topic), e.Offset) {
			continue // sent before its topic was deleted: it went with the topic
		}
		items = append(items, &sendItem{request: &request{oneway: true}, topic: topic, queueID: qid,
			bornTs: rec.BornTimestamp, reconsume: rec.ReconsumeTimes,
			msgs: []protocol.Message{{Topic: topic, Flag: rec.Flag, Body: slices.Clone(rec.Body), Properties: props}}})
	}
	if len(items) == 0 {
		// Nothing readable: count the entries as done.
		s.core.Stored(r.Batch, 0, nil)
		return
	}
	// Only the last item reports back: the batch is appended in order, so
	// its end covers all of them.
	items[len(items)-1].notify, items[len(items)-1].tag = ctx.Self(), r.Batch
	ctx.Send(s.p.writer, &writeBatch{items: items})
}

// scheduleScan answers a scheduleScan for this DispatchActor's queue.
func (d *dispatchActor) scheduleScan(ctx actor.Context, m *scheduleScan) {
	resp := &scheduleEntries{queue: m.queue, from: m.from}
	q, err := d.store.ConsumeQueue(d.key, false)
	if err == nil && q != nil {
		resp.min = q.MinOffset()
		from := max(m.from, q.MinOffset())
		resp.from = from
		resp.entries, err = q.Read(from, m.max, nil)
		if err != nil {
			d.k.log.Error("schedule queue read failed", "queue", d.key.String(), "err", fmt.Sprint(err))
		}
	}
	ctx.Respond(resp)
}
