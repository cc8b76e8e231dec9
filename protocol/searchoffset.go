package protocol

// SEARCH_OFFSET_BY_TIMESTAMP: the remoting listener's (RocketMQ's
// CONSUME_FROM_TIMESTAMP), left out of the code names as the requests of
// clientgroups.go are.
const CodeSearchOffsetByTimestamp Code = 29

// SearchOffsetRequest asks for the first offset of a queue whose message
// was stored at or after Timestamp (Unix ms); the queue's max offset if
// none was. Answered with an OffsetResponse.
type SearchOffsetRequest struct {
	Topic     string `msgpack:"topic"`
	QueueID   int32  `msgpack:"queueId"`
	Timestamp int64  `msgpack:"timestamp"`
}

func (r *SearchOffsetRequest) RequestCode() Code { return CodeSearchOffsetByTimestamp }
func (*SearchOffsetRequest) isFields()           {}
