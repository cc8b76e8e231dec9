package actors

import (
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

// topicMsg is a topic admin request.
type topicMsg struct {
	*request
	req protocol.Request
}

// ensureTopic auto-creates a topic the writer saw first.
type ensureTopic struct{ cfg storage.TopicConfig }

// topicManager owns the topic table (topics.json). It publishes every
// change as an immutable snapshot the writer reads without a message.
type topicManager struct {
	b     *Broker
	table storage.TopicTable
}

func (t *topicManager) path() string { return t.b.store.ConfigPath(storage.TopicsFile) }

func (t *topicManager) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		t.table = storage.TopicTable{Topics: map[string]storage.TopicConfig{}}
		if _, err := storage.LoadJSON(t.b.storeFS(), t.path(), &t.table); err != nil {
			t.b.log.Error("loading topics failed; starting with the topics the log's queues name", "err", err)
		}
		if t.table.Topics == nil {
			t.table.Topics = map[string]storage.TopicConfig{}
		}
		// Queues on disk whose topic config was lost still get a topic.
		for _, k := range t.b.store.Queues() {
			if _, ok := t.table.Topics[k.Topic]; !ok && !strings.HasPrefix(k.Topic, "%") {
				n := max(t.b.cfg.DefaultTopicQueueNums, k.QueueID+1)
				t.table.Topics[k.Topic] = storage.TopicConfig{TopicName: k.Topic, ReadQueueNums: n, WriteQueueNums: n, Perm: storage.PermRead | storage.PermWrite}
			}
		}
		t.publish()
	case *ensureTopic:
		if _, ok := t.table.Topics[m.cfg.TopicName]; !ok {
			t.table.Topics[m.cfg.TopicName] = m.cfg
			t.b.log.Info("topic auto-created", "topic", m.cfg.TopicName, "queues", m.cfg.WriteQueueNums)
			t.save()
		}
	case *topicMsg:
		if t.b.isSlave() {
			if _, ok := m.req.(*protocol.ListTopicsRequest); !ok {
				t.b.respond(m.request, protocol.StatusNotMaster, "topics are managed on the master; this broker is a slave", nil)
				return
			}
		}
		t.handle(m)
	case *importMeta:
		// A slave takes its master's topics as they are.
		var topics map[string]storage.TopicConfig
		if err := json.Unmarshal(m.data, &topics); err != nil {
			t.b.log.Error("bad topics from the master", "err", err)
			return
		}
		if !maps.Equal(topics, t.table.Topics) {
			t.table.Topics = topics
			t.save()
		}
	}
}

func (t *topicManager) publish() {
	snap := make(map[string]storage.TopicConfig, len(t.table.Topics))
	for k, v := range t.table.Topics {
		snap[k] = v
	}
	t.b.v.publishTopics(snap)
}

func (t *topicManager) save() error {
	t.table.DataVersion++
	t.publish()
	if err := storage.SaveJSON(t.b.storeFS(), t.path(), &t.table); err != nil {
		t.b.log.Error("saving topics failed", "err", err)
		return err
	}
	return nil
}

func toStorageTopic(c protocol.TopicConfig) storage.TopicConfig {
	return storage.TopicConfig{TopicName: c.Topic, ReadQueueNums: c.ReadQueueNums, WriteQueueNums: c.WriteQueueNums, Perm: c.Perm}
}

func validTopicConfig(c protocol.TopicConfig) error {
	if err := protocol.ValidateTopic(c.Topic); err != nil {
		return err
	}
	if c.ReadQueueNums < 1 || c.WriteQueueNums < 1 || c.ReadQueueNums > 1024 || c.WriteQueueNums > 1024 {
		return fmt.Errorf("queue numbers must be in [1, 1024]: read %d, write %d", c.ReadQueueNums, c.WriteQueueNums)
	}
	if c.Perm&^(storage.PermRead|storage.PermWrite|storage.PermInherit) != 0 {
		return fmt.Errorf("perm %d: only the bits 4 (read), 2 (write), 1 (inherit) exist", c.Perm)
	}
	return nil
}

