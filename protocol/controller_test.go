package protocol

import (
	"errors"
	"reflect"
	"testing"
)

var sampleGroup = GroupRef{ClusterName: "DefaultCluster", BrokerName: "broker-a"}

var sampleReplicaInfo = &ReplicaInfo{GroupRef: sampleGroup, BrokerID: 2, MasterID: 1, MasterAddr: "10.0.0.1:10911",
	MasterHAAddr: "10.0.0.1:10912", MasterEpoch: 3, SyncStateSet: []int64{1, 2}, SyncStateSetEpoch: 7,
	Replicas: []Replica{{BrokerID: 1, BrokerAddr: "10.0.0.1:10911", HAServerAddr: "10.0.0.1:10912", Alive: true},
		{BrokerID: 2, BrokerAddr: "10.0.0.2:10911"}}}

// controllerRequestCases are one request of every controller code (they
// join requestCases, so the round-trip test and the fuzz seeds cover them).
func controllerRequestCases() []Request {
	return []Request{
		&ControllerRegisterBrokerRequest{GroupRef: sampleGroup, Identity: "5f0c1d2e", BrokerAddr: "10.0.0.1:10911", HAServerAddr: "10.0.0.1:10912"},
		&ControllerHeartbeatRequest{GroupRef: sampleGroup, BrokerID: 1, BrokerAddr: "10.0.0.1:10911", Epoch: 3,
			MaxOffset: 1 << 40, ConfirmOffset: 1<<40 - 5, ElectionPriority: 2},
		&AlterSyncStateSetRequest{GroupRef: sampleGroup, MasterID: 1, MasterEpoch: 3, SyncStateSetEpoch: 7, SyncStateSet: []int64{1, 2, 3}},
		&ElectMasterRequest{GroupRef: sampleGroup, BrokerID: 2},
		&GetReplicaInfoRequest{GroupRef: sampleGroup, BrokerID: 2},
		&GetControllerMetadataRequest{},
		&NotifyBrokerRoleChangedRequest{ReplicaInfo: *sampleReplicaInfo},
	}
}

