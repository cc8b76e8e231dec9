package actors

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
	"github.com/wharfmq/wharf/storage/cq"
)

// Delayed messages wait in storage.ScheduleTopic: queue level-1 for a delay
// level (each such queue is in delivery order), queue len(levels) for
// absolute times (in any order). The scheduler actor finds due messages by
// their ConsumeQueue entries (whose tags code is the delivery time), re-stores
// them in their real topic and queue, and records its progress per queue in
// config/delayOffset.json only once the re-stored copies are flushed, so a
// delayed message survives a restart (at worst it is delivered twice).

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

// delayOffsets is config/delayOffset.json.
type delayOffsets struct {
	Offsets map[int32]int64 `json:"offsetTable"`
}

// DelayOffsetsFile is the scheduler's progress file.
const DelayOffsetsFile = "delayOffset.json"

type schedPending struct {
	qo      int64
	deliver int64
	e       cq.Entry
}

type schedCommit struct {
	queue int32
	upTo  int64 // progress once durable
	end   int64 // log end of the re-stored copies
	qos   []int64
}

type scheduler struct {
	b        *Broker
	progress map[int32]int64 // durable: next queue offset not yet re-stored and flushed
	scan     map[int32]int64 // next queue offset to look at
	asked    map[int32]bool
	abs      []schedPending // absolute-time entries seen, not yet delivered
	absDone  map[int64]bool // absolute-time queue offsets re-stored (awaiting progress)
	commits  []schedCommit
	inflight int
	dirty    bool
}

func (s *scheduler) absQueue() int32 { return int32(len(s.b.cfg.DelayLevels)) }

func (s *scheduler) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		var d delayOffsets
		if _, err := storage.LoadJSON(s.b.storeFS(), s.b.store.ConfigPath(DelayOffsetsFile), &d); err != nil {
			s.b.log.Error("loading delay offsets failed", "err", err)
		}
		s.progress = map[int32]int64{}
		maps.Copy(s.progress, d.Offsets)
		s.scan = maps.Clone(s.progress)
		s.asked, s.absDone = map[int32]bool{}, map[int64]bool{}
		s.b.after(100*time.Millisecond, ctx.Self(), &scheduleTick{})
	case *scheduleTick:
		s.tick(ctx)
		s.b.after(100*time.Millisecond, ctx.Self(), &scheduleTick{})
	case *scheduleEntries:
		s.asked[m.queue] = false
		s.entries(ctx, m)
	case *internalStored:
		s.inflight--
		c := m.tag.(schedCommit)
		if m.err != nil {
			// Not stored (the store refuses writes): look again later.
			s.b.log.Warn("re-storing due delayed messages failed; will retry", "err", m.err)
			s.rewind(c)
			return
		}
		c.end = m.end
		s.commits = append(s.commits, c)
	case *actor.Stopping:
		s.persist()
	}
}

func (s *scheduler) rewind(c schedCommit) {
	if c.queue == s.absQueue() {
		for _, qo := range c.qos {
			delete(s.absDone, qo)
		}
		s.scan[c.queue] = s.progress[c.queue] // rescan; done ones are skipped
		s.abs = nil
		return
	}
	s.scan[c.queue] = s.progress[c.queue]
}

func (s *scheduler) tick(ctx actor.Context) {
	// Progress moves only over re-stored copies that are now durable.
	flushed := s.b.store.CommitLog().FlushedOffset()
	keep := s.commits[:0]
	for _, c := range s.commits {
		if c.end > flushed {
			keep = append(keep, c)
			continue
		}
		if c.queue == s.absQueue() {
			for _, qo := range c.qos {
				s.absDone[qo] = true
			}
			p := s.progress[c.queue]
			for s.absDone[p] {
				delete(s.absDone, p)
				p++
			}
			s.progress[c.queue] = p
		} else if c.upTo > s.progress[c.queue] {
			s.progress[c.queue] = c.upTo
		}
		s.dirty = true
	}
	s.commits = keep
	s.persist()
	if s.inflight > 0 {
		return // one batch at a time keeps progress simple
	}
	for q := int32(0); q <= s.absQueue(); q++ {
		if _, max := s.b.v.queueBounds(storage.QueueKey{Topic: storage.ScheduleTopic, QueueID: q}); max <= s.scan[q] {
			continue
		}
		if !s.asked[q] {
			s.asked[q] = true
			ctx.Request(s.b.p.reput, &scheduleScan{queue: q, from: s.scan[q], max: 256})
		}
	}
	s.deliverAbs(ctx)
}

