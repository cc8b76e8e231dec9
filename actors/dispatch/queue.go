package dispatch

import (
	"fmt"
	"time"

	"github.com/wharfmq/wharf/internal/invariant"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

// Source is what a Queue reads: the store, whose ConsumeQueues and log are
// plain data structures read in place.
type Source interface {
	GetMessages(k storage.QueueKey, from int64, lim storage.GetLimits, filter func(tagsCode int64) bool) (storage.GetResult, error)
	ConsumeQueueBounds(k storage.QueueKey) (min, max int64)
}

// QueueConfig are the broker's pull settings.
type QueueConfig struct {
	MaxMsgs  int // messages per pull: maxMsgNums <= 0 or above it gets this
	MaxBytes int // record bytes per pull (the answer frame's budget)
	// LongPolling false holds a pull at most ShortPolling.
	LongPolling  bool
	ShortPolling time.Duration
	MaxSuspend   time.Duration // cap on any hold
	// SuggestSlaveBeyond: a pull reading more than this many log bytes
	// behind the log's end is told to read from a slave; 0 never.
	SuggestSlaveBeyond int64
}

// Waiter is who waits for a pull's answer, as the shell knows it.
type Waiter interface {
	// Gone reports that nobody would read the answer (its connection
	// closed): the pull is dropped unanswered.
	Gone() bool
}

// Answer is the reply to one pull.
type Answer struct {
	To Waiter
	// Unpark: the pull was held; count it out of its connection's parked
	// requests before the answer is written.
	Unpark  bool
	Status  protocol.Status
	Remark  string
	Pull    *protocol.PullResponse // nil: no fields
	Records [][]byte               // SUCCESS: the records, as read
}

// Ready is what the shell does after a Queue step, in this order: count
// out Dropped, write Answers (counting out those with Unpark), count in
// Parked, and arm a tick for Arm unless it is zero.
type Ready struct {
	Dropped []Waiter // held pulls nobody waits for any more
	Answers []Answer
	Parked  []Waiter // pulls held from now on
	Arm     time.Time
}

type held struct {
	to       Waiter
	req      *protocol.PullRequest
	expr     protocol.TagExpr
	deadline time.Time
}

// Queue is one ConsumeQueue's pulls and long polls. Its owner calls Pull
// for each pull, Entries after applying new entries, Tick when an armed
// tick fires and Stop when it stops.
type Queue struct {
	key   storage.QueueKey
	cfg   QueueConfig
	src   Source
	held  []*held
	armed time.Time // the earliest tick armed and not yet fired
}

// NewQueue returns the pull state of queue k.
func NewQueue(k storage.QueueKey, cfg QueueConfig, src Source) *Queue {
	return &Queue{key: k, cfg: cfg, src: src}
}

// Held is how many pulls are held.
func (q *Queue) Held() int { return len(q.held) }

// Pull answers a pull at once, or holds it until a message arrives or its
// suspend time passes.
func (q *Queue) Pull(now time.Time, to Waiter, req *protocol.PullRequest) Ready {
	var rd Ready
	expr, err := protocol.ParseTagExpr(req.Subscription)
	if err != nil {
		rd.Answers = append(rd.Answers, Answer{To: to, Status: protocol.StatusSubscriptionParseFailed, Remark: err.Error()})
		return rd
	}
	h := &held{to: to, req: req, expr: expr}
	if a, ok := q.try(h); ok {
		rd.Answers = append(rd.Answers, a)
		return rd
	}
	suspend := time.Duration(req.SuspendTimeoutMillis) * time.Millisecond
	if !q.cfg.LongPolling && suspend > 0 {
		suspend = min(suspend, q.cfg.ShortPolling)
	}
	suspend = min(suspend, q.cfg.MaxSuspend)
	if suspend <= 0 {
		rd.Answers = append(rd.Answers, q.notFound(h, false))
		return rd
	}
	h.deadline = now.Add(suspend)
	q.held = append(q.held, h)
	rd.Parked = append(rd.Parked, to)
	rd.Arm = q.arm(h.deadline)
	return rd
}

// Entries serves the held pulls after new entries were applied.
func (q *Queue) Entries(now time.Time) Ready { return q.serve(now) }

// Tick serves the held pulls when a tick armed by a Ready fires.
func (q *Queue) Tick(now time.Time) Ready {
	q.armed = time.Time{}
	return q.serve(now)
}

// Stop answers every held pull PULL_NOT_FOUND.
func (q *Queue) Stop() Ready {
	var rd Ready
	for _, h := range q.held {
		rd.Answers = append(rd.Answers, q.notFound(h, true))
	}
	q.held = nil
	return rd
}

// Drop answers every held pull TOPIC_NOT_EXIST: the queue's topic was
// deleted and its owner is dropping the queue.
func (q *Queue) Drop() Ready {
	var rd Ready
	for _, h := range q.held {
		rd.Answers = append(rd.Answers, Answer{To: h.to, Unpark: true, Status: protocol.StatusTopicNotExist,
			Remark: fmt.Sprintf("topic %q was deleted", q.key.Topic)})
	}
	q.held = nil
	return rd
}

// serve answers held pulls that have a message or have timed out, in the
// order they were held.
func (q *Queue) serve(now time.Time) Ready {
	var rd Ready
	if len(q.held) == 0 {
		return rd
	}
	n := len(q.held)
	keep := q.held[:0]
	var earliest time.Time
	for _, h := range q.held {
		if h.to.Gone() {
			rd.Dropped = append(rd.Dropped, h.to)
			continue
		}
		if a, ok := q.try(h); ok {
			a.Unpark = true
			rd.Answers = append(rd.Answers, a)
			continue
		}
		if !now.Before(h.deadline) {
			rd.Answers = append(rd.Answers, q.notFound(h, true))
			continue
		}
		if earliest.IsZero() || h.deadline.Before(earliest) {
			earliest = h.deadline
		}
		keep = append(keep, h)
	}
	// Every held pull leaves once (dropped or answered) or stays: none is
	// answered twice, none is lost unanswered.
	invariant.Check(len(rd.Dropped)+len(rd.Answers)+len(keep) == n, "dispatch: a held pull was answered twice or lost")
	clear(q.held[len(keep):])
	q.held = keep
	if !earliest.IsZero() {
		rd.Arm = q.arm(earliest)
	}
	// A held pull must have a tick armed by its deadline, or it would wait
	// unanswered past it (until the next append, maybe forever).
	invariant.Check(len(keep) == 0 || !q.armed.IsZero() && !q.armed.After(earliest), "dispatch: a held pull has no tick armed by its deadline")
	return rd
}

// arm returns deadline if a tick must be armed for it (none armed fires by
// then), else zero.
func (q *Queue) arm(deadline time.Time) time.Time {
	if !q.armed.IsZero() && !q.armed.After(deadline) {
		return time.Time{}
	}
	q.armed = deadline
	return deadline
}

func (q *Queue) notFound(h *held, unpark bool) Answer {
	min, max := q.src.ConsumeQueueBounds(q.key)
	return Answer{To: h.to, Unpark: unpark, Status: protocol.StatusPullNotFound, Remark: "no new message",
		Pull: &protocol.PullResponse{NextBeginOffset: h.req.QueueOffset, MinOffset: min, MaxOffset: max}}
}

// try answers h if there is something to answer; false means hold it.
func (q *Queue) try(h *held) (Answer, bool) {
	req := h.req
	lim := storage.GetLimits{Msgs: int(req.MaxMsgNums), BodyBytes: int(req.MaxMsgBytes), RecordBytes: q.cfg.MaxBytes}
	if lim.Msgs <= 0 || lim.Msgs > q.cfg.MaxMsgs {
		lim.Msgs = q.cfg.MaxMsgs
	}
	var filter func(int64) bool
	if !h.expr.All {
		filter = h.expr.MatchesCode
	}
	res, err := q.src.GetMessages(q.key, req.QueueOffset, lim, filter)
	if err != nil {
		return Answer{To: h.to, Status: protocol.StatusSystemError, Remark: err.Error()}, true
	}
	resp := &protocol.PullResponse{NextBeginOffset: res.NextBeginOffset, MinOffset: res.MinOffset, MaxOffset: res.MaxOffset}
	// A consumer reading far behind the head would make the master read
	// from disk: suggest it reads from a slave instead.
	if q.cfg.SuggestSlaveBeyond > 0 && res.LastPhyOffset > 0 && res.MaxPhyOffset-res.LastPhyOffset > q.cfg.SuggestSlaveBeyond {
		resp.SuggestWhichBrokerID = 1
	}
	a := Answer{To: h.to, Pull: resp}
	switch res.Status {
	case storage.GetFound:
		recs, err := matching(res.Records, h.expr)
		if err != nil {
			return Answer{To: h.to, Status: protocol.StatusSystemError, Remark: err.Error()}, true
		}
		if len(recs) == 0 {
			a.Status, a.Remark = protocol.StatusPullRetryImmediately, "no message matched the subscription"
			return a, true
		}
		a.Status, a.Records = protocol.StatusOK, recs
		return a, true
	case storage.GetNoMatchedMessage:
		a.Status, a.Remark = protocol.StatusPullRetryImmediately, "no message matched the subscription"
		return a, true
	case storage.GetOffsetTooSmall, storage.GetOffsetOverflowBadly:
		a.Status = protocol.StatusPullOffsetMoved
		a.Remark = fmt.Sprintf("offset %d outside [%d, %d]", req.QueueOffset, res.MinOffset, res.MaxOffset)
		return a, true
	}
	return Answer{}, false // no message yet: NO_MESSAGE_IN_QUEUE, OVERFLOW_ONE, NO_MATCHED_LOGIC_QUEUE, NOT_DISPATCHED
}

// matching keeps the records whose tags match expr: the queue matched
// their tags hash, and a hash collision must not reach the consumer.
func matching(raws [][]byte, expr protocol.TagExpr) ([][]byte, error) {
	if expr.All {
		return raws, nil
	}
	out := make([][]byte, 0, len(raws))
	for _, raw := range raws {
		rec, err := storage.DecodeRecord(raw, false)
		if err != nil {
			return nil, fmt.Errorf("decode record: %w", err)
		}
		if expr.Matches(recordProperty(&rec, protocol.PropertyTags)) {
			out = append(out, raw)
		}
	}
	return out, nil
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
