package netio

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/protocol/remoting"
)

// RocketMQ's message system flags a send may carry (MessageSysFlag).
const (
	sysFlagCompressed  = 1 << 0
	sysFlagTxMask      = 3 << 2 // transaction type; 0 is "not a transaction"
	sysFlagCompression = 7 << 8 // compression type (0 and 3: zlib)
)

// Pull flags (PullSysFlag).
const (
	pullCommitOffset = 1 << 0
	pullSuspend      = 1 << 1
	pullSubscription = 1 << 2
)

// ext reads a remoting command's ext fields, keeping the first error.
type ext struct {
	m   map[string]string
	err error
}

func (e *ext) str(names ...string) string {
	for _, n := range names {
		if v, ok := e.m[n]; ok {
			return v
		}
	}
	return ""
}

func (e *ext) int(bits int, names ...string) int64 {
	v := e.str(names...)
	if v == "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, bits)
	if err != nil && e.err == nil {
		e.err = fmt.Errorf("%w: header field %s = %q is not an int%d", protocol.ErrInvalidParameter, names[0], v, bits)
	}
	return n
}

func (e *ext) i32(names ...string) int32 { return int32(e.int(32, names...)) }
func (e *ext) i64(names ...string) int64 { return e.int(64, names...) }

// translateRequest maps one remoting request to Wharf's typed request and
// the Wharf code it goes by. A code with no mapping is
// ErrCodeNotSupported, named as RocketMQ names it.
// storeHost is what the broker's message ids name (zero on a name
// server): VIEW_MESSAGE_BY_ID gives a CommitLog offset, Wharf's request
// the offset message id.
func translateRequest(cmd *remoting.Command, lim protocol.Limits, storeHost netip.AddrPort) (protocol.Code, protocol.Request, error) {
	e := &ext{m: cmd.ExtFields}
	var req protocol.Request
	var err error
	switch cmd.Code {
	case remoting.SendMessage, remoting.SendMessageV2:
		req, err = sendRequest(e, cmd.Body, lim)
	case remoting.SendBatchMessage:
		req, err = sendBatchRequest(e, cmd.Body, lim)
	case remoting.PullMessage:
		req = pullRequest(e)
	case remoting.HeartBeat:
		req, err = heartbeatRequest(cmd.Body)
	case remoting.LockBatchMQ, remoting.UnlockBatchMQ:
		req, err = lockBatchRequest(cmd.Body, cmd.Code == remoting.UnlockBatchMQ)
	default:
		req, err = headerRequest(cmd.Code, e, storeHost)
	}
	code := protocol.Code(cmd.Code)
	if cmd.Code == remoting.SendMessageV2 {
		code = protocol.CodeSendMessage
	}
	if err == nil {
		err = e.err
	}
	if err != nil {
		return code, nil, err
	}
	return code, req, nil
}

