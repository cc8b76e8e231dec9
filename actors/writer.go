package actors

import (
	"bytes"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

// sendItem is one SEND or SEND_BATCH request.
type sendItem struct {
	*request
	topic     string
	queueID   int32
	bornTs    int64
	msgs      []protocol.Message
	batch     bool
	sendBack  bool  // CONSUMER_SEND_MSG_BACK: answer OK without fields
	reconsume int32 // reconsume count of a retried or re-delivered message

	// Internal sends (the scheduler re-storing due messages) have no
	// client: the writer tells notify instead.
	notify *actor.PID
	tag    any
}

// internalStored answers an internal send.
type internalStored struct {
	tag any
	end int64 // log end after the messages
	err error
}

// writeBatch is every send of one read burst: the writer appends them as one
// batch.
type writeBatch struct{ items []*sendItem }

// segmentPrepared reports a segment created ahead of need off the writer.
type segmentPrepared struct {
	seg *storage.PreparedSegment
	err error
}

// cleanTick runs retention.
type cleanTick struct{}

// panicForTest makes the receiving actor panic (supervision tests).
type panicForTest struct{}

// pendingReply is a response held until its data is durable.
type pendingReply struct {
	*request
	ok    protocol.Fields // the response if the flush succeeds
	end   int64           // log offset that must be flushed
	start time.Time
}

// writerActor is the CommitLogWriter: the only writer of the log. It owns
// the topic-queue offset table (inside the CommitLog) and queue selection.
type writerActor struct {
	b         *Broker
	rr        map[string]int32 // round-robin queue choice per topic
	preparing bool
	out       []storage.AppendResult
	msgs      []*storage.Message
	props     []byte // this write's encoded properties (valid until the append)
}

func (w *writerActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		w.rr = map[string]int32{}
		w.prepare(ctx)
		// Retention changes the segment list: only the actor that appends
		// to the log may run it (on a slave, the HA client does).
		if w.b.cfg.CleanResourceInterval > 0 && !w.b.isSlave() {
			w.b.after(w.b.cfg.CleanResourceInterval, ctx.Self(), &cleanTick{})
		}
	case *writeBatch:
		w.write(ctx, m)
	case *segmentPrepared:
		w.preparing = false
		if m.err != nil {
			w.b.log.Warn("preparing the next commitlog segment failed; the writer will create it when needed", "err", m.err)
			return
		}
		if err := w.b.store.CommitLog().AdoptSegment(m.seg); err != nil {
			w.b.log.Warn("adopting a prepared commitlog segment failed", "err", err)
		}
		if warm := w.b.store.CommitLog().WarmAhead(); warm != nil {
			w.b.env.RunIO(warm) // the window may reach into the new segment
		}
	case *cleanTick:
		w.b.cleanLog()
		w.b.after(w.b.cfg.CleanResourceInterval, ctx.Self(), &cleanTick{})
	case *panicForTest:
		panic("writer: panic requested by a test")
	}
}

// prepare keeps the pages just ahead of the log's end populated and creates
// the next segment, both off the actor, so appends and the roll-over do not
// wait for page faults or fallocate.
func (w *writerActor) prepare(ctx actor.Context) {
	if w.b.isSlave() {
		// A slave's haClient appends the master's bytes and rolls the
		// segments itself; a segment prepared and adopted here would race
		// its roll (both create the same file, and c.next is unguarded).
		return
	}
	cl := w.b.store.CommitLog()
	if warm := cl.WarmAhead(); warm != nil {
		w.b.env.RunIO(warm) // populate the pages the next appends will write
	}
	start, need := cl.NextSegmentStart()
	if !need || w.preparing || cl.Err() != nil {
		return
	}
	w.preparing = true
	self, root := ctx.Self(), w.b.sys.Root
	w.b.env.RunIO(func() {
		seg, err := cl.CreateSegment(start)
		root.Send(self, &segmentPrepared{seg: seg, err: err})
	})
}

// cleanLog runs one retention pass. Only the log's appender calls it: the
// writer on a master, the HA client on a slave.
func (b *Broker) cleanLog() {
	rep, err := b.store.CleanCommitLog(b.env.Clock.Now(), false)
	if err != nil {
		b.log.Error("retention failed", "err", err)
		return
	}
	if rep.DeletedSegments > 0 {
		b.log.Info("retention deleted commitlog segments", "segments", rep.DeletedSegments, "min_offset", rep.MinOffset, "disk_used", rep.UsedRatio)
	}
	if rep.DiskFull {
		b.log.Error("disk full: refusing writes", "disk_used", rep.UsedRatio)
	}
	b.sys.Root.Send(b.p.reput, &deleteBefore{minPhy: rep.MinOffset})
}

