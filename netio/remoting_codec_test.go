package netio

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/protocol/remoting"
)

func TestParseProperties(t *testing.T) {
	cases := []struct {
		in   string
		want map[string]string
	}{
		{"", nil},
		{"TAGS\x01a\x02", map[string]string{"TAGS": "a"}},
		{"TAGS\x01a\x02KEYS\x01k1 k2\x02DELAY\x013", map[string]string{"TAGS": "a", "KEYS": "k1 k2", "DELAY": "3"}},
		{"noseparator\x02TAGS\x01b\x02", map[string]string{"TAGS": "b"}}, // skipped, as string2messageProperties does
		{"\x01v\x02", nil}, // an empty key is no property
		{"K\x01\x02", map[string]string{"K": ""}},
		{"K\x01a\x01b\x02", map[string]string{"K": "a\x01b"}},
	}
	for _, c := range cases {
		if got := ParseProperties(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseProperties(%q) = %v, want %v", c.in, got, c.want)
		}
	}
	m := map[string]string{"TAGS": "a", "KEYS": "k"}
	if s := FormatProperties([]string{"TAGS", "KEYS", "ABSENT"}, m); s != "TAGS\x01a\x02KEYS\x01k\x02" {
		t.Errorf("FormatProperties = %q", s)
	}
}

func zlibbed(b []byte) []byte {
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func TestTranslateSend(t *testing.T) {
	long := map[string]string{"producerGroup": "pg", "topic": "demo", "queueId": "2", "flag": "7", "bornTimestamp": "1700000000000",
		"sysFlag": "0", "properties": "TAGS\x01a\x02DELAY\x013\x02", "batch": "false"}
	v2 := map[string]string{"a": "pg", "b": "demo", "e": "2", "h": "7", "g": "1700000000000", "f": "0", "i": "TAGS\x01a\x02DELAY\x013\x02", "m": "false"}
	want := &protocol.SendRequest{ProducerGroup: "pg", Topic: "demo", QueueID: 2, Flag: 7, BornTimestamp: 1700000000000,
		Properties: map[string]string{"TAGS": "a", "DELAY": "3"}, Body: []byte("body")}
	with := func(m map[string]string, k, v string) map[string]string {
		c := map[string]string{}
		for a, b := range m {
			c[a] = b
		}
		c[k] = v
		return c
	}
	cases := []struct {
		name   string
		code   int32
		ext    map[string]string
		body   []byte
		want   *protocol.SendRequest
		status protocol.Status
	}{
		{"SEND_MESSAGE, long names (Go client)", remoting.SendMessage, long, []byte("body"), want, protocol.StatusOK},
		{"SEND_MESSAGE_V2, letters (Java client)", remoting.SendMessageV2, v2, []byte("body"), want, protocol.StatusOK},
		{"compressed body is inflated", remoting.SendMessage, with(long, "sysFlag", "1"), zlibbed([]byte("body")), want, protocol.StatusOK},
		{"compressed, zlib named", remoting.SendMessageV2, with(v2, "f", "769"), zlibbed([]byte("body")), want, protocol.StatusOK},
		{"multi-tags flag is harmless", remoting.SendMessage, with(long, "sysFlag", "2"), []byte("body"), want, protocol.StatusOK},
		{"compressed but not zlib", remoting.SendMessage, with(long, "sysFlag", "257"), []byte("x"), nil, protocol.StatusMessageIllegal},
		{"compressed garbage", remoting.SendMessage, with(long, "sysFlag", "1"), []byte("not zlib"), nil, protocol.StatusMessageIllegal},
		{"transaction prepared", remoting.SendMessage, with(long, "sysFlag", "4"), []byte("x"), nil, protocol.StatusMessageIllegal},
		{"queueId not a number", remoting.SendMessage, with(long, "queueId", "two"), []byte("x"), nil, protocol.StatusInvalidParameter},
		{"bornTimestamp overflows", remoting.SendMessage, with(long, "bornTimestamp", "99999999999999999999"), []byte("x"), nil, protocol.StatusInvalidParameter},
		{"batch flag on a single send", remoting.SendMessage, with(long, "batch", "true"), []byte("x"), nil, protocol.StatusMessageIllegal},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, req, err := translateRequest(&remoting.Command{Code: c.code, ExtFields: c.ext, Body: c.body}, protocol.Limits{}, netip.AddrPort{})
			if code != protocol.CodeSendMessage {
				t.Errorf("code %v, want SEND_MESSAGE", code)
			}
			if st := protocol.StatusOf(err); st != c.status {
				t.Fatalf("status %v (%v), want %v", st, err, c.status)
			}
			if c.want != nil && !reflect.DeepEqual(req, c.want) {
				t.Fatalf("got %+v, want %+v", req, c.want)
			}
		})
	}
}

