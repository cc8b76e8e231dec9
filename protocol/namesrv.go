package protocol

// Name-server requests (docs/PROTOCOL.md, "Name server"). Brokers register
// with every name server; clients ask any one of them for routes. The codes
// are RocketMQ's.
const (
	// REGISTER_BROKER: a broker's identity, role and (in the body) its
	// topic configurations with their data version.
	CodeRegisterBroker Code = 103
	// UNREGISTER_BROKER: a broker leaves (a clean stop).
	CodeUnregisterBroker Code = 104
	// GET_ROUTEINFO_BY_TOPIC: a topic's route (RouteData).
	CodeGetRouteInfoByTopic Code = 105
	// GET_BROKER_CLUSTER_INFO: every broker the name server knows.
	CodeGetBrokerClusterInfo Code = 106
	// GET_ALL_TOPIC_LIST_FROM_NAMESERVER: every topic with a route.
	CodeGetAllTopicList Code = 206
	// DELETE_TOPIC_IN_NAMESRV: drop a topic from the routes at once.
	CodeDeleteTopicInNamesrv Code = 216
	// BROKER_HEARTBEAT: a light lease renewal, without the topics.
	CodeBrokerHeartbeat Code = 904
)

func init() {
	codeNames[CodeRegisterBroker] = "REGISTER_BROKER"
	codeNames[CodeUnregisterBroker] = "UNREGISTER_BROKER"
	codeNames[CodeGetRouteInfoByTopic] = "GET_ROUTEINFO_BY_TOPIC"
	codeNames[CodeGetBrokerClusterInfo] = "GET_BROKER_CLUSTER_INFO"
	codeNames[CodeGetAllTopicList] = "GET_ALL_TOPIC_LIST_FROM_NAMESERVER"
	codeNames[CodeDeleteTopicInNamesrv] = "DELETE_TOPIC_IN_NAMESRV"
	codeNames[CodeBrokerHeartbeat] = "BROKER_HEARTBEAT"
}

// MasterID is the brokerId of a group's master; slaves have other ids.
const MasterID int64 = 0

// AutoCreateTopic is the route a broker with autoCreateTopicEnable
// registers besides its real topics (RocketMQ's TBW102, under the same name,
// so RocketMQ's clients find it too): a producer whose topic has no route
// sends to the queues of this one, and the broker that gets the message
// creates the topic (defaultTopicQueueNums queues) and registers it, after
// which the topic's own route exists.
const AutoCreateTopic = "TBW102"

// DataVersion orders a broker's registrations. Timestamp is the time the
// broker process started (Unix ms) and Counter counts its topic changes
// since: a restart gives a larger Timestamp, a change a larger Counter, so
// versions compare as (Timestamp, Counter) whatever the wall clock does
// within one run.
type DataVersion struct {
	Timestamp int64 `msgpack:"timestamp"`
	Counter   int64 `msgpack:"counter"`
}

