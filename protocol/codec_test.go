package protocol

import (
	"errors"
	"reflect"
	"testing"
)

func i64(v int64) *int64 { return &v }

var sampleExt = MessageExt{
	Message: Message{Topic: "orders", Flag: 7, Body: []byte("hello"),
		Properties: map[string]string{"TAGS": "paid", "KEYS": "k1 k2", "UNIQ_KEY": "0A0000010001ABCDEF0100000000002A"}},
	QueueID: 3, QueueOffset: 42, CommitLogOffset: 1 << 33, StoreSize: 180,
	BornTimestamp: 1700000000000, StoreTimestamp: 1700000000123,
	BornHost: "10.0.0.9:53000", StoreHost: "10.0.0.1:10911", MsgID: "0A00000100002A9F0000000200000000",
	ReconsumeTimes: 1, SysFlag: 0, BodyCRC: 0x7ABCDEF0,
}

func requestCases() []Request {
	return append([]Request{
		&SendRequest{ProducerGroup: "pg", Topic: "orders", QueueID: -1, Flag: 1, BornTimestamp: 1700000000000,
			Properties: map[string]string{"TAGS": "a", "KEYS": "x y"}, Body: []byte("payload")},
		&SendRequest{Topic: "t"},
		&SendBatchRequest{ProducerGroup: "pg", Topic: "orders", QueueID: 2, BornTimestamp: 5,
			Messages: []Message{{Topic: "orders", Body: []byte("a")}, {Topic: "orders", Flag: -3, Body: []byte("bb"), Properties: map[string]string{"TAGS": "t"}}}},
		&PullRequest{ConsumerGroup: "cg", Topic: "orders", QueueID: 1, QueueOffset: 100, MaxMsgNums: 32,
			Subscription: "a || b", SuspendTimeoutMillis: 15000, CommitOffset: i64(99), MaxMsgBytes: 1 << 20},
		&PullRequest{ConsumerGroup: "cg", Topic: "orders", QueueOffset: -5},
		&QueryMessageRequest{Topic: "orders", Key: "k1", MaxNum: 64, BeginTimestamp: 1, EndTimestamp: 1 << 41},
		&ViewMessageRequest{MsgID: "0A00000100002A9F0000000200000000"},
		&GetMaxOffsetRequest{Topic: "orders", QueueID: 7},
		&GetMinOffsetRequest{Topic: "orders", QueueID: 0},
		&QueryConsumerOffsetRequest{ConsumerGroup: "cg", Topic: "orders", QueueID: 3},
		&UpdateConsumerOffsetRequest{ConsumerGroup: "cg", Topic: "orders", QueueID: 3, CommitOffset: 1234567890123},
		&GetConsumerOffsetsRequest{ConsumerGroup: "cg"},
		&GetConsumerOffsetsRequest{ConsumerGroup: "cg", Topic: "orders"},
		&CreateTopicRequest{TopicConfig{Topic: "orders", ReadQueueNums: 8, WriteQueueNums: 8, Perm: PermRead | PermWrite}},
		&UpdateTopicRequest{TopicConfig{Topic: "orders", ReadQueueNums: 4, WriteQueueNums: 4, Perm: PermRead}},
		&DeleteTopicRequest{Topic: "orders"},
		&ListTopicsRequest{},
		&GetBrokerRuntimeInfoRequest{},
		&HeartbeatRequest{ClientID: "10.0.0.9@123", ProducerGroups: []string{"pg"},
			ConsumerGroups: []ConsumerGroupInfo{{Group: "cg", ConsumeFromWhere: "LAST_OFFSET",
				Subscriptions: []Subscription{{Topic: "orders", Expression: "*"}}}}},
		&HAReportRequest{BrokerName: "broker-a", BrokerID: 1, MaxOffset: 1 << 33, MinOffset: 1 << 30, TailCRC: 0xDEADBEEF, TailLen: 4096, SegmentSize: 1 << 30, FlushedOffset: 1<<33 - 4096},
		&HAReportRequest{BrokerName: "broker-a", BrokerID: 2, MaxOffset: 1 << 33, Epoch: 7, Epochs: []HAEpoch{{1, 0}, {7, 1 << 32}}},
		&HATransferRequest{Offset: 1 << 30, MasterMaxOffset: 1<<30 + 9, Data: []byte("recordbytes")},
		&HATransferRequest{Offset: 1 << 30, MasterMaxOffset: 1<<30 + 9, Epoch: 3, EpochStartOffset: 1 << 29, ConfirmOffset: 1 << 30, Data: []byte("recordbytes")},
		&HAEpochsRequest{Epochs: []HAEpoch{{1, 0}, {2, 4096}}, MaxOffset: 8192},
		&HAMetadataRequest{Kind: "topics", Version: 3, Data: []byte(`{"a":1}`)},
		&HARefuseRequest{Reason: "diverged at 42"},
		&ControllerRaftMessageRequest{Data: []byte{8, 3, 16, 1}},
		&UnregisterClientRequest{ClientID: "c1", Group: "g"},
		&ConsumerSendMsgBackRequest{Group: "g", CommitLogOffset: 1234, DelayLevel: 3, MaxReconsumeTimes: 16},
		&NotifyConsumerIDsChangedRequest{Group: "g"},
		&GetConsumerGroupsRequest{},
		&DescribeConsumerGroupRequest{Group: "g"},
		&UpdateBrokerRoleRequest{BrokerRole: "SLAVE", HAMasterAddress: "127.0.0.1:10912", BrokerID: 2},
		&RegisterBrokerRequest{BrokerIdentity: sampleIdentity, HAServerAddr: "10.0.0.1:10912", BrokerRole: "SYNC_MASTER",
			DataVersion: DataVersion{Timestamp: 1700000000000, Counter: 3}, HeartbeatTimeoutMillis: 5000,
			Topics: []TopicConfig{{Topic: "orders", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6}, {Topic: "b", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 4}}},
		&RegisterBrokerRequest{BrokerIdentity: BrokerIdentity{ClusterName: "c", BrokerName: "g", BrokerID: 1, BrokerAddr: "h:1"}, BrokerRole: "SLAVE"},
		&BrokerHeartbeatRequest{BrokerIdentity: sampleIdentity, DataVersion: DataVersion{Timestamp: 1, Counter: 2}},
		&UnregisterBrokerRequest{BrokerIdentity: sampleIdentity},
		&GetRouteInfoRequest{Topic: "orders"},
		&GetBrokerClusterInfoRequest{},
		&GetAllTopicListRequest{},
		&DeleteTopicInNamesrvRequest{Topic: "orders", ClusterName: "DefaultCluster"},
	}, controllerRequestCases()...)
}

