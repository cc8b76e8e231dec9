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

// TestSetUniqKeyEncoded: on a message with no properties SetUniqKey keeps
// them encoded (no map); every accessor, setter, Validate and the encoders
// treat that message as the one with the map, byte for byte on the wire.
func TestSetUniqKeyEncoded(t *testing.T) {
	const id = "7F00000100002A9F0000000000000001"
	enc := &Message{Topic: "t", Body: []byte("b")}
	enc.SetUniqKey(id)
	if enc.Properties != nil || len(enc.RawProperties) == 0 {
		t.Fatalf("SetUniqKey on an empty message: map %v, raw %q; want raw only", enc.Properties, enc.RawProperties)
	}
	withMap := &Message{Topic: "t", Body: []byte("b"), Properties: map[string]string{PropertyUniqKey: id}}
	if got := enc.UniqKey(); got != id {
		t.Fatalf("UniqKey = %q, want %q", got, id)
	}
	if err := enc.Validate(Limits{}); err != nil || enc.Properties != nil {
		t.Fatalf("Validate: %v, map %v (Validate must not make the map)", err, enc.Properties)
	}
	if a, b := enc.AppendMsgpack(nil), withMap.AppendMsgpack(nil); string(a) != string(b) {
		t.Fatalf("AppendMsgpack: %x, want %x", a, b)
	}
	req := func(m *Message) []byte {
		b, err := AppendRequest(nil, 1, 0, &SendRequest{Topic: m.Topic, Body: m.Body, Properties: m.Properties, RawProperties: m.RawProperties})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if a, b := req(enc), req(withMap); string(a) != string(b) {
		t.Fatalf("SEND frame: %x, want %x", a, b)
	}
	// A second property turns it into the map, keeping the key.
	enc.SetTags("x")
	if enc.RawProperties != nil || enc.Properties[PropertyUniqKey] != id || enc.Tags() != "x" {
		t.Fatalf("after SetTags: map %v, raw %q", enc.Properties, enc.RawProperties)
	}
	// A message with a map, or with a key set already, keeps its map.
	m := &Message{Topic: "t", Properties: map[string]string{PropertyTags: "a"}}
	m.SetUniqKey(id)
	if m.RawProperties != nil || m.Properties[PropertyUniqKey] != id {
		t.Fatalf("SetUniqKey with a map: map %v, raw %q", m.Properties, m.RawProperties)
	}
	// Encoded properties with a bad value are refused as the map's are.
	bad := &Message{Topic: "t"}
	bad.SetUniqKey("a\x01b")
	if err := bad.Validate(Limits{}); StatusOf(err) != StatusMessageIllegal {
		t.Fatalf("Validate of an encoded UNIQ_KEY with 0x01: %v, want MESSAGE_ILLEGAL", err)
	}
}