// reject answers an item that cannot be written. An internal item (a due
// delayed message whose topic is gone, say) is dropped with a log line so
// its sender does not wait forever.
func (w *writerActor) reject(ctx actor.Context, it *sendItem, st protocol.Status, remark string) {
	if it.notify != nil {
		w.b.log.Error("internal write dropped", "topic", it.topic, "status", st.String(), "reason", remark)
		ctx.Send(it.notify, &internalStored{tag: it.tag, end: w.b.store.CommitLog().MaxOffset()})
		return
	}
	w.b.respond(it.request, st, remark, nil)
}

// resolve checks an item's topic and picks its queue; it returns a non-OK
// status if the item cannot be written.
func (w *writerActor) resolve(it *sendItem) (protocol.Status, string) {
	topics := w.b.v.topicsSnapshot()
	tc, ok := topics[it.topic]
	if !ok {
		if err := protocol.ValidateTopic(it.topic); err != nil {
			return protocol.StatusMessageIllegal, err.Error()
		}
		if !w.b.cfg.AutoCreateTopicEnable && !isGroupTopic(it.topic) {
			return protocol.StatusTopicNotExist, fmt.Sprintf("topic %q does not exist and autoCreateTopicEnable is false", it.topic)
		}
		n := w.b.cfg.DefaultTopicQueueNums
		if isGroupTopic(it.topic) {
			n = 1 // retry and dead-letter topics have one queue, as in RocketMQ
		}
		tc = storage.TopicConfig{TopicName: it.topic, ReadQueueNums: n, WriteQueueNums: n, Perm: storage.PermRead | storage.PermWrite}
		w.b.sys.Root.Send(w.b.p.topics, &ensureTopic{cfg: tc})
		// Publish at once so the next sends of this burst see it too.
		next := make(map[string]storage.TopicConfig, len(topics)+1)
		for k, v := range topics {
			next[k] = v
		}
		next[it.topic] = tc
		w.b.v.publishTopics(next)
	}
	if tc.Perm&storage.PermWrite == 0 {
		return protocol.StatusNoPermission, fmt.Sprintf("topic %q is not writable (perm %d)", it.topic, tc.Perm)
	}
	if tc.WriteQueueNums <= 0 {
		return protocol.StatusNoPermission, fmt.Sprintf("topic %q has no write queues", it.topic)
	}
	switch {
	case it.queueID < 0:
		it.queueID = w.rr[it.topic] % tc.WriteQueueNums
		w.rr[it.topic] = (it.queueID + 1) % tc.WriteQueueNums
	case it.queueID >= tc.WriteQueueNums:
		return protocol.StatusInvalidParameter, fmt.Sprintf("queue %d out of range: topic %q has %d write queues", it.queueID, it.topic, tc.WriteQueueNums)
	}
	return protocol.StatusOK, ""
}

