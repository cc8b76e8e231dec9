package protocol

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// intKind is the range of an integer field as PROTOCOL.md gives it.
type intKind int

const (
	kInt32 intKind = iota
	kUint32
	kInt64
)

// outOfRange are values each kind of field must refuse (INVALID_PARAMETER);
// edges are the extremes it must keep exactly.
var (
	outOfRange = map[intKind][]any{
		kInt32:  {int64(1<<32 + 5), int64(math.MinInt32 - 1), int64(math.MaxInt32 + 1)},
		kUint32: {int64(1 << 32), int64(-1), int64(1<<32 + 5)},
		kInt64:  {uint64(1 << 63), uint64(math.MaxUint64)},
	}
	edges = map[intKind][]any{
		kInt32:  {int64(math.MaxInt32), int64(math.MinInt32)},
		kUint32: {uint64(math.MaxUint32), int64(0)},
		kInt64:  {int64(math.MaxInt64), int64(math.MinInt64)},
	}
)

// requestInts is every integer field of every request's fields map, by
// code (PROTOCOL.md section 7 and 11.2). TestIntRangeTableComplete holds it
// to what the encoder writes, so a new field cannot be left out.
var requestInts = map[Code]map[string]intKind{
	CodeSendMessage:      {"queueId": kInt32, "flag": kInt32, "bornTimestamp": kInt64},
	CodeSendBatchMessage: {"queueId": kInt32, "bornTimestamp": kInt64},
	CodePullMessage: {"queueId": kInt32, "queueOffset": kInt64, "maxMsgNums": kInt32,
		"suspendTimeoutMillis": kInt64, "commitOffset": kInt64, "maxMsgBytes": kInt32},
	CodeQueryMessage:             {"maxNum": kInt32, "beginTimestamp": kInt64, "endTimestamp": kInt64},
	CodeViewMessageByID:          {},
	CodeGetMaxOffset:             {"queueId": kInt32},
	CodeGetMinOffset:             {"queueId": kInt32},
	CodeQueryConsumerOffset:      {"queueId": kInt32},
	CodeUpdateConsumerOffset:     {"queueId": kInt32, "commitOffset": kInt64},
	CodeGetConsumerOffsets:       {},
	CodeCreateTopic:              {"readQueueNums": kInt32, "writeQueueNums": kInt32, "perm": kInt32},
	CodeUpdateAndCreateTopic:     {"readQueueNums": kInt32, "writeQueueNums": kInt32, "perm": kInt32},
	CodeDeleteTopic:              {},
	CodeGetAllTopicConfig:        {},
	CodeGetBrokerRuntimeInfo:     {},
	CodeHeartbeat:                {"consumerGroups[0].owned[0].queueId": kInt32, "consumerGroups[0].generation": kInt64},
	CodeUnregisterClient:         {},
	CodeConsumerSendMsgBack:      {"commitLogOffset": kInt64, "delayLevel": kInt32, "maxReconsumeTimes": kInt32},
	CodeNotifyConsumerIDsChanged: {},
	CodeGetConsumerGroups:        {},
	CodeDescribeConsumerGroup:    {},
	CodeUpdateBrokerRole:         {"brokerId": kInt64},
	CodeHAReport: {"brokerId": kInt64, "maxOffset": kInt64, "minOffset": kInt64, "tailCrc": kUint32,
		"tailLen": kInt32, "segmentSize": kInt64, "epoch": kInt32, "epochs[0].epoch": kInt32, "epochs[0].startOffset": kInt64, "flushedOffset": kInt64},
	CodeHATransfer:            {"offset": kInt64, "masterMaxOffset": kInt64, "epoch": kInt32, "epochStartOffset": kInt64, "confirmOffset": kInt64},
	CodeHAMetadata:            {"version": kInt64},
	CodeHARefuse:              {},
	CodeHAEpochs:              {"epochs[0].epoch": kInt32, "epochs[0].startOffset": kInt64, "maxOffset": kInt64},
	CodeControllerRaftMessage: {},
	CodeRegisterBroker: {"brokerId": kInt64, "dataVersion.timestamp": kInt64, "dataVersion.counter": kInt64,
		"heartbeatTimeoutMillis": kInt64, "masterEpoch": kInt32},
	CodeBrokerHeartbeat:          {"brokerId": kInt64, "dataVersion.timestamp": kInt64, "dataVersion.counter": kInt64},
	CodeUnregisterBroker:         {"brokerId": kInt64},
	CodeGetRouteInfoByTopic:      {},
	CodeGetBrokerClusterInfo:     {},
	CodeGetAllTopicList:          {},
	CodeDeleteTopicInNamesrv:     {},
	CodeControllerRegisterBroker: {},
	CodeControllerBrokerHeartbeat: {"brokerId": kInt64, "epoch": kInt32, "maxOffset": kInt64,
		"confirmOffset": kInt64, "electionPriority": kInt32},
	CodeControllerAlterSyncStateSet: {"masterId": kInt64, "masterEpoch": kInt32, "syncStateSetEpoch": kInt32,
		"syncStateSet[0]": kInt64},
	CodeControllerElectMaster:     {"brokerId": kInt64},
	CodeControllerGetReplicaInfo:  {"brokerId": kInt64},
	CodeControllerGetMetadataInfo: {},
	CodeNotifyBrokerRoleChanged: {"brokerId": kInt64, "masterId": kInt64, "masterEpoch": kInt32,
		"syncStateSet[0]": kInt64, "syncStateSetEpoch": kInt32, "replicas[0].brokerId": kInt64},
}

