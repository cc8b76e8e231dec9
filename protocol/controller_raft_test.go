package protocol

import (
	"bytes"
	"errors"
	"testing"
)

func TestControllerRaftMessageRoundTrip(t *testing.T) {
	req := &ControllerRaftMessageRequest{Data: []byte{8, 3, 1, 2}}
	buf, err := AppendRequest(nil, 7, FlagOneway, req)
	if err != nil {
		t.Fatal(err)
	}
	f, err := DecodeFrame(buf, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeRequest(f, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	m, ok := got.(*ControllerRaftMessageRequest)
	if !ok || !bytes.Equal(m.Data, req.Data) || !f.IsOneway() {
		t.Fatalf("decoded %#v (oneway %v)", got, f.IsOneway())
	}
	for _, bad := range []*ControllerRaftMessageRequest{{}} {
		buf, err := AppendRequest(nil, 8, FlagOneway, bad)
		if err != nil {
			t.Fatal(err)
		}
		f, err := DecodeFrame(buf, DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeRequest(f, DefaultLimits()); !errors.Is(err, ErrFrameIllegal) {
			t.Errorf("%+v decoded with %v, want FRAME_ILLEGAL", bad, err)
		}
	}
}

// FuzzControllerRaftMessage decodes arbitrary frames as this request: an
// error or a request with a message, never a panic.
func FuzzControllerRaftMessage(f *testing.F) {
	buf, _ := AppendRequest(nil, 1, FlagOneway, &ControllerRaftMessageRequest{Data: []byte("raft")})
	f.Add(buf)
	f.Add(frameOf([]byte{0x81, 0xa4, 'c', 'o', 'd', 'e', 0xcd, 0x10, 0x69}, []byte{1}))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := DecodeFrame(b, DefaultLimits())
		if err != nil {
			return
		}
		fr.Code = CodeControllerRaftMessage
		req, err := DecodeRequest(fr, DefaultLimits())
		if err != nil {
			return
		}
		if m := req.(*ControllerRaftMessageRequest); len(m.Data) == 0 {
			t.Fatalf("accepted %+v", m)
		}
	})
}
