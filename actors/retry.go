package actors

import (
	"bytes"
	"fmt"
	"maps"
	"strconv"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

// sendBack turns CONSUMER_SEND_MSG_BACK into a send of the original message
// to the group's retry topic with a delay (3 + its reconsume count unless
// the consumer chose one), or to its dead-letter topic once it was consumed
// maxReconsumeTimes times (or the consumer asks for it with delay -1).
func (b *Broker) sendBack(r *request, m *protocol.ConsumerSendMsgBackRequest) *sendItem {
	if m.Group == "" || protocol.ValidateTopic(protocol.RetryTopic(m.Group)) != nil {
		b.respond(r, protocol.StatusInvalidParameter, fmt.Sprintf("consumer group %q is not a valid group name", m.Group), nil)
		return nil
	}
	rec, err := b.store.CommitLog().ReadRecord(m.CommitLogOffset, 0, true)
	if err != nil {
		b.respond(r, protocol.StatusQueryNotFound, fmt.Sprintf("no message at commit log offset %d: %v", m.CommitLogOffset, err), nil)
		return nil
	}
	ext := recordToExt(&rec)
	props := maps.Clone(ext.Properties)
	if props == nil {
		props = map[string]string{}
	}
	if props[protocol.PropertyRetryTopic] == "" {
		props[protocol.PropertyRetryTopic] = ext.Topic
	}
	if props[protocol.PropertyOriginMessageID] == "" {
		props[protocol.PropertyOriginMessageID] = ext.MsgID
	}
	for _, k := range []string{protocol.PropertyDelay, protocol.PropertyTimerDeliverMs, protocol.PropertyRealTopic, protocol.PropertyRealQueueID, storage.PropDeliverMs} {
		delete(props, k)
	}
	reconsume := rec.ReconsumeTimes + 1
	maxTimes := m.MaxReconsumeTimes
	if maxTimes <= 0 {
		maxTimes = b.cfg.MaxReconsumeTimes
	}
	topic := protocol.RetryTopic(m.Group)
	level := m.DelayLevel
	switch {
	case level < 0 || reconsume > maxTimes:
		topic = protocol.DLQTopic(m.Group)
		level = 0
		b.log.Info("message to the dead-letter topic", "group", m.Group, "msgId", ext.MsgID, "reconsumeTimes", rec.ReconsumeTimes)
	case level == 0:
		level = 3 + rec.ReconsumeTimes
	}
	level = min(level, int32(len(b.cfg.DelayLevels)))
	if level > 0 {
		props[protocol.PropertyDelay] = strconv.Itoa(int(level))
	}
	props[protocol.PropertyReconsumeTime] = strconv.Itoa(int(reconsume))
	props[protocol.PropertyMaxReconsumeTimes] = strconv.Itoa(int(maxTimes))
	msg := protocol.Message{Topic: topic, Flag: rec.Flag, Body: bytes.Clone(rec.Body), Properties: props}
	return &sendItem{request: r, topic: topic, queueID: 0, bornTs: rec.BornTimestamp, msgs: []protocol.Message{msg},
		sendBack: true, reconsume: reconsume}
}
