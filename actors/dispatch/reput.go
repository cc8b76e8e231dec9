package dispatch

import (
	"slices"
	"strings"

	"github.com/wharfmq/wharf/internal/invariant"
	"github.com/wharfmq/wharf/storage"
)

// Log is what the Reput core reads: the log's records in [from, to), and
// the watermarks of deleted topics (their records below it are skipped).
type Log interface {
	ForEachDispatch(from, to int64, fn func(off int64, r *storage.DispatchRecord) error) (next int64, err error)
	Deleted() storage.Deleted
}

// QueueBatch is one queue's share of a dispatch: its requests in log
// order, pointing into the batch's All.
type QueueBatch struct {
	Key  storage.QueueKey
	Reqs []*storage.DispatchRequest
}

// Batch is one dispatch: each queue's new entries, in (topic, queue) order,
// and every record for the index, in log order. Everything a Batch holds
// (All, the queues' pointers into it, the key hashes of its requests) is
// made for it alone: the queue owners and the index actor read it after
// Dispatch returned, and nothing writes it after.
type Batch struct {
	Queues []QueueBatch
	All    []storage.DispatchRequest
}

// Ack is a queue owner's or the index's answer to a checkpoint barrier.
type Ack struct {
	ID      int64
	Mark    storage.QueueMark // a queue's flushed extent (Key.Topic "" for none)
	Indexed int64             // the index's flushed extent
	IsIndex bool
	Err     error
}

// Checkpoint is what a completed barrier lets the Reput actor write.
type Checkpoint struct {
	Pos, Indexed, Ts int64
	Marks            []storage.QueueMark
}

// Reput owns the reput position: how far the log has been handed to the
// queues and the index, and how far it may be (visible). Under SYNC_FLUSH
// only flushed records are visible, so no consumer ever sees a message the
// broker could lose; under controller mode, on a master, only what is
// below the confirm offset (Limit). It also runs the checkpoint barrier: a checkpoint
// covers a position once every queue owner and the index flushed what they
// were sent before the barrier (their mailboxes are FIFO).
type Reput struct {
	syncFlush bool
	pos       int64
	visible   int64
	lastTs    int64 // store time of the last record dispatched
	// The last dispatch's records, the bytes of log they were read from
	// and their key hashes: the next batch is sized from them.
	lastBatch, lastHashes int
	lastBytes             int64
	// limited: controller mode, where nothing at or past limit (the
	// confirm offset, or what the broker holds as a slave) is dispatched.
	limited bool
	limit   int64

	barrier  int64 // id of the checkpoint in progress, 0 if none
	seq      int64
	waiting  int
	marks    []storage.QueueMark
	indexed  int64
	cp       Checkpoint
	cpFailed bool
	// confirmed is the position below which every record is in its
	// ConsumeQueue, not merely handed to the queue's owner: the start, or
	// the last checkpoint whose barrier every owner answered.
	confirmed, confirmedTs int64

	// The grouping's scratch, reused by every dispatch: none of it is in
	// a Batch, so no other actor ever holds it.
	groups map[storage.QueueKey]int32 // a queue's index in spans
	spans  []span
	of     []int32           // the span of each request of the batch
	sorted []int32           // spans' indices in (topic, queue) order
	topics map[string]string // one string per topic dispatched, for the requests' keys
}

// span is one queue's part of a batch being grouped.
type span struct {
	key            storage.QueueKey
	start, n, fill int32
}

// maxTopics bounds the topic strings the core keeps; past it they are
// forgotten and made again.
const maxTopics = 4096

// NewReput starts at dispatched (the store's checkpoint), with the log
// ending at logEnd and flushed to flushed.
func NewReput(syncFlush bool, dispatched, logEnd, flushed int64) *Reput {
	r := &Reput{syncFlush: syncFlush, pos: dispatched, visible: logEnd, confirmed: dispatched,
		groups: map[storage.QueueKey]int32{}, topics: map[string]string{}}
	if syncFlush {
		r.visible = flushed
	}
	return r
}

// Position is how far the log was dispatched, and the store time of the
// last record dispatched.
func (r *Reput) Position() (pos, lastTs int64) { return r.pos, r.lastTs }

// LogStart: the log begins at off. Nothing below it can be dispatched, so
// the position moves up to it: a new slave's empty log starts at its
// master's earliest offset (storage.Store.StartAt) after the reput began.
func (r *Reput) LogStart(off int64) {
	if off > r.pos {
		r.pos = off
	}
	if off > r.confirmed {
		r.confirmed = off // nothing below the log's start exists to dispatch
	}
}

