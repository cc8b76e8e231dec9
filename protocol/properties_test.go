package protocol

import (
	"strings"
	"testing"
)

// TestEmptyPropertyKeyRefused: PROTOCOL.md 6.3 wants property keys
// non-empty. A SEND or SEND_BATCH carrying one is MESSAGE_ILLEGAL whether
// the properties are decoded into a map or kept encoded for the broker
// (Limits.RawProperties, read later with EachRawProperty); a stored message
// (MessageExt) is read as it is, so that a record written before the rule
// can still be pulled.
func TestEmptyPropertyKeyRefused(t *testing.T) {
	bad := map[string]string{"TAGS": "a", "": "v"}
	frames := map[string]Request{
		"SEND":                      &SendRequest{Topic: "t", Properties: bad, Body: []byte("x")},
		"SEND empty value":          &SendRequest{Topic: "t", Properties: map[string]string{"": ""}},
		"SEND_BATCH second message": &SendBatchRequest{Topic: "t", Messages: []Message{{Body: []byte("a")}, {Body: []byte("b"), Properties: bad}}},
	}
	for name, req := range frames {
		b, err := AppendRequest(nil, 1, 0, req)
		if err != nil {
			t.Fatal(err)
		}
		f, err := DecodeFrame(b, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range []bool{false, true} {
			_, err := DecodeRequest(f, Limits{RawProperties: raw})
			if StatusOf(err) != StatusMessageIllegal || !strings.Contains(err.Error(), "empty key") {
				t.Errorf("%s (raw properties %v): %v (status %v), want MESSAGE_ILLEGAL about the empty key", name, raw, err, StatusOf(err))
			}
			if name == "SEND_BATCH second message" && err != nil && !strings.Contains(err.Error(), "messages[1]") {
				t.Errorf("%s: %q does not say which message", name, err)
			}
		}
	}
	if _, err := DecodeMessage((&Message{Topic: "t", Properties: bad}).AppendMsgpack(nil), Limits{}); StatusOf(err) != StatusMessageIllegal {
		t.Errorf("DecodeMessage: %v", err)
	}

	// A stored message with an empty key still reads.
	ext := sampleExt
	ext.Properties = bad
	b, err := AppendResponse(nil, CodePullMessage, 1, StatusOK, "", &PullResponse{Messages: []MessageExt{ext}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := DecodeFrame(b, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var pr PullResponse
	if err := DecodeResponse(f, Limits{}, &pr); err != nil || pr.Messages[0].Property("") != "v" {
		t.Errorf("pull answer with a stored empty key: %v, %+v", err, pr.Messages)
	}
	if _, err := DecodeMessageExt(ext.AppendMsgpack(nil), Limits{}); err != nil {
		t.Errorf("DecodeMessageExt: %v", err)
	}
}
