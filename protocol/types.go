package protocol

import (
	"fmt"
	"reflect"

	"github.com/vmihailenco/msgpack/v5"
)

// ---- SEND_MESSAGE (10) ----

// SendRequest sends one message. Its body travels as the frame body.
type SendRequest struct {
	ProducerGroup string            `msgpack:"producerGroup"`
	Topic         string            `msgpack:"topic"`
	QueueID       int32             `msgpack:"queueId"` // -1: the broker picks a queue
	Flag          int32             `msgpack:"flag"`
	BornTimestamp int64             `msgpack:"bornTimestamp"` // producer's clock, Unix ms
	Properties    map[string]string `msgpack:"properties,omitempty"`
	Body          []byte            `msgpack:"-"` // the frame body
	// RawProperties: see Message.RawProperties.
	RawProperties []byte `msgpack:"-"`
}

// Message returns the message the request carries (sharing Body and Properties).
func (r *SendRequest) Message() Message {
	return Message{Topic: r.Topic, Flag: r.Flag, Body: r.Body, Properties: r.Properties, RawProperties: r.RawProperties}
}

func (r *SendRequest) appendBody(b []byte) ([]byte, error) { return append(b, r.Body...), nil }
func (r *SendRequest) decodeBody(body []byte, lim Limits) error {
	if len(body) > lim.MaxMessageSize {
		return fmt.Errorf("%w: body is %d bytes, limit %d", ErrMessageIllegal, len(body), lim.MaxMessageSize)
	}
	r.Body = body
	return nil
}

// SendResponse answers SEND_MESSAGE. The frame status says whether and how
// durably the message was stored (see Status.Stored).
type SendResponse struct {
	MsgID       string `msgpack:"msgId"` // offset message id
	QueueID     int32  `msgpack:"queueId"`
	QueueOffset int64  `msgpack:"queueOffset"`
}

// ---- SEND_BATCH_MESSAGE (320) ----

// SendBatchRequest sends several messages to one queue of one topic. The
// broker stores them together, at consecutive queue offsets. The messages
// travel in the frame body as a msgpack array of Message maps; a message's
// topic must be empty (it inherits Topic) or equal to Topic.
type SendBatchRequest struct {
	ProducerGroup string    `msgpack:"producerGroup"`
	Topic         string    `msgpack:"topic"`
	QueueID       int32     `msgpack:"queueId"` // -1: the broker picks a queue
	BornTimestamp int64     `msgpack:"bornTimestamp"`
	Messages      []Message `msgpack:"-"` // the frame body
}

func (r *SendBatchRequest) appendBody(b []byte) ([]byte, error) {
	return appendMessageList(b, r.Messages), nil
}

func (r *SendBatchRequest) decodeBody(body []byte, lim Limits) error {
	msgs, err := decodeMessageList(body, lim)
	if err != nil {
		return err
	}
	if len(msgs) == 0 {
		return fmt.Errorf("%w: empty batch", ErrMessageIllegal)
	}
	for i := range msgs {
		switch msgs[i].Topic {
		case "":
			msgs[i].Topic = r.Topic
		case r.Topic:
		default:
			return fmt.Errorf("%w: message %d has topic %q in a batch for %q", ErrMessageIllegal, i, msgs[i].Topic, r.Topic)
		}
	}
	r.Messages = msgs
	return nil
}

// SendBatchResponse answers SEND_BATCH_MESSAGE. Message i of the batch got
// queue offset QueueOffset+i and message id MsgIDs[i]. The frame status
// applies to the whole batch.
type SendBatchResponse struct {
	QueueID     int32    `msgpack:"queueId"`
	QueueOffset int64    `msgpack:"queueOffset"` // of the first message
	MsgIDs      []string `msgpack:"msgIds"`
}

// ---- PULL_MESSAGE (11) ----