// Confirmed is the position below which every record is known to be in its
// ConsumeQueue (and the store time there). Entries handed to a queue's
// owner after it may still wait in the owner's mailbox: at a stop the store
// dispatches again from here, or a clean checkpoint would claim entries
// that a stopped owner never wrote.
func (r *Reput) Confirmed() (pos, lastTs int64) { return r.confirmed, r.confirmedTs }

// Limit (controller mode): nothing at or past off is dispatched until a
// later Limit lifts it. The limit never moves back (what consumers saw
// stays seen): the broker moves it to the confirm offset as a master, to
// its log's end as a slave.
func (r *Reput) Limit(off int64) {
	if !r.limited || off > r.limit {
		r.limit = off
	}
	r.limited = true
}

// upTo is how far records may be dispatched: the visible ones, below the
// limit if there is one.
func (r *Reput) upTo() int64 {
	if r.limited {
		return min(r.visible, r.limit)
	}
	return r.visible
}

// Pending reports whether visible records wait to be dispatched.
func (r *Reput) Pending() bool { return r.upTo() > r.pos }

// Appended: the log now ends at logEnd (ignored under SYNC_FLUSH, where
// only Flushed makes records visible).
func (r *Reput) Appended(logEnd int64) {
	if !r.syncFlush && logEnd > r.visible {
		r.visible = logEnd
	}
}

// Flushed: the log is durable up to off.
func (r *Reput) Flushed(off int64) {
	if off > r.visible {
		r.visible = off
	}
}

// Dispatch reads the visible records not yet dispatched and groups them.
// The position moves past what was read, even when err says the log could
// not be decoded further (the shell then stops and reports it).
func (r *Reput) Dispatch(log Log) (Batch, error) {
	var b Batch
	upTo := r.upTo()
	if upTo <= r.pos {
		return b, nil
	}
	// Made afresh (the last batch may still be read by the queue owners
	// and the index actor), and sized for what is visible: no regrowth.
	n, nh := r.expect(upTo - r.pos)
	b.All = make([]storage.DispatchRequest, 0, n)
	hashes := make([]int32, 0, nh)
	del := log.Deleted()
	next, err := log.ForEachDispatch(r.pos, upTo, func(off int64, rec *storage.DispatchRecord) error {
		if del.Covers(rec.Topic, off) {
			return nil // a deleted topic's record
		}
		b.All = append(b.All, storage.NewDispatchRequest(off, rec, r.topic(rec.Topic), &hashes))
		return nil
	})
	if n := len(b.All); n > 0 {
		r.lastTs = b.All[n-1].StoreTimestamp
	}
	b.Queues = r.group(b.All)
	r.lastBatch, r.lastHashes, r.lastBytes = len(b.All), len(hashes), next-r.pos
	// Queue owners and the checkpoint trust the position: moving it back
	// would dispatch records twice, past visible would show consumers
	// records the broker could still lose (SYNC_FLUSH, or an unconfirmed
	// record under controller mode).
	invariant.Check3(next >= r.pos && next <= upTo, "dispatch: reput position moved from %d to %d (visible %d)", r.pos, next, upTo)
	r.pos = next
	return b, err
}

// maxExpect caps what a batch is sized for: past it (a backlog, or a
// deleted topic's records, which take no room) the slices grow as needed.
const maxExpect = 1 << 14

// expect is how many requests and key hashes bytes of log will make, at
// the last dispatch's rates, with an eighth to spare.
func (r *Reput) expect(bytes int64) (reqs, hashes int) {
	if r.lastBatch == 0 || r.lastBytes < int64(r.lastBatch) {
		return 0, 0 // nothing to go by
	}
	per := r.lastBytes / int64(r.lastBatch) // bytes per record
	reqs = int(min(bytes/per, maxExpect))
	reqs += reqs/8 + 1
	return reqs, int(int64(reqs) * int64(r.lastHashes) / int64(r.lastBatch))
}

// topic is the string of a topic's name: the same one for every request
// of the topic, made once.
func (r *Reput) topic(name []byte) string {
	if t, ok := r.topics[string(name)]; ok { // no allocation: looked up in place
		return t
	}
	if len(r.topics) >= maxTopics {
		clear(r.topics)
	}
	t := string(name)
	r.topics[t] = t
	return t
}

