package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/actors/meta"
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

// topicsRole tells the topic manager the broker's role changed.
type topicsRole struct{ slave bool }

// topicManager is the actor around meta.Topics: it loads and writes
// topics.json and publishes the table in views for the writer and the
// transport.
type topicManager struct {
	k             *kit
	p             *pids
	v             *views
	store         *storage.Store
	defaultQueues int32
	slave         bool
	core          *meta.Topics
}

func newTopicManager(k *kit, p *pids, v *views, store *storage.Store, defaultQueues int32, slave bool) *topicManager {
	return &topicManager{k: k, p: p, v: v, store: store, defaultQueues: defaultQueues, slave: slave}
}

func (t *topicManager) path() string { return t.store.ConfigPath(storage.TopicsFile) }

func (t *topicManager) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		t.core = meta.NewTopics(t.defaultQueues)
		t.core.SetRole(t.slave)
		table := storage.TopicTable{Topics: map[string]storage.TopicConfig{}}
		if _, err := storage.LoadJSON(t.store.FS(), t.path(), &table); err != nil {
			t.k.log.Error("loading topics failed; starting with the topics the log's queues name", "err", err)
		}
		t.core.Load(table, t.store.Queues())
	case *topicsRole:
		t.slave = m.slave
		t.core.SetRole(m.slave)
		if !m.slave {
			t.core.Adopt(t.store.Queues())
		}
	case *ensureTopic:
		if t.core.Ensure(m.cfg) {
			t.k.log.Info("topic auto-created", "topic", m.cfg.TopicName, "queues", m.cfg.WriteQueueNums)
		}
	case *topicMsg:
		t.core.Handle(m.request, m.req)
	case *topicDeleted:
		t.core.Deleted(m.topic, m.err)
	case *importMeta:
		if err := t.core.Import(m.data); err != nil {
			t.k.log.Error("bad topics from the master", "err", err)
		}
	}
	t.drain()
}

// drain runs the core's outputs: publish, write (reporting the outcome to
// the core, which releases the replies that waited for it), answer.
func (t *topicManager) drain() {
	if t.core == nil {
		return
	}
	for {
		rd := t.core.Ready()
		if rd.Publish != nil {
			t.v.publishTopics(rd.Publish)
			if t.p.registrar != nil {
				t.k.send(t.p.registrar, &regTopics{}) // the name servers learn it at once
			}
		}
		for _, topic := range rd.Delete {
			t.k.send(t.p.writer, &cutTopic{topic: topic, at: -1})
		}
		if rd.Save != nil {
			err := storage.SaveJSON(t.store.FS(), t.path(), rd.Save)
			if err != nil {
				t.k.log.Error("saving topics failed", "err", err)
			}
			t.core.Persisted(err)
		}
		for _, r := range rd.Replies {
			t.k.respond(r.To.(*request), r.Status, r.Remark, r.Fields)
		}
		if rd.Save == nil && len(rd.Delete) == 0 {
			return
		}
	}
}