// filledTree returns v's fields map as msgpack encodes it with every field
// set (integers 1, one element in every list), decoded into Go's generic
// values: what a client of another language would build.
func filledTree(t *testing.T, v Fields) map[string]any {
	t.Helper()
	fill(reflect.ValueOf(v).Elem())
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var tree map[string]any
	if err := msgpack.Unmarshal(b, &tree); err != nil {
		t.Fatal(err)
	}
	return tree
}

func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0))
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(0.5)
	}
}

// intLeaves lists the paths ("a[0].b") of the integers in a generic tree.
func intLeaves(v any, path string, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			p := k
			if path != "" {
				p = path + "." + k
			}
			intLeaves(e, p, out)
		}
	case []any:
		for i, e := range x {
			intLeaves(e, path+"["+strconv.Itoa(i)+"]", out)
		}
	default:
		switch reflect.ValueOf(v).Kind() {
		case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			*out = append(*out, path)
		}
	}
}

var pathSeg = regexp.MustCompile(`([^.\[]+)|\[(\d+)\]`)

// leafRef is where the last element of a path sits: a key of a map, or an
// index of a list (an integer list such as a SyncStateSet).
type leafRef struct {
	m map[string]any
	k string
	l []any
	i int
}

func (r leafRef) set(v any) {
	if r.m != nil {
		r.m[r.k] = v
	} else {
		r.l[r.i] = v
	}
}

func (r leafRef) get() (any, bool) {
	if r.m != nil {
		x, ok := r.m[r.k]
		return x, ok
	}
	if r.i < len(r.l) {
		return r.l[r.i], true
	}
	return nil, false
}

// leaf returns where the last element of path sits in tree.
func leaf(tree map[string]any, path string) leafRef {
	segs := pathSeg.FindAllStringSubmatch(path, -1)
	var cur any = tree
	for _, s := range segs[:len(segs)-1] {
		if s[1] != "" {
			cur = cur.(map[string]any)[s[1]]
		} else {
			i, _ := strconv.Atoi(s[2])
			cur = cur.([]any)[i]
		}
	}
	last := segs[len(segs)-1]
	if last[1] != "" {
		return leafRef{m: cur.(map[string]any), k: last[1]}
	}
	i, _ := strconv.Atoi(last[2])
	return leafRef{l: cur.([]any), i: i}
}

// requestTree is filledTree of a request of code, made valid where "x"
// is not (HA_METADATA's kind).
func requestTree(t *testing.T, code Code) map[string]any {
	tree := filledTree(t, NewRequest(code))
	if code == CodeHAMetadata {
		tree["kind"] = "topics"
	}
	return tree
}

