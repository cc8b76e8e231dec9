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
	ForEachRecord(from, to int64, checkCRC bool, fn func(off int64, r *storage.Record) error) (next int64, err error)
	Deleted() storage.Deleted
}

// QueueBatch is one queue's share of a dispatch.
type QueueBatch struct {
	Key  storage.QueueKey
	Reqs []storage.DispatchRequest
}

// Batch is one dispatch: each queue's new entries, in (topic, queue) order,
// and every record for the index.
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
	lastBatch int   // records in the last dispatch, to size the next
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
}

// NewReput starts at dispatched (the store's checkpoint), with the log
// ending at logEnd and flushed to flushed.
func NewReput(syncFlush bool, dispatched, logEnd, flushed int64) *Reput {
	r := &Reput{syncFlush: syncFlush, pos: dispatched, visible: logEnd, confirmed: dispatched}
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
	perQueue := map[storage.QueueKey][]storage.DispatchRequest{}
	b.All = make([]storage.DispatchRequest, 0, r.lastBatch+r.lastBatch/4) // sized like the last batch: no regrowth
	topic := ""
	del := log.Deleted()
	next, err := log.ForEachRecord(r.pos, upTo, false, func(off int64, rec *storage.Record) error {
		if del.Covers(rec.Topic, off) {
			return nil // a deleted topic's record
		}
		d := storage.NewDispatchRequestTopic(off, rec, topic)
		topic = d.Key.Topic
		perQueue[d.Key] = append(perQueue[d.Key], d)
		b.All = append(b.All, d)
		r.lastTs = d.StoreTimestamp
		return nil
	})
	// In key order, not map order: the simulator needs the same sends in
	// the same order for the same seed.
	for _, k := range SortedKeys(perQueue) {
		b.Queues = append(b.Queues, QueueBatch{Key: k, Reqs: perQueue[k]})
	}
	r.lastBatch = len(b.All)
	// Queue owners and the checkpoint trust the position: moving it back
	// would dispatch records twice, past visible would show consumers
	// records the broker could still lose (SYNC_FLUSH, or an unconfirmed
	// record under controller mode).
	invariant.Check3(next >= r.pos && next <= upTo, "dispatch: reput position moved from %d to %d (visible %d)", r.pos, next, upTo)
	r.pos = next
	return b, err
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
	perQueue := map[storage.QueueKey][]storage.DispatchRequest{}
	del := log.Deleted()
	_, err := log.ForEachRecord(from, r.pos, false, func(off int64, rec *storage.Record) error {
		if string(rec.Topic) != topic || del.Covers(rec.Topic, off) {
			return nil
		}
		d := storage.NewDispatchRequestTopic(off, rec, topic)
		perQueue[d.Key] = append(perQueue[d.Key], d)
		return nil
	})
	var out []QueueBatch
	for _, k := range SortedKeys(perQueue) {
		out = append(out, QueueBatch{Key: k, Reqs: perQueue[k]})
	}
	return out, err
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
	slices.SortFunc(keys, func(a, b storage.QueueKey) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.QueueID) - int(b.QueueID)
	})
	return keys
}
