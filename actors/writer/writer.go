package writer

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wharfmq/wharf/internal/invariant"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

// Config is the part of the broker's configuration the writer needs.
type Config struct {
	StoreHost             netip.AddrPort
	AutoCreateTopicEnable bool
	DefaultTopicQueueNums int32
	DelayLevels           []time.Duration // messageDelayLevel
}

// Item is one SEND, SEND_BATCH or internal re-send.
type Item struct {
	Topic     string
	QueueID   int32 // -1: the writer chooses
	BornTs    int64
	BornHost  netip.AddrPort
	Msgs      []protocol.Message
	Batch     bool  // SEND_BATCH: answered with every message id
	SendBack  bool  // CONSUMER_SEND_MSG_BACK: answered without fields
	Reconsume int32 // reconsume count of a retried or re-delivered message
}

// Outcome is what became of one Item.
type Outcome struct {
	Stored bool
	// NotAppended: the item was valid but the log refused it (disk full,
	// a failed write): trying again later may succeed.
	NotAppended bool
	Status      protocol.Status // the refusal's, when not Stored
	Remark      string
	// Fields is the answer once the gate lets it go (nil for send-back).
	Fields protocol.Fields
	// End is the log offset after the item's last byte (when Stored).
	End int64
}

// Result is the outcome of one Write.
type Result struct {
	Outcomes []Outcome // one per item, in order
	// Created lists the topics this write auto-created: the shell
	// publishes them and tells the topic manager.
	Created   []storage.TopicConfig
	Stored    int   // messages appended
	Bytes     int64 // their record bytes
	AppendErr error // the log refused the rest of the batch (sticky in the store)
}

// Writer appends sends to one store's log.
type Writer struct {
	cfg   Config
	st    *storage.Store
	rr    map[string]int32 // round-robin queue choice per topic
	out   []storage.AppendResult
	msgs  []*storage.Message
	arena []storage.Message // what msgs points at: one slice for a write, reused (cleared after it)
	spans []span
	idBuf []byte // the stored messages' ids, before they become one string
	ids   string // the stored messages' ids, one after another (see msgID)
	idLen int    // the length of one of them
	props []byte // this write's encoded properties (valid until the append)
	res   Result
}

// span is an item's messages in Writer.msgs.
type span struct{ from, to int }

// New returns the writer of st.
func New(cfg Config, st *storage.Store) *Writer {
	return &Writer{cfg: cfg, st: st, rr: map[string]int32{}}
}

// Write appends items as one batch. topics is the published topic table;
// Write does not modify it (topics it creates are in Result.Created and
// seen by the later items of the same write). The Result is valid until
// the next Write.
func (w *Writer) Write(now time.Time, topics map[string]storage.TopicConfig, items []*Item) *Result {
	w.msgs, w.props, w.arena = w.msgs[:0], w.props[:0], w.arena[:0]
	w.res = Result{Outcomes: w.res.Outcomes[:0], Created: w.res.Created[:0]}
	spans := w.spans[:0]
	for _, it := range items {
		sp := span{-1, -1}
		o := Outcome{}
		if st, remark := w.resolve(topics, it); st != protocol.StatusOK {
			o = Outcome{Status: st, Remark: remark}
		} else if from, err := w.toStore(now, it); err != nil {
			o = Outcome{Status: StatusOfStoreError(err), Remark: err.Error()}
		} else {
			sp = span{from, len(w.arena)}
		}
		spans = append(spans, sp)
		w.res.Outcomes = append(w.res.Outcomes, o)
	}
	w.spans = spans
	if len(w.arena) == 0 {
		return &w.res
	}
	for i := range w.arena { // the arena is complete: pointers into it stay valid
		w.msgs = append(w.msgs, &w.arena[i])
	}
	// The messages alias the requests' bytes: drop them once appended,
	// so that the writer holds no request buffer until its next write.
	defer func() { clear(w.arena); clear(w.msgs) }()
	out, err := w.st.AppendBatch(w.msgs, now.UnixMilli(), w.out)
	w.out = out
	w.res.AppendErr = err
	w.res.Stored = len(out)
	for _, r := range out {
		// toStore ran CheckMessage on every message: the log refuses one
		// only for a storage error, which ends the batch (err), never
		// with a per-message result the outcomes would read as stored.
		invariant.Check(r.Err == nil, "writer: the log refused a message CheckMessage accepted")
		w.res.Bytes += int64(r.Size)
	}
	w.makeIDs()
	var resps []protocol.SendResponse // the answers' fields: one allocation for the write
	for i, it := range items {
		if sp := spans[i]; sp.from >= 0 {
			if !it.Batch && !it.SendBack && resps == nil {
				resps = make([]protocol.SendResponse, 0, len(items)-i)
			}
			w.res.Outcomes[i], resps = w.outcome(it, sp.from, sp.to, err, resps)
		}
	}
	return &w.res
}

