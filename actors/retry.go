package actors

import (
	"bytes"
	"fmt"

	"github.com/wharfmq/wharf/actors/delay"
	"github.com/wharfmq/wharf/protocol"
)

// sendBack turns CONSUMER_SEND_MSG_BACK into a send of the original message
// to where delay.Decide says: the group's retry topic with a delay, or its
// dead-letter topic.
func (b *Broker) sendBack(r *request, m *protocol.ConsumerSendMsgBackRequest) *sendItem {
	if err := delay.CheckGroup(m.Group); err != nil {
		b.respond(r, protocol.StatusInvalidParameter, err.Error(), nil)
		return nil
	}
	rec, err := b.store.CommitLog().ReadRecord(m.CommitLogOffset, 0, true)
	if err != nil {
		b.respond(r, protocol.StatusQueryNotFound, fmt.Sprintf("no message at commit log offset %d: %v", m.CommitLogOffset, err), nil)
		return nil
	}
	ext := recordToExt(&rec)
	d := delay.Decide(delay.SendBack{Group: m.Group, ReconsumeTimes: rec.ReconsumeTimes, DelayLevel: m.DelayLevel,
		MaxReconsumeTimes: m.MaxReconsumeTimes}, b.cfg.MaxReconsumeTimes, len(b.cfg.DelayLevels))
	if d.DeadLetter {
		b.log.Info("message to the dead-letter topic", "group", m.Group, "msgId", ext.MsgID, "reconsumeTimes", rec.ReconsumeTimes)
	}
	props := delay.RetryProperties(ext.Properties, ext.Topic, ext.MsgID, d)
	msg := protocol.Message{Topic: d.Topic, Flag: rec.Flag, Body: bytes.Clone(rec.Body), Properties: props}
	return &sendItem{request: r, topic: d.Topic, queueID: 0, bornTs: rec.BornTimestamp, msgs: []protocol.Message{msg},
		sendBack: true, reconsume: d.Reconsume}
}
