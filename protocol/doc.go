// Package protocol is Wharf's wire: the frame codec, request and response
// codes, status codes, the msgpack message types and the message model.
// docs/PROTOCOL.md is the specification; this package is its reference
// implementation and its golden tests.
//
// A frame is
//
//	[u32 length][u32 headerLength][msgpack header map][body]
//
// with big-endian words and length = 4 + headerLength + len(body). The header
// map holds code, opaque, flags, status, remark and the typed per-request
// fields; the body holds a message payload or a msgpack list.
//
// Reading: Split finds frame boundaries in a stream (and rejects an oversized
// declared length from its first 4 bytes), DecodeFrame decodes the header,
// DecodeRequest or DecodeResponse the typed fields and body. Writing:
// AppendRequest, AppendResponse, AppendErrorResponse, AppendFrame.
//
// Contract: no I/O and no goroutines. Every decoder of untrusted bytes
// validates msgpack (Validate) before decoding it, decodes only into concrete
// types, and bounds its allocations by a small multiple of the bytes it was
// given: msgpack v5.4.1 alone allocates whatever a declared length says.
// Decoded byte slices (Frame.Fields, Frame.Body, message bodies) alias the
// input buffer.
//
// Errors say what to answer (StatusOf): a malformed frame is FRAME_ILLEGAL
// and wins over anything else wrong with it; an integer outside its field's
// range (int32, uint32, int64) is INVALID_PARAMETER on every request,
// including those msgpack's reflection decoder fills, which would truncate
// it (intrange.go); a message that breaks a rule (a body above the limit, a
// property with an empty key) is MESSAGE_ILLEGAL.
//
// Imports: std and msgpack only.
package protocol