// makeIDs makes the ids of the messages stored by this write as one
// string (one allocation for the write, not one per message); msgID
// slices it.
func (w *Writer) makeIDs() {
	w.idBuf = w.idBuf[:0]
	for _, r := range w.out {
		w.idBuf = protocol.AppendOffsetMsgID(w.idBuf, w.cfg.StoreHost, r.PhyOffset)
	}
	w.ids, w.idLen = string(w.idBuf), 0
	if len(w.out) > 0 {
		w.idLen = len(w.idBuf) / len(w.out)
	}
}

// msgID is the id of w.out[i] (protocol.OffsetMsgID).
func (w *Writer) msgID(i int) string { return w.ids[i*w.idLen : (i+1)*w.idLen] }

// outcome is the answer of an item whose messages are w.msgs[from:to]. A
// SEND's fields are appended to resps (never grown past its capacity, so
// the answers already made keep pointing into it) and resps is returned.
func (w *Writer) outcome(it *Item, from, to int, err error, resps []protocol.SendResponse) (Outcome, []protocol.SendResponse) {
	stored := len(w.out)
	if to > stored {
		remark := fmt.Sprintf("not stored: %v", err)
		if from < stored {
			remark = fmt.Sprintf("batch partly stored (%d of %d messages) before: %v", stored-from, to-from, err)
		}
		return Outcome{NotAppended: true, Status: StatusOfStoreError(err), Remark: remark}, resps
	}
	res := w.out[from:to]
	last := res[len(res)-1]
	o := Outcome{Stored: true, Status: protocol.StatusOK, End: last.PhyOffset + int64(last.Size)}
	invariant.Check(o.End <= w.st.CommitLog().MaxOffset(), "writer: a stored send ends beyond the log end")
	// A delayed message waits in a schedule queue: the answer names the
	// real topic's queue and the offset in the schedule queue
	// (PROTOCOL.md 10.3).
	qid := it.QueueID
	switch {
	case it.SendBack:
	case it.Batch:
		ids := make([]string, len(res))
		for j := range res {
			ids[j] = w.msgID(from + j)
		}
		o.Fields = &protocol.SendBatchResponse{QueueID: qid, QueueOffset: res[0].QueueOffset, MsgIDs: ids}
	default:
		r := protocol.SendResponse{MsgID: w.msgID(from), QueueID: qid, QueueOffset: res[0].QueueOffset}
		if len(resps) < cap(resps) {
			resps = append(resps, r)
			o.Fields = &resps[len(resps)-1]
		} else {
			o.Fields = boxed(r)
		}
	}
	return o, resps
}

// boxed moves r to the heap; taking &r in outcome would move every r there.
func boxed(r protocol.SendResponse) *protocol.SendResponse { return &r }

