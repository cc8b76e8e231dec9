package meta

import (
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strings"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

// Topics owns the topic table. Every change is published as a new snapshot
// (readers on other goroutines never see the table itself) and written to
// topics.json; an admin change is answered once that write succeeded.
//
// On a slave the table is its master's: admin changes are refused with
// NOT_MASTER (listing still works) and Import replaces the table.
type Topics struct {
	table         storage.TopicTable
	defaultQueues int32
	slave         bool

	rd      TopicsReady
	waiting []any // replies that wait for the next write
	writing []any // replies that wait for the write handed out

	// deleting holds the deletions under way: the DELETE_TOPIC waiting for
	// its topic's messages to be cut away, and the creations and updates of
	// the topic that came meanwhile (handled once it is done, so a
	// re-created topic never meets its old queues).
	deleting map[string]*deletion
}

// deletion is one topic's deletion under way.
type deletion struct {
	tok   any
	cfg   storage.TopicConfig // restored if the deletion fails
	after []pendingReq
}

type pendingReq struct {
	tok any
	req protocol.Request
}

// TopicsReady is what the caller must do after an input.
type TopicsReady struct {
	// Publish, if not nil, is the new topic table for readers; the caller
	// publishes it before running Save, so a send never misses a topic it
	// was told exists.
	Publish map[string]storage.TopicConfig
	// Save, if not nil, is the table to write to topics.json; report the
	// outcome with Persisted before the next input.
	Save *storage.TopicTable
	// Replies go out after Save's outcome was reported.
	Replies []Reply
	// Delete lists topics whose messages must be cut away (the writer
	// records the watermark, the queue owners drop their queues); report
	// the end of each with Deleted.
	Delete []string
}

// NewTopics returns an empty table; defaultQueues is the queue count given
// to a topic found only as queues on disk.
func NewTopics(defaultQueues int32) *Topics {
	return &Topics{table: storage.TopicTable{Topics: map[string]storage.TopicConfig{}}, defaultQueues: defaultQueues,
		deleting: map[string]*deletion{}}
}

// SetRole tells the core whether the broker is a slave.
func (t *Topics) SetRole(slave bool) { t.slave = slave }

// Load starts from the table read from topics.json (empty if there was
// none or it was unreadable). Queues on disk whose topic is missing still
// get a topic with queues enough for all of them (at least defaultQueues),
// so their messages stay reachable; internal topics (named with a leading
// %) do not.
func (t *Topics) Load(table storage.TopicTable, queues []storage.QueueKey) {
	t.table = table
	if t.table.Topics == nil {
		t.table.Topics = map[string]storage.TopicConfig{}
	}
	t.adopt(queues)
	t.publish()
}

// Adopt adds the topics the log's queues name that the table lacks, as
// Load does, and saves the table if it grew: a slave made master holds the
// messages of a topic its old master created after the last metadata sync,
// and must serve (and register) it.
func (t *Topics) Adopt(queues []storage.QueueKey) {
	if t.adopt(queues) {
		t.change()
	}
}

func (t *Topics) adopt(queues []storage.QueueKey) bool {
	lost := map[string]int32{} // topic -> queues it needs
	for _, k := range queues {
		if _, ok := t.table.Topics[k.Topic]; !ok && !strings.HasPrefix(k.Topic, "%") {
			lost[k.Topic] = max(lost[k.Topic], t.defaultQueues, k.QueueID+1)
		}
	}
	for topic, n := range lost {
		t.table.Topics[topic] = storage.TopicConfig{TopicName: topic, ReadQueueNums: n, WriteQueueNums: n, Perm: storage.PermRead | storage.PermWrite}
	}
	return len(lost) > 0
}

// Ensure adds a topic a send created (the writer has already published it)
// and reports whether it was new.
func (t *Topics) Ensure(c storage.TopicConfig) bool {
	if _, ok := t.table.Topics[c.TopicName]; ok {
		return false
	}
	t.table.Topics[c.TopicName] = c
	t.change()
	return true
}

// Import takes the master's topic table (JSON of the topic map) as it is.
func (t *Topics) Import(data []byte) error {
	var topics map[string]storage.TopicConfig
	if err := json.Unmarshal(data, &topics); err != nil {
		return fmt.Errorf("topics from the master: %w", err)
	}
	if !maps.Equal(topics, t.table.Topics) {
		if topics == nil {
			topics = map[string]storage.TopicConfig{}
		}
		t.table.Topics = topics
		t.change()
	}
	return nil
}

// Handle takes a topic admin request: CREATE_TOPIC, UPDATE_TOPIC,
// DELETE_TOPIC or LIST_TOPICS.
func (t *Topics) Handle(tok any, req protocol.Request) {
	if _, list := req.(*protocol.ListTopicsRequest); t.slave && !list {
		t.reply(tok, protocol.StatusNotMaster, "topics are managed on the master; this broker is a slave", nil)
		return
	}
	switch req := req.(type) {
	case *protocol.CreateTopicRequest:
		if !t.deferred(tok, req, req.Topic) {
			t.put(tok, req.TopicConfig, true)
		}
	case *protocol.UpdateTopicRequest:
		if !t.deferred(tok, req, req.Topic) {
			t.put(tok, req.TopicConfig, false)
		}
	case *protocol.DeleteTopicRequest:
		t.delete(tok, req.Topic)
	case *protocol.ListTopicsRequest:
		t.reply(tok, protocol.StatusOK, "", t.list())
	default:
		t.reply(tok, protocol.StatusRequestCodeNotSupported, fmt.Sprintf("%T is not a topic request", req), nil)
	}
}

// delete takes the topic out of the table at once (sends no longer find
// it) and asks for its messages to be cut away; the answer waits for that
// and for the table's write.
func (t *Topics) delete(tok any, topic string) {
	c, ok := t.table.Topics[topic]
	if !ok {
		t.reply(tok, protocol.StatusTopicNotExist, fmt.Sprintf("topic %q does not exist", topic), nil)
		return
	}
	delete(t.table.Topics, topic)
	t.deleting[topic] = &deletion{tok: tok, cfg: c}
	t.publish()
	t.rd.Delete = append(t.rd.Delete, topic)
}

// deferred holds a creation or update of a topic being deleted until the
// deletion is done.
func (t *Topics) deferred(tok any, req protocol.Request, topic string) bool {
	d := t.deleting[topic]
	if d != nil {
		d.after = append(d.after, pendingReq{tok, req})
	}
	return d != nil
}

// Deleted reports that the messages of topic were cut away (err: they
// could not be, and the topic is back as it was). The DELETE_TOPIC is
// answered once the table without the topic is written; the requests held
// meanwhile are handled now. A report of a deletion this core did not ask
// for (a slave follows its master's) changes nothing.
func (t *Topics) Deleted(topic string, err error) {
	d := t.deleting[topic]
	if d == nil {
		return
	}
	delete(t.deleting, topic)
	if err != nil {
		if _, ok := t.table.Topics[topic]; !ok {
			t.table.Topics[topic] = d.cfg
			t.publish()
		}
		t.reply(d.tok, protocol.StatusSystemError, fmt.Sprintf("topic %q not deleted: %v", topic, err), nil)
	} else {
		t.changeAndAnswer(d.tok)
	}
	for _, p := range d.after {
		t.Handle(p.tok, p.req)
	}
}

func (t *Topics) put(tok any, c protocol.TopicConfig, create bool) {
	if c.Perm == 0 {
		c.Perm = storage.PermRead | storage.PermWrite
	}
	if err := ValidTopicConfig(c); err != nil {
		t.reply(tok, protocol.StatusInvalidParameter, err.Error(), nil)
		return
	}
	if _, ok := t.table.Topics[c.Topic]; ok && create {
		t.reply(tok, protocol.StatusTopicExistAlready, fmt.Sprintf("topic %q exists", c.Topic), nil)
		return
	}
	t.table.Topics[c.Topic] = storage.TopicConfig{TopicName: c.Topic, ReadQueueNums: c.ReadQueueNums, WriteQueueNums: c.WriteQueueNums, Perm: c.Perm}
	t.changeAndAnswer(tok)
}

func (t *Topics) list() *protocol.TopicListResponse {
	resp := &protocol.TopicListResponse{}
	for _, c := range t.table.Topics {
		resp.Topics = append(resp.Topics, protocol.TopicConfig{Topic: c.TopicName, ReadQueueNums: c.ReadQueueNums, WriteQueueNums: c.WriteQueueNums, Perm: c.Perm})
	}
	sort.Slice(resp.Topics, func(i, j int) bool { return resp.Topics[i].Topic < resp.Topics[j].Topic })
	return resp
}

// ValidTopicConfig checks a topic configuration from a client.
func ValidTopicConfig(c protocol.TopicConfig) error {
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

// changeAndAnswer is change for an admin request, answered once the
// write's outcome is known.
func (t *Topics) changeAndAnswer(tok any) {
	t.change()
	t.waiting = append(t.waiting, tok)
}

// change publishes the changed table and asks for it to be written. The
// table stays changed (and published) even if the write fails: a failed
// write leaves the file as it was, and the next change writes it all.
func (t *Topics) change() {
	t.table.DataVersion++
	t.publish()
	save := storage.TopicTable{Topics: maps.Clone(t.table.Topics), DataVersion: t.table.DataVersion}
	t.rd.Save = &save
}

func (t *Topics) publish() { t.rd.Publish = maps.Clone(t.table.Topics) }

// Persisted reports the outcome of the write Ready handed out last.
func (t *Topics) Persisted(err error) {
	for _, tok := range t.writing {
		if err != nil {
			t.reply(tok, protocol.StatusSystemError, err.Error(), nil)
		} else {
			t.reply(tok, protocol.StatusOK, "", nil)
		}
	}
	t.writing = nil
}

func (t *Topics) reply(tok any, st protocol.Status, remark string, f protocol.Fields) {
	t.rd.Replies = append(t.rd.Replies, Reply{To: tok, Status: st, Remark: remark, Fields: f})
}

// Ready returns the outputs collected since the last call.
func (t *Topics) Ready() TopicsReady {
	rd := t.rd
	t.rd = TopicsReady{}
	if rd.Save != nil {
		t.writing = append(t.writing, t.waiting...)
		t.waiting = nil
	}
	return rd
}