func (t *topicManager) handle(m *topicMsg) {
	b := t.b
	switch req := m.req.(type) {
	case *protocol.CreateTopicRequest, *protocol.UpdateTopicRequest:
		var c protocol.TopicConfig
		create := false
		if cr, ok := req.(*protocol.CreateTopicRequest); ok {
			c, create = cr.TopicConfig, true
		} else {
			c = req.(*protocol.UpdateTopicRequest).TopicConfig
		}
		if c.Perm == 0 {
			c.Perm = storage.PermRead | storage.PermWrite
		}
		if err := validTopicConfig(c); err != nil {
			b.respond(m.request, protocol.StatusInvalidParameter, err.Error(), nil)
			return
		}
		if _, ok := t.table.Topics[c.Topic]; ok && create {
			b.respond(m.request, protocol.StatusTopicExistAlready, fmt.Sprintf("topic %q exists", c.Topic), nil)
			return
		}
		t.table.Topics[c.Topic] = toStorageTopic(c)
		if err := t.save(); err != nil {
			b.respond(m.request, protocol.StatusSystemError, err.Error(), nil)
			return
		}
		b.respond(m.request, protocol.StatusOK, "", nil)
	case *protocol.DeleteTopicRequest:
		if _, ok := t.table.Topics[req.Topic]; !ok {
			b.respond(m.request, protocol.StatusTopicNotExist, fmt.Sprintf("topic %q does not exist", req.Topic), nil)
			return
		}
		delete(t.table.Topics, req.Topic)
		if err := t.save(); err != nil {
			b.respond(m.request, protocol.StatusSystemError, err.Error(), nil)
			return
		}
		b.respond(m.request, protocol.StatusOK, "", nil)
	case *protocol.ListTopicsRequest:
		resp := &protocol.TopicListResponse{}
		for _, c := range t.table.Topics {
			resp.Topics = append(resp.Topics, protocol.TopicConfig{Topic: c.TopicName, ReadQueueNums: c.ReadQueueNums, WriteQueueNums: c.WriteQueueNums, Perm: c.Perm})
		}
		sort.Slice(resp.Topics, func(i, j int) bool { return resp.Topics[i].Topic < resp.Topics[j].Topic })
		b.respond(m.request, protocol.StatusOK, "", resp)
	}
}

// offsetMsg is a consumer offset request.
type offsetMsg struct {
	*request
	req protocol.Request
}

// persistTick persists consumer offsets.
type persistTick struct{}

// persistSoon persists offsets whose commits wait for an answer.
type persistSoon struct{}

// offsetManager owns the consumer offset table (consumerOffset.json),
// persisted every flushConsumerOffsetInterval when changed and at shutdown.
//
// An acknowledged commit (UPDATE_CONSUMER_OFFSET that is not oneway) is
// answered only after the table holding it is on disk, so a committed offset
// never moves backwards across a crash; commits arriving together share one
// write (group commit). Oneway commits and commits piggybacked on pulls are
// persisted on the interval.
type offsetManager struct {
	b       *Broker
	table   storage.ConsumerOffsetTable
	dirty   bool
	pending []*request
	armed   bool
}

func (o *offsetManager) path() string { return o.b.store.ConfigPath(storage.ConsumerOffsetsFile) }

func offsetKey(topic, group string) string { return topic + "@" + group }

