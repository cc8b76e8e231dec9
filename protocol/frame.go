package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Frame layout (all integers big-endian):
//
//	[u32 length][u32 headerLength][header: one msgpack map][body]
//	length = 4 + headerLength + len(body)   (the bytes after the length word)
//
// See docs/PROTOCOL.md.
const (
	// PrefixSize is the size of the two length words before the header.
	PrefixSize = 8
	// minLength is the smallest legal value of the length word: the header
	// length word plus a header of at least one byte.
	minLength = 4 + 1
)

// Header map keys.
const (
	keyCode   = "code"
	keyOpaque = "opaque"
	keyFlags  = "flags"
	keyStatus = "status"
	keyRemark = "remark"
	keyFields = "fields"
)

// Frame is one decoded frame. Fields and Body alias the bytes the frame was
// decoded from: the caller must not reuse that buffer while the Frame (or
// anything decoded from it) is in use.
type Frame struct {
	Code   Code   // request code; a response echoes its request's code
	Opaque uint32 // request id chosen by the requester; a response echoes it
	Flags  Flags  // FlagResponse, FlagOneway
	Status Status // responses only
	Remark string // error text, responses only
	// Fields is the raw msgpack map of the typed per-request or per-response
	// fields (nil if absent). Decode it with DecodeRequest or DecodeResponse.
	Fields []byte
	// Body is the payload after the header (nil if empty): a message body,
	// or a msgpack array for batches and message lists.
	Body []byte
	// Request or RequestErr, when set, is the outcome of decoding by a
	// listener whose wire is not Wharf's (RocketMQ's remoting, netio):
	// DecodeRequest returns it, and Fields and Body are unused. RequestErr
	// wraps the errors DecodeRequest documents (a code the listener does
	// not map is ErrCodeNotSupported), so it is answered as theirs are.
	Request    Request
	RequestErr error
}

// IsResponse reports whether f is a response.
func (f *Frame) IsResponse() bool { return f.Flags&FlagResponse != 0 }

// IsOneway reports whether f is a request that wants no response.
func (f *Frame) IsOneway() bool { return f.Flags&FlagOneway != 0 }

// Split reports whether buf starts with a complete frame. It returns the
// frame's total size (length prefix included) if so, and 0 if more bytes are
// needed. It fails as soon as the bytes present prove the frame illegal: a
// declared length above lim.MaxFrameSize (checked from the first 4 bytes,
// before anything is buffered or allocated for it), a header length above
// lim.MaxHeaderSize or the frame, or a length too small to hold a header.
//
// Split never reads past the frame and never allocates. Use it with gnet's
// Peek/Discard: Peek everything buffered, Split, Next(n) the frame, repeat.
func Split(buf []byte, lim Limits) (frameLen int, err error) {
	if len(buf) < 4 {
		return 0, nil
	}
	// Only the two size limits matter here: normalise just them (Split
	// runs for every frame, twice).
	maxFrame, maxHeader := int64(lim.MaxFrameSize), int64(lim.MaxHeaderSize)
	if maxFrame <= 0 || maxFrame > maxU32Frame || maxHeader <= 0 {
		n := lim.norm()
		maxFrame, maxHeader = int64(n.MaxFrameSize), int64(n.MaxHeaderSize)
	}
	length := int64(binary.BigEndian.Uint32(buf))
	if length > maxFrame-4 {
		return 0, fmt.Errorf("%w: declared length %d, limit %d", ErrFrameTooLarge, 4+length, maxFrame)
	}
	if length < minLength {
		return 0, fmt.Errorf("%w: declared length %d is too small", ErrFrameIllegal, length)
	}
	if len(buf) >= PrefixSize {
		hl := int64(binary.BigEndian.Uint32(buf[4:]))
		if hl > maxHeader {
			return 0, fmt.Errorf("%w: header length %d, limit %d", ErrFrameTooLarge, hl, maxHeader)
		}
		if hl == 0 || hl > length-4 {
			return 0, fmt.Errorf("%w: header length %d in a frame of length %d", ErrFrameIllegal, hl, length)
		}
	}
	if int64(len(buf))-4 < length {
		return 0, nil
	}
	return int(4 + length), nil
}

// DecodeFrame decodes one complete frame (as delimited by Split, length
// prefix included). The header is validated (see Validate) before it is
// parsed; the fields map is not decoded (see DecodeRequest/DecodeResponse).
// The result aliases frame. Errors wrap ErrFrameTooLarge or ErrFrameIllegal.
func DecodeFrame(frame []byte, lim Limits) (*Frame, error) {
	f := &Frame{}
	if err := DecodeFrameInto(f, frame, lim); err != nil {
		return nil, err
	}
	return f, nil
}