func TestInflateBounded(t *testing.T) {
	bomb := zlibbed(make([]byte, 1<<20))
	_, err := sendBody(sysFlagCompressed, bomb, protocol.Limits{MaxMessageSize: 1 << 10})
	if !errors.Is(err, protocol.ErrMessageIllegal) || !strings.Contains(err.Error(), "inflates") {
		t.Fatalf("err = %v, want an inflate limit error", err)
	}
}

func batchBody(msgs ...protocol.Message) []byte {
	var b []byte
	for _, m := range msgs {
		props := FormatProperties([]string{"TAGS", "KEYS"}, m.Properties)
		b = binary.BigEndian.AppendUint32(b, uint32(20+len(m.Body)+2+len(props)))
		b = binary.BigEndian.AppendUint32(b, 0) // magic
		b = binary.BigEndian.AppendUint32(b, 0) // body CRC
		b = binary.BigEndian.AppendUint32(b, uint32(m.Flag))
		b = binary.BigEndian.AppendUint32(b, uint32(len(m.Body)))
		b = append(b, m.Body...)
		b = binary.BigEndian.AppendUint16(b, uint16(len(props)))
		b = append(b, props...)
	}
	return b
}

func TestTranslateBatch(t *testing.T) {
	msgs := []protocol.Message{
		{Topic: "demo", Flag: 1, Body: []byte("one"), Properties: map[string]string{"TAGS": "a"}},
		{Topic: "demo", Body: []byte("two"), Properties: map[string]string{"KEYS": "k"}},
	}
	ext := map[string]string{"producerGroup": "pg", "topic": "demo", "queueId": "-1", "batch": "true"}
	_, req, err := translateRequest(&remoting.Command{Code: remoting.SendBatchMessage, ExtFields: ext, Body: batchBody(msgs...)}, protocol.Limits{}, netip.AddrPort{})
	if err != nil {
		t.Fatal(err)
	}
	want := &protocol.SendBatchRequest{ProducerGroup: "pg", Topic: "demo", QueueID: -1, Messages: msgs}
	if !reflect.DeepEqual(req, want) {
		t.Fatalf("got %+v, want %+v", req, want)
	}
	good := batchBody(msgs...)
	for name, body := range map[string][]byte{
		"empty":             nil,
		"cut":               good[:len(good)-1],
		"totalSize too big": append(binary.BigEndian.AppendUint32(nil, 1000), good[4:]...),
		"bodyLen too big":   append(append(append([]byte(nil), good[:16]...), 0x7f, 0, 0, 0), good[20:]...),
	} {
		_, _, err := translateRequest(&remoting.Command{Code: remoting.SendBatchMessage, ExtFields: ext, Body: body}, protocol.Limits{}, netip.AddrPort{})
		if !errors.Is(err, protocol.ErrMessageIllegal) {
			t.Errorf("%s: err %v, want MESSAGE_ILLEGAL", name, err)
		}
	}
}