// group splits all into one QueueBatch per queue, in (topic, queue) order
// (not map order: the simulator needs the same sends in the same order for
// the same seed), each queue's requests in log order. The batches point
// into all, through one slice of pointers made for them.
func (r *Reput) group(all []storage.DispatchRequest) []QueueBatch {
	if len(all) == 0 {
		return nil
	}
	clear(r.groups)
	r.spans, r.of, r.sorted = r.spans[:0], r.of[:0], r.sorted[:0]
	g := int32(-1)
	for i := range all {
		if k := all[i].Key; g < 0 || r.spans[g].key != k { // runs of one queue look it up once
			var ok bool
			if g, ok = r.groups[k]; !ok {
				g = int32(len(r.spans))
				r.groups[k] = g
				r.spans = append(r.spans, span{key: k})
				r.sorted = append(r.sorted, g)
			}
		}
		r.spans[g].n++
		r.of = append(r.of, g)
	}
	slices.SortFunc(r.sorted, func(a, b int32) int { return compareKeys(r.spans[a].key, r.spans[b].key) })
	start := int32(0)
	for _, g := range r.sorted {
		r.spans[g].start = start
		start += r.spans[g].n
	}
	ptrs := make([]*storage.DispatchRequest, len(all))
	for i, g := range r.of {
		sp := &r.spans[g]
		ptrs[sp.start+sp.fill] = &all[i]
		sp.fill++
	}
	out := make([]QueueBatch, len(r.sorted))
	for j, g := range r.sorted {
		sp := r.spans[g]
		out[j] = QueueBatch{Key: sp.key, Reqs: ptrs[sp.start : sp.start+sp.n : sp.start+sp.n]}
	}
	return out
}

// Replay reads again the records of topic in [from, Position) that are
// not a deleted topic's, grouped per queue in queue order: when a topic is
// deleted at from, what its re-created queues got before the Reput actor
// learnt of the deletion went to the owners that are now dropping their
// queues, and must go to their fresh owners. The index already has them.
func (r *Reput) Replay(log Log, topic string, from int64) ([]QueueBatch, error) {
	if from >= r.pos {
		return nil, nil
	}
	var all []storage.DispatchRequest
	var hashes []int32 // the replay's own: its batches leave the core
	del := log.Deleted()
	_, err := log.ForEachDispatch(from, r.pos, func(off int64, rec *storage.DispatchRecord) error {
		if string(rec.Topic) != topic || del.Covers(rec.Topic, off) {
			return nil
		}
		all = append(all, storage.NewDispatchRequest(off, rec, topic, &hashes))
		return nil
	})
	return r.group(all), err
}

// StartCheckpoint opens a barrier over owners queue owners and the index
// and returns its id; false if the previous checkpoint is still under way.
func (r *Reput) StartCheckpoint(owners int) (int64, bool) {
	if r.barrier != 0 {
		return 0, false
	}
	r.seq++
	r.barrier = r.seq
	r.cp = Checkpoint{Pos: r.pos, Ts: r.lastTs}
	r.marks = r.marks[:0]
	r.cpFailed = false
	r.waiting = owners + 1
	return r.barrier, true
}

// Ack counts one answer to the barrier. When the last one arrives and none
// failed it returns the checkpoint to write (write true); the next barrier
// waits for Written. A failed barrier ends without a checkpoint.
func (r *Reput) Ack(a Ack) (Checkpoint, bool) {
	if a.ID != r.barrier || r.barrier == 0 {
		return Checkpoint{}, false
	}
	if a.Err != nil {
		r.cpFailed = true
	}
	if a.IsIndex {
		r.indexed = a.Indexed
	} else if a.Mark.Key.Topic != "" {
		r.marks = append(r.marks, a.Mark)
	}
	// Each owner answers a barrier once; one answer too many would have
	// let the checkpoint cover an owner that had not flushed.
	invariant.Check1(r.waiting > 0, "dispatch: checkpoint barrier %d answered more times than it has owners", a.ID)
	if r.waiting--; r.waiting > 0 {
		return Checkpoint{}, false
	}
	if r.cpFailed {
		r.barrier = 0
		return Checkpoint{}, false
	}
	cp := r.cp
	cp.Indexed, cp.Marks = r.indexed, slices.Clone(r.marks)
	if cp.Pos > r.confirmed {
		r.confirmed, r.confirmedTs = cp.Pos, cp.Ts
	}
	return cp, true
}

// Written: the checkpoint returned by Ack is written (or failed to be).
func (r *Reput) Written() { r.barrier = 0 }

// SortedKeys returns the keys of m in (topic, queue) order.
func SortedKeys[V any](m map[storage.QueueKey]V) []storage.QueueKey {
	keys := make([]storage.QueueKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareKeys)
	return keys
}

// compareKeys orders queues by topic, then queue id.
func compareKeys(a, b storage.QueueKey) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return int(a.QueueID) - int(b.QueueID)
}
