package storage

import (
	"errors"
	"fmt"
	"strings"

	"github.com/wharfmq/wharf/storage/cq"
	"github.com/wharfmq/wharf/storage/index"
)

// GetStatus is the outcome of GetMessages, as RocketMQ's GetMessageStatus.
type GetStatus int

const (
	GetFound               GetStatus = iota // messages returned
	GetNoMatchedMessage                     // entries read, none matched the filter
	GetNoMessageInQueue                     // the queue is empty
	GetOffsetTooSmall                       // below the queue's min offset (deleted by retention)
	GetOffsetOverflowOne                    // exactly at the max offset: wait for new messages
	GetOffsetOverflowBadly                  // beyond the max offset
	GetNoMatchedLogicQueue                  // no such queue
	// GetOffsetNotDispatched: beyond the max offset while the log holds
	// records not yet dispatched (DispatchConfirmedOnly): the offset may be
	// among them, so wait, as at the max offset. A consumer that read up to
	// an offset confirmed before a restart is there while the store keeps
	// back what it did not know confirmed.
	GetOffsetNotDispatched
)

var getStatusNames = [...]string{"FOUND", "NO_MATCHED_MESSAGE", "NO_MESSAGE_IN_QUEUE", "OFFSET_TOO_SMALL",
	"OFFSET_OVERFLOW_ONE", "OFFSET_OVERFLOW_BADLY", "NO_MATCHED_LOGIC_QUEUE", "OFFSET_NOT_DISPATCHED"}

func (s GetStatus) String() string {
	if int(s) < len(getStatusNames) {
		return getStatusNames[s]
	}
	return fmt.Sprintf("GetStatus(%d)", int(s))
}

// GetResult is what GetMessages read.
type GetResult struct {
	Status          GetStatus
	Records         [][]byte // whole encoded records, aliasing the log's mapping
	QueueOffsets    []int64  // queue offset of each record
	NextBeginOffset int64    // where the next pull should start
	MinOffset       int64
	MaxOffset       int64
	// MaxPhyOffset and LastPhyOffset let the broker suggest reading from a
	// slave when the consumer is far behind the log's head.
	MaxPhyOffset  int64
	LastPhyOffset int64
}

// GetLimits bound one GetMessages read. The first message found is
// returned whatever its size, so that a consumer always progresses; every
// later one only if it keeps the read within all three limits.
type GetLimits struct {
	Msgs int // messages; <= 0: 32
	// BodyBytes caps the payload bytes (the bodies alone), what a
	// consumer's maxMsgBytes asks for; <= 0: no cap.
	BodyBytes int
	// RecordBytes caps the whole stored records, which is about what the
	// answer's frame carries (the broker's own limit); <= 0: 16 MiB.
	RecordBytes int
}

// GetMessages reads messages of queue k from queue offset from, within lim,
// keeping those whose tags code passes filter (nil keeps all). It is called
// by the owner of the queue's dispatch; records are not copied.
func (s *Store) GetMessages(k QueueKey, from int64, lim GetLimits, filter func(tagsCode int64) bool) (GetResult, error) {
	res := GetResult{MaxPhyOffset: s.cl.MaxOffset(), NextBeginOffset: from}
	q, err := s.ConsumeQueue(k, false)
	if err != nil {
		return res, err
	}
	if q == nil {
		res.Status, res.NextBeginOffset = GetNoMatchedLogicQueue, 0
		return res, nil
	}
	res.MinOffset, res.MaxOffset = q.MinOffset(), q.MaxOffset()
	switch {
	case res.MaxOffset == 0:
		res.Status, res.NextBeginOffset = GetNoMessageInQueue, 0
		return res, nil
	case from < res.MinOffset:
		res.Status, res.NextBeginOffset = GetOffsetTooSmall, res.MinOffset
		return res, nil
	case from == res.MaxOffset:
		res.Status = GetOffsetOverflowOne
		return res, nil
	case from > res.MaxOffset && s.cfg.DispatchConfirmedOnly && s.dispatched.Load() < s.cl.MaxOffset():
		res.Status = GetOffsetNotDispatched
		return res, nil
	case from > res.MaxOffset:
		res.Status, res.NextBeginOffset = GetOffsetOverflowBadly, res.MaxOffset
		return res, nil
	}
	if lim.Msgs <= 0 {
		lim.Msgs = 32
	}
	if lim.RecordBytes <= 0 {
		lim.RecordBytes = 16 << 20
	}
	next, err := s.readEntries(q, k, from, lim, filter, &res)
	if err != nil || res.Status == GetOffsetTooSmall {
		return res, err
	}
	res.NextBeginOffset = next
	if len(res.Records) > 0 {
		res.Status = GetFound
	} else {
		res.Status = GetNoMatchedMessage
	}
	return res, nil
}