func TestTranslatePullAndOffsets(t *testing.T) {
	four := int64(4)
	cases := []struct {
		code int32
		ext  map[string]string
		want protocol.Request
	}{
		{remoting.PullMessage, map[string]string{"consumerGroup": "cg", "topic": "demo", "queueId": "1", "queueOffset": "5",
			"maxMsgNums": "32", "sysFlag": "7", "commitOffset": "4", "suspendTimeoutMillis": "20000", "subscription": "a || b", "expressionType": "TAG"},
			&protocol.PullRequest{ConsumerGroup: "cg", Topic: "demo", QueueID: 1, QueueOffset: 5, MaxMsgNums: 32,
				Subscription: "a || b", SuspendTimeoutMillis: 20000, CommitOffset: &four}},
		// Flags off: no suspend, no commit, no expression, whatever the fields say.
		{remoting.PullMessage, map[string]string{"topic": "demo", "sysFlag": "0", "commitOffset": "4", "suspendTimeoutMillis": "20000", "subscription": "a"},
			&protocol.PullRequest{Topic: "demo"}},
		{remoting.QueryConsumerOffset, map[string]string{"consumerGroup": "cg", "topic": "demo", "queueId": "3"},
			&protocol.QueryConsumerOffsetRequest{ConsumerGroup: "cg", Topic: "demo", QueueID: 3}},
		{remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": "cg", "topic": "demo", "queueId": "3", "commitOffset": "9"},
			&protocol.UpdateConsumerOffsetRequest{ConsumerGroup: "cg", Topic: "demo", QueueID: 3, CommitOffset: 9}},
		{remoting.GetMaxOffset, map[string]string{"topic": "demo", "queueId": "1"}, &protocol.GetMaxOffsetRequest{Topic: "demo", QueueID: 1}},
		{remoting.GetMinOffset, map[string]string{"topic": "demo", "queueId": "1"}, &protocol.GetMinOffsetRequest{Topic: "demo", QueueID: 1}},
		{remoting.ConsumerSendMsgBack, map[string]string{"group": "cg", "offset": "1234", "delayLevel": "3", "maxReconsumeTimes": "16"},
			&protocol.ConsumerSendMsgBackRequest{Group: "cg", CommitLogOffset: 1234, DelayLevel: 3, MaxReconsumeTimes: 16}},
		{remoting.UpdateAndCreateTopic, map[string]string{"topic": "t", "readQueueNums": "8", "writeQueueNums": "8", "perm": "6"},
			&protocol.UpdateTopicRequest{TopicConfig: protocol.TopicConfig{Topic: "t", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6}}},
		{remoting.UnregisterClient, map[string]string{"clientID": "c1", "consumerGroup": "cg"}, &protocol.UnregisterClientRequest{ClientID: "c1", Group: "cg"}},
		{remoting.GetRouteInfoByTopic, map[string]string{"topic": "demo"}, &protocol.GetRouteInfoRequest{Topic: "demo"}},
		{remoting.GetAllTopicConfig, nil, &protocol.ListTopicsRequest{}},
		{remoting.DeleteTopicInBroker, map[string]string{"topic": "demo"}, &protocol.DeleteTopicRequest{Topic: "demo"}},
		{remoting.DeleteTopicInNamesrv, map[string]string{"topic": "demo", "clusterName": "c"},
			&protocol.DeleteTopicInNamesrvRequest{Topic: "demo", ClusterName: "c"}},
		{remoting.QueryMessage, map[string]string{"topic": "demo", "key": "k1", "maxNum": "32", "beginTimestamp": "1", "endTimestamp": "9"},
			&protocol.QueryMessageRequest{Topic: "demo", Key: "k1", MaxNum: 32, BeginTimestamp: 1, EndTimestamp: 9}},
	}
	for _, c := range cases {
		code, req, err := translateRequest(&remoting.Command{Code: c.code, ExtFields: c.ext}, protocol.Limits{}, netip.AddrPort{})
		if err != nil || !reflect.DeepEqual(req, c.want) || int32(code) != c.code {
			t.Errorf("code %d: got %v %+v, %v; want %+v", c.code, code, req, err, c.want)
		}
	}
	_, _, err := translateRequest(&remoting.Command{Code: remoting.PullMessage, ExtFields: map[string]string{"expressionType": "SQL92"}}, protocol.Limits{}, netip.AddrPort{})
	if !errors.Is(err, protocol.ErrInvalidParameter) {
		t.Errorf("SQL92 pull: %v, want INVALID_PARAMETER", err)
	}
	host := netip.MustParseAddrPort("10.0.0.1:10911")
	_, view, err := translateRequest(&remoting.Command{Code: remoting.ViewMessageByID, ExtFields: map[string]string{"offset": "4096"}},
		protocol.Limits{}, host)
	if want := (&protocol.ViewMessageRequest{MsgID: protocol.OffsetMsgID(host, 4096)}); err != nil || !reflect.DeepEqual(view, want) {
		t.Errorf("VIEW_MESSAGE_BY_ID: %+v, %v; want %+v", view, err, want)
	}
	if _, _, err := translateRequest(&remoting.Command{Code: remoting.ViewMessageByID}, protocol.Limits{}, netip.AddrPort{}); !errors.Is(err, protocol.ErrCodeNotSupported) {
		t.Errorf("VIEW_MESSAGE_BY_ID on a name server: %v", err)
	}
	code, _, err := translateRequest(&remoting.Command{Code: remoting.EndTransaction}, protocol.Limits{}, netip.AddrPort{})
	if !errors.Is(err, protocol.ErrCodeNotSupported) || code != protocol.Code(remoting.EndTransaction) {
		t.Errorf("END_TRANSACTION: %v %v, want REQUEST_CODE_NOT_SUPPORTED", code, err)
	}
}

