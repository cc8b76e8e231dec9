package protocol

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"sync/atomic"
	"unicode/utf8"
)

// TagsHashCode returns Java's String.hashCode of tags as an int64, the value
// RocketMQ stores in a ConsumeQueue entry and sends in a subscription's code
// set: h = 31*h + c over the UTF-16 code units, wrapping at 32 bits.
// Invalid UTF-8 counts as U+FFFD, as Java's decoder would produce.
func TagsHashCode(tags string) int64 {
	var h int32
	for i := 0; i < len(tags); {
		r, size := utf8.DecodeRuneInString(tags[i:])
		i += size
		if r >= 0x10000 { // a surrogate pair in UTF-16
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	return int64(h)
}

// OffsetMsgID returns the offset message id of the record at commitLogOffset
// on the broker storeHost: upper-case hex of the IPv4 address (4 bytes), the
// port (4 bytes) and the offset (8 bytes), big-endian: 32 characters. An IPv6
// host gives 56 characters (16 + 4 + 8 bytes).
func OffsetMsgID(storeHost netip.AddrPort, commitLogOffset int64) string {
	var out [56]byte
	return string(AppendOffsetMsgID(out[:0], storeHost, commitLogOffset))
}

// AppendOffsetMsgID appends OffsetMsgID's characters to dst: ids made
// into one buffer can become one string, sliced, instead of one each.
func AppendOffsetMsgID(dst []byte, storeHost netip.AddrPort, commitLogOffset int64) []byte {
	a := storeHost.Addr().Unmap()
	var buf [28]byte
	b := buf[:0]
	b = append(b, a.AsSlice()...)
	b = binary.BigEndian.AppendUint32(b, uint32(storeHost.Port()))
	b = binary.BigEndian.AppendUint64(b, uint64(commitLogOffset))
	n := len(dst)
	dst = append(dst, make([]byte, 2*len(b))...)
	hexUpper(dst[n:], b)
	return dst
}

// ParseOffsetMsgID parses an offset message id (either case).
func ParseOffsetMsgID(id string) (storeHost netip.AddrPort, commitLogOffset int64, err error) {
	if len(id) != 32 && len(id) != 56 {
		return netip.AddrPort{}, 0, fmt.Errorf("protocol: message id %q: want 32 or 56 hex characters, got %d", id, len(id))
	}
	var buf [28]byte
	b := buf[:len(id)/2]
	if _, err := hex.Decode(b, []byte(id)); err != nil {
		return netip.AddrPort{}, 0, fmt.Errorf("protocol: message id %q: %w", id, err)
	}
	ipLen := len(b) - 12
	addr, _ := netip.AddrFromSlice(b[:ipLen])
	port := binary.BigEndian.Uint32(b[ipLen:])
	if port > 0xFFFF {
		return netip.AddrPort{}, 0, fmt.Errorf("protocol: message id %q: port %d out of range", id, port)
	}
	off := int64(binary.BigEndian.Uint64(b[ipLen+4:]))
	if off < 0 {
		return netip.AddrPort{}, 0, fmt.Errorf("protocol: message id %q: negative offset", id)
	}
	return netip.AddrPortFrom(addr, uint16(port)), off, nil
}

func hexUpper(dst, src []byte) {
	const digits = "0123456789ABCDEF"
	for i, c := range src {
		dst[2*i] = digits[c>>4]
		dst[2*i+1] = digits[c&0x0F]
	}
}

// UniqIDPrefix is the per-process part (10 bytes) of a client message id:
// IPv4 address (4), process id (low 2 bytes), salt (4), as in RocketMQ's
// MessageClientIDSetter where the salt is a class-loader hash. Pick a random
// salt per process so that two processes with the same pid differ.
type UniqIDPrefix [10]byte

// MakeUniqIDPrefix builds a prefix. For an IPv6 address its last 4 bytes
// are used.
func MakeUniqIDPrefix(ip netip.Addr, pid int, salt uint32) UniqIDPrefix {
	var p UniqIDPrefix
	a := ip.Unmap().AsSlice()
	if len(a) >= 4 {
		copy(p[0:4], a[len(a)-4:])
	}
	binary.BigEndian.PutUint16(p[4:6], uint16(pid))
	binary.BigEndian.PutUint32(p[6:10], salt)
	return p
}

// UniqID returns a client message id (the UNIQ_KEY property): upper-case hex
// of the prefix (10 bytes), elapsedMs (4 bytes: milliseconds since a base the
// client chooses, RocketMQ uses the start of the month) and counter (2 bytes),
// 32 characters. It is a pure function: the caller supplies the clock and
// the counter (see UniqIDGenerator).
func UniqID(p UniqIDPrefix, elapsedMs uint32, counter uint16) string {
	var b [16]byte
	copy(b[:10], p[:])
	binary.BigEndian.PutUint32(b[10:14], elapsedMs)
	binary.BigEndian.PutUint16(b[14:16], counter)
	var out [32]byte
	hexUpper(out[:], b[:])
	return string(out[:])
}

// UniqIDGenerator hands out client message ids with a shared counter. It
// reads no clock: Next takes the time. Safe for concurrent use.
type UniqIDGenerator struct {
	Prefix UniqIDPrefix
	BaseMs int64 // the epoch of elapsedMs, e.g. the start of the current month in Unix ms
	n      atomic.Uint32
}

// Next returns a new id for a message created at nowMs (Unix ms).
func (g *UniqIDGenerator) Next(nowMs int64) string {
	return UniqID(g.Prefix, uint32(nowMs-g.BaseMs), uint16(g.n.Add(1)))
}