// PullRequest reads messages of one queue from an offset, optionally
// waiting (long polling) until a message arrives.
type PullRequest struct {
	ConsumerGroup string `msgpack:"consumerGroup"`
	Topic         string `msgpack:"topic"`
	QueueID       int32  `msgpack:"queueId"`
	QueueOffset   int64  `msgpack:"queueOffset"` // first queue offset wanted
	MaxMsgNums    int32  `msgpack:"maxMsgNums"`  // at most this many messages
	// Subscription is a tag expression ("*", "a || b"); empty means "*".
	Subscription string `msgpack:"subscription,omitempty"`
	// SuspendTimeoutMillis > 0 allows the broker to hold the request up to
	// that long when no message is available (long polling).
	SuspendTimeoutMillis int64 `msgpack:"suspendTimeoutMillis,omitempty"`
	// CommitOffset, if set, commits the group's offset for this queue.
	CommitOffset *int64 `msgpack:"commitOffset,omitempty"`
	// MaxMsgBytes > 0 caps the total body bytes returned.
	MaxMsgBytes int32 `msgpack:"maxMsgBytes,omitempty"`
}

// PullResponse answers PULL_MESSAGE; see PullStatusOf for the frame status.
// The messages travel in the frame body as a msgpack array of MessageExt maps.
// Decoded, a message's properties stay encoded (Message.RawProperties: read
// them with Property and the other accessors, PropertyMap turns them into
// Properties), and its Body and RawProperties alias the frame's body: the
// frame's buffer must not be reused while the messages are in use.
type PullResponse struct {
	NextBeginOffset      int64        `msgpack:"nextBeginOffset"`
	MinOffset            int64        `msgpack:"minOffset"`
	MaxOffset            int64        `msgpack:"maxOffset"`
	SuggestWhichBrokerID int64        `msgpack:"suggestWhichBrokerId"`
	Messages             []MessageExt `msgpack:"-"` // the frame body
}

func (r *PullResponse) appendBody(b []byte) ([]byte, error) {
	if len(r.Messages) == 0 {
		return b, nil
	}
	return appendMessageExtList(b, r.Messages), nil
}

func (r *PullResponse) decodeBody(body []byte, lim Limits) (err error) {
	r.Messages, err = decodePullMessages(body, lim)
	return err
}

// ---- QUERY_MESSAGE (12) ----

// QueryMessageRequest finds messages by key (the KEYS or UNIQ_KEY property)
// stored in [BeginTimestamp, EndTimestamp] (store time, Unix ms).
type QueryMessageRequest struct {
	Topic          string `msgpack:"topic"`
	Key            string `msgpack:"key"`
	MaxNum         int32  `msgpack:"maxNum"`
	BeginTimestamp int64  `msgpack:"beginTimestamp"`
	EndTimestamp   int64  `msgpack:"endTimestamp"`
}

// QueryMessageResponse answers QUERY_MESSAGE (status SUCCESS or
// QUERY_NOT_FOUND). The messages travel in the frame body as a msgpack
// array of MessageExt maps.
type QueryMessageResponse struct {
	IndexLastUpdateTimestamp int64        `msgpack:"indexLastUpdateTimestamp"`
	IndexLastUpdatePhyoffset int64        `msgpack:"indexLastUpdatePhyoffset"`
	Messages                 []MessageExt `msgpack:"-"` // the frame body
}

func (r *QueryMessageResponse) appendBody(b []byte) ([]byte, error) {
	if len(r.Messages) == 0 {
		return b, nil
	}
	return appendMessageExtList(b, r.Messages), nil
}

func (r *QueryMessageResponse) decodeBody(body []byte, lim Limits) (err error) {
	r.Messages, err = decodeMessageExtList(body, lim, false)
	return err
}

// ---- VIEW_MESSAGE_BY_ID (33) ----

// ViewMessageRequest reads one message by its offset message id.
type ViewMessageRequest struct {
	MsgID string `msgpack:"msgId"`
}