func TestTranslateHeartbeat(t *testing.T) {
	body := `{"clientID":"10.0.0.1@123","producerDataSet":[{"groupName":"pg"}],"consumerDataSet":[{"groupName":"cg","consumeType":"CONSUME_PASSIVELY",
"messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","subscriptionDataSet":[{"classFilterMode":false,"topic":"demo",
"subString":"a || b","tagsSet":["a","b"],"codeSet":[97,98],"subVersion":1,"expressionType":"TAG"}],"unitMode":false}]}`
	_, req, err := translateRequest(&remoting.Command{Code: remoting.HeartBeat, Body: []byte(body)}, protocol.Limits{}, netip.AddrPort{})
	if err != nil {
		t.Fatal(err)
	}
	// A client-coordinated heartbeat: its groups stay out of Wharf's coordinator.
	want := &protocol.ClientHeartbeatRequest{ClientID: "10.0.0.1@123", ProducerGroups: []string{"pg"},
		ConsumerGroups: []protocol.ConsumerGroupInfo{{Group: "cg", MessageModel: "CLUSTERING", ConsumeFromWhere: "FIRST_OFFSET",
			Subscriptions: []protocol.Subscription{{Topic: "demo", Expression: "a || b"}}}}}
	if !reflect.DeepEqual(req, want) {
		t.Fatalf("got %+v\nwant %+v", req, want)
	}
	if _, _, err := translateRequest(&remoting.Command{Code: remoting.HeartBeat, Body: []byte("{")}, protocol.Limits{}, netip.AddrPort{}); err == nil {
		t.Fatal("bad heartbeat JSON accepted")
	}
}

// TestTranslateClientGroups: GET_CONSUMER_LIST_BY_GROUP, the lock
// requests, with the Go client's bodies (lockBatchRequestBody), and
// SEARCH_OFFSET_BY_TIMESTAMP.
func TestTranslateClientGroups(t *testing.T) {
	qs := []protocol.BrokerQueue{{Topic: "t", BrokerName: "broker-a", QueueID: 0}, {Topic: "t", BrokerName: "broker-a", QueueID: 3}}
	body := `{"consumerGroup":"og","clientId":"10.0.0.1@7","mqSet":[{"topic":"t","brokerName":"broker-a","queueId":0},{"topic":"t","brokerName":"broker-a","queueId":3}]}`
	cases := []struct {
		cmd  remoting.Command
		code protocol.Code
		want protocol.Request
	}{
		{remoting.Command{Code: remoting.GetConsumerListByGroup, ExtFields: map[string]string{"consumerGroup": "cg"}},
			protocol.CodeGetConsumerListByGroup, &protocol.GetConsumerListRequest{Group: "cg"}},
		{remoting.Command{Code: remoting.SearchOffsetByTimestamp, ExtFields: map[string]string{"topic": "t", "queueId": "3", "timestamp": "1700000000123"}},
			protocol.CodeSearchOffsetByTimestamp, &protocol.SearchOffsetRequest{Topic: "t", QueueID: 3, Timestamp: 1700000000123}},
		{remoting.Command{Code: remoting.LockBatchMQ, Body: []byte(body)},
			protocol.CodeLockBatchMQ, &protocol.LockBatchRequest{Group: "og", ClientID: "10.0.0.1@7", Queues: qs}},
		{remoting.Command{Code: remoting.UnlockBatchMQ, Body: []byte(body)},
			protocol.CodeUnlockBatchMQ, &protocol.LockBatchRequest{Group: "og", ClientID: "10.0.0.1@7", Queues: qs, Unlock: true}},
	}
	for _, c := range cases {
		code, req, err := translateRequest(&c.cmd, protocol.Limits{}, netip.AddrPort{})
		if err != nil || code != c.code || !reflect.DeepEqual(req, c.want) || req.RequestCode() != c.code {
			t.Errorf("code %d: %v %+v %v\nwant %v %+v", c.cmd.Code, code, req, err, c.code, c.want)
		}
	}
	for _, bad := range []string{"", "[", `{"mqSet":[{"queueId":"x"}]}`} {
		_, _, err := translateRequest(&remoting.Command{Code: remoting.LockBatchMQ, Body: []byte(bad)}, protocol.Limits{}, netip.AddrPort{})
		if !errors.Is(err, protocol.ErrInvalidParameter) {
			t.Errorf("lock body %q: %v, want INVALID_PARAMETER", bad, err)
		}
	}
}

