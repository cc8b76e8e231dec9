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
		for _, v := range []Fields{req, resp, pull} {
			generic, err := appendValue(nil, v)
			if err != nil {
				t.Fatal(err)
			}
			fast := v.(fieldsCodec).appendFieldsMap(nil)
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
	}
}