var sampleIdentity = BrokerIdentity{ClusterName: "DefaultCluster", BrokerName: "broker-a", BrokerID: 0, BrokerAddr: "10.0.0.1:10911"}

var sampleRoute = &RouteData{Topic: "orders", Version: 1700000000000123,
	QueueDatas: []QueueData{{BrokerName: "broker-a", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6}, {BrokerName: "broker-b", ReadQueueNums: 4, Perm: 4}},
	Brokers: []BrokerRef{{ClusterName: "DefaultCluster", BrokerName: "broker-a", BrokerID: 0, BrokerAddr: "10.0.0.1:10911", HAServerAddr: "10.0.0.1:10912", BrokerRole: "ASYNC_MASTER", Alive: true},
		{ClusterName: "DefaultCluster", BrokerName: "broker-b", BrokerID: 1, BrokerAddr: "10.0.0.2:10911", BrokerRole: "SLAVE", Alive: true}}}

var sampleClusterInfo = &ClusterInfo{Version: 42, Brokers: []BrokerInfo{
	{BrokerRef: sampleRoute.Brokers[0], DataVersion: DataVersion{Timestamp: 5, Counter: 1}, LiveSinceMs: 1, LastHeartbeatMs: 2, LeaseMillis: 5000, Topics: 3},
	{BrokerRef: sampleRoute.Brokers[1], LeaseMillis: 5000}}}