// resolve checks an item's topic and picks its queue; it returns a non-OK
// status if the item cannot be written.
func (w *Writer) resolve(topics map[string]storage.TopicConfig, it *Item) (protocol.Status, string) {
	tc, ok := topics[it.Topic]
	if !ok {
		tc, ok = w.created(it.Topic)
	}
	if !ok {
		if err := protocol.ValidateTopic(it.Topic); err != nil {
			return protocol.StatusMessageIllegal, err.Error()
		}
		group := IsGroupTopic(it.Topic)
		if !w.cfg.AutoCreateTopicEnable && !group {
			return protocol.StatusTopicNotExist, fmt.Sprintf("topic %q does not exist and autoCreateTopicEnable is false", it.Topic)
		}
		n := w.cfg.DefaultTopicQueueNums
		if group {
			n = 1 // retry and dead-letter topics have one queue, as in RocketMQ
		}
		tc = storage.TopicConfig{TopicName: it.Topic, ReadQueueNums: n, WriteQueueNums: n, Perm: storage.PermRead | storage.PermWrite}
		w.res.Created = append(w.res.Created, tc)
	}
	if tc.Perm&storage.PermWrite == 0 {
		return protocol.StatusNoPermission, fmt.Sprintf("topic %q is not writable (perm %d)", it.Topic, tc.Perm)
	}
	if tc.WriteQueueNums <= 0 {
		return protocol.StatusNoPermission, fmt.Sprintf("topic %q has no write queues", it.Topic)
	}
	switch {
	case it.QueueID < 0:
		it.QueueID = w.rr[it.Topic] % tc.WriteQueueNums
		w.rr[it.Topic] = (it.QueueID + 1) % tc.WriteQueueNums
	case it.QueueID >= tc.WriteQueueNums:
		return protocol.StatusInvalidParameter, fmt.Sprintf("queue %d out of range: topic %q has %d write queues", it.QueueID, it.Topic, tc.WriteQueueNums)
	}
	return protocol.StatusOK, ""
}

func (w *Writer) created(topic string) (storage.TopicConfig, bool) {
	for _, c := range w.res.Created {
		if c.TopicName == topic {
			return c, true
		}
	}
	return storage.TopicConfig{}, false
}

// toStore converts an item's messages onto w.arena and returns where they
// start; the whole item is rejected (the arena as it was) if one message
// cannot be stored, so a batch is all or nothing.
func (w *Writer) toStore(now time.Time, it *Item) (int, error) {
	cl := w.st.CommitLog()
	from := len(w.arena)
	for i := range it.Msgs {
		pm := &it.Msgs[i]
		if pm.Topic != "" && pm.Topic != it.Topic {
			w.arena = w.arena[:from]
			return 0, fmt.Errorf("%w: message %d of the batch is for topic %q, the batch for %q", storage.ErrIllegal, i, pm.Topic, it.Topic)
		}
		topic, queueID, props, err := w.properties(now, it, pm)
		if err != nil {
			w.arena = w.arena[:from]
			return 0, err
		}
		w.arena = append(w.arena, storage.Message{Topic: topic, QueueID: queueID, Flag: pm.Flag, Body: pm.Body,
			Properties: props, BornTimestamp: it.BornTs, BornHost: it.BornHost, ReconsumeTimes: it.Reconsume})
		if err := cl.CheckMessage(&w.arena[len(w.arena)-1]); err != nil {
			w.arena = w.arena[:from]
			return 0, err
		}
	}
	return from, nil
}

// properties encodes a message's properties for the log and says where it
// is stored (the schedule topic, if it is delayed).
func (w *Writer) properties(now time.Time, it *Item, pm *protocol.Message) (string, int32, []byte, error) {
	if pm.Properties == nil {
		// Properties as they came off the wire: straight into the log's
		// encoding, unless they need the map (see appendStoreProperties).
		at := len(w.props)
		var fast bool
		var err error
		if w.props, fast, err = appendStoreProperties(w.props, pm.RawProperties); err != nil {
			return "", 0, nil, err
		}
		if fast {
			return it.Topic, it.QueueID, w.props[at:len(w.props):len(w.props)], nil
		}
	}
	topic, queueID, propMap, err := w.delay(now, it.Topic, it.QueueID, pm.PropertyMap())
	if err != nil {
		return "", 0, nil, err
	}
	props, err := EncodeProperties(propMap)
	return topic, queueID, props, err
}