func (o *offsetManager) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		o.table = storage.ConsumerOffsetTable{Offsets: map[string]map[int32]int64{}}
		if _, err := storage.LoadJSON(o.b.storeFS(), o.path(), &o.table); err != nil {
			o.b.log.Error("loading consumer offsets failed", "err", err)
		}
		if o.table.Offsets == nil {
			o.table.Offsets = map[string]map[int32]int64{}
		}
		o.b.after(o.interval(), ctx.Self(), &persistTick{})
	case *offsetMsg:
		o.handle(m)
	case *persistTick:
		o.persist()
		o.b.after(o.interval(), ctx.Self(), &persistTick{})
	case *persistSoon:
		o.armed = false
		o.persist()
	case *fillOffsets:
		o.fill(m)
	case *exportOffsets:
		data, err := json.Marshal(o.table.Offsets)
		if err == nil {
			ctx.Respond(&metaSnapshot{kind: "offsets", data: data})
		}
	case *importMeta:
		// Offsets from the other side of a master/slave pair merge by
		// maximum, so offsets committed on a slave while the master was away
		// are not lost when it returns (and never move backwards).
		var in map[string]map[int32]int64
		if err := json.Unmarshal(m.data, &in); err != nil {
			o.b.log.Error("bad consumer offsets from the peer broker", "err", err)
			return
		}
		for k, queues := range in {
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
	case *actor.Stopping:
		o.persist()
	}
	if len(o.pending) > 0 && !o.armed {
		o.armed = true
		o.b.after(time.Millisecond, ctx.Self(), &persistSoon{})
	}
}

func (o *offsetManager) interval() time.Duration {
	if o.b.cfg.FlushConsumerOffsetInterval <= 0 {
		return 5 * time.Second
	}
	return o.b.cfg.FlushConsumerOffsetInterval
}

func (o *offsetManager) persist() {
	var err error
	if o.dirty {
		if err = storage.SaveJSON(o.b.storeFS(), o.path(), &o.table); err != nil {
			o.b.log.Error("persisting consumer offsets failed", "err", err)
		} else {
			o.dirty = false
		}
	}
	for _, r := range o.pending {
		if err != nil {
			o.b.respond(r, protocol.StatusSystemError, "offset not persisted: "+err.Error(), nil)
		} else {
			o.b.respond(r, protocol.StatusOK, "", nil)
		}
	}
	clear(o.pending)
	o.pending = o.pending[:0]
}

func (o *offsetManager) handle(m *offsetMsg) {
	b := o.b
	switch req := m.req.(type) {
	case *protocol.UpdateConsumerOffsetRequest:
		if req.ConsumerGroup == "" || req.CommitOffset < 0 {
			b.respond(m.request, protocol.StatusInvalidParameter, "consumer group must be set and the offset non-negative", nil)
			return
		}
		k := offsetKey(req.Topic, req.ConsumerGroup)
		q := o.table.Offsets[k]
		if q == nil {
			q = map[int32]int64{}
			o.table.Offsets[k] = q
		}
		q[req.QueueID] = req.CommitOffset
		o.dirty = true
		if m.oneway || o.b.k.faults.CommitOffsetBeforePersist {
			b.respond(m.request, protocol.StatusOK, "", nil)
			return
		}
		o.pending = append(o.pending, m.request)
	case *protocol.QueryConsumerOffsetRequest:
		off, ok := o.table.Offsets[offsetKey(req.Topic, req.ConsumerGroup)][req.QueueID]
		if !ok {
			b.respond(m.request, protocol.StatusQueryNotFound, "no committed offset", nil)
			return
		}
		b.respond(m.request, protocol.StatusOK, "", &protocol.OffsetResponse{Offset: off})
	case *protocol.GetConsumerOffsetsRequest:
		resp := &protocol.ConsumerOffsetsResponse{}
		for k, queues := range o.table.Offsets {
			topic, group, _ := strings.Cut(k, "@")
			if group != req.ConsumerGroup || (req.Topic != "" && topic != req.Topic) {
				continue
			}
			for qid, off := range queues {
				min, max := b.v.queueBounds(storage.QueueKey{Topic: topic, QueueID: qid})
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
		b.respond(m.request, protocol.StatusOK, "", resp)
	}
}