func (s *scheduler) persist() {
	if !s.dirty {
		return
	}
	if err := storage.SaveJSON(s.b.storeFS(), s.b.store.ConfigPath(DelayOffsetsFile), &delayOffsets{Offsets: s.progress}); err != nil {
		s.b.log.Error("saving delay offsets failed", "err", err)
		return
	}
	s.dirty = false
}

func (s *scheduler) entries(ctx actor.Context, m *scheduleEntries) {
	if m.from != s.scan[m.queue] {
		if m.from < s.scan[m.queue] {
			return // a stale answer
		}
		s.scan[m.queue] = m.from // retention removed the entries before
	}
	now := s.b.env.Clock.Now().UnixMilli()
	if m.queue == s.absQueue() {
		for i, e := range m.entries {
			qo := m.from + int64(i)
			if e.Valid() && !s.absDone[qo] {
				s.abs = append(s.abs, schedPending{qo: qo, deliver: e.TagsCode, e: e})
			}
		}
		s.scan[m.queue] = m.from + int64(len(m.entries))
		sort.Slice(s.abs, func(i, j int) bool { return s.abs[i].deliver < s.abs[j].deliver })
		return
	}
	var due []cq.Entry
	for _, e := range m.entries {
		if e.TagsCode > now {
			break // a level's queue is in delivery order
		}
		due = append(due, e)
	}
	if len(due) == 0 {
		return
	}
	c := schedCommit{queue: m.queue, upTo: m.from + int64(len(due))}
	if s.restore(ctx, due, c) {
		s.scan[m.queue] = c.upTo
	}
}

func (s *scheduler) deliverAbs(ctx actor.Context) {
	if s.inflight > 0 || len(s.abs) == 0 {
		return
	}
	now := s.b.env.Clock.Now().UnixMilli()
	n := 0
	for n < len(s.abs) && s.abs[n].deliver <= now && n < 256 {
		n++
	}
	if n == 0 {
		return
	}
	c := schedCommit{queue: s.absQueue()}
	due := make([]cq.Entry, n)
	for i := range n {
		due[i] = s.abs[i].e
		c.qos = append(c.qos, s.abs[i].qo)
	}
	if s.restore(ctx, due, c) {
		s.abs = slices.Delete(s.abs, 0, n)
	}
}

// restore re-stores due messages in their real topics, as one write batch.
func (s *scheduler) restore(ctx actor.Context, due []cq.Entry, c schedCommit) bool {
	var items []*sendItem
	for _, e := range due {
		rec, err := s.b.store.CommitLog().ReadRecord(e.Offset, e.Size, false)
		if err != nil {
			s.b.log.Error("delayed message unreadable; skipped", "offset", e.Offset, "err", err)
			continue
		}
		ext := recordToExt(&rec)
		props := maps.Clone(ext.Properties)
		topic := props[protocol.PropertyRealTopic]
		qid, _ := strconv.Atoi(props[protocol.PropertyRealQueueID])
		for _, k := range []string{protocol.PropertyRealTopic, protocol.PropertyRealQueueID, protocol.PropertyDelay,
			protocol.PropertyTimerDeliverMs, storage.PropDeliverMs} {
			delete(props, k)
		}
		if topic == "" {
			s.b.log.Error("delayed message without REAL_TOPIC; skipped", "offset", e.Offset)
			continue
		}
		items = append(items, &sendItem{request: &request{oneway: true}, topic: topic, queueID: int32(qid),
			bornTs: rec.BornTimestamp, reconsume: rec.ReconsumeTimes,
			msgs: []protocol.Message{{Topic: topic, Flag: rec.Flag, Body: slices.Clone(rec.Body), Properties: props}}})
	}
	if len(items) == 0 {
		// Nothing readable: count the entries as done.
		s.commits = append(s.commits, c)
		return true
	}
	// Only the last item reports back: the batch is appended in order, so
	// its end covers all of them.
	items[len(items)-1].notify, items[len(items)-1].tag = ctx.Self(), c
	for _, it := range items[:len(items)-1] {
		it.request.oneway = true
	}
	s.inflight++
	ctx.Send(s.b.p.writer, &writeBatch{items: items})
	return true
}

// scan answers a scheduleScan for this DispatchActor's queue.
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