// ViewMessageResponse answers VIEW_MESSAGE_BY_ID (status SUCCESS or
// QUERY_NOT_FOUND). The message travels in the frame body as one MessageExt map.
type ViewMessageResponse struct {
	Message MessageExt `msgpack:"-"` // the frame body
}

func (r *ViewMessageResponse) appendBody(b []byte) ([]byte, error) {
	return r.Message.AppendMsgpack(b), nil
}

func (r *ViewMessageResponse) decodeBody(body []byte, lim Limits) (err error) {
	if len(body) == 0 {
		return nil
	}
	r.Message, err = DecodeMessageExt(body, lim)
	return err
}

// ---- GET_MAX_OFFSET (30), GET_MIN_OFFSET (31) ----

// GetMaxOffsetRequest asks for a queue's max offset: the offset the next
// message will get (so a queue holds [min, max)).
type GetMaxOffsetRequest struct {
	Topic   string `msgpack:"topic"`
	QueueID int32  `msgpack:"queueId"`
}

// GetMinOffsetRequest asks for a queue's min offset: the oldest offset still stored.
type GetMinOffsetRequest struct {
	Topic   string `msgpack:"topic"`
	QueueID int32  `msgpack:"queueId"`
}

// OffsetResponse answers GET_MAX_OFFSET, GET_MIN_OFFSET and QUERY_CONSUMER_OFFSET.
type OffsetResponse struct {
	Offset int64 `msgpack:"offset"`
}

// ---- consumer offsets: QUERY (14), UPDATE (15), GET_CONSUMER_OFFSETS (4002) ----

// QueryConsumerOffsetRequest asks for a group's committed offset of one
// queue. Status QUERY_NOT_FOUND if none is stored.
type QueryConsumerOffsetRequest struct {
	ConsumerGroup string `msgpack:"consumerGroup"`
	Topic         string `msgpack:"topic"`
	QueueID       int32  `msgpack:"queueId"`
}

// UpdateConsumerOffsetRequest commits a group's offset of one queue (the
// next offset to consume). Often sent oneway. The response has no fields.
type UpdateConsumerOffsetRequest struct {
	ConsumerGroup string `msgpack:"consumerGroup"`
	Topic         string `msgpack:"topic"`
	QueueID       int32  `msgpack:"queueId"`
	CommitOffset  int64  `msgpack:"commitOffset"`
}

// GetConsumerOffsetsRequest lists a group's committed offsets, for one topic
// or (Topic empty) every topic the group has offsets for.
type GetConsumerOffsetsRequest struct {
	ConsumerGroup string `msgpack:"consumerGroup"`
	Topic         string `msgpack:"topic,omitempty"`
}

// ConsumerQueueOffset is one queue's consumer offset and bounds.
type ConsumerQueueOffset struct {
	Topic          string `msgpack:"topic"`
	QueueID        int32  `msgpack:"queueId"`
	ConsumerOffset int64  `msgpack:"consumerOffset"` // committed (queues without a commit are not listed)
	MinOffset      int64  `msgpack:"minOffset"`
	MaxOffset      int64  `msgpack:"maxOffset"` // lag = MaxOffset - ConsumerOffset
}

// ConsumerOffsetsResponse answers GET_CONSUMER_OFFSETS. The list travels in
// the frame body as a msgpack array of ConsumerQueueOffset maps.
type ConsumerOffsetsResponse struct {
	Offsets []ConsumerQueueOffset `msgpack:"-"` // the frame body
}

func (r *ConsumerOffsetsResponse) appendBody(b []byte) ([]byte, error) {
	return appendList(b, r.Offsets)
}

func (r *ConsumerOffsetsResponse) decodeBody(body []byte, lim Limits) (err error) {
	r.Offsets, err = decodeStructList[ConsumerQueueOffset](body, lim, "offsets")
	return err
}