// fieldsFrame is a frame of code whose fields map is tree.
func fieldsFrame(t *testing.T, code Code, flags Flags, tree map[string]any, body []byte) *Frame {
	t.Helper()
	fields, err := msgpack.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	f, err := DecodeFrame(AppendFrame(nil, &Frame{Code: code, Flags: flags, Fields: fields, Body: body}), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// validBody is a body that decodes for code, for the requests that need one.
func validBody(code Code) []byte {
	switch code {
	case CodeSendBatchMessage:
		return appendMessageList(nil, []Message{{Body: []byte("m")}})
	}
	return nil
}

// TestIntRangeChecked: an integer outside its field's range is refused with
// INVALID_PARAMETER, naming the field and the value, on every request
// (fields decoded by hand, as SEND's, or by msgpack's reflection, which
// truncates silently), and the extremes of the range are kept exactly.
func TestIntRangeChecked(t *testing.T) {
	for code, ints := range requestInts {
		for path, kind := range ints {
			for _, bad := range outOfRange[kind] {
				tree := requestTree(t, code)
				leaf(tree, path).set(bad)
				_, err := DecodeRequest(fieldsFrame(t, code, 0, tree, validBody(code)), Limits{})
				if StatusOf(err) != StatusInvalidParameter {
					t.Errorf("%v %s = %v: status %v (%v), want INVALID_PARAMETER", code, path, bad, StatusOf(err), err)
					continue
				}
				if msg := err.Error(); !strings.Contains(msg, path+": "+fmt.Sprint(bad)+" is out of range") {
					t.Errorf("%v %s = %v: remark %q does not name the field and value", code, path, bad, msg)
				}
			}
			for _, edge := range edges[kind] {
				tree := requestTree(t, code)
				leaf(tree, path).set(edge)
				req, err := DecodeRequest(fieldsFrame(t, code, 0, tree, validBody(code)), Limits{})
				if err != nil {
					t.Errorf("%v %s = %v: %v", code, path, edge, err)
					continue
				}
				got := decodedLeaf(t, req, path)
				if fmt.Sprint(got) != fmt.Sprint(edge) {
					t.Errorf("%v %s = %v: decoded %v", code, path, edge, got)
				}
			}
		}
	}
}

// decodedLeaf is the value at path of v as msgpack encodes it (0 if left out).
func decodedLeaf(t *testing.T, v Fields, path string) any {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var tree map[string]any
	if err := msgpack.Unmarshal(b, &tree); err != nil {
		t.Fatal(err)
	}
	if x, ok := leaf(tree, path).get(); ok {
		return x
	}
	return 0
}

// TestIntRangeTableComplete: requestInts lists every integer the encoder
// writes in the fields of every request, so TestIntRangeChecked covers
// every one.
func TestIntRangeTableComplete(t *testing.T) {
	for c := range codeNames {
		req := NewRequest(c)
		if req == nil {
			continue
		}
		ints, ok := requestInts[c]
		if !ok {
			t.Errorf("%v: no row in requestInts", c)
			continue
		}
		var got []string
		intLeaves(filledTree(t, req), "", &got)
		var want []string
		for p := range ints {
			want = append(want, p)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%v: integer fields %q, requestInts has %q", c, got, want)
		}
	}
}

// TestIntRangeCheckedResponses: the same holds for every response's fields
// (a client reading a broken or hostile broker): every integer the encoder
// writes is refused when it is 2^64-1, out of range for every field type.
func TestIntRangeCheckedResponses(t *testing.T) {
	for c := range codeNames {
		if NewResponse(c) == nil {
			continue
		}
		var paths []string
		intLeaves(filledTree(t, NewResponse(c)), "", &paths)
		for _, path := range paths {
			tree := filledTree(t, NewResponse(c))
			leaf(tree, path).set(uint64(math.MaxUint64))
			err := DecodeResponse(fieldsFrame(t, c, FlagResponse, tree, nil), Limits{}, NewResponse(c))
			if StatusOf(err) != StatusInvalidParameter || !strings.Contains(err.Error(), path+": 18446744073709551615") {
				t.Errorf("%v response %s = 2^64-1: %v (status %v)", c, path, err, StatusOf(err))
			}
		}
	}
}

// TestIntRangeCheckedInBodies: integers in the lists carried by bodies
// (SEND_BATCH messages, pulled messages, topic and offset lists) are held to
// their ranges too, and the error says which element.
func TestIntRangeCheckedInBodies(t *testing.T) {
	msg := func(extra ...any) []byte { // a message map with "body" and extra key/value pairs
		b := appendMapHeader(nil, 1+len(extra)/2)
		b = appendStr(appendStr(b, "body"), "x")
		for i := 0; i < len(extra); i += 2 {
			b = appendStr(b, extra[i].(string))
			switch v := extra[i+1].(type) {
			case int64:
				b = appendInt(b, v)
			case uint64:
				b = appendUint(b, v)
			}
		}
		return b
	}
	list := func(items ...[]byte) []byte {
		b := appendArrayHeader(nil, len(items))
		for _, it := range items {
			b = append(b, it...)
		}
		return b
	}
	topic := func(readQueueNums int64) []byte {
		b, _ := msgpack.Marshal(map[string]any{"topic": "t", "readQueueNums": readQueueNums})
		return b
	}
	batch := AppendFrame(nil, &Frame{Code: CodeSendBatchMessage, Fields: []byte{0x81, 0xa5, 't', 'o', 'p', 'i', 'c', 0xa1, 't'},
		Body: list(msg(), msg("flag", int64(1<<32+5)))})
	pull := AppendFrame(nil, &Frame{Code: CodePullMessage, Flags: FlagResponse,
		Body: list(msg("queueOffset", uint64(math.MaxUint64)))})
	topics := AppendFrame(nil, &Frame{Code: CodeGetAllTopicConfig, Flags: FlagResponse,
		Body: list(topic(1), topic(1<<31))})
	for name, c := range map[string]struct {
		frame []byte
		where string
	}{
		"SEND_BATCH flag":          {batch, "messages[1].flag: 4294967301 is out of range for int32"},
		"PULL queueOffset":         {pull, "messages[0].queueOffset: 18446744073709551615 is out of range for int64"},
		"topic list readQueueNums": {topics, "topics[1].readQueueNums: 2147483648 is out of range for int32"},
	} {
		err := decodeNatural(c.frame, Limits{})
		if StatusOf(err) != StatusInvalidParameter || !strings.Contains(err.Error(), c.where) {
			t.Errorf("%s: %v (status %v), want INVALID_PARAMETER at %q", name, err, StatusOf(err), c.where)
		}
	}
}

// TestMalformedBeatsOutOfRange: a frame with an integer out of range that is
// also malformed (a field of the wrong type, a body that is not msgpack) is
// FRAME_ILLEGAL and closes the connection, whichever comes first.
func TestMalformedBeatsOutOfRange(t *testing.T) {
	fields := func(kv ...any) []byte {
		b := appendMapHeader(nil, len(kv)/2)
		for i := 0; i < len(kv); i += 2 {
			b = appendStr(b, kv[i].(string))
			switch v := kv[i+1].(type) {
			case int64:
				b = appendInt(b, v)
			case string:
				b = appendStr(b, v)
			}
		}
		return b
	}
	big := int64(1<<32 + 5)
	cases := map[string]*Frame{
		"SEND: then topic an int": {Code: CodeSendMessage, Fields: fields("queueId", big, "topic", int64(5))},
		"PULL: then topic an int": {Code: CodePullMessage, Fields: fields("queueId", big, "topic", int64(5))},
		"SEND_BATCH: then a bad body": {Code: CodeSendBatchMessage, Fields: fields("queueId", big),
			Body: []byte{0xdd, 0xff, 0xff, 0xff, 0xff, 0x80}},
		"SEND_BATCH: then a message without body": {Code: CodeSendBatchMessage, Fields: fields("topic", "t"),
			Body: append(append(appendArrayHeader(nil, 2), 0x82, 0xa4, 'b', 'o', 'd', 'y', 0xa0, 0xa4, 'f', 'l', 'a', 'g', 0xcf, 0, 0, 0, 1, 0, 0, 0, 5),
				0x81, 0xa5, 't', 'o', 'p', 'i', 'c', 0xa1, 't')},
	}
	for name, f := range cases {
		err := decodeNatural(AppendFrame(nil, f), Limits{})
		if StatusOf(err) != StatusFrameIllegal {
			t.Errorf("%s: status %v (%v), want FRAME_ILLEGAL", name, StatusOf(err), err)
		}
	}
	// Without its malformed part the frame is INVALID_PARAMETER: the cases
	// above test precedence.
	ok := &Frame{Code: CodeSendMessage, Fields: fields("queueId", big, "topic", "t")}
	if err := decodeNatural(AppendFrame(nil, ok), Limits{}); StatusOf(err) != StatusInvalidParameter {
		t.Errorf("SEND queueId 2^32+5 alone: status %v (%v)", StatusOf(err), err)
	}
}

// TestIntRangeCheckedEmbeddedName: msgpack also decodes an inlined struct
// under the embedded field's own name (CREATE_TOPIC's "TopicConfig"), and
// truncates there too: the check follows it.
func TestIntRangeCheckedEmbeddedName(t *testing.T) {
	tree := map[string]any{"TopicConfig": map[string]any{"topic": "t", "perm": int64(1<<32 + 6)}}
	var plain CreateTopicRequest
	if b, _ := msgpack.Marshal(tree); msgpack.Unmarshal(b, &plain) != nil || plain.Perm != 6 {
		t.Logf("msgpack no longer decodes the embedded name as it did (perm %d): the check is still right", plain.Perm)
	}
	_, err := DecodeRequest(fieldsFrame(t, CodeCreateTopic, 0, tree, nil), Limits{})
	if StatusOf(err) != StatusInvalidParameter || !strings.Contains(err.Error(), "TopicConfig.perm: 4294967302") {
		t.Errorf("%v (status %v), want INVALID_PARAMETER at TopicConfig.perm", err, StatusOf(err))
	}
}