// readEntries appends to res the records of q's entries from queue offset
// from on, within lim, and returns the queue offset after the last entry
// scanned. An entry whose record would break a limit is not scanned: the
// next read starts with it.
func (s *Store) readEntries(q *cq.Queue, k QueueKey, from int64, lim GetLimits, filter func(int64) bool, res *GetResult) (int64, error) {
	var entries [64]cq.Entry
	next, bytes, body := from, 0, 0
	minPhy := s.cl.MinOffset()
	for len(res.Records) < lim.Msgs && next < res.MaxOffset {
		batch, err := q.Read(next, min(len(entries), lim.Msgs-len(res.Records)+16), entries[:0])
		if err != nil {
			if errors.Is(err, cq.ErrOffsetTooSmall) {
				res.Status, res.NextBeginOffset = GetOffsetTooSmall, q.MinOffset()
				return next, nil
			}
			return next, fmt.Errorf("storage: read consume queue %s at %d: %w", k, next, err)
		}
		if len(batch) == 0 {
			break
		}
		for _, e := range batch {
			if len(res.Records) >= lim.Msgs {
				break
			}
			qo := next
			if !e.Valid() || e.Offset < minPhy { // a gap filler, or deleted from the log
				next++
				continue
			}
			if filter != nil && !filter(e.TagsCode) {
				res.LastPhyOffset = e.Offset
				next++
				continue
			}
			b, err := s.cl.Read(e.Offset, int(e.Size))
			if err != nil {
				return next, fmt.Errorf("storage: queue %s offset %d: %w", k, qo, err)
			}
			n := 0
			if lim.BodyBytes > 0 {
				if n, err = bodyLen(b); err != nil {
					return next, fmt.Errorf("storage: queue %s offset %d: %w", k, qo, err)
				}
			}
			if len(res.Records) > 0 && (bytes+len(b) > lim.RecordBytes || (lim.BodyBytes > 0 && body+n > lim.BodyBytes)) {
				return next, nil // full: this one starts the next read
			}
			next++
			res.LastPhyOffset = e.Offset
			res.Records = append(res.Records, b)
			res.QueueOffsets = append(res.QueueOffsets, qo)
			bytes += len(b)
			body += n
		}
	}
	return next, nil
}

// bodyLen is the length of the body of the record at the start of b.
func bodyLen(b []byte) (int, error) {
	r, err := DecodeRecord(b, false)
	if err != nil {
		return 0, err
	}
	return len(r.Body), nil
}

// QueryByKey returns the records of topic whose KEYS or UNIQ_KEY contain key,
// stored in [beginMs, endMs], newest first, at most max. Index hits are
// re-checked against the records (hashes collide); records of a deleted
// topic are not found (the index keeps their keys until its files expire).
func (s *Store) QueryByKey(topic, key string, beginMs, endMs int64, max int) ([]Record, error) {
	if s.idx == nil {
		return nil, errors.New("storage: query by key: messageIndexEnable is false")
	}
	offs, err := s.idx.Query(index.KeyOf(topic, key), beginMs, endMs, max*2+8)
	if err != nil {
		return nil, fmt.Errorf("storage: query by key: %w", err)
	}
	var out []Record
	del := s.cl.Deleted()
	for _, off := range offs {
		if len(out) >= max {
			break
		}
		r, err := s.cl.ReadRecord(off, 0, false)
		if err != nil {
			continue // deleted by retention, or a stale index entry
		}
		if string(r.Topic) != topic || del.Covers(r.Topic, off) || !recordHasKey(&r, key) {
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

func recordHasKey(r *Record, key string) bool {
	found := false
	EachProperty(r.Properties, func(k, v []byte) {
		switch string(k) {
		case PropUniqKey:
			if string(v) == key {
				found = true
			}
		case PropKeys:
			for f := range strings.FieldsSeq(string(v)) {
				if f == key {
					found = true
				}
			}
		}
	})
	return found
}