// ---- topics: CREATE_TOPIC (4001), UPDATE_AND_CREATE_TOPIC (17), DELETE (215), LIST (21) ----

// Topic permission bits (RocketMQ's PermName).
const (
	PermInherit int32 = 1
	PermWrite   int32 = 2
	PermRead    int32 = 4
)

// TopicConfig is a topic's configuration on one broker.
type TopicConfig struct {
	Topic          string `msgpack:"topic"`
	ReadQueueNums  int32  `msgpack:"readQueueNums"`
	WriteQueueNums int32  `msgpack:"writeQueueNums"`
	Perm           int32  `msgpack:"perm"` // PermRead|PermWrite = 6
}

// CreateTopicRequest creates a topic; status TOPIC_EXIST_ALREADY if it exists.
// The response has no fields.
type CreateTopicRequest struct {
	TopicConfig `msgpack:",inline"`
}

// UpdateTopicRequest creates a topic or replaces its configuration. The
// response has no fields.
type UpdateTopicRequest struct {
	TopicConfig `msgpack:",inline"`
}

// DeleteTopicRequest deletes a topic; status TOPIC_NOT_EXIST if absent. The
// response has no fields.
type DeleteTopicRequest struct {
	Topic string `msgpack:"topic"`
}

// ListTopicsRequest lists every topic of the broker.
type ListTopicsRequest struct{}

// TopicListResponse answers GET_ALL_TOPIC_CONFIG. The list travels in the
// frame body as a msgpack array of TopicConfig maps.
type TopicListResponse struct {
	Topics []TopicConfig `msgpack:"-"` // the frame body
}

func (r *TopicListResponse) appendBody(b []byte) ([]byte, error) { return appendList(b, r.Topics) }
func (r *TopicListResponse) decodeBody(body []byte, lim Limits) (err error) {
	r.Topics, err = decodeStructList[TopicConfig](body, lim, "topics")
	return err
}

// ---- GET_BROKER_RUNTIME_INFO (28) ----

// GetBrokerRuntimeInfoRequest asks for the broker's statistics.
type GetBrokerRuntimeInfoRequest struct{}

// BrokerRuntimeInfo answers GET_BROKER_RUNTIME_INFO.
type BrokerRuntimeInfo struct {
	BrokerName         string  `msgpack:"brokerName"`
	BrokerID           int64   `msgpack:"brokerId"`
	BrokerRole         string  `msgpack:"brokerRole"` // ASYNC_MASTER, SYNC_MASTER, SLAVE
	Version            string  `msgpack:"version"`
	BootTimestamp      int64   `msgpack:"bootTimestamp"` // Unix ms
	CommitLogMinOffset int64   `msgpack:"commitLogMinOffset"`
	CommitLogMaxOffset int64   `msgpack:"commitLogMaxOffset"`
	FlushedOffset      int64   `msgpack:"flushedOffset"`    // CommitLog bytes known durable
	ReplicatedOffset   int64   `msgpack:"replicatedOffset"` // CommitLog bytes acked by a slave
	MsgPutTotal        int64   `msgpack:"msgPutTotal"`
	MsgGetTotal        int64   `msgpack:"msgGetTotal"`
	BytesPutTotal      int64   `msgpack:"bytesPutTotal"`
	TopicCount         int32   `msgpack:"topicCount"`
	ConnectionCount    int32   `msgpack:"connectionCount"`
	DiskUsedRatio      float64 `msgpack:"diskUsedRatio"` // 0..1
	// Extra holds any other statistic, stringified.
	Extra map[string]string `msgpack:"extra,omitempty"`
	// Slaves (on a master) are the connected slaves.
	Slaves []SlaveInfo `msgpack:"slaves,omitempty"`
	// HAStatus (on a slave) describes its replication link.
	HAStatus string `msgpack:"haStatus,omitempty"`
	// MasterMaxOffset (on a slave) is the master's log end it last heard of.
	MasterMaxOffset int64 `msgpack:"masterMaxOffset,omitempty"`
}

