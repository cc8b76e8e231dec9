package protocol

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"

	"github.com/vmihailenco/msgpack/v5"
)

// Fields is implemented by pointers to this package's request and response
// types: the only types DecodeRequest and DecodeResponse decode into.
type Fields interface{ isFields() }

// Request is implemented by pointers to the request types.
type Request interface {
	Fields
	RequestCode() Code
}

// bodyCodec is implemented by the types that carry part of their content in
// the frame body rather than in the header's fields map.
type bodyCodec interface {
	appendBody(b []byte) ([]byte, error)
	decodeBody(body []byte, lim Limits) error
}

// NewRequest returns a new zero request of the type for code, or nil if the
// code is unknown.
func NewRequest(code Code) Request {
	switch code {
	case CodeSendMessage:
		return &SendRequest{}
	case CodeSendBatchMessage:
		return &SendBatchRequest{}
	case CodePullMessage:
		return &PullRequest{}
	case CodeQueryMessage:
		return &QueryMessageRequest{}
	case CodeViewMessageByID:
		return &ViewMessageRequest{}
	case CodeGetMaxOffset:
		return &GetMaxOffsetRequest{}
	case CodeGetMinOffset:
		return &GetMinOffsetRequest{}
	case CodeQueryConsumerOffset:
		return &QueryConsumerOffsetRequest{}
	case CodeUpdateConsumerOffset:
		return &UpdateConsumerOffsetRequest{}
	case CodeGetConsumerOffsets:
		return &GetConsumerOffsetsRequest{}
	case CodeCreateTopic:
		return &CreateTopicRequest{}
	case CodeUpdateAndCreateTopic:
		return &UpdateTopicRequest{}
	case CodeDeleteTopic:
		return &DeleteTopicRequest{}
	case CodeGetAllTopicConfig:
		return &ListTopicsRequest{}
	case CodeGetBrokerRuntimeInfo:
		return &GetBrokerRuntimeInfoRequest{}
	case CodeHeartbeat:
		return &HeartbeatRequest{}
	case CodeHAReport:
		return &HAReportRequest{}
	case CodeHATransfer:
		return &HATransferRequest{}
	case CodeHAMetadata:
		return &HAMetadataRequest{}
	case CodeHARefuse:
		return &HARefuseRequest{}
	case CodeHAEpochs:
		return &HAEpochsRequest{}
	case CodeUnregisterClient:
		return &UnregisterClientRequest{}
	case CodeConsumerSendMsgBack:
		return &ConsumerSendMsgBackRequest{}
	case CodeNotifyConsumerIDsChanged:
		return &NotifyConsumerIDsChangedRequest{}
	case CodeGetConsumerGroups:
		return &GetConsumerGroupsRequest{}
	case CodeDescribeConsumerGroup:
		return &DescribeConsumerGroupRequest{}
	case CodeUpdateBrokerRole:
		return &UpdateBrokerRoleRequest{}
	}
	return newNamesrvRequest(code)
}

// newNamesrvRequest is NewRequest for the name server's codes.
func newNamesrvRequest(code Code) Request {
	switch code {
	case CodeRegisterBroker:
		return &RegisterBrokerRequest{}
	case CodeBrokerHeartbeat:
		return &BrokerHeartbeatRequest{}
	case CodeUnregisterBroker:
		return &UnregisterBrokerRequest{}
	case CodeGetRouteInfoByTopic:
		return &GetRouteInfoRequest{}
	case CodeGetBrokerClusterInfo:
		return &GetBrokerClusterInfoRequest{}
	case CodeGetAllTopicList:
		return &GetAllTopicListRequest{}
	case CodeDeleteTopicInNamesrv:
		return &DeleteTopicInNamesrvRequest{}
	case CodeControllerRaftMessage:
		return &ControllerRaftMessageRequest{}
	}
	return newControllerRequest(code)
}

