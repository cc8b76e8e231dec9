package meta

import (
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

// GroupCommitDelay is how long an acknowledged commit waits for others to
// share its write.
const GroupCommitDelay = time.Millisecond

// OffsetsConfig is what the offset table needs from outside.
type OffsetsConfig struct {
	// AckBeforePersist answers an acknowledged commit before it is on disk
	// (the planted bug CommitOffsetBeforePersist).
	AckBeforePersist bool
	// Bounds reports a queue's min and max offsets, for
	// GET_CONSUMER_OFFSETS; nil reports 0, 0.
	Bounds func(storage.QueueKey) (min, max int64)
}

// Offsets owns the consumer offset table.
//
// An acknowledged commit (UPDATE_CONSUMER_OFFSET that is not oneway) is
// answered only after a write holding it succeeded, so a committed offset
// never moves backwards across a crash; commits arriving together share one
// write (group commit, GroupCommitDelay). Oneway commits, commits
// piggybacked on pulls and imports are written on the interval (Tick) and
// at Stop.
type Offsets struct {
	cfg   OffsetsConfig
	table storage.ConsumerOffsetTable

	dirty   bool  // changed since the last write handed out
	pending []any // acknowledged commits not yet in a write
	writing []any // acknowledged commits in the write handed out
	inWrite bool  // a write is handed out and its outcome not reported
	armed   bool  // the group-commit timer is armed
	rd      OffsetsReady

	// dropped are topics deleted since the start whose offsets no import
	// may bring back (the peer broker may not have dropped them yet); a
	// commit made here for the topic (its re-created queues) ends that.
	dropped map[string]bool
}

// OffsetsReady is what the caller must do after an input.
type OffsetsReady struct {
	// Save, if not nil, is the table to write to consumerOffset.json;
	// report the outcome with Persisted before the next input.
	Save *storage.ConsumerOffsetTable
	// ArmSoon, if not zero, asks for SoonFired after that long.
	ArmSoon time.Duration
	Replies []Reply
}

// NewOffsets returns an empty table.
func NewOffsets(cfg OffsetsConfig) *Offsets {
	return &Offsets{cfg: cfg, table: storage.ConsumerOffsetTable{Offsets: map[string]map[int32]int64{}}}
}

// Load starts from the table read from consumerOffset.json (empty if there
// was none or it was unreadable).
func (o *Offsets) Load(t storage.ConsumerOffsetTable) {
	o.table = t
	if o.table.Offsets == nil {
		o.table.Offsets = map[string]map[int32]int64{}
	}
}

// offsetKey is the table's key of a group's offsets in a topic.
func offsetKey(topic, group string) string { return topic + "@" + group }

// Committed is group's committed offset of a queue, if any.
func (o *Offsets) Committed(topic, group string, queueID int32) (int64, bool) {
	off, ok := o.table.Offsets[offsetKey(topic, group)][queueID]
	return off, ok
}

// Handle takes UPDATE_CONSUMER_OFFSET, QUERY_CONSUMER_OFFSET or
// GET_CONSUMER_OFFSETS. oneway is whether the client waits for no answer.
func (o *Offsets) Handle(tok any, req protocol.Request, oneway bool) {
	switch req := req.(type) {
	case *protocol.UpdateConsumerOffsetRequest:
		o.commit(tok, req, oneway)
	case *protocol.QueryConsumerOffsetRequest:
		off, ok := o.Committed(req.Topic, req.ConsumerGroup, req.QueueID)
		if !ok {
			o.reply(tok, protocol.StatusQueryNotFound, "no committed offset", nil)
			return
		}
		o.reply(tok, protocol.StatusOK, "", &protocol.OffsetResponse{Offset: off})
	case *protocol.GetConsumerOffsetsRequest:
		o.reply(tok, protocol.StatusOK, "", o.groupOffsets(req))
	default:
		o.reply(tok, protocol.StatusRequestCodeNotSupported, fmt.Sprintf("%T is not an offset request", req), nil)
	}
}

func (o *Offsets) commit(tok any, req *protocol.UpdateConsumerOffsetRequest, oneway bool) {
	if req.ConsumerGroup == "" || req.CommitOffset < 0 {
		o.reply(tok, protocol.StatusInvalidParameter, "consumer group must be set and the offset non-negative", nil)
		return
	}
	delete(o.dropped, req.Topic)
	k := offsetKey(req.Topic, req.ConsumerGroup)
	q := o.table.Offsets[k]
	if q == nil {
		q = map[int32]int64{}
		o.table.Offsets[k] = q
	}
	q[req.QueueID] = req.CommitOffset
	o.dirty = true
	if oneway || o.cfg.AckBeforePersist {
		o.reply(tok, protocol.StatusOK, "", nil)
		return
	}
	o.pending = append(o.pending, tok)
}

func (o *Offsets) groupOffsets(req *protocol.GetConsumerOffsetsRequest) *protocol.ConsumerOffsetsResponse {
	resp := &protocol.ConsumerOffsetsResponse{}
	for k, queues := range o.table.Offsets {
		topic, group, _ := strings.Cut(k, "@")
		if group != req.ConsumerGroup || (req.Topic != "" && topic != req.Topic) {
			continue
		}
		for qid, off := range queues {
			var min, max int64
			if o.cfg.Bounds != nil {
				min, max = o.cfg.Bounds(storage.QueueKey{Topic: topic, QueueID: qid})
			}
			resp.Offsets = append(resp.Offsets, protocol.ConsumerQueueOffset{Topic: topic, QueueID: qid, ConsumerOffset: off, MinOffset: min, MaxOffset: max})
		}
	}
	sort.Slice(resp.Offsets, func(i, j int) bool {
		a, c := resp.Offsets[i], resp.Offsets[j]
		if a.Topic != c.Topic {
			return a.Topic < c.Topic
		}
		return a.QueueID < c.QueueID
	})
	return resp
}

// Import merges offsets from the other side of a master/slave pair (JSON of
// the offset map) by maximum, so offsets committed on a slave while the
// master was away are not lost when it returns, and none moves backwards.
// The merge is written on the interval.
func (o *Offsets) Import(data []byte) error {
	var in map[string]map[int32]int64
	if err := json.Unmarshal(data, &in); err != nil {
		return fmt.Errorf("consumer offsets from the peer broker: %w", err)
	}
	for k, queues := range in {
		if topic, _, _ := strings.Cut(k, "@"); o.dropped[topic] {
			continue
		}
		q := o.table.Offsets[k]
		if q == nil {
			q = map[int32]int64{}
			o.table.Offsets[k] = q
		}
		for qid, off := range queues {
			if off > q[qid] {
				q[qid] = off
				o.dirty = true
			}
		}
	}
	return nil
}

// DropTopic forgets every group's offsets of a deleted topic and writes
// the table at once (if a write is out, at the next interval), so a
// re-created topic is consumed from its start.
func (o *Offsets) DropTopic(topic string) {
	if o.dropped == nil {
		o.dropped = map[string]bool{}
	}
	o.dropped[topic] = true
	for k := range o.table.Offsets {
		if t, _, _ := strings.Cut(k, "@"); t == topic {
			delete(o.table.Offsets, k)
			o.dirty = true
		}
	}
	if o.dirty {
		o.persist()
	}
}

// Export is the offset map as JSON, for the peer broker's Import.
func (o *Offsets) Export() ([]byte, error) {
	data, err := json.Marshal(o.table.Offsets)
	if err != nil {
		return nil, fmt.Errorf("consumer offsets: %w", err)
	}
	return data, nil
}

// Tick is the interval write (flushConsumerOffsetInterval).
func (o *Offsets) Tick() { o.persist() }

// SoonFired is the group-commit timer ArmSoon asked for.
func (o *Offsets) SoonFired() {
	o.armed = false
	o.persist()
}

// Stop writes what changed before the broker stops.
func (o *Offsets) Stop() { o.persist() }

// persist hands out a write if the table changed; with nothing to write,
// the waiting commits are already on disk and are answered at once.
func (o *Offsets) persist() {
	if o.inWrite {
		return // the waiting commits are answered after the write handed out
	}
	if !o.dirty {
		o.answer(o.pending, nil)
		o.pending = o.pending[:0]
		return
	}
	o.dirty = false
	o.inWrite = true
	o.writing, o.pending = o.pending, nil
	save := storage.ConsumerOffsetTable{Offsets: make(map[string]map[int32]int64, len(o.table.Offsets))}
	for k, q := range o.table.Offsets {
		save.Offsets[k] = maps.Clone(q)
	}
	o.rd.Save = &save
}

// Persisted reports the outcome of the write Ready handed out last. A
// failed write leaves the table to write again and its commits answered
// SYSTEM_ERROR: the client commits again.
func (o *Offsets) Persisted(err error) {
	o.inWrite = false
	if err != nil {
		o.dirty = true
	}
	o.answer(o.writing, err)
	o.writing = nil
}

func (o *Offsets) answer(toks []any, err error) {
	for _, tok := range toks {
		if err != nil {
			o.reply(tok, protocol.StatusSystemError, "offset not persisted: "+err.Error(), nil)
		} else {
			o.reply(tok, protocol.StatusOK, "", nil)
		}
	}
}

func (o *Offsets) reply(tok any, st protocol.Status, remark string, f protocol.Fields) {
	o.rd.Replies = append(o.rd.Replies, Reply{To: tok, Status: st, Remark: remark, Fields: f})
}

// Ready returns the outputs collected since the last call, arming the
// group-commit timer while commits wait for a write (not while one is out:
// its outcome comes first).
func (o *Offsets) Ready() OffsetsReady {
	if len(o.pending) > 0 && !o.armed && !o.inWrite {
		o.armed = true
		o.rd.ArmSoon = GroupCommitDelay
	}
	rd := o.rd
	o.rd = OffsetsReady{}
	return rd
}