// SlaveInfo is one slave as its master sees it.
type SlaveInfo struct {
	Address     string `msgpack:"address"`
	BrokerID    int64  `msgpack:"brokerId"`
	AckedOffset int64  `msgpack:"ackedOffset"` // every byte below is on the slave
	// FlushedOffset: every byte below is fsynced on the slave (its
	// HA_REPORT's flushedOffset; <= AckedOffset).
	FlushedOffset int64 `msgpack:"flushedOffset"`
	LagBytes      int64 `msgpack:"lagBytes"`
	InSync        bool  `msgpack:"inSync"` // lag within haMaxGapNotInSync
}

// ---- HEART_BEAT (34) ----

// HeartbeatRequest tells the broker which groups a client belongs to. The
// response has no fields.
type HeartbeatRequest struct {
	ClientID       string              `msgpack:"clientId"`
	ProducerGroups []string            `msgpack:"producerGroups,omitempty"`
	ConsumerGroups []ConsumerGroupInfo `msgpack:"consumerGroups,omitempty"`
}

// ConsumerGroupInfo describes one consumer group membership of a client.
type ConsumerGroupInfo struct {
	Group            string         `msgpack:"group"`
	ConsumeFromWhere string         `msgpack:"consumeFromWhere,omitempty"` // FIRST_OFFSET, LAST_OFFSET
	Subscriptions    []Subscription `msgpack:"subscriptions,omitempty"`
	// MessageModel is CLUSTERING (default: each message to one member) or
	// BROADCASTING (every member gets every message).
	MessageModel string `msgpack:"messageModel,omitempty"`
	// ConsumeOrderly asks for one message at a time per queue, in order.
	ConsumeOrderly bool `msgpack:"consumeOrderly,omitempty"`
	// AllocateStrategy is AVG (default) or CONSISTENT_HASH; the group's
	// first member decides it.
	AllocateStrategy string `msgpack:"allocateStrategy,omitempty"`
	// Owned are the queues this member holds right now: a queue leaves a
	// member's assignment first, and reaches its next owner only once no
	// member reports owning it (or the old owner timed out).
	Owned []QueueRef `msgpack:"owned,omitempty"`
	// Generation is that of the last assignment this member received and
	// applied (0 before the first). A revoked queue counts as released only
	// when a heartbeat echoing the revoking generation no longer lists it
	// in Owned, so a heartbeat that crossed the revocation on the wire is not
	// mistaken for a release.
	Generation int64 `msgpack:"generation,omitempty"`
}

// QueueRef names a queue.
type QueueRef struct {
	Topic   string `msgpack:"topic"`
	QueueID int32  `msgpack:"queueId"`
}

// HeartbeatResponse answers HEART_BEAT with each group's assignment for
// this client.
type HeartbeatResponse struct {
	Assignments []GroupAssignment `msgpack:"assignments,omitempty"`
	// HeartbeatIntervalMillis is how often the broker wants heartbeats;
	// a member silent for 3 intervals (consumerHeartbeatTimeout) is removed.
	HeartbeatIntervalMillis int64 `msgpack:"heartbeatIntervalMillis"`
}

// GroupAssignment is the queues one member of a group may consume.
type GroupAssignment struct {
	Group      string     `msgpack:"group"`
	Generation int64      `msgpack:"generation"` // grows with every change of the group
	Queues     []QueueRef `msgpack:"queues"`
}

// Subscription is a topic and tag expression.
type Subscription struct {
	Topic      string `msgpack:"topic"`
	Expression string `msgpack:"expression"`
}

// ---- plumbing ----

func appendList[T any](b []byte, items []T) ([]byte, error) {
	if len(items) == 0 {
		return b, nil
	}
	b = appendArrayHeader(b, len(items))
	for i := range items {
		var err error
		if b, err = appendValue(b, &items[i]); err != nil {
			return b, err
		}
	}
	return b, nil
}

