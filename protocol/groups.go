package protocol

// Consumer-group requests.
const (
	// UNREGISTER_CLIENT: a member leaves its group at once (on Close).
	CodeUnregisterClient Code = 35
	// CONSUMER_SEND_MSG_BACK: a consumer gives a message back for a retry
	// (negative ack or ack timeout); the broker re-stores it in the
	// group's retry topic with a delay, or in its dead-letter topic.
	CodeConsumerSendMsgBack Code = 36
	// NOTIFY_CONSUMER_IDS_CHANGED (broker -> client, oneway): the group
	// changed; heartbeat now to get the new assignment.
	CodeNotifyConsumerIDsChanged Code = 40
	// GET_CONSUMER_GROUPS: the groups the broker coordinates.
	CodeGetConsumerGroups Code = 4003
	// DESCRIBE_CONSUMER_GROUP: members, assignment, offsets and lag.
	CodeDescribeConsumerGroup Code = 4004
)

// Properties of retried and delayed messages (RocketMQ's names).
const (
	PropertyRetryTopic        = "RETRY_TOPIC"       // the topic a retried message came from
	PropertyOriginMessageID   = "ORIGIN_MESSAGE_ID" // offset message id of the first delivery
	PropertyReconsumeTime     = "RECONSUME_TIME"    // deliveries so far (informational)
	PropertyMaxReconsumeTimes = "MAX_RECONSUME_TIMES"
	PropertyRealTopic         = "REAL_TOPIC" // a delayed message's topic while it waits
	PropertyRealQueueID       = "REAL_QID"
	PropertyTimerDeliverMs    = "TIMER_DELIVER_MS" // absolute delivery time, Unix ms (beyond delay levels)
)

// Group topic names.
const (
	RetryTopicPrefix = "%RETRY%"
	DLQTopicPrefix   = "%DLQ%"
	ScheduleTopic    = "SCHEDULE_TOPIC_XXXX"
)

// RetryTopic is a group's retry topic.
func RetryTopic(group string) string { return RetryTopicPrefix + group }

// DLQTopic is a group's dead-letter topic.
func DLQTopic(group string) string { return DLQTopicPrefix + group }

// Message models.
const (
	Clustering   = "CLUSTERING"
	Broadcasting = "BROADCASTING"
)

// Allocation strategies.
const (
	AllocateAverage        = "AVG"
	AllocateConsistentHash = "CONSISTENT_HASH"
)

func init() {
	codeNames[CodeUnregisterClient] = "UNREGISTER_CLIENT"
	codeNames[CodeConsumerSendMsgBack] = "CONSUMER_SEND_MSG_BACK"
	codeNames[CodeNotifyConsumerIDsChanged] = "NOTIFY_CONSUMER_IDS_CHANGED"
	codeNames[CodeGetConsumerGroups] = "GET_CONSUMER_GROUPS"
	codeNames[CodeDescribeConsumerGroup] = "DESCRIBE_CONSUMER_GROUP"
}

// UnregisterClientRequest: ClientID leaves Group (every group if empty).
type UnregisterClientRequest struct {
	ClientID string `msgpack:"clientId"`
	Group    string `msgpack:"group,omitempty"`
}

// ConsumerSendMsgBackRequest gives back the message stored at
// CommitLogOffset (see MessageExt.CommitLogOffset) for another delivery.
// DelayLevel 0 means 3 + its reconsume count (10 s, 30 s, 1 min, ...);
// -1 sends it straight to the dead-letter topic. MaxReconsumeTimes 0 means
// the default, 16.
type ConsumerSendMsgBackRequest struct {
	Group             string `msgpack:"group"`
	CommitLogOffset   int64  `msgpack:"commitLogOffset"`
	DelayLevel        int32  `msgpack:"delayLevel"`
	MaxReconsumeTimes int32  `msgpack:"maxReconsumeTimes,omitempty"`
}

// NotifyConsumerIDsChangedRequest is pushed to members of Group.
type NotifyConsumerIDsChangedRequest struct {
	Group string `msgpack:"group"`
}

// GetConsumerGroupsRequest lists groups.
type GetConsumerGroupsRequest struct{}

// ConsumerGroupsResponse lists groups (fields only).
type ConsumerGroupsResponse struct {
	Groups []GroupSummary `msgpack:"groups"`
}

// GroupSummary is one group in a list.
type GroupSummary struct {
	Group        string   `msgpack:"group"`
	MessageModel string   `msgpack:"messageModel"`
	Members      int32    `msgpack:"members"`
	Topics       []string `msgpack:"topics"`
	Lag          int64    `msgpack:"lag"`
}

// DescribeConsumerGroupRequest asks for one group's state.
type DescribeConsumerGroupRequest struct {
	Group string `msgpack:"group"`
}

// ConsumerGroupDescription answers DESCRIBE_CONSUMER_GROUP.
type ConsumerGroupDescription struct {
	Group            string        `msgpack:"group"`
	MessageModel     string        `msgpack:"messageModel"`
	AllocateStrategy string        `msgpack:"allocateStrategy"`
	ConsumeOrderly   bool          `msgpack:"consumeOrderly"`
	Generation       int64         `msgpack:"generation"`
	Members          []GroupMember `msgpack:"members"`
	Queues           []GroupQueue  `msgpack:"queues"`
}

// GroupMember is one live member.
type GroupMember struct {
	ClientID        string     `msgpack:"clientId"`
	Address         string     `msgpack:"address"`
	LastHeartbeatMs int64      `msgpack:"lastHeartbeatMs"`
	Queues          []QueueRef `msgpack:"queues"` // assigned
}

// GroupQueue is one queue of the group's topics.
type GroupQueue struct {
	Topic           string `msgpack:"topic"`
	QueueID         int32  `msgpack:"queueId"`
	Owner           string `msgpack:"owner"`             // client id; "" while unassigned or handed over
	Pending         string `msgpack:"pending,omitempty"` // the next owner, waiting for the release
	CommittedOffset int64  `msgpack:"committedOffset"`   // -1 if none
	MaxOffset       int64  `msgpack:"maxOffset"`
	Lag             int64  `msgpack:"lag"`
}

func (r *UnregisterClientRequest) RequestCode() Code         { return CodeUnregisterClient }
func (r *ConsumerSendMsgBackRequest) RequestCode() Code      { return CodeConsumerSendMsgBack }
func (r *NotifyConsumerIDsChangedRequest) RequestCode() Code { return CodeNotifyConsumerIDsChanged }
func (r *GetConsumerGroupsRequest) RequestCode() Code        { return CodeGetConsumerGroups }
func (r *DescribeConsumerGroupRequest) RequestCode() Code    { return CodeDescribeConsumerGroup }

func (*UnregisterClientRequest) isFields()         {}
func (*ConsumerSendMsgBackRequest) isFields()      {}
func (*NotifyConsumerIDsChangedRequest) isFields() {}
func (*GetConsumerGroupsRequest) isFields()        {}
func (*DescribeConsumerGroupRequest) isFields()    {}
func (*ConsumerGroupsResponse) isFields()          {}
func (*ConsumerGroupDescription) isFields()        {}
func (*HeartbeatResponse) isFields()               {}
