package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net/netip"
	"strings"
)

// Record magic codes of RocketMQ's CommitLog layout.
const (
	MagicV1    uint32 = 0xDAA320A7 // message record, 1-byte topic length
	MagicV2    uint32 = 0xDAA320AB // message record, 2-byte topic length (read only)
	MagicBlank uint32 = 0xCBD43194 // end-of-segment filler
)

// SysFlag bits used by Wharf.
const (
	SysFlagBornHostV6  int32 = 1 << 4
	SysFlagStoreHostV6 int32 = 1 << 5
)

// Layout limits.
const (
	// BlankRecordSize is the size of the end-of-segment filler header, and the
	// least room a segment always keeps free for it.
	BlankRecordSize = 8
	// MaxTopicLen is the longest topic a V1 record can carry.
	MaxTopicLen = 127
	// MaxPropertiesLen is the longest encoded properties string.
	MaxPropertiesLen = 32767
	// fixedV1IPv4 is the size of a V1 record with IPv4 hosts and empty body,
	// topic and properties: 4+4+4+4+4+8+8+4+8+8+8+8+4+8+4+1+2.
	fixedV1IPv4 = 91
)

// Property separators of RocketMQ's properties string: key\x01value\x02...
const (
	propNameSep  = '\x01'
	propValueSep = '\x02'
)

// Well-known property keys.
const (
	PropKeys    = "KEYS"
	PropTags    = "TAGS"
	PropUniqKey = "UNIQ_KEY"
)

// Record errors. Every decode error wraps one of these, so callers can tell a
// torn or blank tail from a bad record.
var (
	ErrShortRecord = errors.New("record extends past the end of the data")
	ErrBadMagic    = errors.New("bad record magic")
	ErrBadCRC      = errors.New("record body CRC mismatch")
	ErrBadLength   = errors.New("record length fields inconsistent")
	ErrIllegal     = errors.New("message illegal")
)

// Message is what a producer asks the CommitLog to store. Properties is the
// encoded properties string (see EncodeProperties).
type Message struct {
	Topic          string
	QueueID        int32
	Flag           int32
	SysFlag        int32
	Body           []byte
	Properties     []byte
	BornTimestamp  int64 // producer clock, ms
	BornHost       netip.AddrPort
	ReconsumeTimes int32
	PreparedTxnOff int64
}

// Record is a decoded CommitLog record. Body, Topic and Properties alias the
// bytes it was decoded from.
type Record struct {
	TotalSize      int32
	Magic          uint32
	BodyCRC        uint32
	QueueID        int32
	Flag           int32
	QueueOffset    int64
	PhysicalOffset int64
	SysFlag        int32
	BornTimestamp  int64
	BornHost       netip.AddrPort
	StoreTimestamp int64
	StoreHost      netip.AddrPort
	ReconsumeTimes int32
	PreparedTxnOff int64
	Body           []byte
	Topic          []byte
	Properties     []byte
}

// BodyCRC is RocketMQ's body checksum: CRC-32 (IEEE) masked to 31 bits.
func BodyCRC(body []byte) uint32 { return crc32.ChecksumIEEE(body) & 0x7FFFFFFF }

func hostLen(ap netip.AddrPort) int {
	if ap.Addr().Is4() || ap.Addr().Is4In6() || !ap.Addr().IsValid() {
		return 8
	}
	return 20
}

// RecordSize is the encoded size of m with the given store host, or an error
// wrapping ErrIllegal if m cannot be stored.
func RecordSize(m *Message, storeHost netip.AddrPort) (int, error) {
	if err := ValidateTopic(m.Topic); err != nil {
		return 0, err
	}
	return recordSizeOfValid(m, storeHost)
}