// decodeStructList decodes a body holding a msgpack array of T maps (T has
// only scalar and string fields).
func decodeStructList[T any](body []byte, lim Limits, what string) ([]T, error) {
	return decodeList(body, lim, lim.MaxListItems, what, func(r *reader, v *T) error {
		raw, err := r.rawValue()
		if err != nil {
			return err
		}
		// msgpack's reflection decoder gets only what Validate accepts
		// (an element sits one level down, in the list).
		if err := Validate(raw, depthBelow(lim, 1)); err != nil {
			return fmt.Errorf("%w: %w", ErrFrameIllegal, err)
		}
		if err := msgpack.Unmarshal(raw, v); err != nil {
			return fmt.Errorf("%w: %w", ErrFrameIllegal, err)
		}
		return r.keep("", checkInts(raw, reflect.TypeFor[T]()))
	})
}

func (r *SendRequest) RequestCode() Code                 { return CodeSendMessage }
func (r *SendBatchRequest) RequestCode() Code            { return CodeSendBatchMessage }
func (r *PullRequest) RequestCode() Code                 { return CodePullMessage }
func (r *QueryMessageRequest) RequestCode() Code         { return CodeQueryMessage }
func (r *ViewMessageRequest) RequestCode() Code          { return CodeViewMessageByID }
func (r *GetMaxOffsetRequest) RequestCode() Code         { return CodeGetMaxOffset }
func (r *GetMinOffsetRequest) RequestCode() Code         { return CodeGetMinOffset }
func (r *QueryConsumerOffsetRequest) RequestCode() Code  { return CodeQueryConsumerOffset }
func (r *UpdateConsumerOffsetRequest) RequestCode() Code { return CodeUpdateConsumerOffset }
func (r *GetConsumerOffsetsRequest) RequestCode() Code   { return CodeGetConsumerOffsets }
func (r *CreateTopicRequest) RequestCode() Code          { return CodeCreateTopic }
func (r *UpdateTopicRequest) RequestCode() Code          { return CodeUpdateAndCreateTopic }
func (r *DeleteTopicRequest) RequestCode() Code          { return CodeDeleteTopic }
func (r *ListTopicsRequest) RequestCode() Code           { return CodeGetAllTopicConfig }
func (r *GetBrokerRuntimeInfoRequest) RequestCode() Code { return CodeGetBrokerRuntimeInfo }
func (r *HeartbeatRequest) RequestCode() Code            { return CodeHeartbeat }

func (*SendRequest) isFields()                 {}
func (*SendBatchRequest) isFields()            {}
func (*PullRequest) isFields()                 {}
func (*QueryMessageRequest) isFields()         {}
func (*ViewMessageRequest) isFields()          {}
func (*GetMaxOffsetRequest) isFields()         {}
func (*GetMinOffsetRequest) isFields()         {}
func (*QueryConsumerOffsetRequest) isFields()  {}
func (*UpdateConsumerOffsetRequest) isFields() {}
func (*GetConsumerOffsetsRequest) isFields()   {}
func (*CreateTopicRequest) isFields()          {}
func (*UpdateTopicRequest) isFields()          {}
func (*DeleteTopicRequest) isFields()          {}
func (*ListTopicsRequest) isFields()           {}
func (*GetBrokerRuntimeInfoRequest) isFields() {}
func (*HeartbeatRequest) isFields()            {}
func (*SendResponse) isFields()                {}
func (*SendBatchResponse) isFields()           {}
func (*PullResponse) isFields()                {}
func (*QueryMessageResponse) isFields()        {}
func (*ViewMessageResponse) isFields()         {}
func (*OffsetResponse) isFields()              {}
func (*ConsumerOffsetsResponse) isFields()     {}
func (*TopicListResponse) isFields()           {}
func (*BrokerRuntimeInfo) isFields()           {}