// NewResponse returns a new zero response of the type that answers code,
// or nil if the response to code has no fields and no body (or code is
// unknown).
func NewResponse(code Code) Fields {
	switch code {
	case CodeSendMessage:
		return &SendResponse{}
	case CodeSendBatchMessage:
		return &SendBatchResponse{}
	case CodePullMessage:
		return &PullResponse{}
	case CodeQueryMessage:
		return &QueryMessageResponse{}
	case CodeViewMessageByID:
		return &ViewMessageResponse{}
	case CodeGetMaxOffset, CodeGetMinOffset, CodeQueryConsumerOffset:
		return &OffsetResponse{}
	case CodeGetConsumerOffsets:
		return &ConsumerOffsetsResponse{}
	case CodeGetAllTopicConfig:
		return &TopicListResponse{}
	case CodeGetBrokerRuntimeInfo:
		return &BrokerRuntimeInfo{}
	case CodeHeartbeat:
		return &HeartbeatResponse{}
	case CodeGetConsumerGroups:
		return &ConsumerGroupsResponse{}
	case CodeDescribeConsumerGroup:
		return &ConsumerGroupDescription{}
	case CodeRegisterBroker, CodeBrokerHeartbeat:
		return &RegisterBrokerResponse{}
	case CodeGetRouteInfoByTopic:
		return &RouteData{}
	case CodeGetBrokerClusterInfo:
		return &ClusterInfo{}
	case CodeGetAllTopicList:
		return &TopicNameList{}
	}
	return newControllerResponse(code)
}

// AppendRequest appends a request frame for req to dst. flags may add
// FlagOneway; FlagResponse is cleared. The frame is not checked against any
// Limits: a sender can run Split on the result to check it.
func AppendRequest(dst []byte, opaque uint32, flags Flags, req Request) ([]byte, error) {
	h := Frame{Code: req.RequestCode(), Opaque: opaque, Flags: flags &^ FlagResponse}
	return appendFrameFields(dst, &h, req)
}

// AppendResponse appends a response frame to dst: code and opaque are the
// request's, resp may be nil (no fields, no body).
func AppendResponse(dst []byte, code Code, opaque uint32, status Status, remark string, resp Fields) ([]byte, error) {
	h := Frame{Code: code, Opaque: opaque, Flags: FlagResponse, Status: status, Remark: remark}
	return appendFrameFields(dst, &h, resp)
}

// appendFrameFields writes the frame in place: the header map with a
// "fields" entry encoded straight into dst (dropped again if it came out
// empty), then the body, then the two length words.
func appendFrameFields(dst []byte, h *Frame, v Fields) ([]byte, error) {
	start := len(dst)
	dst = append(dst, make([]byte, PrefixSize)...)
	hdr := len(dst)
	dst = h.appendHeader(dst) // canonical header without fields
	if v != nil {
		if dst[hdr] >= 0x8f {
			return dst[:start], fmt.Errorf("protocol: header map too large")
		}
		mark := len(dst)
		dst = appendStr(dst, keyFields)
		fieldsAt := len(dst)
		if fa, ok := v.(fieldsAppender); ok {
			dst = fa.appendFieldsMap(dst)
		} else {
			var err error
			if dst, err = appendValue(dst, v); err != nil {
				return dst[:start], fmt.Errorf("protocol: encode %T: %w", v, err)
			}
		}
		if len(dst)-fieldsAt == 1 && dst[fieldsAt] == 0x80 {
			dst = dst[:mark] // empty map: leave "fields" out
		} else {
			dst[hdr]++ // one more pair in the fixmap
		}
	}
	hl := len(dst) - hdr
	if bc, ok := v.(bodyCodec); ok {
		var err error
		if dst, err = bc.appendBody(dst); err != nil {
			return dst[:start], fmt.Errorf("protocol: encode %T body: %w", v, err)
		}
	}
	if int64(len(dst)-start-4) > math.MaxUint32 {
		return dst[:start], fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, len(dst)-start)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	binary.BigEndian.PutUint32(dst[start+4:], uint32(hl))
	return dst, nil
}

// appendBuf lets a msgpack.Encoder append to a byte slice.
type appendBuf struct{ b []byte }

