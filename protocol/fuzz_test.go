package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// frameOf wraps a header and body in the two length words, unchecked.
func frameOf(header, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(4+len(header)+len(body)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(header)))
	return append(append(b, header...), body...)
}

func nested(depth int) []byte {
	return append(bytes.Repeat([]byte{0x91}, depth), 0xc0)
}

// hostileValues are msgpack bombs: each declares far more than it carries.
var hostileValues = map[string][]byte{
	"bin32 4GiB":        {0xc6, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5},
	"str32 4GiB":        {0xdb, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5},
	"array32 4G":        {0xdd, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5},
	"map32 4G":          {0xdf, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5},
	"ext32 4GiB":        {0xc9, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5},
	"map16 in a map":    {0x81, 0xa1, 'a', 0xde, 0xff, 0xff, 0, 0, 0, 0},
	"array16 of maps":   {0xdc, 0xff, 0xff, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80},
	"10000-deep arrays": nested(10000),
	"33-deep arrays":    nested(33),
	"never-used 0xc1":   {0xc1},
	"trailing bytes":    {0x80, 0x00},
	"truncated uint64":  {0xcf, 0, 0, 0},
}

// hostileFrames are frames whose header or body is a bomb.
func hostileFrames() map[string][]byte {
	m := map[string][]byte{
		"4GiB length":      {0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x01, 0x80},
		"4GiB header":      {0x00, 0x00, 0x00, 0x10, 0xff, 0xff, 0xff, 0xff, 0x80},
		"zero length":      {0, 0, 0, 0},
		"empty header":     {0, 0, 0, 4, 0, 0, 0, 0},
		"nil header":       frameOf([]byte{0xc0}, nil),
		"array header":     frameOf([]byte{0x90}, nil),
		"header bin32":     frameOf([]byte{0x81, 0xa1, 'x', 0xc6, 0xff, 0xff, 0xff, 0xff}, nil),
		"fields array32":   frameOf([]byte{0x81, 0xa6, 'f', 'i', 'e', 'l', 'd', 's', 0xdd, 0xff, 0xff, 0xff, 0xff}, nil),
		"fields map32":     frameOf([]byte{0x82, 0xa4, 'c', 'o', 'd', 'e', 0x0b, 0xa6, 'f', 'i', 'e', 'l', 'd', 's', 0xdf, 0xff, 0xff, 0xff, 0xff}, nil),
		"deep fields":      frameOf(append([]byte{0x81, 0xa6, 'f', 'i', 'e', 'l', 'd', 's'}, nested(10000)...), nil),
		"batch array32":    frameOf([]byte{0x81, 0xa4, 'c', 'o', 'd', 'e', 0xcd, 0x01, 0x40}, []byte{0xdd, 0xff, 0xff, 0xff, 0xff, 0x80}),
		"batch of empties": frameOf([]byte{0x81, 0xa4, 'c', 'o', 'd', 'e', 0xcd, 0x01, 0x40}, append([]byte{0xdc, 0x10, 0x00}, bytes.Repeat([]byte{0x80}, 4096)...)),
		"pull resp bin32": frameOf([]byte{0x83, 0xa4, 'c', 'o', 'd', 'e', 0x0b, 0xa5, 'f', 'l', 'a', 'g', 's', 0x01, 0xa6, 's', 't', 'a', 't', 'u', 's', 0x00},
			[]byte{0x91, 0x81, 0xa4, 'b', 'o', 'd', 'y', 0xc6, 0xff, 0xff, 0xff, 0xff}),
		"props map32": frameOf([]byte{0x82, 0xa4, 'c', 'o', 'd', 'e', 0x0a, 0xa6, 'f', 'i', 'e', 'l', 'd', 's', 0x81, 0xaa, 'p', 'r', 'o', 'p', 'e', 'r', 't', 'i', 'e', 's', 0xdf, 0xff, 0xff, 0xff, 0xff}, nil),
	}
	for name, v := range hostileValues {
		m["header "+name] = frameOf(v, nil)
		m["fields "+name] = frameOf(append([]byte{0x82, 0xa4, 'c', 'o', 'd', 'e', 0x0b, 0xa6, 'f', 'i', 'e', 'l', 'd', 's'}, v...), nil)
	}
	return m
}

