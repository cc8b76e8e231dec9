package delay

import (
	"fmt"
	"maps"
	"strconv"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

// waitProperties are the properties that say a message waits in the
// schedule topic: a re-stored or retried copy must not carry them, or it
// would wait again.
var waitProperties = []string{protocol.PropertyRealTopic, protocol.PropertyRealQueueID, protocol.PropertyDelay,
	protocol.PropertyTimerDeliverMs, storage.PropDeliverMs}

// Unwrap is where a due delayed message goes and the properties it is
// re-stored with: its REAL_TOPIC and REAL_QID (0 if unreadable), and its
// properties without those that made it wait. ok is false if it names no
// topic. props is not modified.
func Unwrap(props map[string]string) (topic string, queueID int32, out map[string]string, ok bool) {
	out = maps.Clone(props)
	topic = out[protocol.PropertyRealTopic]
	qid, _ := strconv.Atoi(out[protocol.PropertyRealQueueID])
	for _, k := range waitProperties {
		delete(out, k)
	}
	return topic, int32(qid), out, topic != ""
}

// CheckGroup checks the group of a CONSUMER_SEND_MSG_BACK: it must name a
// valid retry topic.
func CheckGroup(group string) error {
	if group == "" || protocol.ValidateTopic(protocol.RetryTopic(group)) != nil {
		return fmt.Errorf("consumer group %q is not a valid group name", group)
	}
	return nil
}

// SendBack is a message given back by a consumer.
type SendBack struct {
	Group string
	// ReconsumeTimes is the stored message's reconsume count.
	ReconsumeTimes int32
	// DelayLevel is as asked: 0 means 3 + ReconsumeTimes, -1 the
	// dead-letter topic at once.
	DelayLevel int32
	// MaxReconsumeTimes is as asked: 0 (or less) means the broker's default.
	MaxReconsumeTimes int32
}

// Retry is where a message given back goes.
type Retry struct {
	Topic      string // the group's retry or dead-letter topic
	DeadLetter bool
	Level      int32 // delay level (1-based); 0 stores it at once
	Reconsume  int32 // its reconsume count once re-stored
	MaxTimes   int32 // the maximum in force
}

// Decide sends a message given back to the group's retry topic with a delay
// (3 + its reconsume count unless the consumer chose one, capped at the
// last of levels delay levels), or to its dead-letter topic once it was
// consumed more than its maximum times or the consumer asks for it with
// delay -1, as RocketMQ does.
func Decide(m SendBack, defaultMax int32, levels int) Retry {
	r := Retry{Topic: protocol.RetryTopic(m.Group), Level: m.DelayLevel, Reconsume: m.ReconsumeTimes + 1, MaxTimes: m.MaxReconsumeTimes}
	if r.MaxTimes <= 0 {
		r.MaxTimes = defaultMax
	}
	switch {
	case r.Level < 0 || r.Reconsume > r.MaxTimes:
		r.Topic, r.DeadLetter, r.Level = protocol.DLQTopic(m.Group), true, 0
	case r.Level == 0:
		r.Level = 3 + m.ReconsumeTimes
	}
	r.Level = min(r.Level, int32(levels))
	return r
}

// RetryProperties are the properties of the copy a Retry stores: those of
// the original (from topic, with message id msgID) without the ones that
// made it wait, where it first came from, and the delay and counts of r.
// props is not modified.
func RetryProperties(props map[string]string, topic, msgID string, r Retry) map[string]string {
	out := maps.Clone(props)
	if out == nil {
		out = map[string]string{}
	}
	if out[protocol.PropertyRetryTopic] == "" {
		out[protocol.PropertyRetryTopic] = topic
	}
	if out[protocol.PropertyOriginMessageID] == "" {
		out[protocol.PropertyOriginMessageID] = msgID
	}
	for _, k := range waitProperties {
		delete(out, k)
	}
	if r.Level > 0 {
		out[protocol.PropertyDelay] = strconv.Itoa(int(r.Level))
	}
	out[protocol.PropertyReconsumeTime] = strconv.Itoa(int(r.Reconsume))
	out[protocol.PropertyMaxReconsumeTimes] = strconv.Itoa(int(r.MaxTimes))
	return out
}
