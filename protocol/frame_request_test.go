package protocol

import (
	"errors"
	"testing"
)

// TestDecodeRequestPredecoded: a frame a listener decoded itself (another
// wire's) hands its request, or its error, to DecodeRequest unchanged.
func TestDecodeRequestPredecoded(t *testing.T) {
	req := &GetMaxOffsetRequest{Topic: "t", QueueID: 1}
	got, err := DecodeRequest(&Frame{Code: CodeGetMaxOffset, Request: req}, Limits{})
	if err != nil || got != req {
		t.Fatalf("DecodeRequest = %v, %v; want the frame's request", got, err)
	}
	bad := errors.Join(ErrInvalidParameter, errors.New("queueId is not a number"))
	if _, err := DecodeRequest(&Frame{Code: CodeGetMaxOffset, RequestErr: bad}, Limits{}); err != bad || StatusOf(err) != StatusInvalidParameter {
		t.Fatalf("DecodeRequest error = %v; want the frame's, INVALID_PARAMETER", err)
	}
	if _, err := DecodeRequest(&Frame{Code: CodeGetMaxOffset, Flags: FlagResponse, Request: req}, Limits{}); StatusOf(err) != StatusFrameIllegal {
		t.Fatalf("a response frame: %v", err)
	}
}