// recordSizeOfValid is RecordSize of a message whose topic passed
// ValidateTopic.
func recordSizeOfValid(m *Message, storeHost netip.AddrPort) (int, error) {
	if len(m.Properties) > MaxPropertiesLen {
		return 0, fmt.Errorf("%w: properties length %d > %d", ErrIllegal, len(m.Properties), MaxPropertiesLen)
	}
	if m.QueueID < 0 {
		return 0, fmt.Errorf("%w: negative queue id %d", ErrIllegal, m.QueueID)
	}
	if len(m.Properties)+propCRCLen > MaxPropertiesLen {
		return 0, fmt.Errorf("%w: properties length %d > %d", ErrIllegal, len(m.Properties), MaxPropertiesLen-propCRCLen)
	}
	n := fixedV1IPv4 - 16 + hostLen(m.BornHost) + hostLen(storeHost) + len(m.Body) + len(m.Topic) + len(m.Properties) + propCRCLen
	return n, nil
}

func putHost(b []byte, ap netip.AddrPort) int {
	a := ap.Addr()
	if hostLen(ap) == 8 {
		if a.IsValid() {
			v4 := a.Unmap().As4()
			copy(b, v4[:])
		} else {
			copy(b, []byte{0, 0, 0, 0})
		}
		binary.BigEndian.PutUint32(b[4:], uint32(ap.Port()))
		return 8
	}
	v6 := a.As16()
	copy(b, v6[:])
	binary.BigEndian.PutUint32(b[16:], uint32(ap.Port()))
	return 20
}

func hostFlags(m *Message, storeHost netip.AddrPort) int32 {
	f := m.SysFlag &^ (SysFlagBornHostV6 | SysFlagStoreHostV6)
	if hostLen(m.BornHost) == 20 {
		f |= SysFlagBornHostV6
	}
	if hostLen(storeHost) == 20 {
		f |= SysFlagStoreHostV6
	}
	return f
}

// EncodeRecord writes m as a V1 record into b, which must be exactly
// RecordSize(m, storeHost) bytes (the CommitLog passes its mapped segment).
func EncodeRecord(b []byte, m *Message, queueOffset, phyOffset, storeTimestamp int64, storeHost netip.AddrPort) {
	be := binary.BigEndian
	be.PutUint32(b[0:], uint32(len(b)))
	be.PutUint32(b[4:], MagicV1)
	be.PutUint32(b[8:], BodyCRC(m.Body))
	be.PutUint32(b[12:], uint32(m.QueueID))
	be.PutUint32(b[16:], uint32(m.Flag))
	be.PutUint64(b[20:], uint64(queueOffset))
	be.PutUint64(b[28:], uint64(phyOffset))
	be.PutUint32(b[36:], uint32(hostFlags(m, storeHost)))
	be.PutUint64(b[40:], uint64(m.BornTimestamp))
	p := 48
	p += putHost(b[p:], m.BornHost)
	be.PutUint64(b[p:], uint64(storeTimestamp))
	p += 8
	p += putHost(b[p:], storeHost)
	be.PutUint32(b[p:], uint32(m.ReconsumeTimes))
	p += 4
	be.PutUint64(b[p:], uint64(m.PreparedTxnOff))
	p += 8
	be.PutUint32(b[p:], uint32(len(m.Body)))
	p += 4
	p += copy(b[p:], m.Body)
	b[p] = byte(len(m.Topic))
	p++
	p += copy(b[p:], m.Topic)
	be.PutUint16(b[p:], uint16(len(m.Properties)+propCRCLen))
	p += 2
	p += copy(b[p:], m.Properties)
	p += putPropCRC(b[p:], crc32.ChecksumIEEE(b[:p]))
	if p != len(b) {
		panic(fmt.Sprintf("storage: record encoded to %d bytes, want %d", p, len(b)))
	}
}

// The record CRC property (RocketMQ 5's enabledAppendPropCRC, always on in
// Wharf): the last 20 bytes of every record are "__CRC32#" \x01, ten ASCII
// digits of the CRC-32 of all the record's bytes before them (least
// significant digit first), \x02. The body CRC alone leaves the header, topic
// and properties unprotected, so a torn write that zeroed a record's tail
// would pass as valid; recovery requires this CRC.
const (
	propCRCKey = "__CRC32#"
	propCRCLen = len(propCRCKey) + 1 + 10 + 1
)

