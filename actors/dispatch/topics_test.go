package dispatch

import (
	"testing"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

func TestTopicsRead(t *testing.T) {
	tc := func(name string, read, write, perm int32) storage.TopicConfig {
		return storage.TopicConfig{TopicName: name, ReadQueueNums: read, WriteQueueNums: write, Perm: perm}
	}
	topics := Topics{
		Table: map[string]storage.TopicConfig{
			"rw":        tc("rw", 4, 4, 6),
			"writeonly": tc("writeonly", 4, 4, 2),
			"inherit":   tc("inherit", 4, 4, 1),
			"readonly":  tc("readonly", 4, 4, 4),
			"narrow":    tc("narrow", 2, 8, 6), // write queues beyond the read ones
			"%RETRY%g2": tc("%RETRY%g2", 3, 3, 6),
		},
		OnDisk: func(topic string) int32 {
			return map[string]int32{"fromlog": 3, "%RETRY%big": 2, storage.ScheduleTopic: 18, "narrow": 5}[topic]
		},
	}
	const (
		ok      = protocol.StatusOK
		noTopic = protocol.StatusTopicNotExist
		badQ    = protocol.StatusInvalidParameter
		noPerm  = protocol.StatusNoPermission
	)
	tests := []struct {
		topic     string
		queue     int32
		pull, off protocol.Status // for a pull, for an offset query
	}{
		{"rw", 0, ok, ok},
		{"rw", 3, ok, ok},
		{"rw", 4, badQ, badQ},
		{"rw", -1, badQ, badQ},
		{"nope", 0, noTopic, noTopic},
		{"writeonly", 0, noPerm, ok},
		{"inherit", 0, noPerm, ok},
		{"readonly", 0, ok, ok},
		{"writeonly", 9, noPerm, badQ}, // permission first, as RocketMQ
		{"narrow", 1, ok, ok},
		{"narrow", 2, badQ, ok}, // a write queue nobody reads: offsets only
		{"narrow", 7, badQ, ok},
		{"narrow", 8, badQ, badQ},
		// Retry and dead-letter topics exist before their first message.
		{"%RETRY%g", 0, ok, ok},
		{"%RETRY%g", 1, badQ, badQ},
		{"%DLQ%g", 0, ok, ok},
		{"%RETRY%big", 1, ok, ok},
		{"%RETRY%g2", 2, ok, ok}, // the table decides when it has the topic
		// Topics the log has (a slave before its metadata sync; the
		// scheduler's own topic).
		{"fromlog", 2, ok, ok},
		{"fromlog", 3, badQ, badQ},
		{storage.ScheduleTopic, 17, ok, ok},
		{storage.ScheduleTopic, 18, badQ, badQ},
		{"%OTHER%x", 0, noTopic, noTopic},
	}
	for _, tt := range tests {
		if st, remark := topics.Read(tt.topic, tt.queue, true); st != tt.pull {
			t.Errorf("pull %s-%d: %v (%s), want %v", tt.topic, tt.queue, st, remark, tt.pull)
		}
		if st, remark := topics.Read(tt.topic, tt.queue, false); st != tt.off {
			t.Errorf("offset of %s-%d: %v (%s), want %v", tt.topic, tt.queue, st, remark, tt.off)
		}
	}
	if st, _ := (Topics{}).Read("%RETRY%g", 0, true); st != ok {
		t.Errorf("retry topic without an OnDisk view: %v", st)
	}
}