// delay diverts a delayed message (property DELAY = level, or
// TIMER_DELIVER_MS in the future) to the schedule topic until it is due:
// queue level-1 for a level, queue len(levels) for an absolute time. The
// real topic and queue travel in REAL_TOPIC and REAL_QID.
func (w *Writer) delay(now time.Time, topic string, queueID int32, props map[string]string) (string, int32, map[string]string, error) {
	levels := w.cfg.DelayLevels
	var deliver int64
	var q int32
	if v := props[protocol.PropertyDelay]; v != "" && v != "0" {
		level, err := strconv.Atoi(v)
		if err != nil || level < 0 || level > len(levels) {
			return "", 0, nil, fmt.Errorf("%w: DELAY %q is not a level in [0, %d]", storage.ErrIllegal, v, len(levels))
		}
		if level > 0 {
			deliver, q = now.Add(levels[level-1]).UnixMilli(), int32(level-1)
		}
	} else if v := props[protocol.PropertyTimerDeliverMs]; v != "" {
		at, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return "", 0, nil, fmt.Errorf("%w: TIMER_DELIVER_MS %q is not a Unix time in ms", storage.ErrIllegal, v)
		}
		if at > now.UnixMilli() {
			deliver, q = at, int32(len(levels))
		}
	}
	if deliver == 0 {
		return topic, queueID, props, nil
	}
	out := maps.Clone(props)
	out[protocol.PropertyRealTopic] = topic
	out[protocol.PropertyRealQueueID] = strconv.Itoa(int(queueID))
	out[storage.PropDeliverMs] = strconv.FormatInt(deliver, 10)
	return storage.ScheduleTopic, q, out, nil
}

// appendStoreProperties appends a properties map as it came off the wire
// (protocol.Message.RawProperties) to dst in the log's encoding. ok is
// false, and dst unchanged, when the map must take the slow way through a
// Go map: keys not in strictly increasing order (the log keeps one
// encoding per message: sorted keys), or a delay property (the writer
// rewrites delayed messages).
func appendStoreProperties(dst, raw []byte) (out []byte, ok bool, err error) {
	start := len(dst)
	var prev []byte
	ok = true
	protocol.EachRawProperty(raw, func(k, v []byte) {
		if !ok || err != nil {
			return
		}
		if prev != nil && bytes.Compare(prev, k) >= 0 ||
			string(k) == protocol.PropertyDelay || string(k) == protocol.PropertyTimerDeliverMs {
			ok = false
			return
		}
		dst, err = storage.AppendProperty(dst, k, v)
		prev = k
	})
	if !ok || err != nil {
		return dst[:start], ok, err
	}
	return dst, true, nil
}

// EncodeProperties turns a property map into the log's properties string,
// keys sorted so the same message always gives the same bytes.
func EncodeProperties(props map[string]string) ([]byte, error) {
	if len(props) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	kv := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		kv = append(kv, k, props[k])
	}
	return storage.EncodeProperties(kv...)
}

// StatusOfStoreError maps a store error to the status a producer gets.
func StatusOfStoreError(err error) protocol.Status {
	switch {
	case errors.Is(err, storage.ErrDiskFull):
		return protocol.StatusDiskFull
	case errors.Is(err, storage.ErrIllegal):
		return protocol.StatusMessageIllegal
	default:
		return protocol.StatusServiceNotAvailable
	}
}

// IsGroupTopic reports whether a topic is a group's retry or dead-letter
// topic (created on demand with one queue).
func IsGroupTopic(t string) bool {
	return strings.HasPrefix(t, protocol.RetryTopicPrefix) || strings.HasPrefix(t, protocol.DLQTopicPrefix)
}