func putPropCRC(b []byte, crc uint32) int {
	n := copy(b, propCRCKey)
	b[n] = propNameSep
	n++
	for i := 0; i < 10; i++ {
		b[n+i] = byte('0' + crc%10)
		crc /= 10
	}
	b[n+10] = propValueSep
	return propCRCLen
}

// propCRC parses the record CRC property at the end of props.
func propCRC(props []byte) (uint32, bool) {
	if len(props) < propCRCLen {
		return 0, false
	}
	t := props[len(props)-propCRCLen:]
	if string(t[:len(propCRCKey)]) != propCRCKey || t[len(propCRCKey)] != propNameSep || t[propCRCLen-1] != propValueSep {
		return 0, false
	}
	var v uint64
	for i := 9; i >= 0; i-- {
		c := t[len(propCRCKey)+1+i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if v > 0xFFFFFFFF {
		return 0, false
	}
	return uint32(v), true
}

// EncodeBlank writes the end-of-segment filler header into b: the total size
// covers every byte left in the segment.
func EncodeBlank(b []byte, bytesLeft int) {
	binary.BigEndian.PutUint32(b[0:], uint32(bytesLeft))
	binary.BigEndian.PutUint32(b[4:], MagicBlank)
}

func getHost(b []byte, v6 bool) (netip.AddrPort, int, bool) {
	if !v6 {
		if len(b) < 8 {
			return netip.AddrPort{}, 0, false
		}
		a := netip.AddrFrom4([4]byte(b[:4]))
		return netip.AddrPortFrom(a, uint16(binary.BigEndian.Uint32(b[4:]))), 8, true
	}
	if len(b) < 20 {
		return netip.AddrPort{}, 0, false
	}
	a := netip.AddrFrom16([16]byte(b[:16]))
	return netip.AddrPortFrom(a, uint16(binary.BigEndian.Uint32(b[16:]))), 20, true
}

// PeekHeader reads the total size and magic at the start of b without
// validating anything else. ok is false if b has fewer than 8 bytes.
func PeekHeader(b []byte) (size int32, magic uint32, ok bool) {
	if len(b) < 8 {
		return 0, 0, false
	}
	return int32(binary.BigEndian.Uint32(b)), binary.BigEndian.Uint32(b[4:]), true
}

// DecodeRecord decodes the message record at the start of b. It never reads
// past len(b) and never allocates. With checkCRC the record CRC property and
// the body CRC are verified. Properties excludes the record CRC property.
// A blank record is reported as an error wrapping ErrBadMagic; use PeekHeader
// to recognise it first.
func DecodeRecord(b []byte, checkCRC bool) (Record, error) {
	var r Record
	size, magic, ok := PeekHeader(b)
	if !ok {
		return r, fmt.Errorf("%w: %d bytes for a header", ErrShortRecord, len(b))
	}
	if magic != MagicV1 && magic != MagicV2 {
		return r, fmt.Errorf("%w: %#08x", ErrBadMagic, magic)
	}
	if size < fixedV1IPv4 {
		return r, fmt.Errorf("%w: total size %d below the minimum %d", ErrBadLength, size, fixedV1IPv4)
	}
	if int(size) > len(b) {
		return r, fmt.Errorf("%w: total size %d, %d bytes available", ErrShortRecord, size, len(b))
	}
	b = b[:size]
	be := binary.BigEndian
	r.TotalSize = size
	r.Magic = magic
	r.BodyCRC = be.Uint32(b[8:])
	r.QueueID = int32(be.Uint32(b[12:]))
	r.Flag = int32(be.Uint32(b[16:]))
	r.QueueOffset = int64(be.Uint64(b[20:]))
	r.PhysicalOffset = int64(be.Uint64(b[28:]))
	r.SysFlag = int32(be.Uint32(b[36:]))
	r.BornTimestamp = int64(be.Uint64(b[40:]))
	p := 48
	var n int
	if r.BornHost, n, ok = getHost(b[p:], r.SysFlag&SysFlagBornHostV6 != 0); !ok {
		return r, fmt.Errorf("%w: born host", ErrBadLength)
	}
	p += n
	if len(b) < p+8 {
		return r, fmt.Errorf("%w: store timestamp", ErrBadLength)
	}
	r.StoreTimestamp = int64(be.Uint64(b[p:]))
	p += 8
	if r.StoreHost, n, ok = getHost(b[p:], r.SysFlag&SysFlagStoreHostV6 != 0); !ok {
		return r, fmt.Errorf("%w: store host", ErrBadLength)
	}
	p += n
	if len(b) < p+16 {
		return r, fmt.Errorf("%w: reconsume times", ErrBadLength)
	}
	r.ReconsumeTimes = int32(be.Uint32(b[p:]))
	r.PreparedTxnOff = int64(be.Uint64(b[p+4:]))
	bodyLen := int(be.Uint32(b[p+12:]))
	p += 16
	if bodyLen < 0 || bodyLen > len(b)-p {
		return r, fmt.Errorf("%w: body length %d", ErrBadLength, bodyLen)
	}
	r.Body = b[p : p+bodyLen]
	p += bodyLen
	var err error
	if r.Topic, p, err = decodeTopic(b, p, magic); err != nil {
		return r, err
	}
	if len(b) < p+2 {
		return r, fmt.Errorf("%w: properties length", ErrBadLength)
	}
	propLen := int(be.Uint16(b[p:]))
	p += 2
	if propLen != len(b)-p {
		return r, fmt.Errorf("%w: properties length %d, %d bytes left of total size %d", ErrBadLength, propLen, len(b)-p, size)
	}
	r.Properties = b[p:]
	crc, hasCRC := propCRC(r.Properties)
	if hasCRC {
		r.Properties = r.Properties[:len(r.Properties)-propCRCLen]
	}
	if checkCRC {
		return r, verifyRecordCRC(&r, b, crc, hasCRC)
	}
	return r, nil
}

// decodeTopic reads the topic length (one byte in MagicV1, two in MagicV2)
// and the topic at b[p:]; it is apart because the two layouts differ only
// here. It returns the topic (a sub-slice of b) and the position after it.
func decodeTopic(b []byte, p int, magic uint32) ([]byte, int, error) {
	var topicLen int
	if magic == MagicV1 {
		if len(b) < p+1 {
			return nil, p, fmt.Errorf("%w: topic length", ErrBadLength)
		}
		topicLen = int(b[p])
		p++
	} else {
		if len(b) < p+2 {
			return nil, p, fmt.Errorf("%w: topic length", ErrBadLength)
		}
		topicLen = int(binary.BigEndian.Uint16(b[p:]))
		p += 2
	}
	if topicLen > len(b)-p {
		return nil, p, fmt.Errorf("%w: topic length %d", ErrBadLength, topicLen)
	}
	return b[p : p+topicLen], p + topicLen, nil
}

// verifyRecordCRC checks the record CRC property (crc, hasCRC) over b, the
// whole record, and then the body CRC of r; it is apart so that the layout
// walk in DecodeRecord reads as one pass and the optional check as another.
func verifyRecordCRC(r *Record, b []byte, crc uint32, hasCRC bool) error {
	if !hasCRC {
		return fmt.Errorf("%w: record CRC property missing (torn tail?)", ErrBadCRC)
	}
	if got := crc32.ChecksumIEEE(b[:len(b)-propCRCLen]); got != crc {
		return fmt.Errorf("%w: record CRC stored %#08x, computed %#08x", ErrBadCRC, crc, got)
	}
	if BodyCRC(r.Body) != r.BodyCRC {
		return fmt.Errorf("%w: body CRC stored %#08x, computed %#08x", ErrBadCRC, r.BodyCRC, BodyCRC(r.Body))
	}
	return nil
}

// ValidateTopic checks a topic name: 1 to 127 characters from
// [A-Za-z0-9_%|-], as RocketMQ allows. Topics name directories on disk, so
// nothing else (no '/', no '.') may pass.
func ValidateTopic(t string) error {
	if len(t) == 0 || len(t) > MaxTopicLen {
		return fmt.Errorf("%w: topic length %d not in [1, %d]", ErrIllegal, len(t), MaxTopicLen)
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '%' || c == '|') {
			return fmt.Errorf("%w: topic %q has character %q (allowed: letters, digits, _ - %% |)", ErrIllegal, t, c)
		}
	}
	return nil
}

// EncodeProperties builds RocketMQ's properties string from key/value pairs,
// in the order given. Keys and values must not contain the separators \x01 and
// \x02.
func EncodeProperties(kv ...string) ([]byte, error) {
	if len(kv)%2 != 0 {
		return nil, fmt.Errorf("%w: odd number of property strings", ErrIllegal)
	}
	var n int
	for _, s := range kv {
		if strings.ContainsAny(s, "\x01\x02") {
			return nil, fmt.Errorf("%w: property %q contains a separator byte", ErrIllegal, s)
		}
		n += len(s) + 1
	}
	b := make([]byte, 0, n)
	for i := 0; i < len(kv); i += 2 {
		b = append(b, kv[i]...)
		b = append(b, propNameSep)
		b = append(b, kv[i+1]...)
		b = append(b, propValueSep)
	}
	return b, nil
}

// AppendProperty appends one key/value pair to an encoded properties
// string. Neither may contain the separators \x01 and \x02.
func AppendProperty(dst, key, value []byte) ([]byte, error) {
	for _, s := range [2][]byte{key, value} {
		for _, c := range s {
			if c == propNameSep || c == propValueSep {
				return dst, fmt.Errorf("%w: property %q contains a separator byte", ErrIllegal, s)
			}
		}
	}
	dst = append(dst, key...)
	dst = append(dst, propNameSep)
	dst = append(dst, value...)
	return append(dst, propValueSep), nil
}

// Property returns the value of key in an encoded properties string without
// allocating.
func Property(props []byte, key string) (string, bool) {
	for len(props) > 0 {
		i := indexByte(props, propNameSep)
		if i < 0 {
			return "", false
		}
		name := props[:i]
		rest := props[i+1:]
		j := indexByte(rest, propValueSep)
		if j < 0 {
			j = len(rest)
		}
		if string(name) == key {
			return string(rest[:j]), true
		}
		if j == len(rest) {
			return "", false
		}
		props = rest[j+1:]
	}
	return "", false
}

// EachProperty calls fn for every key/value pair, in order.
func EachProperty(props []byte, fn func(key, value []byte)) {
	for len(props) > 0 {
		i := indexByte(props, propNameSep)
		if i < 0 {
			return
		}
		rest := props[i+1:]
		j := indexByte(rest, propValueSep)
		if j < 0 {
			fn(props[:i], rest)
			return
		}
		fn(props[:i], rest[:j])
		props = rest[j+1:]
	}
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// TagsHashCode is the ConsumeQueue tags code of a tags string: Java's
// String.hashCode, widened to int64 (0 for no tags).
func TagsHashCode(tags string) int64 {
	var h int32
	for _, r := range tags {
		if r >= 0x10000 {
			r1, r2 := surrogates(r)
			h = 31*h + int32(r1)
			h = 31*h + int32(r2)
			continue
		}
		h = 31*h + int32(r)
	}
	return int64(h)
}

func surrogates(r rune) (rune, rune) {
	r -= 0x10000
	return 0xD800 + (r>>10)&0x3FF, 0xDC00 + r&0x3FF
}

// PropDeliverMs is set by the broker on a delayed message while it waits in
// ScheduleTopic: its delivery time, Unix ms. Its ConsumeQueue entry's tags
// code is that time, so the scheduler finds due messages without reading
// the log.
const (
	PropDeliverMs = "__DELIVER_MS"
	ScheduleTopic = "SCHEDULE_TOPIC_XXXX"
)