// DecodeFrameInto is DecodeFrame into a Frame of the caller's (a reader
// decoding a burst of frames into one slice of them: one allocation for
// the burst instead of one per frame). *f is overwritten; on error its
// contents are unspecified.
func DecodeFrameInto(f *Frame, frame []byte, lim Limits) error {
	lim = lim.norm()
	n, err := Split(frame, lim)
	if err != nil {
		return err
	}
	if n == 0 || n != len(frame) {
		return fmt.Errorf("%w: %d bytes given for a frame of %d", ErrFrameIllegal, len(frame), n)
	}
	hl := int(binary.BigEndian.Uint32(frame[4:]))
	if err := Validate(frame[PrefixSize:PrefixSize+hl], lim.MaxDepth); err != nil {
		return fmt.Errorf("%w: header: %w", ErrFrameIllegal, err)
	}
	*f = Frame{}
	return f.decodeAfterCheck(frame, hl)
}

// decodeAfterCheck decodes a split and validated frame whose header is hl
// bytes long.
func (f *Frame) decodeAfterCheck(frame []byte, hl int) error {
	if err := f.decodeHeader(frame[PrefixSize : PrefixSize+hl]); err != nil {
		return err
	}
	if body := frame[PrefixSize+hl:]; len(body) > 0 {
		f.Body = body
	}
	return nil
}

// decodeHeader decodes a header that Validate accepted.
func (f *Frame) decodeHeader(h []byte) error {
	r := &reader{b: h}
	if h[0] == 0xc0 {
		return r.errf("header is nil, want a map")
	}
	n, err := r.mapLen()
	if err != nil {
		return err
	}
	for i := range n {
		key, err := r.rawStr()
		if err != nil {
			return fmt.Errorf("header key: %w", err)
		}
		switch string(key) {
		case keyCode:
			var v int64
			v, err = r.int(0, math.MaxInt32)
			f.Code = Code(v)
		case keyOpaque:
			f.Opaque, err = r.uint32()
		case keyFlags:
			var v uint32
			v, err = r.uint32()
			f.Flags = Flags(v)
		case keyStatus:
			var v int32
			v, err = r.int32()
			f.Status = Status(v)
		case keyRemark:
			f.Remark, err = r.str()
		case keyFields:
			if r.isNil() {
				f.Fields = nil
				continue
			}
			start := r.p
			var m int
			if m, err = r.mapLen(); err != nil {
				return fmt.Errorf("header %q: %w", keyFields, err)
			}
			r.p = start
			if i == n-1 {
				// The last value of a header Validate accepted (one value,
				// no trailing bytes) ends where the header ends: no second
				// walk over the fields (AppendFrame puts them last).
				f.Fields, r.p = h[start:], len(h)
			} else {
				f.Fields, err = r.rawValue()
			}
			if m == 0 {
				f.Fields = nil
			}
		default: // unknown keys are skipped: forward compatibility
			err = r.skip()
		}
		if err != nil {
			if errors.Is(err, ErrInvalidParameter) {
				// Out of the header's range: there is no request to
				// answer, the frame itself is bad (code, opaque, flags).
				return fmt.Errorf("%w: header %q: %v", ErrFrameIllegal, key, err)
			}
			return fmt.Errorf("header %q: %w", key, err)
		}
	}
	return nil
}

// AppendFrame appends the encoding of f to dst. f.Fields must be nil or one
// msgpack map (as produced by this package). The header is written in
// canonical form: keys in the order code, opaque, flags, status (responses
// only), remark (if not empty), fields (if not empty).
func AppendFrame(dst []byte, f *Frame) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	dst = f.appendHeader(dst)
	hl := len(dst) - start - PrefixSize
	dst = append(dst, f.Body...)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	binary.BigEndian.PutUint32(dst[start+4:], uint32(hl))
	return dst
}

func (f *Frame) appendHeader(b []byte) []byte {
	hasFields := len(f.Fields) > 0 && !(len(f.Fields) == 1 && f.Fields[0] == 0x80)
	n := 3
	if f.IsResponse() {
		n++
	}
	if f.Remark != "" {
		n++
	}
	if hasFields {
		n++
	}
	b = appendMapHeader(b, n)
	b = appendStr(b, keyCode)
	b = appendInt(b, int64(f.Code))
	b = appendStr(b, keyOpaque)
	b = appendUint(b, uint64(f.Opaque))
	b = appendStr(b, keyFlags)
	b = appendUint(b, uint64(f.Flags))
	if f.IsResponse() {
		b = appendStr(b, keyStatus)
		b = appendInt(b, int64(f.Status))
	}
	if f.Remark != "" {
		b = appendStr(b, keyRemark)
		b = appendStr(b, f.Remark)
	}
	if hasFields {
		b = appendStr(b, keyFields)
		b = append(b, f.Fields...)
	}
	return b
}

// AppendErrorResponse appends a response frame without fields or body: the
// reply to a request that failed. Use code 0 and opaque 0 when the request's
// header could not be read.
func AppendErrorResponse(dst []byte, code Code, opaque uint32, status Status, remark string) []byte {
	return AppendFrame(dst, &Frame{Code: code, Opaque: opaque, Flags: FlagResponse, Status: status, Remark: remark})
}