// validFrames are one request and one response of every type.
func validFrames(t testing.TB) [][]byte {
	var out [][]byte
	for _, req := range requestCases() {
		b, err := AppendRequest(nil, 3, 0, req)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	for _, b := range goldenFrames(t) {
		out = append(out, b)
	}
	resps := []struct {
		c Code
		f Fields
	}{
		{CodeSendBatchMessage, &SendBatchResponse{QueueID: 1, MsgIDs: []string{"a"}}},
		{CodeQueryMessage, &QueryMessageResponse{Messages: []MessageExt{sampleExt}}},
		{CodeViewMessageByID, &ViewMessageResponse{Message: sampleExt}},
		{CodeGetConsumerOffsets, &ConsumerOffsetsResponse{Offsets: []ConsumerQueueOffset{{Topic: "t"}}}},
		{CodeGetAllTopicConfig, &TopicListResponse{Topics: []TopicConfig{{Topic: "t", Perm: 6}}}},
		{CodeGetBrokerRuntimeInfo, &BrokerRuntimeInfo{BrokerName: "b", Extra: map[string]string{"a": "b"}}},
		{CodeGetMaxOffset, &OffsetResponse{Offset: 5}},
		{CodeRegisterBroker, &RegisterBrokerResponse{Changed: true, LeaseMillis: 5000, MasterAddr: "h:1"}},
		{CodeGetRouteInfoByTopic, sampleRoute},
		{CodeGetBrokerClusterInfo, sampleClusterInfo},
		{CodeGetAllTopicList, &TopicNameList{Topics: []TopicName{{Topic: "a"}}}},
		{CodeControllerGetReplicaInfo, sampleReplicaInfo},
		{CodeControllerGetMetadataInfo, &ControllerMetadata{IsLeader: true, LeaderAddr: "h:9878", Groups: []ReplicaInfo{*sampleReplicaInfo}}},
		{CodeControllerBrokerHeartbeat, &ControllerHeartbeatResponse{MasterEpoch: 3, SyncStateSetEpoch: 4}},
	}
	for _, r := range resps {
		b, err := AppendResponse(nil, r.c, 4, StatusOK, "", r.f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// decodeNatural runs what a peer does with received bytes: Split, decode
// the frame, decode the request or response its code names.
func decodeNatural(data []byte, lim Limits) error {
	n, err := Split(data, lim)
	if err != nil || n == 0 {
		return err
	}
	f, err := DecodeFrame(data[:n], lim)
	if err != nil {
		return err
	}
	if f.IsResponse() {
		return DecodeResponse(f, lim, NewResponse(f.Code))
	}
	_, err = DecodeRequest(f, lim)
	return err
}

// decodeAsEverything decodes a frame's fields and body as every type.
func decodeAsEverything(f *Frame, lim Limits) {
	for c := range codeNames {
		g := *f
		g.Code, g.Flags = c, 0
		_, _ = DecodeRequest(&g, lim)
		g.Flags = FlagResponse
		if into := NewResponse(c); into != nil {
			_ = DecodeResponse(&g, lim, into)
		}
	}
}

// allocated returns the bytes fn allocated on the heap.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// allocBound is what decoding n bytes may allocate: a small multiple of the
// input plus a constant for pooled decoders and the like.
func allocBound(n int) uint64 { return 64*uint64(n) + 128<<10 }

func TestHostileInputsDoNotAllocate(t *testing.T) {
	lim := Limits{}
	for name, v := range hostileValues {
		if err := Validate(v, 0); !errors.Is(err, ErrInvalidMsgpack) {
			t.Errorf("Validate(%s) = %v", name, err)
		}
		if a := testing.AllocsPerRun(10, func() { _ = Validate(v, 0) }); a != 0 {
			t.Errorf("Validate(%s) allocates %v times", name, a)
		}
	}
	for name, fr := range hostileFrames() {
		var err error
		a := allocated(func() { err = decodeNatural(fr, lim) })
		if err == nil {
			t.Errorf("%s: accepted", name)
		} else if s := StatusOf(err); s != StatusFrameIllegal {
			t.Errorf("%s: status %v (%v), want FRAME_ILLEGAL", name, s, err)
		}
		limit := allocBound(len(fr))
		if len(fr) <= 20 {
			limit = 64 << 10
		}
		if a > limit {
			t.Errorf("%s (%d bytes): allocated %d bytes, limit %d", name, len(fr), a, limit)
		}
		if f, err := DecodeFrame(fr, lim); err == nil {
			a := allocated(func() { decodeAsEverything(f, lim) })
			if a > uint64(len(codeNames))*2*allocBound(len(fr)) {
				t.Errorf("%s: decoding as every type allocated %d bytes", name, a)
			}
		}
	}
	// What the validator protects against: the library alone, on a 5-byte
	// bin32, allocates whatever the length says (here 1 GiB would be
	// attempted; the test only checks that Validate rejects it first).
	bomb := []byte{0xc6, 0x40, 0x00, 0x00, 0x00}
	if err := Validate(bomb, 0); err == nil {
		t.Fatal("bomb accepted")
	}
}

func TestValidateAcceptsValid(t *testing.T) {
	vals := []any{
		nil, true, 0, -1, -33, int64(1) << 40, int64(-1) << 40, 3.5, float32(1.5), "", "x", string(make([]byte, 40)),
		string(make([]byte, 300)), string(make([]byte, 70000)), []byte{}, make([]byte, 300), make([]byte, 70000),
		[]int{1, 2, 3}, make([]int, 20), make([]int, 70000), map[string]int{"a": 1},
		map[string][]any{"x": {1, "y", []any{map[string]any{}}}}, sampleExt,
	}
	for i, v := range vals {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := Validate(b, 0); err != nil {
			t.Errorf("value %d (%T): %v", i, v, err)
		}
		if len(b) > 1 {
			if err := Validate(b[:len(b)-1], 0); err == nil {
				t.Errorf("value %d truncated: accepted", i)
			}
		}
	}
	// Depth: 32 nested containers pass, 33 do not.
	if err := Validate(nested(32), 32); err != nil {
		t.Error(err)
	}
	if err := Validate(nested(33), 32); err == nil {
		t.Error("33 deep accepted")
	}
	deep := nested(32)
	if a := testing.AllocsPerRun(10, func() { _ = Validate(deep, 32) }); a != 0 {
		t.Errorf("allocs %v", a)
	}
}

func FuzzSplit(f *testing.F) {
	for _, b := range validFrames(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lim := Limits{MaxFrameSize: 1 << 20, MaxHeaderSize: 4 << 10}
		n, err := Split(data, lim)
		if n < 0 || n > len(data) || (err != nil && n != 0) {
			t.Fatalf("Split = %d, %v for %d bytes", n, err, len(data))
		}
		if len(data) >= 4 && binary.BigEndian.Uint32(data) > 1<<20-4 && err == nil {
			t.Fatalf("oversized length accepted")
		}
		if n > 0 {
			if _, err := DecodeFrame(data[:n], lim); errors.Is(err, ErrFrameTooLarge) {
				t.Fatalf("Split accepted what DecodeFrame calls too large: %v", err)
			}
			// Split is stable under more data.
			if m, err2 := Split(append(data[:n:n], 0, 0, 0), lim); m != n || err2 != nil {
				t.Fatalf("Split changed with trailing data: %d %v", m, err2)
			}
		}
	})
}

func FuzzDecodeFrame(f *testing.F) {
	for _, b := range validFrames(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lim := Limits{}
		var err error
		if a := allocated(func() { err = decodeNatural(data, lim) }); a > allocBound(len(data)) {
			t.Fatalf("decoding %d bytes allocated %d (err %v)", len(data), a, err)
		}
		n, _ := Split(data, lim)
		if n == 0 {
			return
		}
		fr, err := DecodeFrame(data[:n], lim)
		if err != nil {
			return
		}
		// Into a Frame that held another: the same frame, nothing left over.
		into := Frame{Code: 9999, Remark: "left over", Fields: []byte{1}, Body: []byte{2}, Request: &SendRequest{}, RequestErr: ErrFrameIllegal}
		if err := DecodeFrameInto(&into, data[:n], lim); err != nil || !reflect.DeepEqual(into, *fr) {
			t.Fatalf("DecodeFrameInto: %+v, %v; DecodeFrame: %+v", into, err, fr)
		}
		// As a SEND: DecodeSendInto decodes what DecodeRequest does, with
		// the same error, strings shared with the send before or not.
		send := *fr
		send.Code, send.Flags = CodeSendMessage, send.Flags&^FlagResponse
		want, werr := DecodeRequest(&send, lim)
		for _, prev := range []*SendRequest{nil, {ProducerGroup: "group", Topic: "topic"}} {
			got := SendRequest{Topic: "left over", Body: []byte{1}}
			ok, gerr := DecodeSendInto(&send, lim, &got, prev)
			if !ok || fmt.Sprint(gerr) != fmt.Sprint(werr) || werr == nil && !reflect.DeepEqual(&got, want) {
				t.Fatalf("DecodeSendInto: %v %+v %v; DecodeRequest: %+v %v", ok, got, gerr, want, werr)
			}
		}
		// As the answer to a SEND: DecodeSendResponse decodes what
		// DecodeResponse does, with the same error.
		answer := *fr
		answer.Code = CodeSendMessage
		var wantResp, gotResp SendResponse
		werr = DecodeResponse(&answer, lim, &wantResp)
		if gerr := DecodeSendResponse(&answer, lim, &gotResp); fmt.Sprint(gerr) != fmt.Sprint(werr) || gotResp != wantResp {
			t.Fatalf("DecodeSendResponse: %+v %v; DecodeResponse: %+v %v", gotResp, gerr, wantResp, werr)
		}
		// As the answer to a SEND_BATCH: DecodeSendBatchResponse accepts
		// what DecodeResponse does, into the same values.
		answer.Code = CodeSendBatchMessage
		var wantBatch, gotBatch SendBatchResponse
		werr = DecodeResponse(&answer, lim, &wantBatch)
		gerr := DecodeSendBatchResponse(&answer, lim, &gotBatch)
		if (gerr == nil) != (werr == nil) || werr == nil && !sameBatchResponse(gotBatch, wantBatch) {
			t.Fatalf("DecodeSendBatchResponse: %+v %v; DecodeResponse: %+v %v", gotBatch, gerr, wantBatch, werr)
		}
		if a := allocated(func() { decodeAsEverything(fr, lim) }); a > uint64(len(codeNames))*2*allocBound(n) {
			t.Fatalf("decoding %d bytes as every type allocated %d", n, a)
		}
		checkRawProperties(t, fr, lim)
		// A decoded frame re-encodes to a frame that decodes to the same header.
		re := AppendFrame(nil, fr)
		fr2, err := DecodeFrame(re, lim)
		if err != nil {
			t.Fatalf("re-encoded frame: %v", err)
		}
		if fr2.Code != fr.Code || fr2.Opaque != fr.Opaque || fr2.Flags != fr.Flags || fr2.Remark != fr.Remark ||
			(fr.IsResponse() && fr2.Status != fr.Status) || !bytes.Equal(fr2.Body, fr.Body) {
			t.Fatalf("re-encoded header differs: %+v vs %+v", fr2, fr)
		}
	})
}

func FuzzValidate(f *testing.F) {
	for _, v := range hostileValues {
		f.Add(v)
	}
	for _, b := range validFrames(f) {
		f.Add(b[PrefixSize:])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// Validate itself allocates nothing (TestHostileInputsDoNotAllocate
		// checks that exactly); here the process-wide counter also sees the
		// fuzzing engine's own allocations, so allow a little noise.
		if a := allocated(func() { _ = Validate(data, 0) }); a > 16<<10 {
			t.Fatalf("Validate allocated %d bytes", a)
		}
		if Validate(data, 0) != nil {
			return
		}
		// Whatever Validate accepts, the library can step over exactly.
		d := msgpack.NewDecoder(bytes.NewReader(data))
		if err := d.Skip(); err != nil {
			t.Fatalf("Validate accepted what Skip rejects: %v", err)
		}
		if d.Buffered().(*bytes.Reader).Len() != 0 {
			t.Fatal("Validate accepted trailing bytes")
		}
	})
}

// TestWriteSeedCorpus (with -update) writes the hostile seeds to
// testdata/fuzz so that plain `go test` replays them on every run.
func TestWriteSeedCorpus(t *testing.T) {
	if !*update {
		t.Skip("run with -update to rewrite testdata/fuzz")
	}
	write := func(target, name string, data []byte) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	clean := func(s string) string {
		out := []byte(strings.ToLower(s))
		for i, c := range out {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
				out[i] = '_'
			}
		}
		return string(out)
	}
	frames := hostileFrames()
	for i, v := range validFrames(t) {
		for _, cut := range []int{3, 7, 9, len(v) / 2, len(v) - 1} {
			if cut < len(v) {
				frames[fmt.Sprintf("truncated %d at %d", i, cut)] = v[:cut]
			}
		}
	}
	for name, fr := range frames {
		write("FuzzDecodeFrame", clean(name), fr)
		write("FuzzSplit", clean(name), fr)
	}
	for name, v := range hostileValues {
		write("FuzzValidate", clean(name), v)
	}
}