// headerRequest maps the requests whose fields are all in the header.
func headerRequest(code int32, e *ext, storeHost netip.AddrPort) (protocol.Request, error) {
	var req protocol.Request
	switch code {
	case remoting.QueryConsumerOffset:
		req = &protocol.QueryConsumerOffsetRequest{ConsumerGroup: e.str("consumerGroup"), Topic: e.str("topic"), QueueID: e.i32("queueId")}
	case remoting.UpdateConsumerOffset:
		req = &protocol.UpdateConsumerOffsetRequest{ConsumerGroup: e.str("consumerGroup"), Topic: e.str("topic"),
			QueueID: e.i32("queueId"), CommitOffset: e.i64("commitOffset")}
	case remoting.QueryMessage:
		req = &protocol.QueryMessageRequest{Topic: e.str("topic"), Key: e.str("key"), MaxNum: e.i32("maxNum"),
			BeginTimestamp: e.i64("beginTimestamp"), EndTimestamp: e.i64("endTimestamp")}
	case remoting.ViewMessageByID:
		if !storeHost.IsValid() {
			return nil, fmt.Errorf("%w: VIEW_MESSAGE_BY_ID on a listener that stores no messages", protocol.ErrCodeNotSupported)
		}
		req = &protocol.ViewMessageRequest{MsgID: protocol.OffsetMsgID(storeHost, e.i64("offset"))}
	case remoting.GetMaxOffset:
		req = &protocol.GetMaxOffsetRequest{Topic: e.str("topic"), QueueID: e.i32("queueId")}
	case remoting.SearchOffsetByTimestamp:
		req = &protocol.SearchOffsetRequest{Topic: e.str("topic"), QueueID: e.i32("queueId"), Timestamp: e.i64("timestamp")}
	case remoting.GetMinOffset:
		req = &protocol.GetMinOffsetRequest{Topic: e.str("topic"), QueueID: e.i32("queueId")}
	case remoting.ConsumerSendMsgBack:
		req = &protocol.ConsumerSendMsgBackRequest{Group: e.str("group"), CommitLogOffset: e.i64("offset"),
			DelayLevel: e.i32("delayLevel"), MaxReconsumeTimes: e.i32("maxReconsumeTimes")}
	case remoting.GetConsumerListByGroup:
		req = &protocol.GetConsumerListRequest{Group: e.str("consumerGroup")}
	case remoting.UnregisterClient:
		req = &protocol.UnregisterClientRequest{ClientID: e.str("clientID"), Group: e.str("consumerGroup", "producerGroup")}
	case remoting.UpdateAndCreateTopic:
		req = &protocol.UpdateTopicRequest{TopicConfig: protocol.TopicConfig{Topic: e.str("topic"),
			ReadQueueNums: e.i32("readQueueNums"), WriteQueueNums: e.i32("writeQueueNums"), Perm: e.i32("perm")}}
	case remoting.GetAllTopicConfig:
		req = &protocol.ListTopicsRequest{}
	case remoting.DeleteTopicInBroker:
		req = &protocol.DeleteTopicRequest{Topic: e.str("topic")}
	case remoting.DeleteTopicInNamesrv:
		req = &protocol.DeleteTopicInNamesrvRequest{Topic: e.str("topic"), ClusterName: e.str("clusterName")}
	case remoting.GetRouteInfoByTopic:
		req = &protocol.GetRouteInfoRequest{Topic: e.str("topic")}
	case remoting.GetBrokerClusterInfo:
		req = &protocol.GetBrokerClusterInfoRequest{}
	case remoting.GetAllTopicListFromNameSrv:
		req = &protocol.GetAllTopicListRequest{}
	default:
		return nil, fmt.Errorf("%w: RocketMQ request code %d is not served by Wharf's remoting listener",
			protocol.ErrCodeNotSupported, code)
	}
	return req, nil
}

func sendRequest(e *ext, body []byte, lim protocol.Limits) (protocol.Request, error) {
	// SEND_MESSAGE's long field names (the Go client) or SEND_MESSAGE_V2's
	// letters (the Java client).
	r := &protocol.SendRequest{
		ProducerGroup: e.str("producerGroup", "a"),
		Topic:         e.str("topic", "b"),
		QueueID:       e.i32("queueId", "e"),
		Flag:          e.i32("flag", "h"),
		BornTimestamp: e.i64("bornTimestamp", "g"),
		Properties:    ParseProperties(e.str("properties", "i")),
	}
	if b := e.str("batch", "m"); b == "true" {
		return nil, fmt.Errorf("%w: a batch sent as SEND_MESSAGE; use SEND_BATCH_MESSAGE", protocol.ErrMessageIllegal)
	}
	var err error
	r.Body, err = sendBody(e.i32("sysFlag", "f"), body, lim)
	return r, err
}

// sendBody checks a sent body against its system flags: a compressed body
// is inflated (the log stores bodies as sent by Wharf's clients, and a
// Wharf consumer must read it), a transactional one refused.
func sendBody(sysFlag int32, body []byte, lim protocol.Limits) ([]byte, error) {
	maxSize := lim.MaxMessageSize
	if maxSize <= 0 {
		maxSize = protocol.DefaultMaxMessageSize
	}
	if sysFlag&sysFlagTxMask != 0 {
		return nil, fmt.Errorf("%w: transactional messages (sysFlag %#x) are not supported", protocol.ErrMessageIllegal, sysFlag)
	}
	if sysFlag&sysFlagCompressed != 0 {
		if t := (sysFlag & sysFlagCompression) >> 8; t != 0 && t != 3 {
			return nil, fmt.Errorf("%w: compression type %d (sysFlag %#x) is not supported, only zlib", protocol.ErrMessageIllegal, t, sysFlag)
		}
		var err error
		if body, err = inflate(body, maxSize); err != nil {
			return nil, err
		}
	}
	if len(body) > maxSize {
		return nil, fmt.Errorf("%w: body is %d bytes, limit %d", protocol.ErrMessageIllegal, len(body), maxSize)
	}
	return body, nil
}