func (w *appendBuf) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }
func (w *appendBuf) WriteByte(c byte) error      { w.b = append(w.b, c); return nil }
func (w *appendBuf) WriteString(s string) (int, error) {
	w.b = append(w.b, s...)
	return len(s), nil
}

// appendValue appends the canonical msgpack encoding of v: shortest
// integers, map keys sorted.
func appendValue(dst []byte, v any) ([]byte, error) {
	w := &appendBuf{b: dst}
	e := msgpack.GetEncoder()
	e.Reset(w) // Reset clears flags a pooled encoder may still carry
	e.UseCompactInts(true)
	e.SetSortMapKeys(true)
	err := e.Encode(v)
	msgpack.PutEncoder(e)
	return w.b, err
}

// unmarshalFields decodes untrusted msgpack into one of this package's types.
func unmarshalFields(b []byte, lim Limits, v any) error {
	if len(b) == 0 {
		return nil
	}
	if fc, ok := v.(fieldsCodec); ok {
		// Hand-written on reader: every length is checked against the
		// bytes left and unknown values are stepped over by the bounded
		// walk, so no Validate pass first (the hot path: SEND and its
		// answer).
		if sr, ok := fc.(*SendRequest); ok {
			return unmarshalSend(b, lim, sr, nil)
		}
		r := &reader{b: b, rawProps: lim.RawProperties}
		return fieldsDone(r, fc.decodeFieldsMap(r))
	}
	if err := Validate(b, lim.MaxDepth); err != nil {
		return fmt.Errorf("%w: fields: %w", ErrFrameIllegal, err)
	}
	if err := msgpack.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: fields: %w", ErrFrameIllegal, err)
	}
	// After the library's decode, which truncates (see checkInts): a
	// field of the wrong type stays a malformed frame.
	if err := checkInts(b, reflect.TypeOf(v)); err != nil {
		return fmt.Errorf("fields: %w", err)
	}
	return nil
}

// unmarshalSend is unmarshalFields of a SEND's fields; prev, if not nil,
// is the send decoded before it (see DecodeSendInto). A concrete call: the
// reader stays on the stack (through the fieldsCodec interface it escapes:
// one allocation per SEND).
func unmarshalSend(b []byte, lim Limits, r, prev *SendRequest) error {
	if len(b) == 0 {
		return nil
	}
	rd := reader{b: b, rawProps: lim.RawProperties}
	if prev != nil {
		rd.prevGroup, rd.prevTopic = prev.ProducerGroup, prev.Topic
	}
	return fieldsDone(&rd, r.decodeFieldsMap(&rd))
}

// DecodeSendInto decodes a SEND frame as DecodeRequest does, into r
// instead of a new SendRequest: a reader decoding a burst of sends into one
// slice of them. prev, if not nil, is the send decoded before it: a
// producer group or topic equal to prev's is prev's string, not a new one.
// ok is false, and r untouched, for any frame but a SEND request of Wharf's
// wire (decode that with DecodeRequest).
func DecodeSendInto(f *Frame, lim Limits, r, prev *SendRequest) (ok bool, err error) {
	if f.Code != CodeSendMessage || f.IsResponse() || f.Request != nil || f.RequestErr != nil {
		return false, nil
	}
	lim = lim.norm()
	*r = SendRequest{}
	err = unmarshalSend(f.Fields, lim, r, prev)
	if StatusOf(err) != StatusFrameIllegal { // as decodeInto: the body after the fields
		if berr := r.decodeBody(f.Body, lim); berr != nil && (err == nil || StatusOf(berr) == StatusFrameIllegal) {
			err = berr
		}
	}
	if err != nil {
		return true, fmt.Errorf("%v: %w", f.Code, err)
	}
	return true, nil
}

// fieldsDone checks what a hand-written fields decode left: its error,
// bytes after the map, a soft (field content) error.
func fieldsDone(r *reader, err error) error {
	if err != nil {
		return fmt.Errorf("%w: fields: %w", ErrFrameIllegal, err)
	}
	if r.p != len(r.b) {
		return fmt.Errorf("%w: fields: %d bytes after the map", ErrFrameIllegal, len(r.b)-r.p)
	}
	if r.soft != nil {
		return fmt.Errorf("fields: %w", r.soft)
	}
	return nil
}