// checkRawProperties decodes a SEND or SEND_BATCH frame with and without
// Limits.RawProperties: both must accept or reject it alike and give the
// same properties.
func checkRawProperties(t *testing.T, fr *Frame, lim Limits) {
	t.Helper()
	if fr.Code != CodeSendMessage && fr.Code != CodeSendBatchMessage || fr.IsResponse() {
		return
	}
	rawLim := lim
	rawLim.RawProperties = true
	a, errA := DecodeRequest(fr, lim)
	b, errB := DecodeRequest(fr, rawLim)
	if (errA == nil) != (errB == nil) {
		t.Fatalf("map decoding: %v; raw decoding: %v", errA, errB)
	}
	if errA != nil {
		return
	}
	var ma, mb []Message
	switch x := a.(type) {
	case *SendRequest:
		ma, mb = []Message{x.Message()}, []Message{b.(*SendRequest).Message()}
	case *SendBatchRequest:
		ma, mb = x.Messages, b.(*SendBatchRequest).Messages
	}
	for i := range ma {
		if mb[i].Properties != nil {
			t.Fatalf("message %d: raw decoding filled Properties", i)
		}
		for k, v := range ma[i].Properties {
			if got := mb[i].Property(k); got != v {
				t.Fatalf("message %d: property %q: raw %q, map %q", i, k, got, v)
			}
		}
		pa, pb := ma[i].Properties, mb[i].PropertyMap()
		if len(pa) != len(pb) || !maps.Equal(pa, pb) {
			t.Fatalf("message %d: raw properties %v, map %v", i, pb, pa)
		}
	}
}

// sameBatchResponse compares two decoded batch answers, an empty list of
// ids equal to none.
func sameBatchResponse(a, b SendBatchResponse) bool {
	return a.QueueID == b.QueueID && a.QueueOffset == b.QueueOffset && slices.Equal(a.MsgIDs, b.MsgIDs)
}