// Compare returns -1, 0 or +1 as v is older than, equal to or newer than o.
func (v DataVersion) Compare(o DataVersion) int {
	switch {
	case v.Timestamp != o.Timestamp:
		return cmpInt(v.Timestamp, o.Timestamp)
	default:
		return cmpInt(v.Counter, o.Counter)
	}
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// BrokerIdentity names one broker of a cluster.
type BrokerIdentity struct {
	ClusterName string `msgpack:"clusterName"`
	BrokerName  string `msgpack:"brokerName"` // the broker group
	BrokerID    int64  `msgpack:"brokerId"`   // 0: the master
	BrokerAddr  string `msgpack:"brokerAddr"` // host:listenPort clients connect to
}

// RegisterBrokerRequest registers a broker, or renews its lease. Topics
// travel in the body as a msgpack array of TopicConfig maps; the name
// server takes them only from a master (brokerId 0) and only when
// DataVersion is newer than the one it holds. A registration with an older
// DataVersion than the one held is ignored entirely (Stale in the answer):
// it is a delayed message of a previous run or change.
type RegisterBrokerRequest struct {
	BrokerIdentity `msgpack:",inline"`
	HAServerAddr   string      `msgpack:"haServerAddr,omitempty"` // host:haListenPort
	BrokerRole     string      `msgpack:"brokerRole"`             // ASYNC_MASTER, SYNC_MASTER, SLAVE
	DataVersion    DataVersion `msgpack:"dataVersion"`
	// RemotingAddr is host:remotingListenPort, where the broker speaks
	// RocketMQ's remoting protocol (empty: it does not). The name server's
	// remoting listener names it in the routes it serves.
	RemotingAddr string `msgpack:"remotingAddr,omitempty"`
	// HeartbeatTimeoutMillis is the lease the broker asks for; 0 means the
	// name server's default.
	HeartbeatTimeoutMillis int64 `msgpack:"heartbeatTimeoutMillis,omitempty"`
	// MasterEpoch is the controller's master epoch the broker's role
	// belongs to (controller mode; 0 otherwise). Between two brokers that
	// claim one brokerId, the name server keeps the newer epoch's, whatever
	// their data versions: a deposed master still running (its lease
	// expired, its controllers unreachable) never hides the new one.
	MasterEpoch int32         `msgpack:"masterEpoch,omitempty"`
	Topics      []TopicConfig `msgpack:"-"` // the frame body
}

func (r *RegisterBrokerRequest) appendBody(b []byte) ([]byte, error) { return appendList(b, r.Topics) }
func (r *RegisterBrokerRequest) decodeBody(body []byte, lim Limits) (err error) {
	r.Topics, err = decodeStructList[TopicConfig](body, lim, "topics")
	return err
}

// RegisterBrokerResponse answers REGISTER_BROKER and BROKER_HEARTBEAT.
type RegisterBrokerResponse struct {
	// Changed: the registration changed the routes (new broker, new
	// address or role, newer topics).
	Changed bool `msgpack:"changed,omitempty"`
	// Stale: the data version was older than the one held; nothing was taken.
	Stale bool `msgpack:"stale,omitempty"`
	// Unknown (heartbeat only): the name server does not hold this broker
	// at this data version (it restarted, expired the lease, or missed a
	// change); the broker must send REGISTER_BROKER now.
	Unknown bool `msgpack:"unknown,omitempty"`
	// LeaseMillis is the lease granted: the broker is expired if nothing
	// renews it within that long.
	LeaseMillis int64 `msgpack:"leaseMillis"`
	// MasterAddr and MasterHAAddr are the group's live master, if any
	// (a slave's hint of whom to replicate from).
	MasterAddr   string `msgpack:"masterAddr,omitempty"`
	MasterHAAddr string `msgpack:"masterHaAddr,omitempty"`
}

// BrokerHeartbeatRequest renews a registered broker's lease without
// resending its topics. If the answer says Unknown, the broker registers.
type BrokerHeartbeatRequest struct {
	BrokerIdentity `msgpack:",inline"`
	DataVersion    DataVersion `msgpack:"dataVersion"`
}

// UnregisterBrokerRequest removes a broker at once. The response has no fields.
type UnregisterBrokerRequest struct {
	BrokerIdentity `msgpack:",inline"`
}

// GetRouteInfoRequest asks for a topic's route; status TOPIC_NOT_EXIST if
// no live broker group hosts it.
type GetRouteInfoRequest struct {
	Topic string `msgpack:"topic"`
}

// RouteData answers GET_ROUTEINFO_BY_TOPIC: the groups hosting the topic,
// their queues and their brokers.
type RouteData struct {
	Topic string `msgpack:"topic"`
	// Version grows with every change of this name server's table and never
	// goes back, across restarts too (it starts from the clock, in µs). A
	// client keeps the route with the larger version.
	Version    int64       `msgpack:"version"`
	QueueDatas []QueueData `msgpack:"queueDatas"`
	Brokers    []BrokerRef `msgpack:"brokers"`
}

// QueueData is a topic's queues on one broker group. A group without a
// live master has WriteQueueNums 0 and no PermWrite: its queues stay
// readable (from its slaves) and take no sends.
type QueueData struct {
	BrokerName     string `msgpack:"brokerName"`
	ReadQueueNums  int32  `msgpack:"readQueueNums"`
	WriteQueueNums int32  `msgpack:"writeQueueNums"`
	Perm           int32  `msgpack:"perm"`
}

// BrokerRef is one broker of a group in a route.
type BrokerRef struct {
	ClusterName  string `msgpack:"clusterName"`
	BrokerName   string `msgpack:"brokerName"`
	BrokerID     int64  `msgpack:"brokerId"`
	BrokerAddr   string `msgpack:"brokerAddr"`
	HAServerAddr string `msgpack:"haServerAddr,omitempty"`
	BrokerRole   string `msgpack:"brokerRole"`
	Alive        bool   `msgpack:"alive"`
	// RemotingAddr: see RegisterBrokerRequest.RemotingAddr.
	RemotingAddr string `msgpack:"remotingAddr,omitempty"`
}

// GetBrokerClusterInfoRequest lists every broker known.
type GetBrokerClusterInfoRequest struct{}

// ClusterInfo answers GET_BROKER_CLUSTER_INFO. The brokers travel in the
// body as a msgpack array of BrokerInfo maps, sorted by cluster, group and
// brokerId.
type ClusterInfo struct {
	Version int64        `msgpack:"version"` // as RouteData.Version
	Brokers []BrokerInfo `msgpack:"-"`       // the frame body
}

func (r *ClusterInfo) appendBody(b []byte) ([]byte, error) { return appendList(b, r.Brokers) }
func (r *ClusterInfo) decodeBody(body []byte, lim Limits) (err error) {
	r.Brokers, err = decodeStructList[BrokerInfo](body, lim, "brokers")
	return err
}

// BrokerInfo is one broker as the name server holds it.
type BrokerInfo struct {
	BrokerRef       `msgpack:",inline"`
	DataVersion     DataVersion `msgpack:"dataVersion"`
	LiveSinceMs     int64       `msgpack:"liveSinceMs"`     // when this registration began (Unix ms)
	LastHeartbeatMs int64       `msgpack:"lastHeartbeatMs"` // the last renewal (Unix ms)
	LeaseMillis     int64       `msgpack:"leaseMillis"`
	Topics          int32       `msgpack:"topics"` // topic configs held from it (masters only)
}

// GetAllTopicListRequest lists every topic with a route.
type GetAllTopicListRequest struct{}

// TopicNameList answers GET_ALL_TOPIC_LIST_FROM_NAMESERVER. The topics
// travel in the body as a msgpack array of TopicName maps, sorted.
type TopicNameList struct {
	Topics []TopicName `msgpack:"-"` // the frame body
}

// TopicName is one element of a TopicNameList.
type TopicName struct {
	Topic string `msgpack:"topic"`
}

func (r *TopicNameList) appendBody(b []byte) ([]byte, error) { return appendList(b, r.Topics) }
func (r *TopicNameList) decodeBody(body []byte, lim Limits) (err error) {
	r.Topics, err = decodeStructList[TopicName](body, lim, "topics")
	return err
}

// DeleteTopicInNamesrvRequest drops a topic's queue data from the routes
// (of ClusterName's groups, or of every group if empty), until a master
// registers the topic again with a newer data version. Deleting the topic
// on the brokers is the admin's other step. The response has no fields.
type DeleteTopicInNamesrvRequest struct {
	Topic       string `msgpack:"topic"`
	ClusterName string `msgpack:"clusterName,omitempty"`
}

func (*RegisterBrokerRequest) RequestCode() Code       { return CodeRegisterBroker }
func (*BrokerHeartbeatRequest) RequestCode() Code      { return CodeBrokerHeartbeat }
func (*UnregisterBrokerRequest) RequestCode() Code     { return CodeUnregisterBroker }
func (*GetRouteInfoRequest) RequestCode() Code         { return CodeGetRouteInfoByTopic }
func (*GetBrokerClusterInfoRequest) RequestCode() Code { return CodeGetBrokerClusterInfo }
func (*GetAllTopicListRequest) RequestCode() Code      { return CodeGetAllTopicList }
func (*DeleteTopicInNamesrvRequest) RequestCode() Code { return CodeDeleteTopicInNamesrv }

func (*RegisterBrokerRequest) isFields()       {}
func (*BrokerHeartbeatRequest) isFields()      {}
func (*UnregisterBrokerRequest) isFields()     {}
func (*GetRouteInfoRequest) isFields()         {}
func (*GetBrokerClusterInfoRequest) isFields() {}
func (*GetAllTopicListRequest) isFields()      {}
func (*DeleteTopicInNamesrvRequest) isFields() {}
func (*RegisterBrokerResponse) isFields()      {}
func (*RouteData) isFields()                   {}
func (*ClusterInfo) isFields()                 {}
func (*TopicNameList) isFields()               {}