// DecodeRequest decodes the fields and body of a request frame into a new
// value of the request type for f.Code (one of the *...Request types).
// Errors wrap ErrCodeNotSupported (unknown code: answer
// REQUEST_CODE_NOT_SUPPORTED and keep the connection), ErrMessageIllegal
// (answer MESSAGE_ILLEGAL, keep the connection) or ErrFrameIllegal (answer
// FRAME_ILLEGAL and close). See StatusOf. Byte slices in the result alias
// f.Body.
func DecodeRequest(f *Frame, lim Limits) (Request, error) {
	lim = lim.norm()
	if f.IsResponse() {
		return nil, fmt.Errorf("%w: a response where a request was expected", ErrFrameIllegal)
	}
	if f.Request != nil || f.RequestErr != nil {
		return f.Request, f.RequestErr
	}
	req := NewRequest(f.Code)
	if req == nil {
		return nil, fmt.Errorf("%w: %v", ErrCodeNotSupported, f.Code)
	}
	if err := decodeInto(f, lim, req); err != nil {
		return nil, fmt.Errorf("%v: %w", f.Code, err)
	}
	return req, nil
}

// DecodeResponse decodes the fields and body of a response frame into
// into, which should be a zero value of the type NewResponse(f.Code)
// returns. into may be nil to ignore them. The fields are decoded whatever
// the status (a PULL_NOT_FOUND response carries offsets too). Byte slices
// in the result alias f.Body.
func DecodeResponse(f *Frame, lim Limits, into Fields) error {
	lim = lim.norm()
	if !f.IsResponse() {
		return fmt.Errorf("%w: a request where a response was expected", ErrFrameIllegal)
	}
	if into == nil {
		return nil
	}
	if err := decodeInto(f, lim, into); err != nil {
		return fmt.Errorf("%v response: %w", f.Code, err)
	}
	return nil
}

// DecodeSendResponse is DecodeResponse(f, lim, r) for the answer to a
// SEND, with the same result and errors, by a concrete call: r and the
// decoder's state stay on the caller's stack (a producer decodes one
// answer per message).
func DecodeSendResponse(f *Frame, lim Limits, r *SendResponse) error {
	lim = lim.norm()
	if !f.IsResponse() {
		return fmt.Errorf("%w: a request where a response was expected", ErrFrameIllegal)
	}
	if len(f.Fields) == 0 {
		return nil
	}
	rd := reader{b: f.Fields, rawProps: lim.RawProperties}
	if err := fieldsDone(&rd, r.decodeFieldsMap(&rd)); err != nil {
		return fmt.Errorf("%v response: %w", f.Code, err)
	}
	return nil
}

// decodeInto decodes the fields, then the body. An error about the
// content of the fields (ErrInvalidParameter, ErrMessageIllegal) does not
// stop the body from being decoded: a malformed body still makes the frame
// FRAME_ILLEGAL, as it would with valid fields.
func decodeInto(f *Frame, lim Limits, v Fields) error {
	err := unmarshalFields(f.Fields, lim, v)
	if StatusOf(err) == StatusFrameIllegal {
		return err
	}
	if bc, ok := v.(bodyCodec); ok {
		if berr := bc.decodeBody(f.Body, lim); berr != nil && (err == nil || StatusOf(berr) == StatusFrameIllegal) {
			return berr
		}
	}
	return err // a body where none is defined is ignored
}

// RawBody is an answer without fields whose body is already encoded: what
// a proxy or a test passes through unchanged.
type RawBody struct{ Body []byte }

func (*RawBody) isFields()                               {}
func (*RawBody) appendFieldsMap(dst []byte) []byte       { return append(dst, 0x80) }
func (b *RawBody) appendBody(dst []byte) ([]byte, error) { return append(dst, b.Body...), nil }
func (b *RawBody) decodeBody(body []byte, _ Limits) error {
	b.Body = body
	return nil
}
func (*RawBody) decodeFieldsMap(r *reader) error { return r.skip() }
