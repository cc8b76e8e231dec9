package dispatch

import (
	"fmt"
	"strings"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

// Topics is what the broker knows of its topics, to check a read of one
// queue (PULL_MESSAGE, GET_MIN_OFFSET, GET_MAX_OFFSET) before it is routed.
type Topics struct {
	// Table is the published topic table.
	Table map[string]storage.TopicConfig
	// OnDisk returns how many queues of a topic have entries here (highest
	// queue id + 1): a slave before its first metadata sync knows its
	// topics only from the log.
	OnDisk func(topic string) int32
}

// Read says whether a read of (topic, queueID) may proceed: StatusOK, or
// the status and remark to answer at once. pull asks for the topic's read
// permission and a read queue; an offset query needs neither, only a queue
// the topic has (read or write).
//
// A topic outside the table is known if it is a group's retry or
// dead-letter topic (they are created on their first message, and their
// group pulls them before that; one queue), or if the log has entries of
// it. Anything else is TOPIC_NOT_EXIST, whether or not the broker
// auto-creates topics: only a send creates one.
func (t Topics) Read(topic string, queueID int32, pull bool) (protocol.Status, string) {
	queues, perm, known := t.lookup(topic, pull)
	if !known {
		return protocol.StatusTopicNotExist, fmt.Sprintf("topic %q does not exist", topic)
	}
	if pull && perm&storage.PermRead == 0 {
		return protocol.StatusNoPermission, fmt.Sprintf("topic %q is not readable (perm %d)", topic, perm)
	}
	if queueID < 0 || queueID >= queues {
		return protocol.StatusInvalidParameter, fmt.Sprintf("queue %d out of range: topic %q has %d queues", queueID, topic, queues)
	}
	return protocol.StatusOK, ""
}

// lookup returns the queues a read may name and the topic's permission.
func (t Topics) lookup(topic string, pull bool) (queues, perm int32, known bool) {
	onDisk := func() int32 {
		if t.OnDisk == nil {
			return 0
		}
		return t.OnDisk(topic)
	}
	if tc, ok := t.Table[topic]; ok {
		if pull {
			return tc.ReadQueueNums, tc.Perm, true
		}
		return max(tc.ReadQueueNums, tc.WriteQueueNums, onDisk()), tc.Perm, true
	}
	rw := int32(storage.PermRead | storage.PermWrite)
	if strings.HasPrefix(topic, protocol.RetryTopicPrefix) || strings.HasPrefix(topic, protocol.DLQTopicPrefix) {
		return max(1, onDisk()), rw, true
	}
	if n := onDisk(); n > 0 {
		return n, rw, true
	}
	return 0, 0, false
}