// TestClientGroupAnswers: the bodies the Go client parses (consumerIdList
// with gjson, lockOKMQSet into primitive.MessageQueue).
func TestClientGroupAnswers(t *testing.T) {
	var codec RemotingCodec
	cases := []struct {
		f    protocol.Fields
		want string
	}{
		{&protocol.ConsumerListResponse{ClientIDs: []string{"a@1", "b@2"}}, `{"consumerIdList":["a@1","b@2"]}`},
		{&protocol.ConsumerListResponse{}, `{"consumerIdList":[]}`},
		{&protocol.LockBatchResponse{Locked: []protocol.BrokerQueue{{Topic: "t", BrokerName: "broker-a", QueueID: 2}}},
			`{"lockOKMQSet":[{"topic":"t","brokerName":"broker-a","queueId":2}]}`},
		{&protocol.LockBatchResponse{}, `{"lockOKMQSet":[]}`},
	}
	for _, c := range cases {
		a := decodeAnswer(t, codec.AppendResponse(nil, &actors.Response{Code: 38, Opaque: 3, Status: protocol.StatusOK, Fields: c.f}))
		if a.Code != remoting.Success || a.Opaque != 3 || string(a.Body) != c.want {
			t.Errorf("%T: code %d opaque %d body %s, want %s", c.f, a.Code, a.Opaque, a.Body, c.want)
		}
	}
}

