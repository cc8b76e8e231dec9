package protocol

import (
	"errors"
	"math"
)

// Limits bounds what a decoder accepts from a peer. Every limit is checked
// before the bytes it guards are allocated. A zero field means "use the
// default", so Limits{} is valid and equals DefaultLimits().
type Limits struct {
	// MaxFrameSize is the largest frame, counting the 4-byte length prefix.
	MaxFrameSize int
	// MaxHeaderSize is the largest msgpack header of one frame.
	MaxHeaderSize int
	// MaxMessageSize is the largest body of one message.
	MaxMessageSize int
	// MaxBatchMessages is the most messages in one SEND_BATCH request or in
	// one message list of a response (pull, query, view).
	MaxBatchMessages int
	// MaxListItems is the most elements of any other list carried in a body
	// (topic configs, consumer offsets).
	MaxListItems int
	// MaxDepth is the deepest msgpack nesting accepted (at most HardMaxDepth).
	MaxDepth int
	// RawProperties makes DecodeRequest leave the properties of SEND and
	// SEND_BATCH messages as they arrived: Message.RawProperties (and
	// SendRequest.RawProperties) hold the validated msgpack map, aliasing
	// the frame, and Properties stays nil. The broker sets it: it stores
	// properties in its own encoding and needs few of them by name, so a Go
	// map per message would be pure overhead. Not a limit, but decoding
	// configuration that travels with the limits.
	RawProperties bool
}

// Default limits.
const (
	DefaultMaxFrameSize     = 16 << 20
	DefaultMaxHeaderSize    = 64 << 10
	DefaultMaxMessageSize   = 4 << 20
	DefaultMaxBatchMessages = 1024
	DefaultMaxListItems     = 65536
	DefaultMaxDepth         = 32
	// HardMaxDepth caps MaxDepth: the validator keeps its stack in a fixed array.
	HardMaxDepth = 64
)

// DefaultLimits returns the default limits.
func DefaultLimits() Limits {
	return Limits{
		MaxFrameSize:     DefaultMaxFrameSize,
		MaxHeaderSize:    DefaultMaxHeaderSize,
		MaxMessageSize:   DefaultMaxMessageSize,
		MaxBatchMessages: DefaultMaxBatchMessages,
		MaxListItems:     DefaultMaxListItems,
		MaxDepth:         DefaultMaxDepth,
	}
}

// norm fills zero (or negative) fields with their defaults and clamps the
// rest to what the codec can represent. Limits already in range (a
// connection's, normalised once) come back as they are without building the
// defaults: norm runs several times per frame on both sides.
func (l Limits) norm() Limits {
	if l.MaxFrameSize > 0 && int64(l.MaxFrameSize) <= maxU32Frame && l.MaxHeaderSize > 0 &&
		l.MaxMessageSize > 0 && l.MaxBatchMessages > 0 && l.MaxListItems > 0 &&
		l.MaxDepth > 0 && l.MaxDepth <= HardMaxDepth {
		return l
	}
	return l.fill()
}

// fill is norm's slow path.
func (l Limits) fill() Limits {
	d := DefaultLimits()
	if l.MaxFrameSize <= 0 {
		l.MaxFrameSize = d.MaxFrameSize
	}
	if int64(l.MaxFrameSize) > maxU32Frame {
		l.MaxFrameSize = int(min(maxU32Frame, int64(math.MaxInt)))
	}
	if l.MaxHeaderSize <= 0 {
		l.MaxHeaderSize = d.MaxHeaderSize
	}
	if l.MaxMessageSize <= 0 {
		l.MaxMessageSize = d.MaxMessageSize
	}
	if l.MaxBatchMessages <= 0 {
		l.MaxBatchMessages = d.MaxBatchMessages
	}
	if l.MaxListItems <= 0 {
		l.MaxListItems = d.MaxListItems
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = d.MaxDepth
	}
	if l.MaxDepth > HardMaxDepth {
		l.MaxDepth = HardMaxDepth
	}
	return l
}

// maxU32Frame is the largest frame the 32-bit length prefix can describe.
const maxU32Frame int64 = 4 + (1<<32 - 1)

// Errors. Decoding errors wrap one of these sentinels; use errors.Is and
// StatusOf to classify them.
var (
	// ErrFrameTooLarge: a declared frame or header length is above the limit.
	ErrFrameTooLarge = errors.New("protocol: frame too large")
	// ErrFrameIllegal: the frame is malformed (bad lengths, invalid or
	// hostile msgpack, wrong field types). The connection must be closed.
	ErrFrameIllegal = errors.New("protocol: illegal frame")
	// ErrInvalidMsgpack: msgpack that is truncated, declares more than it
	// carries, nests too deeply or has trailing bytes. Wrapped with ErrFrameIllegal.
	ErrInvalidMsgpack = errors.New("msgpack: truncated, oversized or too deeply nested input")
	// ErrCodeNotSupported: a well-formed request with an unknown code.
	ErrCodeNotSupported = errors.New("protocol: request code not supported")
	// ErrMessageIllegal: a well-formed request whose message breaks a rule
	// (body too large, bad topic name, properties too large, a property
	// with an empty key).
	ErrMessageIllegal = errors.New("protocol: message illegal")
	// ErrInvalidParameter: a well-formed request with a field whose value
	// its type cannot hold (an integer outside int32, uint32 or int64).
	ErrInvalidParameter = errors.New("protocol: invalid parameter")
)

// StatusOf maps an error from this package to the status of the error
// response a server should send. ErrFrameTooLarge and ErrFrameIllegal map to
// FrameIllegal, after which the connection must be closed; an error that
// wraps ErrFrameIllegal and another sentinel is FrameIllegal.
func StatusOf(err error) Status {
	switch {
	case err == nil:
		return StatusOK
	case errors.Is(err, ErrFrameTooLarge), errors.Is(err, ErrFrameIllegal), errors.Is(err, ErrInvalidMsgpack):
		return StatusFrameIllegal
	case errors.Is(err, ErrCodeNotSupported):
		return StatusRequestCodeNotSupported
	case errors.Is(err, ErrMessageIllegal):
		return StatusMessageIllegal
	case errors.Is(err, ErrInvalidParameter):
		return StatusInvalidParameter
	default:
		return StatusSystemError
	}
}
