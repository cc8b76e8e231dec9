package protocol

import (
	"encoding/binary"
	"testing"
)

// A header's fields map decodes to the same bytes wherever it stands in
// the header: last (taken to the header's end, no second walk) or before
// other keys (stepped over).
func TestHeaderFieldsAnywhere(t *testing.T) {
	fields := appendInt(appendStr(appendMapHeader(nil, 1), "queueId"), 3)
	frame := func(fieldsFirst bool) []byte {
		h := appendMapHeader(nil, 3)
		if fieldsFirst {
			h = append(appendStr(h, keyFields), fields...)
		}
		h = appendInt(appendStr(h, keyCode), int64(CodeSendMessage))
		h = appendInt(appendStr(h, keyOpaque), 7)
		if !fieldsFirst {
			h = append(appendStr(h, keyFields), fields...)
		}
		b := binary.BigEndian.AppendUint32(nil, uint32(4+len(h)+2))
		b = binary.BigEndian.AppendUint32(b, uint32(len(h)))
		return append(append(b, h...), "hi"...)
	}
	for _, first := range []bool{false, true} {
		f, err := DecodeFrame(frame(first), Limits{})
		if err != nil {
			t.Fatalf("fields first %v: %v", first, err)
		}
		if string(f.Fields) != string(fields) || f.Code != CodeSendMessage || f.Opaque != 7 || string(f.Body) != "hi" {
			t.Fatalf("fields first %v: %+v", first, f)
		}
	}
}
