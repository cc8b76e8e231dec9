package protocol

// Client-coordinated consumer groups: the requests of clients that
// allocate queues themselves (RocketMQ 4's clients, over the remoting
// listener: docs/PROTOCOL.md 11c). They have no form on Wharf's own wire:
// the remoting codec builds them, the broker answers them, and their codes
// are RocketMQ's, left out of the code names (and of NewRequest) so that
// Wharf's listener keeps answering them REQUEST_CODE_NOT_SUPPORTED.
const (
	// GET_CONSUMER_LIST_BY_GROUP: the client ids of a group's live members.
	CodeGetConsumerListByGroup Code = 38
	// LOCK_BATCH_MQ: an orderly consumer locks the queues it allocated.
	CodeLockBatchMQ Code = 41
	// UNLOCK_BATCH_MQ: it gives them back.
	CodeUnlockBatchMQ Code = 42
)

// ClientHeartbeatRequest is the heartbeat of a client that allocates its
// queues itself: its consumer groups are kept as client-coordinated groups,
// never handed to Wharf's coordinator (section 9).
type ClientHeartbeatRequest struct {
	ClientID       string              `msgpack:"clientId"`
	ProducerGroups []string            `msgpack:"producerGroups,omitempty"`
	ConsumerGroups []ConsumerGroupInfo `msgpack:"consumerGroups,omitempty"`
}

// GetConsumerListRequest asks for the live members of Group.
type GetConsumerListRequest struct {
	Group string `msgpack:"group"`
}

// ConsumerListResponse lists a group's members' client ids, sorted.
type ConsumerListResponse struct {
	ClientIDs []string `msgpack:"clientIds"`
}

// BrokerQueue names a queue as RocketMQ's clients do: with the broker
// group hosting it.
type BrokerQueue struct {
	Topic      string `msgpack:"topic"`
	BrokerName string `msgpack:"brokerName"`
	QueueID    int32  `msgpack:"queueId"`
}

// LockBatchRequest locks Queues for ClientID in Group (LOCK_BATCH_MQ), or,
// with Unlock, releases those it holds (UNLOCK_BATCH_MQ).
type LockBatchRequest struct {
	Group    string        `msgpack:"group"`
	ClientID string        `msgpack:"clientId"`
	Queues   []BrokerQueue `msgpack:"queues"`
	Unlock   bool          `msgpack:"unlock,omitempty"`
}

// LockBatchResponse lists the queues of a LOCK_BATCH_MQ that the client
// now holds.
type LockBatchResponse struct {
	Locked []BrokerQueue `msgpack:"locked"`
}

func (r *ClientHeartbeatRequest) RequestCode() Code { return CodeHeartbeat }
func (r *GetConsumerListRequest) RequestCode() Code { return CodeGetConsumerListByGroup }
func (r *LockBatchRequest) RequestCode() Code {
	if r.Unlock {
		return CodeUnlockBatchMQ
	}
	return CodeLockBatchMQ
}

func (*ClientHeartbeatRequest) isFields() {}
func (*GetConsumerListRequest) isFields() {}
func (*ConsumerListResponse) isFields()   {}
func (*LockBatchRequest) isFields()       {}
func (*LockBatchResponse) isFields()      {}