func TestRequestRoundTrip(t *testing.T) {
	seen := map[Code]bool{}
	for _, req := range requestCases() {
		seen[req.RequestCode()] = true
		t.Run(req.RequestCode().String(), func(t *testing.T) {
			for _, flags := range []Flags{0, FlagOneway} {
				b, err := AppendRequest([]byte("junk"), 77, flags, req)
				if err != nil {
					t.Fatal(err)
				}
				b = b[4:]
				n, err := Split(b, Limits{})
				if err != nil || n != len(b) {
					t.Fatalf("Split = %d, %v; want %d", n, err, len(b))
				}
				f, err := DecodeFrame(b, Limits{})
				if err != nil {
					t.Fatal(err)
				}
				if f.Code != req.RequestCode() || f.Opaque != 77 || f.Flags != flags || f.IsResponse() {
					t.Fatalf("header %+v", f)
				}
				got, err := DecodeRequest(f, Limits{})
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, req) {
					t.Fatalf("round trip:\n got %#v\nwant %#v", got, req)
				}
				// Re-encoding the decoded request gives the same bytes.
				b2, err := AppendRequest(nil, 77, flags, got)
				if err != nil || string(b2) != string(b) {
					t.Fatalf("re-encode differs: %v\n%x\n%x", err, b2, b)
				}
			}
		})
	}
	for c := range codeNames {
		if !seen[c] {
			t.Errorf("no round-trip case for %v", c)
		}
		if NewRequest(c) == nil {
			t.Errorf("NewRequest(%v) = nil", c)
		}
	}
}