func TestControllerResponseRoundTrip(t *testing.T) {
	cases := []struct {
		code Code
		resp Fields
	}{
		{CodeControllerRegisterBroker, sampleReplicaInfo},
		{CodeControllerAlterSyncStateSet, &ReplicaInfo{GroupRef: sampleGroup, MasterID: 1, MasterEpoch: 1, SyncStateSet: []int64{1}, SyncStateSetEpoch: 2, Replicas: []Replica{}}},
		{CodeControllerBrokerHeartbeat, &ControllerHeartbeatResponse{MasterEpoch: 3, SyncStateSetEpoch: 4}},
		{CodeControllerGetMetadataInfo, &ControllerMetadata{IsLeader: true, LeaderAddr: "h:9878", Term: 7, Groups: []ReplicaInfo{*sampleReplicaInfo}}},
		{CodeControllerGetMetadataInfo, &ControllerMetadata{LeaderAddr: "h:9878"}},
	}
	for _, c := range cases {
		b, err := AppendResponse(nil, c.code, 9, StatusOK, "", c.resp)
		if err != nil {
			t.Fatal(err)
		}
		f, err := DecodeFrame(b, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		got := NewResponse(c.code)
		if err := DecodeResponse(f, Limits{}, got); err != nil {
			t.Fatalf("%v: %v", c.code, err)
		}
		if !reflect.DeepEqual(got, c.resp) {
			t.Errorf("%v round trip:\n got %#v\nwant %#v", c.code, got, c.resp)
		}
	}
}

func TestControllerCodesAndStatuses(t *testing.T) {
	// RocketMQ's numbers, which a RocketMQ-speaking tool would send.
	codes := map[Code]string{1001: "CONTROLLER_ALTER_SYNC_STATE_SET", 1002: "CONTROLLER_ELECT_MASTER",
		1003: "CONTROLLER_REGISTER_BROKER", 1004: "CONTROLLER_GET_REPLICA_INFO", 1005: "CONTROLLER_GET_METADATA_INFO",
		1008: "NOTIFY_BROKER_ROLE_CHANGED"}
	for c, name := range codes {
		if c.String() != name {
			t.Errorf("code %d = %v, want %s", int32(c), c, name)
		}
	}
	statuses := map[Status]string{2000: "CONTROLLER_FENCED_MASTER_EPOCH", 2001: "CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH",
		2007: "CONTROLLER_NOT_LEADER", 2012: "CONTROLLER_ELECT_MASTER_FAILED"}
	for s, name := range statuses {
		if s.String() != name {
			t.Errorf("status %d = %v, want %s", int32(s), s, name)
		}
	}
	if CodeControllerBrokerHeartbeat == CodeBrokerHeartbeat {
		t.Error("the controller heartbeat collides with the name server's")
	}
}

func TestControllerRequestCheck(t *testing.T) {
	type checker interface{ Check() error }
	good := []checker{}
	for _, r := range controllerRequestCases() {
		if c, ok := r.(checker); ok {
			good = append(good, c)
		}
	}
	for _, c := range good {
		if err := c.Check(); err != nil {
			t.Errorf("%T: %v", c, err)
		}
	}
	bad := []checker{
		&ControllerRegisterBrokerRequest{GroupRef: sampleGroup, BrokerAddr: "h:1"},
		&ControllerRegisterBrokerRequest{GroupRef: GroupRef{BrokerName: "b"}, Identity: "x", BrokerAddr: "h:1"},
		&ControllerHeartbeatRequest{GroupRef: sampleGroup, BrokerAddr: "h:1"},
		&ControllerHeartbeatRequest{GroupRef: sampleGroup, BrokerID: 1},
		&AlterSyncStateSetRequest{GroupRef: sampleGroup, MasterID: 1},
		&AlterSyncStateSetRequest{GroupRef: sampleGroup, MasterID: 1, SyncStateSet: []int64{1, 1}},
		&AlterSyncStateSetRequest{GroupRef: sampleGroup, MasterID: 1, SyncStateSet: []int64{1, -2}},
		&AlterSyncStateSetRequest{GroupRef: sampleGroup, SyncStateSet: []int64{1}},
		&AlterSyncStateSetRequest{GroupRef: sampleGroup, MasterID: 1, SyncStateSet: make([]int64, MaxSyncStateSet+1)},
		&ElectMasterRequest{GroupRef: sampleGroup, BrokerID: -1},
		&GetReplicaInfoRequest{GroupRef: GroupRef{ClusterName: "c"}},
	}
	for _, c := range bad {
		if err := c.Check(); !errors.Is(err, ErrInvalidParameter) {
			t.Errorf("%T %+v: Check = %v, want INVALID_PARAMETER", c, c, err)
		}
	}
}

func TestValueRoundTrip(t *testing.T) {
	in := *sampleReplicaInfo
	b, err := MarshalValue(&in)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := MarshalValue(&in)
	if string(b) != string(b2) {
		t.Fatal("encoding is not canonical")
	}
	var out ReplicaInfo
	if err := UnmarshalValue(b, Limits{}, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("got %#v", out)
	}
	// An epoch beyond int32 is refused, not truncated.
	wide, _ := MarshalValue(map[string]int64{"masterEpoch": 1 << 40})
	if err := UnmarshalValue(wide, Limits{}, &out); !errors.Is(err, ErrInvalidParameter) {
		t.Fatalf("wide epoch: %v", err)
	}
	for name, v := range hostileValues {
		if err := UnmarshalValue(v, Limits{}, &out); StatusOf(err) != StatusFrameIllegal {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzControllerDecoders feeds arbitrary fields and bodies to every
// controller request and response type, and arbitrary bytes to
// UnmarshalValue: no panic, bounded allocation, and whatever decodes
// re-encodes to something that decodes to the same value.
func FuzzControllerDecoders(f *testing.F) {
	for _, r := range controllerRequestCases() {
		b, _ := MarshalValue(r)
		f.Add(b, []byte(nil))
	}
	f.Add([]byte{0x80}, []byte{0x91, 0x80})
	for _, v := range hostileValues {
		f.Add(v, v)
	}
	codes := []Code{CodeControllerAlterSyncStateSet, CodeControllerElectMaster, CodeControllerRegisterBroker,
		CodeControllerGetReplicaInfo, CodeControllerGetMetadataInfo, CodeNotifyBrokerRoleChanged, CodeControllerBrokerHeartbeat}
	f.Fuzz(func(t *testing.T, fields, body []byte) {
		lim := Limits{}
		for _, c := range codes {
			fr := &Frame{Code: c, Fields: fields, Body: body}
			var req Request
			var err error
			if a := allocated(func() { req, err = DecodeRequest(fr, lim) }); a > allocBound(len(fields)+len(body)) {
				t.Fatalf("%v: decoding allocated %d", c, a)
			}
			if err == nil {
				reencodes(t, req)
			}
			fr.Flags = FlagResponse
			if into := NewResponse(c); into != nil {
				_ = DecodeResponse(fr, lim, into)
			}
		}
		var ri ReplicaInfo
		_ = UnmarshalValue(fields, lim, &ri)
	})
}

func reencodes(t *testing.T, req Request) {
	t.Helper()
	b, err := AppendRequest(nil, 1, 0, req)
	if err != nil {
		t.Fatalf("re-encode %T: %v", req, err)
	}
	f, err := DecodeFrame(b, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeRequest(f, Limits{})
	if err != nil {
		t.Fatalf("re-decode %T: %v", req, err)
	}
	b2, err := AppendRequest(nil, 1, 0, got)
	if err != nil || string(b2) != string(b) {
		t.Fatalf("re-encode of %T is not stable: %v\n%x\n%x", req, err, b2, b)
	}
}
