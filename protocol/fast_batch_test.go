package protocol

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// genericBatch is SendBatchRequest's fields without its hand-written
// codec: what msgpack's reflection decodes.
type genericBatch struct {
	ProducerGroup string `msgpack:"producerGroup"`
	Topic         string `msgpack:"topic"`
	QueueID       int32  `msgpack:"queueId"`
	BornTimestamp int64  `msgpack:"bornTimestamp"`
}

// compareBatchDecoders decodes a SEND_BATCH fields map with the
// hand-written decoder and as the generic path does (Validate, msgpack's
// reflection, checkInts): both refuse it, or both give the same fields.
func compareBatchDecoders(b []byte) string {
	var fast SendBatchRequest
	errF := unmarshalFields(b, DefaultLimits(), &fast)
	var g genericBatch
	var errG error
	if len(b) > 0 { // no fields at all is none (unmarshalFields), either way
		errG = Validate(b, DefaultLimits().MaxDepth)
	}
	if errG == nil && len(b) > 0 {
		errG = msgpack.Unmarshal(b, &g)
	}
	if errG == nil && len(b) > 0 { // the generic path's range check
		errG = checkInts(b, reflect.TypeOf(&g))
	}
	switch {
	case (errF == nil) != (errG == nil):
		return fmt.Sprintf("fast: %v; generic: %v", errF, errG)
	case errF != nil:
		return ""
	}
	if got := (genericBatch{fast.ProducerGroup, fast.Topic, fast.QueueID, fast.BornTimestamp}); got != g {
		return fmt.Sprintf("fast %+v, generic %+v", got, g)
	}
	return ""
}

func batchSeeds(t testing.TB) [][]byte {
	enc := func(v any) []byte {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return [][]byte{
		(&SendBatchRequest{ProducerGroup: "pg", Topic: "orders", QueueID: -1, BornTimestamp: 1_700_000_000_123}).appendFieldsMap(nil),
		(&SendBatchRequest{Topic: "t", QueueID: 7}).appendFieldsMap(nil),
		enc(genericBatch{ProducerGroup: "pg", Topic: "orders", QueueID: 3, BornTimestamp: -5}),
		enc(map[string]any{"topic": "t", "queueId": int64(2), "other": []any{1, "x", map[string]any{"a": nil}}, "bornTimestamp": nil}),
		enc(map[string]any{"queueId": uint8(200), "producerGroup": ""}),
	}
}

// TestBatchDecodeMatchesGeneric runs the seeds, every truncation and
// one-byte change of them, through both decoders.
func TestBatchDecodeMatchesGeneric(t *testing.T) {
	for i, s := range batchSeeds(t) {
		for cut := 0; cut <= len(s); cut++ {
			if d := compareBatchDecoders(s[:cut]); d != "" {
				t.Fatalf("seed %d cut %d (%x): %s", i, cut, s[:cut], d)
			}
		}
		for at := range s {
			for _, x := range []byte{0x00, 0x7f, 0x80, 0xa0, 0xc0, 0xc1, 0xcc, 0xcf, 0xd2, 0xdc, 0xff} {
				m := bytes.Clone(s)
				m[at] = x
				if d := compareBatchDecoders(m); d != "" {
					t.Fatalf("seed %d byte %d = %#x (%x): %s", i, at, x, m, d)
				}
			}
		}
	}
}

func FuzzBatchDecodeMatchesGeneric(f *testing.F) {
	for _, s := range batchSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if d := compareBatchDecoders(b); d != "" {
			t.Fatalf("%x: %s", b, d)
		}
	})
}

// TestNilFieldLeavesZero: a nil value leaves its field at zero and the
// fields after it decode as sent, in every hand-written fields decoder
// (the nil was once stepped over twice, swallowing the next key).
func TestNilFieldLeavesZero(t *testing.T) {
	enc := func(kv ...any) []byte {
		b := appendMapHeader(nil, len(kv)/2)
		for i := 0; i < len(kv); i += 2 {
			b = appendStr(b, kv[i].(string))
			switch v := kv[i+1].(type) {
			case nil:
				b = append(b, 0xc0)
			case string:
				b = appendStr(b, v)
			case int:
				b = appendInt(b, int64(v))
			}
		}
		return b
	}
	var sr SendRequest
	if err := unmarshalFields(enc("producerGroup", nil, "topic", "orders", "queueId", nil, "flag", 3, "bornTimestamp", 9), DefaultLimits(), &sr); err != nil ||
		sr.Topic != "orders" || sr.QueueID != 0 || sr.Flag != 3 || sr.BornTimestamp != 9 {
		t.Errorf("SEND fields: %+v, %v", sr, err)
	}
	var sb SendBatchRequest
	if err := unmarshalFields(enc("topic", nil, "queueId", 4, "bornTimestamp", nil, "producerGroup", "pg"), DefaultLimits(), &sb); err != nil ||
		sb.Topic != "" || sb.QueueID != 4 || sb.ProducerGroup != "pg" {
		t.Errorf("SEND_BATCH fields: %+v, %v", sb, err)
	}
	var resp SendResponse
	if err := unmarshalFields(enc("msgId", nil, "queueId", 2, "queueOffset", 77), DefaultLimits(), &resp); err != nil ||
		resp.QueueID != 2 || resp.QueueOffset != 77 {
		t.Errorf("SEND answer fields: %+v, %v", resp, err)
	}
}