func TestResponseRoundTrip(t *testing.T) {
	ext2 := sampleExt
	ext2.QueueOffset++
	ext2.Properties = nil
	ext2.Body = nil
	cases := []struct {
		code   Code
		status Status
		remark string
		resp   Fields
	}{
		{CodeSendMessage, StatusOK, "", &SendResponse{MsgID: "0A00000100002A9F0000000200000000", QueueID: 3, QueueOffset: 42}},
		{CodeSendMessage, StatusFlushDiskTimeout, "flush timeout", &SendResponse{MsgID: "X", QueueID: 1, QueueOffset: 1}},
		{CodeSendBatchMessage, StatusOK, "", &SendBatchResponse{QueueID: 2, QueueOffset: 10, MsgIDs: []string{"A", "B"}}},
		{CodePullMessage, StatusOK, "", &PullResponse{NextBeginOffset: 44, MinOffset: 0, MaxOffset: 44, SuggestWhichBrokerID: 0,
			Messages: []MessageExt{sampleExt, ext2}}},
		{CodePullMessage, StatusPullNotFound, "", &PullResponse{NextBeginOffset: 44, MaxOffset: 44}},
		{CodePullMessage, StatusPullOffsetMoved, "", &PullResponse{NextBeginOffset: 10, MinOffset: 10, MaxOffset: 44, SuggestWhichBrokerID: 1}},
		{CodeQueryMessage, StatusOK, "", &QueryMessageResponse{IndexLastUpdateTimestamp: 9, IndexLastUpdatePhyoffset: 8, Messages: []MessageExt{sampleExt}}},
		{CodeViewMessageByID, StatusOK, "", &ViewMessageResponse{Message: sampleExt}},
		{CodeGetMaxOffset, StatusOK, "", &OffsetResponse{Offset: 1 << 40}},
		{CodeGetMinOffset, StatusOK, "", &OffsetResponse{}},
		{CodeQueryConsumerOffset, StatusQueryNotFound, "no offset", &OffsetResponse{}},
		{CodeGetConsumerOffsets, StatusOK, "", &ConsumerOffsetsResponse{Offsets: []ConsumerQueueOffset{
			{Topic: "orders", QueueID: 0, ConsumerOffset: 5, MinOffset: 0, MaxOffset: 9},
			{Topic: "orders", QueueID: 1, ConsumerOffset: -1, MinOffset: 3, MaxOffset: 3}}}},
		{CodeGetAllTopicConfig, StatusOK, "", &TopicListResponse{Topics: []TopicConfig{
			{Topic: "a", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}, {Topic: "b", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 4}}}},
		{CodeGetBrokerRuntimeInfo, StatusOK, "", &BrokerRuntimeInfo{BrokerName: "b1", BrokerRole: "ASYNC_MASTER", Version: "0.1",
			BootTimestamp: 1, CommitLogMaxOffset: 1 << 30, FlushedOffset: 1 << 29, MsgPutTotal: 5, DiskUsedRatio: 0.25,
			Extra: map[string]string{"x": "y"}}},
		{CodeHeartbeat, StatusOK, "", nil},
		{CodeRegisterBroker, StatusOK, "", &RegisterBrokerResponse{Changed: true, LeaseMillis: 5000, MasterAddr: "h:1", MasterHAAddr: "h:2"}},
		{CodeBrokerHeartbeat, StatusOK, "", &RegisterBrokerResponse{Unknown: true, LeaseMillis: 5000}},
		{CodeGetRouteInfoByTopic, StatusOK, "", sampleRoute},
		{CodeGetRouteInfoByTopic, StatusTopicNotExist, "no route", nil},
		{CodeGetBrokerClusterInfo, StatusOK, "", sampleClusterInfo},
		{CodeGetAllTopicList, StatusOK, "", &TopicNameList{Topics: []TopicName{{Topic: "a"}, {Topic: "b"}}}},
		{CodeUnregisterBroker, StatusOK, "", nil},
		{CodeDeleteTopicInNamesrv, StatusOK, "", nil},
		{CodeUpdateConsumerOffset, StatusOK, "", nil},
		{CodeCreateTopic, StatusTopicExistAlready, "topic orders exists", nil},
		{CodeUpdateAndCreateTopic, StatusOK, "", nil},
		{CodeDeleteTopic, StatusTopicNotExist, "no such topic", nil},
		{CodeSendMessage, StatusFrameIllegal, "bad frame", nil},
	}
	for _, c := range cases {
		t.Run(c.code.String()+"/"+c.status.String(), func(t *testing.T) {
			b, err := AppendResponse(nil, c.code, 9, c.status, c.remark, c.resp)
			if err != nil {
				t.Fatal(err)
			}
			f, err := DecodeFrame(b, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if f.Code != c.code || f.Opaque != 9 || !f.IsResponse() || f.Status != c.status || f.Remark != c.remark {
				t.Fatalf("header %+v", f)
			}
			into := NewResponse(c.code)
			if c.resp == nil {
				if into != nil && len(f.Fields) > 0 {
					t.Fatalf("unexpected fields %x", f.Fields)
				}
				return
			}
			if reflect.TypeOf(into) != reflect.TypeOf(c.resp) {
				t.Fatalf("NewResponse(%v) = %T, want %T", c.code, into, c.resp)
			}
			if err := DecodeResponse(f, Limits{}, into); err != nil {
				t.Fatal(err)
			}
			if pr, ok := into.(*PullResponse); ok {
				// A pull answer's properties stay encoded until asked for.
				for i := range pr.Messages {
					if pr.Messages[i].Properties != nil {
						t.Fatalf("message %d: properties decoded into a map", i)
					}
					pr.Messages[i].PropertyMap()
				}
			}
			if !reflect.DeepEqual(into, c.resp) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", into, c.resp)
			}
		})
	}
}

