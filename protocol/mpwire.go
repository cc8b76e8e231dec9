package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unsafe"
)

// This file holds a minimal msgpack writer and reader used for the frame
// header and the message lists, the hot and hostile paths. The writer always
// emits the shortest encoding (what PROTOCOL.md calls canonical). The reader
// accepts every encoding of a value that the spec allows, and is only ever run
// over bytes that Validate accepted, though it checks bounds anyway.

func appendMapHeader(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x80|byte(n))
	case n <= math.MaxUint16:
		return append(b, 0xde, byte(n>>8), byte(n))
	default:
		return append(b, 0xdf, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
}

func appendArrayHeader(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x90|byte(n))
	case n <= math.MaxUint16:
		return append(b, 0xdc, byte(n>>8), byte(n))
	default:
		return append(b, 0xdd, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
}

func appendStr[S string | []byte](b []byte, s S) []byte {
	n := len(s)
	switch {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		b = append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		b = append(b, 0xda, byte(n>>8), byte(n))
	default:
		b = append(b, 0xdb, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, s...)
}

func appendBin(b []byte, p []byte) []byte {
	n := len(p)
	switch {
	case n <= math.MaxUint8:
		b = append(b, 0xc4, byte(n))
	case n <= math.MaxUint16:
		b = append(b, 0xc5, byte(n>>8), byte(n))
	default:
		b = append(b, 0xc6, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, p...)
}

func appendUint(b []byte, v uint64) []byte {
	switch {
	case v <= 0x7f:
		return append(b, byte(v))
	case v <= math.MaxUint8:
		return append(b, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return append(b, 0xcd, byte(v>>8), byte(v))
	case v <= math.MaxUint32:
		return append(b, 0xce, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	default:
		b = append(b, 0xcf)
		return binary.BigEndian.AppendUint64(b, v)
	}
}

func appendInt(b []byte, v int64) []byte {
	switch {
	case v >= 0:
		return appendUint(b, uint64(v))
	case v >= -32:
		return append(b, byte(v))
	case v >= math.MinInt8:
		return append(b, 0xd0, byte(v))
	case v >= math.MinInt16:
		return append(b, 0xd1, byte(v>>8), byte(v))
	case v >= math.MinInt32:
		return append(b, 0xd2, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	default:
		b = append(b, 0xd3)
		return binary.BigEndian.AppendUint64(b, uint64(v))
	}
}

// reader walks validated msgpack. Every method checks bounds anyway, so a
// bug upstream turns into an error, never a panic.
type reader struct {
	b        []byte
	p        int
	rawProps bool // keep message properties encoded (Limits.RawProperties)
	// prevGroup and prevTopic are the strings of the send decoded before
	// this one (DecodeSendInto): equal bytes give them back, not new ones.
	prevGroup, prevTopic string
	// skipDepth bounds the nesting of a value skip steps over (0:
	// HardMaxDepth): a list decoder that did not validate its body first
	// sets what is left of Limits.MaxDepth at the level it skips from.
	skipDepth int

	// Strings that repeat from message to message of one list (topic,
	// hosts, property names) are allocated once per list: seen holds the
	// last few, strSeen returns one of them when the bytes match.
	seen *[8]string // allocated on first use
	next int

	// arena, when set (list decoders), holds the bytes of the strings str
	// returns, so that a list of messages costs a few allocations for its
	// strings instead of one per string. It is only ever appended to: the
	// strings made from it never change.
	arena    []byte
	useArena bool

	// soft is the first error of the value about a field's content, not
	// its msgpack: an integer out of its field's range, a property with an
	// empty key (see keep). Decoding goes on past it, so that a value that
	// is malformed as well is still a malformed frame (FRAME_ILLEGAL, the
	// connection closed), and the decoder reports it once the whole value
	// was read.
	soft error
}

// arenaChunk is the size of a string arena's chunks.
const arenaChunk = 16 << 10

// strSeen reads a string like str, but returns an earlier string of this
// reader with the same bytes instead of allocating a new one. For the
// strings of a message list that repeat (at most len(seen) distinct ones
// are remembered).
func (r *reader) strSeen() (string, error) {
	b, err := r.rawStr()
	if err != nil {
		return "", err
	}
	if r.seen == nil {
		r.seen = new([8]string)
	}
	for _, s := range r.seen {
		if s == string(b) && s != "" {
			return s, nil
		}
	}
	s := string(b)
	r.seen[r.next] = s
	r.next = (r.next + 1) % len(r.seen)
	return s, nil
}

func (r *reader) errf(format string, args ...any) error {
	return fmt.Errorf("%w: at byte %d: "+format, append([]any{ErrFrameIllegal, r.p}, args...)...)
}

func (r *reader) need(n int) ([]byte, error) {
	if n < 0 || n > len(r.b)-r.p {
		return nil, r.errf("truncated")
	}
	s := r.b[r.p : r.p+n]
	r.p += n
	return s, nil
}

func (r *reader) byte() (byte, error) {
	if r.p >= len(r.b) {
		return 0, r.errf("truncated")
	}
	c := r.b[r.p]
	r.p++
	return c, nil
}

func (r *reader) uintN(n int) (uint64, error) {
	s, err := r.need(n)
	if err != nil {
		return 0, err
	}
	switch n { // the sizes msgpack uses, without a loop (timestamps are 8)
	case 1:
		return uint64(s[0]), nil
	case 2:
		return uint64(binary.BigEndian.Uint16(s)), nil
	case 4:
		return uint64(binary.BigEndian.Uint32(s)), nil
	case 8:
		return binary.BigEndian.Uint64(s), nil
	}
	var v uint64
	for _, x := range s {
		v = v<<8 | uint64(x)
	}
	return v, nil
}

// isNil consumes a nil if one is next.
func (r *reader) isNil() bool {
	if r.p < len(r.b) && r.b[r.p] == 0xc0 {
		r.p++
		return true
	}
	return false
}

// mapLen reads a map header; nil reads as an empty map.
func (r *reader) mapLen() (int, error) {
	c, err := r.byte()
	if err != nil {
		return 0, err
	}
	var n uint64
	switch {
	case c >= 0x80 && c <= 0x8f:
		return int(c & 0x0f), nil
	case c == 0xc0:
		return 0, nil
	case c == 0xde:
		n, err = r.uintN(2)
	case c == 0xdf:
		n, err = r.uintN(4)
	default:
		r.p--
		return 0, r.errf("want map, got 0x%02x", c)
	}
	if err == nil && n > uint64(len(r.b)-r.p)/2 {
		err = r.errf("map of %d pairs in %d bytes", n, len(r.b)-r.p)
	}
	return int(n), err
}

// arrayLen reads an array header; nil reads as an empty array.
func (r *reader) arrayLen() (int, error) {
	c, err := r.byte()
	if err != nil {
		return 0, err
	}
	var n uint64
	switch {
	case c >= 0x90 && c <= 0x9f:
		return int(c & 0x0f), nil
	case c == 0xc0:
		return 0, nil
	case c == 0xdc:
		n, err = r.uintN(2)
	case c == 0xdd:
		n, err = r.uintN(4)
	default:
		r.p--
		return 0, r.errf("want array, got 0x%02x", c)
	}
	if err == nil && n > uint64(len(r.b)-r.p) {
		err = r.errf("array of %d in %d bytes", n, len(r.b)-r.p)
	}
	return int(n), err
}

// rawStr returns the bytes of a str (or bin: both are accepted wherever a
// string or byte string is expected); nil reads as empty. The result aliases r.b.
func (r *reader) rawStr() ([]byte, error) {
	// Fast path: a non-empty fixstr that is all there (every key, and
	// most short values); the general path below decides the rest.
	if p := r.p; p < len(r.b) {
		if c := r.b[p]; c > 0xa0 && c <= 0xbf {
			if n := int(c & 0x1f); n < len(r.b)-p {
				r.p = p + 1 + n
				return r.b[p+1 : r.p], nil
			}
		}
	}
	c, err := r.byte()
	if err != nil {
		return nil, err
	}
	var n uint64
	switch {
	case c >= 0xa0 && c <= 0xbf:
		n = uint64(c & 0x1f)
	case c == 0xc0:
		return nil, nil
	case c == 0xd9 || c == 0xc4:
		n, err = r.uintN(1)
	case c == 0xda || c == 0xc5:
		n, err = r.uintN(2)
	case c == 0xdb || c == 0xc6:
		n, err = r.uintN(4)
	default:
		r.p--
		return nil, r.errf("want str or bin, got 0x%02x", c)
	}
	if err != nil {
		return nil, err
	}
	if n > uint64(len(r.b)-r.p) {
		return nil, r.errf("string of %d in %d bytes", n, len(r.b)-r.p)
	}
	if n == 0 {
		return nil, nil
	}
	return r.need(int(n))
}

// strAs is str, giving prev back when the bytes are prev's: a burst's
// sends name the same group and topic, one string for all of them.
func (r *reader) strAs(prev string) (string, error) {
	s, err := r.rawStr()
	if err == nil && prev != "" && string(s) == prev {
		return prev, nil
	}
	return string(s), err
}

func (r *reader) str() (string, error) {
	s, err := r.rawStr()
	if err != nil || len(s) == 0 || !r.useArena {
		return string(s), err
	}
	if cap(r.arena)-len(r.arena) < len(s) {
		// A new chunk; the strings of the old one keep it alive.
		// Strings are a small part of a message list: a sixteenth of
		// the body, within [512 B, arenaChunk], per chunk.
		r.arena = make([]byte, 0, max(len(s), min(max(len(r.b)/16, 512), arenaChunk)))
	}
	at := len(r.arena)
	r.arena = append(r.arena, s...)
	return unsafe.String(&r.arena[at], len(s)), nil
}

// integer reads any msgpack integer (nil reads as 0). big reports a uint64
// above math.MaxInt64, whose value is then u (and v is meaningless).
func (r *reader) integer() (v int64, u uint64, big bool, err error) {
	if p := r.p; p < len(r.b) { // fast path: a fixint
		if c := r.b[p]; c <= 0x7f || c >= 0xe0 {
			r.p++
			return int64(int8(c)), 0, false, nil
		}
	}
	start := r.p
	c, err := r.byte()
	if err != nil {
		return 0, 0, false, err
	}
	switch {
	case c <= 0x7f:
		return int64(c), 0, false, nil
	case c >= 0xe0:
		return int64(int8(c)), 0, false, nil
	case c == 0xc0:
		return 0, 0, false, nil
	case c >= 0xcc && c <= 0xcf:
		u, err := r.uintN(1 << (c - 0xcc))
		if err != nil {
			return 0, 0, false, err
		}
		if u > math.MaxInt64 {
			return 0, u, true, nil
		}
		return int64(u), 0, false, nil
	case c >= 0xd0 && c <= 0xd3:
		size := 1 << (c - 0xd0)
		u, err := r.uintN(size)
		if err != nil {
			return 0, 0, false, err
		}
		shift := 64 - 8*size
		return int64(u<<shift) >> shift, 0, false, nil // sign-extend
	}
	r.p = start
	return 0, 0, false, r.errf("want integer, got 0x%02x", c)
}

// int reads any msgpack integer (nil reads as 0) that fits in [lo, hi].
// An integer outside is a *rangeError (not a malformed frame), and the
// reader is then past it, so a decoder can go on (see keep).
func (r *reader) int(lo, hi int64) (int64, error) {
	v, u, big, err := r.integer()
	switch {
	case err != nil:
		return 0, err
	case big:
		return 0, newRangeError(strconv.FormatUint(u, 10), lo, hi)
	case v < lo || v > hi:
		return 0, newRangeError(strconv.FormatInt(v, 10), lo, hi)
	}
	return v, nil
}

func (r *reader) int32() (int32, error) {
	v, err := r.int(math.MinInt32, math.MaxInt32)
	return int32(v), err
}

func (r *reader) int64() (int64, error) { return r.int(math.MinInt64, math.MaxInt64) }

func (r *reader) uint32() (uint32, error) {
	v, err := r.int(0, math.MaxUint32)
	return uint32(v), err
}

// rangeError is a well-formed integer outside the range of the field it is
// read into: the request is wrong, not the frame (INVALID_PARAMETER, the
// connection stays open). path names the field; the decoders it passes
// through on the way out prefix it (see within).
type rangeError struct {
	path string
	val  string // decimal
	want string // the field's range
}

func newRangeError(val string, lo, hi int64) *rangeError {
	want := fmt.Sprintf("[%d, %d]", lo, hi)
	switch {
	case lo == math.MinInt32 && hi == math.MaxInt32:
		want = "int32 " + want
	case lo == math.MinInt64 && hi == math.MaxInt64:
		want = "int64 " + want
	case lo == 0 && hi == math.MaxUint32:
		want = "uint32 " + want
	}
	return &rangeError{val: val, want: want}
}

func (e *rangeError) Error() string {
	s := e.val + " is out of range for " + e.want
	if e.path != "" {
		s = e.path + ": " + s
	}
	return s
}

func (e *rangeError) Unwrap() error { return ErrInvalidParameter }

// within says that err happened inside seg (a key, or "name[i]"): a
// rangeError's path grows from the inside out (consumerGroups[0].owned[1].queueId),
// other errors are wrapped.
func within(seg string, err error) error {
	if seg == "" {
		return err
	}
	if re, ok := err.(*rangeError); ok {
		switch {
		case re.path == "":
			re.path = seg
		case re.path[0] == '[':
			re.path = seg + re.path
		default:
			re.path = seg + "." + re.path
		}
		return re
	}
	return fmt.Errorf("%s: %w", seg, err)
}

// keep records err in r.soft, and returns nil so that decoding goes on, if
// it is about a field's content rather than the msgpack (ErrInvalidParameter,
// ErrMessageIllegal); other errors are returned as they are. seg is where
// in the value err happened (see within).
func (r *reader) keep(seg string, err error) error {
	if !errors.Is(err, ErrInvalidParameter) && !errors.Is(err, ErrMessageIllegal) || errors.Is(err, ErrFrameIllegal) {
		return err
	}
	if r.soft == nil {
		r.soft = within(seg, err)
	}
	return nil
}

// skip steps over one value of any type.
func (r *reader) skip() error {
	depth := r.skipDepth
	if depth <= 0 {
		depth = HardMaxDepth
	}
	n, err := walk(r.b[r.p:], depth)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFrameIllegal, err)
	}
	r.p += n
	return nil
}

// rawValue returns the bytes of the next value and steps over it.
func (r *reader) rawValue() ([]byte, error) {
	start := r.p
	if err := r.skip(); err != nil {
		return nil, err
	}
	return r.b[start:r.p], nil
}