// inflate undoes the clients' zlib compression, reading at most limit+1
// bytes so a small hostile body cannot expand without bound.
func inflate(b []byte, limit int) ([]byte, error) {
	zr, err := zlib.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%w: compressed body: %v", protocol.ErrMessageIllegal, err)
	}
	defer zr.Close()
	out, err := io.ReadAll(io.LimitReader(zr, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("%w: compressed body: %v", protocol.ErrMessageIllegal, err)
	}
	if len(out) > limit {
		return nil, fmt.Errorf("%w: body inflates to more than the limit of %d bytes", protocol.ErrMessageIllegal, limit)
	}
	return out, nil
}

// ParseProperties reads RocketMQ's properties string, name\x01value\x02
// repeated, as MessageDecoder.string2messageProperties does: an item
// without a separator is skipped. nil for none.
func ParseProperties(s string) map[string]string {
	if s == "" {
		return nil
	}
	m := make(map[string]string)
	for s != "" {
		item, rest, _ := strings.Cut(s, "\x02")
		s = rest
		if k, v, ok := strings.Cut(item, "\x01"); ok && k != "" {
			m[k] = v
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// FormatProperties is ParseProperties' inverse, keys in the order given.
func FormatProperties(keys []string, m map[string]string) string {
	var b strings.Builder
	for _, k := range keys {
		if v, ok := m[k]; ok {
			b.WriteString(k + "\x01" + v + "\x02")
		}
	}
	return b.String()
}

// sendBatchRequest decodes SEND_BATCH_MESSAGE's body: messages encoded as
// MessageDecoder.encodeMessage does, back to back: totalSize, magic,
// bodyCRC, flag (int32 each), bodyLen int32 + body, propsLen int16 + props.
func sendBatchRequest(e *ext, body []byte, lim protocol.Limits) (protocol.Request, error) {
	r := &protocol.SendBatchRequest{ProducerGroup: e.str("producerGroup", "a"), Topic: e.str("topic", "b"),
		QueueID: e.i32("queueId", "e"), BornTimestamp: e.i64("bornTimestamp", "g")}
	maxMsgs := lim.MaxBatchMessages
	if maxMsgs <= 0 {
		maxMsgs = protocol.DefaultMaxBatchMessages
	}
	sysFlag := e.i32("sysFlag", "f")
	for p := 0; p < len(body); {
		if len(r.Messages) == maxMsgs {
			return nil, fmt.Errorf("%w: more than %d messages in a batch", protocol.ErrMessageIllegal, maxMsgs)
		}
		m, n, err := batchMessage(body[p:])
		if err != nil {
			return nil, fmt.Errorf("batch message %d: %w", len(r.Messages), err)
		}
		if m.Body, err = sendBody(sysFlag&^sysFlagCompressed, m.Body, lim); err != nil {
			return nil, fmt.Errorf("batch message %d: %w", len(r.Messages), err)
		}
		m.Topic = r.Topic
		r.Messages = append(r.Messages, m)
		p += n
	}
	if len(r.Messages) == 0 {
		return nil, fmt.Errorf("%w: an empty batch", protocol.ErrMessageIllegal)
	}
	return r, nil
}

var errBatch = errors.New("malformed batch body")

func batchMessage(b []byte) (protocol.Message, int, error) {
	const fixed = 4 * 5
	if len(b) < fixed+2 {
		return protocol.Message{}, 0, fmt.Errorf("%w: %w: %d bytes left, a message needs %d", protocol.ErrMessageIllegal, errBatch, len(b), fixed+2)
	}
	total := int64(int32(binary.BigEndian.Uint32(b)))
	bodyLen := int64(int32(binary.BigEndian.Uint32(b[16:])))
	if total < fixed+2 || total > int64(len(b)) || bodyLen < 0 || fixed+bodyLen+2 > total {
		return protocol.Message{}, 0, fmt.Errorf("%w: %w: totalSize %d, bodyLen %d, %d bytes left", protocol.ErrMessageIllegal, errBatch, total, bodyLen, len(b))
	}
	m := protocol.Message{Flag: int32(binary.BigEndian.Uint32(b[12:])), Body: b[fixed : fixed+bodyLen]}
	p := fixed + bodyLen
	propsLen := int64(binary.BigEndian.Uint16(b[p:]))
	if p+2+propsLen != total {
		return protocol.Message{}, 0, fmt.Errorf("%w: %w: propsLen %d does not end at totalSize %d", protocol.ErrMessageIllegal, errBatch, propsLen, total)
	}
	m.Properties = ParseProperties(string(b[p+2 : total]))
	return m, int(total), nil
}

func pullRequest(e *ext) protocol.Request {
	flags := e.i32("sysFlag")
	r := &protocol.PullRequest{ConsumerGroup: e.str("consumerGroup"), Topic: e.str("topic"), QueueID: e.i32("queueId"),
		QueueOffset: e.i64("queueOffset"), MaxMsgNums: e.i32("maxMsgNums"), MaxMsgBytes: e.i32("maxMsgBytes")}
	if flags&pullSubscription != 0 {
		r.Subscription = e.str("subscription")
	}
	if flags&pullSuspend != 0 {
		r.SuspendTimeoutMillis = e.i64("suspendTimeoutMillis")
	}
	if flags&pullCommitOffset != 0 {
		off := e.i64("commitOffset")
		r.CommitOffset = &off
	}
	if t := e.str("expressionType"); t != "" && t != "TAG" && e.err == nil {
		e.err = fmt.Errorf("%w: expression type %s is not supported, only TAG", protocol.ErrInvalidParameter, t)
	}
	return r
}

// heartbeatData is RocketMQ's HeartbeatData body, the fields Wharf reads.
type heartbeatData struct {
	ClientID      string `json:"clientID"`
	ProducerDatas []struct {
		GroupName string `json:"groupName"`
	} `json:"producerDataSet"`
	ConsumerDatas []struct {
		GroupName     string `json:"groupName"`
		MessageModel  string `json:"messageModel"`
		Where         string `json:"consumeFromWhere"`
		Subscriptions []struct {
			Topic     string `json:"topic"`
			SubString string `json:"subString"`
		} `json:"subscriptionDataSet"`
	} `json:"consumerDataSet"`
}

// heartbeatRequest keeps the client id, its producer groups and its
// consumer groups, as a client-coordinated heartbeat: RocketMQ's clients
// allocate queues themselves (from GET_CONSUMER_LIST_BY_GROUP), so their
// groups are kept apart from Wharf's coordinator, whose lease (three
// heartbeat intervals) their 30 s beat would not keep anyway.
func heartbeatRequest(body []byte) (protocol.Request, error) {
	var h heartbeatData
	if err := json.Unmarshal(body, &h); err != nil {
		return nil, fmt.Errorf("%w: heartbeat body: %v", protocol.ErrInvalidParameter, err)
	}
	r := &protocol.ClientHeartbeatRequest{ClientID: h.ClientID}
	for _, p := range h.ProducerDatas {
		r.ProducerGroups = append(r.ProducerGroups, p.GroupName)
	}
	for _, c := range h.ConsumerDatas {
		g := protocol.ConsumerGroupInfo{Group: c.GroupName, MessageModel: c.MessageModel,
			ConsumeFromWhere: strings.TrimPrefix(c.Where, "CONSUME_FROM_")}
		for _, s := range c.Subscriptions {
			g.Subscriptions = append(g.Subscriptions, protocol.Subscription{Topic: s.Topic, Expression: s.SubString})
		}
		r.ConsumerGroups = append(r.ConsumerGroups, g)
	}
	return r, nil
}

// rmqQueue is RocketMQ's MessageQueue in JSON.
type rmqQueue struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
}

// lockBatchBody is LockBatchRequestBody (and UnlockBatchRequestBody).
type lockBatchBody struct {
	ConsumerGroup string     `json:"consumerGroup"`
	ClientID      string     `json:"clientId"`
	MQSet         []rmqQueue `json:"mqSet"`
}

// maxLockQueues bounds one lock request's queues (the list limit of
// docs/PROTOCOL.md section 13).
const maxLockQueues = 65536

func lockBatchRequest(body []byte, unlock bool) (protocol.Request, error) {
	var b lockBatchBody
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("%w: lock body: %v", protocol.ErrInvalidParameter, err)
	}
	if len(b.MQSet) > maxLockQueues {
		return nil, fmt.Errorf("%w: %d queues in one lock request, at most %d", protocol.ErrInvalidParameter, len(b.MQSet), maxLockQueues)
	}
	r := &protocol.LockBatchRequest{Group: b.ConsumerGroup, ClientID: b.ClientID, Unlock: unlock,
		Queues: make([]protocol.BrokerQueue, 0, len(b.MQSet))}
	for _, q := range b.MQSet {
		r.Queues = append(r.Queues, protocol.BrokerQueue{Topic: q.Topic, BrokerName: q.BrokerName, QueueID: q.QueueID})
	}
	return r, nil
}