func TestDecodeErrorsClassified(t *testing.T) {
	good, _ := AppendRequest(nil, 1, 0, &PullRequest{Topic: "t"})
	unknown, _ := AppendRequest(nil, 1, 0, &PullRequest{Topic: "t"})
	// Patch the code (fixint 11 right after "code") to 99.
	for i := 8; i < len(unknown)-5; i++ {
		if string(unknown[i:i+5]) == "\xa4code" {
			unknown[i+5] = 99
		}
	}
	big := make([]byte, 5<<20)
	tooBig, _ := AppendRequest(nil, 1, 0, &SendRequest{Topic: "t", Body: big})
	badFields := AppendFrame(nil, &Frame{Code: CodePullMessage, Fields: []byte{0x81, 0xa5, 't', 'o', 'p', 'i', 'c', 0x01}})
	cases := []struct {
		name  string
		frame []byte
		want  Status
	}{
		{"good", good, StatusOK},
		{"unknown code", unknown, StatusRequestCodeNotSupported},
		{"body too big", tooBig, StatusMessageIllegal},
		{"wrong field type", badFields, StatusFrameIllegal},
	}
	for _, c := range cases {
		f, err := DecodeFrame(c.frame, Limits{})
		if err == nil {
			_, err = DecodeRequest(f, Limits{})
		}
		if got := StatusOf(err); got != c.want {
			t.Errorf("%s: status %v (err %v), want %v", c.name, got, err, c.want)
		}
	}
}

func TestSplit(t *testing.T) {
	frame, _ := AppendRequest(nil, 5, 0, &SendRequest{Topic: "t", Body: []byte("xyz")})
	stream := append(append([]byte{}, frame...), frame...)
	for i := 0; i < len(frame); i++ {
		if n, err := Split(stream[:i], Limits{}); n != 0 || err != nil {
			t.Fatalf("Split(%d bytes) = %d, %v", i, n, err)
		}
	}
	if n, err := Split(stream, Limits{}); n != len(frame) || err != nil {
		t.Fatalf("Split = %d, %v", n, err)
	}
	bad := []struct {
		name string
		b    []byte
		want error
	}{
		{"4 GiB", []byte{0xff, 0xff, 0xff, 0xff}, ErrFrameTooLarge},
		{"just over", []byte{0x01, 0x00, 0x00, 0x00}, ErrFrameTooLarge},
		{"zero", []byte{0, 0, 0, 0}, ErrFrameIllegal},
		{"no header", []byte{0, 0, 0, 5, 0, 0, 0, 0}, ErrFrameIllegal},
		{"header past frame", []byte{0, 0, 0, 5, 0, 0, 0, 2}, ErrFrameIllegal},
		{"header too big", []byte{0, 0, 0x10, 0, 0, 0x0f, 0, 0}, ErrFrameTooLarge},
	}
	for _, c := range bad {
		if _, err := Split(c.b, Limits{}); !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
	}
	// Exactly the limit is accepted (as "need more").
	lim := Limits{MaxFrameSize: 100}
	if n, err := Split([]byte{0, 0, 0, 96, 0, 0, 0, 1}, lim); n != 0 || err != nil {
		t.Errorf("at limit: %d %v", n, err)
	}
	if _, err := Split([]byte{0, 0, 0, 97}, lim); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("over limit: %v", err)
	}
}

// TestListNestingLimit: message lists are decoded without a Validate pass
// first, yet a body still may not nest deeper than MaxDepth, counting the
// list and the message map: the decoder accepts exactly what Validate does.
func TestListNestingLimit(t *testing.T) {
	body := func(d int) []byte {
		b := []byte{0x91, 0x82} // [ {
		b = append(b, 0xa4)
		b = append(b, "body"...)
		b = append(b, 0xc4, 1, 'x')
		b = append(b, 0xa2)
		b = append(b, "zz"...) // an unknown key, skipped
		for range d {
			b = append(b, 0x91)
		}
		return append(b, 0x01) // d non-empty arrays deep
	}
	lim := DefaultLimits()
	for _, d := range []int{1, lim.MaxDepth - 3, lim.MaxDepth - 2, lim.MaxDepth - 1, lim.MaxDepth, HardMaxDepth} {
		b := body(d)
		_, err := decodeMessageList(b, lim)
		verr := Validate(b, lim.MaxDepth)
		if (err == nil) != (verr == nil) {
			t.Errorf("value %d deep (body %d deep): decode error %v, Validate %v", d, d+2, err, verr)
		}
		if wantOK := d+2 <= lim.MaxDepth; (err == nil) != wantOK {
			t.Errorf("value %d deep (body %d deep, limit %d): decode error %v", d, d+2, lim.MaxDepth, err)
		}
	}
}