func decodeAnswer(t *testing.T, b []byte) *remoting.Command {
	t.Helper()
	c, err := remoting.Decode(b, remoting.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRemotingAnswers(t *testing.T) {
	var codec RemotingCodec
	send := decodeAnswer(t, codec.AppendResponse(nil, &actors.Response{Code: protocol.CodeSendMessage, Opaque: 7, Status: protocol.StatusFlushDiskTimeout,
		Fields: &protocol.SendResponse{MsgID: "ID", QueueID: 2, QueueOffset: 40}}))
	if send.Code != remoting.FlushDiskTimeout || send.Opaque != 7 || !send.IsResponse() ||
		!reflect.DeepEqual(send.ExtFields, map[string]string{"msgId": "ID", "queueId": "2", "queueOffset": "40"}) {
		t.Errorf("send answer %+v", send)
	}
	pull := decodeAnswer(t, codec.AppendResponse(nil, &actors.Response{Code: protocol.CodePullMessage, Opaque: 8,
		Records: &actors.Records{Kind: actors.RecordsPull, Raw: [][]byte{[]byte("rec1"), []byte("rec2")},
			Pull: &protocol.PullResponse{NextBeginOffset: 12, MinOffset: 1, MaxOffset: 20, SuggestWhichBrokerID: 1}}}))
	if pull.Code != remoting.Success || string(pull.Body) != "rec1rec2" || !reflect.DeepEqual(pull.ExtFields,
		map[string]string{"nextBeginOffset": "12", "minOffset": "1", "maxOffset": "20", "suggestWhichBrokerId": "1"}) {
		t.Errorf("pull answer %+v", pull)
	}
	for st, want := range map[protocol.Status]int32{
		protocol.StatusPullNotFound: remoting.PullNotFound, protocol.StatusPullOffsetMoved: remoting.PullOffsetMoved,
		protocol.StatusPullRetryImmediately: remoting.PullRetryImmediately, protocol.StatusNotMaster: remoting.ServiceNotAvailable,
		protocol.StatusDiskFull: remoting.ServiceNotAvailable, protocol.StatusFrameIllegal: remoting.SystemError,
		protocol.StatusQueryNotFound: remoting.QueryNotFound, protocol.Status(4999): remoting.SystemError,
	} {
		c := decodeAnswer(t, codec.AppendResponse(nil, &actors.Response{Status: st, Remark: "r",
			Fields: &protocol.PullResponse{NextBeginOffset: 3}}))
		if c.Code != want || c.Remark != "r" || c.ExtFields["nextBeginOffset"] != "3" {
			t.Errorf("status %v: answer %+v, want code %d", st, c, want)
		}
	}
	n := decodeAnswer(t, mustReq(t, codec, &protocol.NotifyConsumerIDsChangedRequest{Group: "cg"}))
	if n.Code != remoting.NotifyConsumerIdsChanged || !n.IsOneway() || n.ExtFields["consumerGroup"] != "cg" {
		t.Errorf("notify %+v", n)
	}
	if _, err := codec.AppendRequest(nil, &protocol.HARefuseRequest{}); err == nil {
		t.Error("HA request encoded for a remoting peer")
	}
}

func mustReq(t *testing.T, c RemotingCodec, r protocol.Request) []byte {
	b, err := c.AppendRequest(nil, r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRouteBody(t *testing.T) {
	rd := &protocol.RouteData{Topic: "demo", QueueDatas: []protocol.QueueData{
		{BrokerName: "a", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}, {BrokerName: "b", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}},
		Brokers: []protocol.BrokerRef{
			{ClusterName: "c", BrokerName: "a", BrokerID: 0, BrokerAddr: "h:10911", RemotingAddr: "h:10921", Alive: true},
			{ClusterName: "c", BrokerName: "a", BrokerID: 1, BrokerAddr: "h:11911", RemotingAddr: "h:11921", Alive: true},
			{ClusterName: "c", BrokerName: "a", BrokerID: 2, BrokerAddr: "h:12911", RemotingAddr: "h:12921"}, // dead
			{ClusterName: "c", BrokerName: "b", BrokerID: 0, BrokerAddr: "h:13911", Alive: true},             // no remoting
		}}
	b, err := routeBody(rd)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"queueDatas":[{"brokerName":"a","readQueueNums":4,"writeQueueNums":4,"perm":6,"topicSysFlag":0}],` +
		`"brokerDatas":[{"cluster":"c","brokerName":"a","brokerAddrs":{"0":"h:10921","1":"h:11921"}}],"filterServerTable":{}}`
	if string(b) != want {
		t.Fatalf("route body\n %s\nwant\n %s", b, want)
	}
}

// FuzzRemotingDecode: whatever a peer sends, the listener's decode and
// translation neither panic nor answer it with a request and an error at
// once; what decodes re-encodes as an answer.
func FuzzRemotingDecode(f *testing.F) {
	for _, c := range []remoting.Command{
		{Code: remoting.SendMessage, ExtFields: map[string]string{"topic": "t", "properties": "TAGS\x01a\x02", "sysFlag": "1"}, Body: zlibbed([]byte("x"))},
		{Code: remoting.SendBatchMessage, ExtFields: map[string]string{"topic": "t"}, Body: batchBody(protocol.Message{Body: []byte("b")})},
		{Code: remoting.PullMessage, ExtFields: map[string]string{"topic": "t", "sysFlag": "7", "commitOffset": "1"}},
		{Code: remoting.HeartBeat, Body: []byte(`{"clientID":"c","producerDataSet":[{"groupName":"g"}]}`)},
		{Code: remoting.GetRouteInfoByTopic, ExtFields: map[string]string{"topic": "t"}, Serialize: remoting.SerializeRocketMQ},
	} {
		b, err := remoting.Append(nil, &c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	var codec RemotingCodec
	lim := protocol.Limits{MaxFrameSize: 1 << 16, MaxHeaderSize: 1 << 12, MaxMessageSize: 1 << 12}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := codec.split(b, lim)
		if err != nil || n == 0 {
			return
		}
		fr, err := codec.decode(b[:n], lim)
		if err != nil {
			return
		}
		if fr.Request != nil && fr.RequestErr != nil {
			t.Fatalf("both a request and an error: %v", fr.RequestErr)
		}
		if !fr.IsResponse() && fr.Request == nil && fr.RequestErr == nil {
			t.Fatal("a request frame with neither a request nor an error")
		}
		decodeAnswer(t, codec.AppendResponse(nil, &actors.Response{Code: fr.Code, Opaque: fr.Opaque,
			Status: protocol.StatusOf(fr.RequestErr), Remark: fmt.Sprint(fr.RequestErr)}))
	})
}