// delay diverts a delayed message (property DELAY = level, or
// TIMER_DELIVER_MS in the future) to the schedule topic until it is due:
// queue level-1 for a level, queue len(levels) for an absolute time. The
// real topic and queue travel in REAL_TOPIC and REAL_QID.
func (w *writerActor) delay(topic string, queueID int32, props map[string]string) (string, int32, map[string]string, error) {
	levels := w.b.cfg.DelayLevels
	now := w.b.env.Clock.Now()
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

// toStore converts an item's messages; the whole item is rejected if one
// message cannot be stored, so a batch is all or nothing.
func (w *writerActor) toStore(it *sendItem, bornHost string) ([]*storage.Message, error) {
	cl := w.b.store.CommitLog()
	host := parseHost(bornHost)
	out := make([]*storage.Message, 0, len(it.msgs))
	for i := range it.msgs {
		pm := &it.msgs[i]
		if pm.Topic != "" && pm.Topic != it.topic {
			return nil, fmt.Errorf("%w: message %d of the batch is for topic %q, the batch for %q", storage.ErrIllegal, i, pm.Topic, it.topic)
		}
		topic, queueID := it.topic, it.queueID
		var props []byte
		fast := false
		if pm.Properties == nil {
			// Properties as they came off the wire: straight into the
			// log's encoding, unless they need the map (see below).
			at := len(w.props)
			var err error
			if w.props, fast, err = appendStoreProperties(w.props, pm.RawProperties); err != nil {
				return nil, err
			}
			props = w.props[at:len(w.props):len(w.props)]
		}
		if !fast {
			var propMap map[string]string
			var err error
			topic, queueID, propMap, err = w.delay(it.topic, it.queueID, pm.PropertyMap())
			if err != nil {
				return nil, err
			}
			if props, err = encodeProperties(propMap); err != nil {
				return nil, err
			}
		}
		sm := &storage.Message{Topic: topic, QueueID: queueID, Flag: pm.Flag, Body: pm.Body,
			Properties: props, BornTimestamp: it.bornTs, BornHost: host, ReconsumeTimes: it.reconsume}
		if err := cl.CheckMessage(sm); err != nil {
			return nil, err
		}
		out = append(out, sm)
	}
	return out, nil
}

func (w *writerActor) write(ctx actor.Context, wb *writeBatch) {
	b := w.b
	if b.isSlave() {
		for _, it := range wb.items {
			b.respond(it.request, protocol.StatusNotMaster,
				fmt.Sprintf("broker %s (brokerId %d) is a read-only slave; send to its master", b.cfg.BrokerName, b.cfg.BrokerID), nil)
		}
		return
	}
	w.msgs = w.msgs[:0]
	w.props = w.props[:0]
	type span struct{ from, to int } // an item's messages in w.msgs
	spans := make([]span, len(wb.items))
	for i, it := range wb.items {
		spans[i] = span{-1, -1}
		if st, remark := w.resolve(it); st != protocol.StatusOK {
			w.reject(ctx, it, st, remark)
			continue
		}
		addr := ""
		if it.conn != nil {
			addr = it.conn.RemoteAddr()
		}
		sms, err := w.toStore(it, addr)
		if err != nil {
			w.reject(ctx, it, statusOfStoreError(err), err.Error())
			continue
		}
		spans[i] = span{len(w.msgs), len(w.msgs) + len(sms)}
		w.msgs = append(w.msgs, sms...)
	}
	if len(w.msgs) == 0 {
		return
	}
	now := b.nowMs()
	out, err := b.store.AppendBatch(w.msgs, now, w.out)
	w.out = out
	stored := len(out)
	var bytes int64
	for _, r := range out {
		bytes += int64(r.Size)
	}
	b.msgPutTotal.Add(int64(stored))
	b.bytesPut.Add(bytes)
	if err != nil {
		b.log.Error("commitlog append failed: refusing writes", "err", err)
	}

	sync := b.cfg.FlushDiskType == SyncFlush
	syncMaster := b.isSyncMaster()
	var waits, replWaits []*pendingReply
	for i, it := range wb.items {
		sp := spans[i]
		if sp.from < 0 {
			continue
		}
		if sp.to > stored && it.notify != nil {
			ctx.Send(it.notify, &internalStored{tag: it.tag, err: fmt.Errorf("not stored: %v", err)})
			continue
		}
		if sp.to > stored {
			st := statusOfStoreError(err)
			remark := fmt.Sprintf("not stored: %v", err)
			if sp.from < stored {
				remark = fmt.Sprintf("batch partly stored (%d of %d messages) before: %v", stored-sp.from, sp.to-sp.from, err)
			}
			b.respond(it.request, st, remark, nil)
			continue
		}
		res := out[sp.from:sp.to]
		last := res[len(res)-1]
		end := last.PhyOffset + int64(last.Size)
		if it.notify != nil {
			ctx.Send(it.notify, &internalStored{tag: it.tag, end: end})
			continue
		}
		var resp protocol.Fields
		// A delayed message waits in a schedule queue: the answer names
		// where it was stored (queue and offset of the same place).
		qid := w.msgs[sp.from].QueueID
		if it.sendBack {
			resp = nil
		} else if it.batch {
			ids := make([]string, len(res))
			for j, r := range res {
				ids[j] = protocol.OffsetMsgID(b.cfg.StoreHost, r.PhyOffset)
			}
			resp = &protocol.SendBatchResponse{QueueID: qid, QueueOffset: res[0].QueueOffset, MsgIDs: ids}
		} else {
			resp = &protocol.SendResponse{MsgID: protocol.OffsetMsgID(b.cfg.StoreHost, res[0].PhyOffset), QueueID: qid, QueueOffset: res[0].QueueOffset}
		}
		if syncMaster && !it.oneway && it.msgs[0].WaitStoreMsgOK() {
			// Never an OK without the slave's copy: with too few slaves in
			// sync, say so at once (the message is stored on the master).
			if have := int(b.haInSync.Load()) + 1; have < b.cfg.InSyncReplicas {
				b.respond(it.request, protocol.StatusSlaveNotAvailable,
					fmt.Sprintf("stored on the master only: %d of the %d copies inSyncReplicas asks for are in sync", have, b.cfg.InSyncReplicas), nil)
				continue
			}
			replWaits = append(replWaits, &pendingReply{request: it.request, ok: resp, end: end})
			continue
		}
		if sync && !it.oneway && it.msgs[0].WaitStoreMsgOK() {
			waits = append(waits, &pendingReply{request: it.request, ok: resp, end: end})
			continue
		}
		b.respond(it.request, protocol.StatusOK, "", resp)
	}
	if sync {
		if len(waits) > 0 || stored > 0 {
			ctx.Send(b.p.flusher, &flushWait{replies: waits})
		}
	} else if stored > 0 {
		ctx.Send(b.p.reput, &logAppended{})
	}
	if stored > 0 && b.p.replicator != nil {
		ctx.Send(b.p.replicator, &logAppended{})
	}
	if len(replWaits) > 0 {
		ctx.Send(b.p.replicator, &replWait{replies: replWaits})
	}
	w.prepare(ctx)
}
