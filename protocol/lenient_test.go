package protocol

import (
	"errors"
	"testing"
)

// TestForeignEncodings decodes frames as another language's msgpack library
// might write them: other key orders, wide integer formats, unknown keys,
// nil values, bin for str. PROTOCOL.md section 4 promises all of these work.
func TestForeignEncodings(t *testing.T) {
	var h []byte
	h = appendMapHeader(h, 6)
	h = appendStr(h, "fields")
	{ // fields of a PULL, unordered, with wide ints, nil, bin-for-str and an unknown key
		h = appendMapHeader(h, 6)
		h = appendStr(h, "queueOffset")
		h = append(h, 0xd3, 0, 0, 0, 0, 0, 0, 0, 42) // int64 42
		h = appendStr(h, "future")
		h = append(h, 0x92, 0xc3, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0) // [true, 0.0]
		h = appendStr(h, "topic")
		h = append(h, 0xc4, 4, 'd', 'e', 'm', 'o') // bin instead of str
		h = appendStr(h, "subscription")
		h = append(h, 0xc0) // nil
		h = appendStr(h, "maxMsgNums")
		h = append(h, 0xcf, 0, 0, 0, 0, 0, 0, 0, 32) // uint64 32
		h = appendStr(h, "queueId")
		h = append(h, 0xd0, 0xff) // int8 -1
	}
	h = appendStr(h, "opaque")
	h = append(h, 0xce, 0xff, 0xff, 0xff, 0xff) // uint32 max
	h = appendStr(h, "x-trace")
	h = appendStr(h, "abc")
	h = appendStr(h, "flags")
	h = append(h, 0xcd, 0, 2) // uint16 2: oneway
	h = appendStr(h, "remark")
	h = append(h, 0xc0)
	h = appendStr(h, "code")
	h = append(h, 0xd2, 0, 0, 0, 11) // int32 11
	f, err := DecodeFrame(frameOf(h, nil), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if f.Code != CodePullMessage || f.Opaque != 0xffffffff || !f.IsOneway() || f.IsResponse() {
		t.Fatalf("header %+v", f)
	}
	req, err := DecodeRequest(f, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	p := req.(*PullRequest)
	if p.Topic != "demo" || p.QueueOffset != 42 || p.MaxMsgNums != 32 || p.QueueID != -1 || p.Subscription != "" || p.CommitOffset != nil {
		t.Fatalf("pull %+v", p)
	}

	// A message list with unknown keys and nil properties.
	var body []byte
	body = appendArrayHeader(body, 1)
	body = appendMapHeader(body, 4)
	body = appendStr(body, "x")
	body = appendStr(body, "y")
	body = appendStr(body, "body")
	body = appendStr(body, "payload") // str instead of bin
	body = appendStr(body, "properties")
	body = append(body, 0xc0)
	body = appendStr(body, "queueOffset")
	body = append(body, 0xd3, 0, 0, 0, 0, 0, 0, 0, 7)
	resp := AppendFrame(nil, &Frame{Code: CodePullMessage, Flags: FlagResponse, Body: body})
	f, err = DecodeFrame(resp, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var pr PullResponse
	if err := DecodeResponse(f, Limits{}, &pr); err != nil {
		t.Fatal(err)
	}
	if len(pr.Messages) != 1 || string(pr.Messages[0].Body) != "payload" || pr.Messages[0].QueueOffset != 7 {
		t.Fatalf("messages %+v", pr.Messages)
	}

	// Rejected: a float where an integer belongs, an out-of-range header int,
	// a message without "body".
	bad := map[string][]byte{
		"float code":  frameOf([]byte{0x81, 0xa4, 'c', 'o', 'd', 'e', 0xcb, 0x40, 0x26, 0, 0, 0, 0, 0, 0}, nil),
		"opaque 2^32": frameOf([]byte{0x81, 0xa6, 'o', 'p', 'a', 'q', 'u', 'e', 0xcf, 0, 0, 0, 1, 0, 0, 0, 0}, nil),
		"float field": frameOf([]byte{0x82, 0xa4, 'c', 'o', 'd', 'e', 0x1e, 0xa6, 'f', 'i', 'e', 'l', 'd', 's',
			0x81, 0xa7, 'q', 'u', 'e', 'u', 'e', 'I', 'd', 0xcb, 0x40, 0x26, 0, 0, 0, 0, 0, 0}, nil),
		"no body": AppendFrame(nil, &Frame{Code: CodePullMessage, Flags: FlagResponse,
			Body: []byte{0x91, 0x81, 0xa5, 't', 'o', 'p', 'i', 'c', 0xa0}}),
	}
	for name, fr := range bad {
		err := decodeNatural(fr, Limits{})
		if !errors.Is(err, ErrFrameIllegal) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestMessageWithoutBodyRejected(t *testing.T) {
	body := []byte{0x91, 0x81, 0xa5, 't', 'o', 'p', 'i', 'c', 0xa0}
	_, err := decodeMessageExtList(body, Limits{}.norm(), false)
	if err == nil || !errors.Is(err, ErrFrameIllegal) {
		t.Fatalf("err %v", err)
	}
	if got := err.Error(); !contains(got, "body") {
		t.Fatalf("err %v does not mention body", err)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
