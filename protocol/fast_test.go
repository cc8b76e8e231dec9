package protocol

import (
	"bytes"
	"math"
	"math/rand"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// TestFastFieldsMatchGeneric: the hand-written field codecs produce exactly
// the generic canonical encoding, and decode what the generic encoder wrote.
func TestFastFieldsMatchGeneric(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	ints := []int64{0, 1, -1, 31, 127, 128, 255, 256, -32, -33, -128, -129, 65535, 65536, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64}
	for i := 0; i < 500; i++ {
		pick := func() int64 {
			if rng.Intn(2) == 0 {
				return ints[rng.Intn(len(ints))]
			}
			return rng.Int63() >> uint(rng.Intn(63))
		}
		req := &SendRequest{ProducerGroup: "pg", Topic: "t" + string(rune('a'+rng.Intn(26))), QueueID: int32(pick()), Flag: int32(pick()),
			BornTimestamp: pick()}
		if rng.Intn(2) == 0 {
			req.Properties = map[string]string{"KEYS": "k1 k2", "TAGS": "x", "Z": "", "A": "1"}
		}
		resp := &SendResponse{MsgID: "0A000001000027AF0000000000000001", QueueID: int32(pick()), QueueOffset: pick()}
		pull := &PullResponse{NextBeginOffset: pick(), MinOffset: pick(), MaxOffset: pick(), SuggestWhichBrokerID: pick()}
		batch := &SendBatchRequest{ProducerGroup: "pg", Topic: req.Topic, QueueID: int32(pick()), BornTimestamp: pick()}
		batchResp := &SendBatchResponse{QueueID: int32(pick()), QueueOffset: pick()}
		switch rng.Intn(3) { // nil, empty, or ids (some empty, over 15 for a longer array header)
		case 1:
			batchResp.MsgIDs = []string{}
		case 2:
			for range rng.Intn(40) {
				batchResp.MsgIDs = append(batchResp.MsgIDs, resp.MsgID[:rng.Intn(len(resp.MsgID)+1)])
			}
		}
		for _, v := range []Fields{req, resp, pull, batch, batchResp} {
			generic, err := appendValue(nil, v)
			if err != nil {
				t.Fatal(err)
			}
			fast := v.(fieldsAppender).appendFieldsMap(nil)
			if !bytes.Equal(generic, fast) {
				t.Fatalf("%T %+v:\n fast    %x\n generic %x", v, v, fast, generic)
			}
		}
		var got SendRequest
		b, _ := msgpack.Marshal(req) // a non-canonical encoder: the decoder takes it too
		if err := unmarshalFields(b, DefaultLimits(), &got); err != nil {
			t.Fatal(err)
		}
		if got.Topic != req.Topic || got.QueueID != req.QueueID || got.Flag != req.Flag || got.BornTimestamp != req.BornTimestamp || len(got.Properties) != len(req.Properties) {
			t.Fatalf("decoded %+v, want %+v", got, req)
		}
		var gotBatch SendBatchRequest
		b, _ = msgpack.Marshal(batch)
		if err := unmarshalFields(b, DefaultLimits(), &gotBatch); err != nil {
			t.Fatal(err)
		}
		if gotBatch.ProducerGroup != batch.ProducerGroup || gotBatch.Topic != batch.Topic || gotBatch.QueueID != batch.QueueID || gotBatch.BornTimestamp != batch.BornTimestamp {
			t.Fatalf("decoded %+v, want %+v", gotBatch, *batch)
		}
	}
}

// TestDecodeSendBatchResponse: the hand-written decoder of a batch's
// answer agrees with DecodeResponse on encodings of either encoder, on the
// values' edges and on malformed fields.
func TestDecodeSendBatchResponse(t *testing.T) {
	ids := []string{"0A000001000027AF0000000000000001", "0A000001000027AF0000000000000002", ""}
	type wire struct {
		QueueID     any `msgpack:"queueId"`
		QueueOffset any `msgpack:"queueOffset"`
		MsgIDs      any `msgpack:"msgIds"`
		Other       any `msgpack:"other,omitempty"`
	}
	encode := func(v any) []byte {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name   string
		fields []byte
		ok     bool
	}{
		{"three ids", encode(SendBatchResponse{QueueID: 3, QueueOffset: 1 << 40, MsgIDs: ids}), true},
		{"canonical", mustAppend(t, &SendBatchResponse{QueueID: -1, QueueOffset: 7, MsgIDs: ids[:1]}), true},
		{"no ids", encode(wire{QueueID: 1, QueueOffset: 2, MsgIDs: nil}), true},
		{"empty ids", encode(wire{QueueID: 1, QueueOffset: 2, MsgIDs: []string{}}), true},
		{"an unknown key", encode(wire{QueueID: 1, QueueOffset: 2, MsgIDs: ids, Other: map[string]int{"x": 1}}), true},
		{"no fields", nil, true},
		{"queueId out of range", encode(wire{QueueID: int64(math.MaxInt32) + 1, QueueOffset: 2, MsgIDs: ids}), false},
		{"an id not a string", encode(wire{QueueID: 1, QueueOffset: 2, MsgIDs: []any{"a", 7}}), false},
		{"ids not a list", encode(wire{QueueID: 1, QueueOffset: 2, MsgIDs: "a"}), false},
		{"a string offset", encode(wire{QueueID: 1, QueueOffset: "2", MsgIDs: ids}), false},
		{"truncated", encode(SendBatchResponse{QueueID: 3, MsgIDs: ids})[:20], false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &Frame{Code: CodeSendBatchMessage, Flags: FlagResponse, Fields: tt.fields}
			var want, got SendBatchResponse
			werr := DecodeResponse(f, Limits{}, &want)
			gerr := DecodeSendBatchResponse(f, Limits{}, &got)
			if (werr == nil) != tt.ok || (gerr == nil) != tt.ok {
				t.Fatalf("DecodeResponse: %v, DecodeSendBatchResponse: %v; want ok %v", werr, gerr, tt.ok)
			}
			if tt.ok && !sameBatchResponse(got, want) {
				t.Fatalf("decoded %+v, DecodeResponse %+v", got, want)
			}
		})
	}
}

// mustAppend is v's fields as this package's encoder writes them.
func mustAppend(t *testing.T, v Fields) []byte {
	b, err := appendValue(nil, v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
