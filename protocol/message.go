package protocol

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unsafe"
)

// Well-known message property keys (RocketMQ's names).
const (
	PropertyTags    = "TAGS"     // the message's tag, used by tag expressions
	PropertyKeys    = "KEYS"     // space-separated business keys, indexed for QUERY_MESSAGE
	PropertyUniqKey = "UNIQ_KEY" // client-generated unique message id (see UniqID)
	PropertyDelay   = "DELAY"    // delay level (1..18), 0 or absent = none
	PropertyWait    = "WAIT"     // "false": the producer does not wait for the flush
)

// Message is a message as a producer sends it. On the wire (inside a
// SEND_BATCH body) it is a msgpack map with the keys of its tags.
type Message struct {
	Topic      string            `msgpack:"topic"`
	Flag       int32             `msgpack:"flag"`
	Body       []byte            `msgpack:"body"`
	Properties map[string]string `msgpack:"properties,omitempty"`
	// RawProperties is the properties map as it arrived on the wire, when
	// the decoder was asked to keep it encoded (Limits.RawProperties), or
	// as SetUniqKey wrote it on a message that had none (a producer's send
	// of a message without properties); then Properties is nil. The accessors below read either; the setters turn
	// it into Properties first. The encoders write it when Properties is
	// empty.
	RawProperties []byte `msgpack:"-"`
}

// MessageExt is a stored message as pulls and queries return it.
type MessageExt struct {
	Message
	QueueID         int32  `msgpack:"queueId"`
	QueueOffset     int64  `msgpack:"queueOffset"`     // index in the ConsumeQueue
	CommitLogOffset int64  `msgpack:"commitLogOffset"` // byte offset of the record in the CommitLog
	StoreSize       int32  `msgpack:"storeSize"`       // size of the CommitLog record
	BornTimestamp   int64  `msgpack:"bornTimestamp"`   // producer's clock, ms since the Unix epoch
	StoreTimestamp  int64  `msgpack:"storeTimestamp"`  // broker's clock, ms since the Unix epoch
	BornHost        string `msgpack:"bornHost"`        // producer "ip:port"
	StoreHost       string `msgpack:"storeHost"`       // broker "ip:port"
	MsgID           string `msgpack:"msgId"`           // offset message id (see OffsetMsgID)
	ReconsumeTimes  int32  `msgpack:"reconsumeTimes"`
	SysFlag         int32  `msgpack:"sysFlag"`
	BodyCRC         uint32 `msgpack:"bodyCRC"` // CRC32 (IEEE) of the body, masked & 0x7FFFFFFF
}

// Property returns the value of property k ("" if absent).
func (m *Message) Property(k string) string {
	if m.Properties == nil && len(m.RawProperties) > 0 {
		return RawProperty(m.RawProperties, k)
	}
	return m.Properties[k]
}

// PropertyMap returns the properties as a map, decoding RawProperties into
// Properties first if needed (the map is m's own: changes to it are
// changes to m).
func (m *Message) PropertyMap() map[string]string {
	if m.Properties == nil && len(m.RawProperties) > 0 {
		props := make(map[string]string, 8)
		EachRawProperty(m.RawProperties, func(k, v []byte) { props[string(k)] = string(v) })
		m.Properties, m.RawProperties = props, nil
	}
	return m.Properties
}

// SetProperty sets property k, creating the map if needed. An empty value
// deletes the property.
func (m *Message) SetProperty(k, v string) {
	m.PropertyMap()
	if v == "" {
		delete(m.Properties, k)
		return
	}
	if m.Properties == nil {
		m.Properties = make(map[string]string, 4)
	}
	m.Properties[k] = v
}

// Tags returns the TAGS property.
func (m *Message) Tags() string { return m.Property(PropertyTags) }

// SetTags sets the TAGS property.
func (m *Message) SetTags(tags string) { m.SetProperty(PropertyTags, tags) }

// Keys returns the KEYS property split on spaces.
func (m *Message) Keys() []string {
	keys := m.Property(PropertyKeys)
	if keys == "" {
		return nil
	}
	return strings.Fields(keys)
}

// SetKeys sets the KEYS property to the keys joined by spaces. A key
// containing a space becomes several keys.
func (m *Message) SetKeys(keys ...string) {
	m.SetProperty(PropertyKeys, strings.Join(strings.Fields(strings.Join(keys, " ")), " "))
}

// UniqKey returns the UNIQ_KEY property.
func (m *Message) UniqKey() string { return m.Property(PropertyUniqKey) }

// SetUniqKey sets the UNIQ_KEY property. On a message with no properties
// at all it writes them encoded (RawProperties, one entry) rather than
// making a map: the producer sets a UNIQ_KEY on every message it sends, and
// the map was the largest allocation of an async send. The accessors and
// setters read and change it as any other property; only code that writes
// to m.Properties directly must make the map first (PropertyMap does).
func (m *Message) SetUniqKey(id string) {
	if id != "" && m.Properties == nil && len(m.RawProperties) == 0 {
		b := make([]byte, 0, 1+1+len(PropertyUniqKey)+2+len(id))
		b = appendMapHeader(b, 1)
		b = appendStr(b, PropertyUniqKey)
		m.RawProperties = appendStr(b, id)
		return
	}
	m.SetProperty(PropertyUniqKey, id)
}

// DelayLevel returns the DELAY property as a number (0 if absent or invalid).
func (m *Message) DelayLevel() int {
	n, err := strconv.Atoi(m.Property(PropertyDelay))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// SetDelayLevel sets the DELAY property (0 removes it).
func (m *Message) SetDelayLevel(level int) {
	if level <= 0 {
		m.SetProperty(PropertyDelay, "")
		return
	}
	m.SetProperty(PropertyDelay, strconv.Itoa(level))
}

// WaitStoreMsgOK returns the WAIT property: true unless it is "false".
func (m *Message) WaitStoreMsgOK() bool { return m.Property(PropertyWait) != "false" }

// SetWaitStoreMsgOK sets the WAIT property ("false" or absent).
func (m *Message) SetWaitStoreMsgOK(wait bool) {
	if wait {
		m.SetProperty(PropertyWait, "")
		return
	}
	m.SetProperty(PropertyWait, "false")
}

// Limits on a message that the CommitLog record layout imposes (RocketMQ's).
const (
	MaxTopicLength = 127 // bytes; the record stores it behind a 1-byte length
	// MaxPropertiesBytes is the largest encoded "k\x01v\x02..." size of a
	// message's properties: the record stores them behind an int16 (32767),
	// together with the 20-byte record CRC property every record ends with.
	MaxPropertiesBytes = 32767 - recordCRCPropertySize
)

// Sizes of the CommitLog record (docs/STORAGE.md), from which a client
// computes a message's storeSize and so the largest body the broker's
// maxMessageSize admits (docs/PROTOCOL.md 6.2, 7.1). TestPullExampleRecord
// holds them to storage's golden record.
const (
	// recordCRCPropertySize is the "__CRC32#" property at the end of every
	// record's properties, which readers do not see.
	recordCRCPropertySize = 20
	// recordOverhead is a record's size less its body, topic and
	// properties, with IPv4 born and store hosts (each IPv6 host adds 12):
	// 91 fixed bytes and the CRC property.
	recordOverhead = 91 + recordCRCPropertySize
)

// ValidateTopic checks a topic name: 1..127 bytes of [A-Za-z0-9_%|-].
func ValidateTopic(topic string) error {
	if topic == "" {
		return fmt.Errorf("%w: empty topic", ErrMessageIllegal)
	}
	if len(topic) > MaxTopicLength {
		return fmt.Errorf("%w: topic is %d bytes, limit %d", ErrMessageIllegal, len(topic), MaxTopicLength)
	}
	for i := 0; i < len(topic); i++ {
		c := topic[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '%' || c == '|') {
			return fmt.Errorf("%w: topic %q: character %q not allowed (use A-Z a-z 0-9 _ - %% |)", ErrMessageIllegal, topic, c)
		}
	}
	return nil
}

// Validate checks that m can be stored: a valid topic, a body of at most
// lim.MaxMessageSize bytes, properties whose keys are not empty, that contain
// no 0x01 or 0x02 byte, and whose encoding fits in MaxPropertiesBytes.
// Errors wrap ErrMessageIllegal (status MESSAGE_ILLEGAL).
func (m *Message) Validate(lim Limits) error {
	lim = lim.norm()
	if err := ValidateTopic(m.Topic); err != nil {
		return err
	}
	if len(m.Body) > lim.MaxMessageSize {
		return fmt.Errorf("%w: body is %d bytes, limit %d", ErrMessageIllegal, len(m.Body), lim.MaxMessageSize)
	}
	n := 0 // encoded size "k\x01v\x02...", counted in the same pass
	var err error
	if m.Properties == nil && len(m.RawProperties) > 0 {
		// Read where they are: Validate does not change m (a map made
		// here would undo SetUniqKey's encoded properties).
		EachRawProperty(m.RawProperties, func(k, v []byte) {
			if err == nil {
				// Views of raw for the check only (the error copies k).
				n, err = checkProperty(n, unsafe.String(unsafe.SliceData(k), len(k)), unsafe.String(unsafe.SliceData(v), len(v)))
			}
		})
	} else {
		for k, v := range m.Properties {
			if n, err = checkProperty(n, k, v); err != nil {
				break
			}
		}
	}
	if err != nil {
		return err
	}
	if n > MaxPropertiesBytes {
		return fmt.Errorf("%w: properties are %d bytes, limit %d", ErrMessageIllegal, n, MaxPropertiesBytes)
	}
	return nil
}

// checkProperty checks one property for Validate and adds its encoded
// size ("k\x01v\x02") to n.
func checkProperty(n int, k, v string) (int, error) {
	if len(k) == 0 {
		return n, fmt.Errorf("%w: empty property key", ErrMessageIllegal)
	}
	if hasSeparator(k) || hasSeparator(v) {
		return n, fmt.Errorf("%w: property %q contains a 0x01 or 0x02 byte", ErrMessageIllegal, k)
	}
	return n + len(k) + len(v) + 2, nil
}

// hasSeparator reports whether s holds one of the CommitLog's property
// separators, 0x01 and 0x02.
func hasSeparator(s string) bool {
	return strings.IndexByte(s, 1) >= 0 || strings.IndexByte(s, 2) >= 0
}

// ---- wire encoding of messages (hand-written: hot path, deterministic) ----

func appendProperties(b []byte, props map[string]string) []byte {
	if len(props) == 1 { // most messages: UNIQ_KEY alone; nothing to sort
		for k, v := range props {
			b = appendMapHeader(b, 1)
			b = appendStr(b, k)
			return appendStr(b, v)
		}
	}
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = appendMapHeader(b, len(keys))
	for _, k := range keys {
		b = appendStr(b, k)
		b = appendStr(b, props[k])
	}
	return b
}

func (m *Message) appendFields(b []byte) []byte {
	b = appendStr(b, "topic")
	b = appendStr(b, m.Topic)
	b = appendStr(b, "flag")
	b = appendInt(b, int64(m.Flag))
	b = appendStr(b, "body")
	b = appendBin(b, m.Body)
	return appendPropertiesField(b, m.Properties, m.RawProperties)
}

// appendPropertiesField appends the "properties" key and map of a message
// or SEND request: props if it has any, else raw (a map kept encoded, see
// Message.RawProperties), else nothing.
func appendPropertiesField(b []byte, props map[string]string, raw []byte) []byte {
	switch {
	case len(props) > 0:
		b = appendStr(b, "properties")
		return appendProperties(b, props)
	case len(raw) > 0:
		b = appendStr(b, "properties")
		return append(b, raw...)
	}
	return b
}

func (m *Message) fieldCount() int {
	if len(m.Properties) > 0 || len(m.RawProperties) > 0 {
		return 4
	}
	return 3
}

// AppendMsgpack appends m as one msgpack map in canonical form.
func (m *Message) AppendMsgpack(b []byte) []byte {
	b = appendMapHeader(b, m.fieldCount())
	return m.appendFields(b)
}

// AppendMsgpack appends m as one msgpack map in canonical form.
func (m *MessageExt) AppendMsgpack(b []byte) []byte {
	b = appendMapHeader(b, m.fieldCount()+12)
	b = m.Message.appendFields(b)
	b = appendStr(b, "queueId")
	b = appendInt(b, int64(m.QueueID))
	b = appendStr(b, "queueOffset")
	b = appendInt(b, m.QueueOffset)
	b = appendStr(b, "commitLogOffset")
	b = appendInt(b, m.CommitLogOffset)
	b = appendStr(b, "storeSize")
	b = appendInt(b, int64(m.StoreSize))
	b = appendStr(b, "bornTimestamp")
	b = appendInt(b, m.BornTimestamp)
	b = appendStr(b, "storeTimestamp")
	b = appendInt(b, m.StoreTimestamp)
	b = appendStr(b, "bornHost")
	b = appendStr(b, m.BornHost)
	b = appendStr(b, "storeHost")
	b = appendStr(b, m.StoreHost)
	b = appendStr(b, "msgId")
	b = appendStr(b, m.MsgID)
	b = appendStr(b, "reconsumeTimes")
	b = appendInt(b, int64(m.ReconsumeTimes))
	b = appendStr(b, "sysFlag")
	b = appendInt(b, int64(m.SysFlag))
	b = appendStr(b, "bodyCRC")
	b = appendUint(b, uint64(m.BodyCRC))
	return b
}

func appendMessageList(b []byte, msgs []Message) []byte {
	b = appendArrayHeader(b, len(msgs))
	for i := range msgs {
		b = msgs[i].AppendMsgpack(b)
	}
	return b
}

func appendMessageExtList(b []byte, msgs []MessageExt) []byte {
	b = appendArrayHeader(b, len(msgs))
	for i := range msgs {
		b = msgs[i].AppendMsgpack(b)
	}
	return b
}

// ---- decoding (only over validated bytes) ----

// errEmptyKey: PROTOCOL.md 6.3 wants every property key non-empty (the
// CommitLog's "k\x01v\x02" encoding would store a pair no reader can name).
var errEmptyKey = fmt.Errorf("%w: a property has an empty key (keys must be 1 byte or more)", ErrMessageIllegal)

// decodeProperties decodes a properties map. With producer set (a message
// as a producer sends it), a pair with an empty key is refused: recorded
// in r.soft (see reader.keep) and left out. Stored messages (MessageExt) are
// decoded as they are, so that a record from before the rule still reads.
func decodeProperties(r *reader, producer bool) (map[string]string, error) {
	n, err := r.mapLen()
	if err != nil || n == 0 {
		return nil, err
	}
	// Do not trust n for the allocation: grow as pairs actually arrive.
	props := make(map[string]string, min(n, 8))
	for range n {
		k, err := r.strSeen() // the same few names in every message
		if err != nil {
			return nil, err
		}
		v, err := r.str()
		if err != nil {
			return nil, err
		}
		if k == "" && producer {
			_ = r.keep("properties", errEmptyKey)
			continue
		}
		props[k] = v
	}
	return props, nil
}

// rawProperties checks that the next value is a map of strings to strings
// and returns its encoding (nil for an empty map), aliasing r's bytes.
// producer: as for decodeProperties (the map is still returned whole).
func rawProperties(r *reader, producer bool) ([]byte, error) {
	start := r.p
	n, err := r.mapLen()
	if err != nil || n == 0 {
		return nil, err
	}
	for i := range 2 * n {
		k, err := r.rawStr()
		if err != nil {
			return nil, err
		}
		if i%2 == 0 && len(k) == 0 && producer {
			_ = r.keep("properties", errEmptyKey)
		}
	}
	return r.b[start:r.p], nil
}

// EachRawProperty calls fn with every key and value of a properties map
// kept encoded (Message.RawProperties, as validated by the decoder), in
// wire order. k and v alias raw.
func EachRawProperty(raw []byte, fn func(k, v []byte)) {
	if len(raw) == 0 {
		return
	}
	r := &reader{b: raw}
	n, err := r.mapLen()
	if err != nil {
		return
	}
	for range n {
		k, err := r.rawStr()
		if err != nil {
			return
		}
		v, err := r.rawStr()
		if err != nil {
			return
		}
		fn(k, v)
	}
}

// AppendPropertyMapHeader and AppendPropertyPair build, without a Go map,
// the msgpack map of properties that Message.RawProperties holds: the
// header for n pairs, then n pairs. A broker turning stored properties into
// a pull answer uses them.
func AppendPropertyMapHeader(b []byte, n int) []byte { return appendMapHeader(b, n) }

// AppendPropertyPair appends one key and value; see AppendPropertyMapHeader.
func AppendPropertyPair(b []byte, k, v []byte) []byte {
	return appendStr(appendStr(b, k), v)
}

// RawProperty returns the value of key in a properties map kept encoded
// ("" if absent). Of repeated keys the last counts, as when the map is
// decoded.
func RawProperty(raw []byte, key string) string {
	var last []byte
	EachRawProperty(raw, func(k, v []byte) {
		if string(k) == key {
			last = v
		}
	})
	return string(last)
}

// depthBelow is the nesting Limits.MaxDepth leaves for a value levels
// containers down (at least 1).
func depthBelow(lim Limits, levels int) int {
	return max(lim.norm().MaxDepth-levels, 1)
}

// minListElem is the smallest encoding of a list element this package
// accepts: every message map has a "body" key (0x81 0xa4 "body" 0xc4 0x00 is
// 8 bytes), and other lists are held to the same bound. A list may therefore
// declare at most len/8 elements, which keeps the memory of the decoded
// slice within a small multiple of the input even for lists of empty maps.
const minListElem = 8

// decodeMessage decodes one message map into m, and into x's extra fields
// if x is not nil (then m is &x.Message). Unknown keys are skipped. Body
// aliases r's bytes. The "body" key is required.
func decodeMessage(r *reader, m *Message, x *MessageExt) error {
	n, err := r.mapLen()
	if err != nil {
		return err
	}
	sawBody := false
	for range n {
		key, err := r.rawStr()
		if err != nil {
			return err
		}
		switch string(key) {
		case "topic":
			m.Topic, err = r.strSeen()
		case "flag":
			m.Flag, err = r.int32()
		case "body":
			m.Body, err = r.rawStr()
			sawBody = true
		case "properties":
			if r.rawProps {
				m.RawProperties, err = rawProperties(r, x == nil)
			} else {
				m.Properties, err = decodeProperties(r, x == nil)
			}
		default:
			if x == nil {
				err = r.skip()
			} else {
				err = decodeExtField(r, x, key)
			}
		}
		if err != nil {
			if err = r.keep(string(key), err); err != nil {
				return fmt.Errorf("message %q: %w", key, err)
			}
		}
	}
	if !sawBody {
		return r.errf("message without a \"body\" key")
	}
	return nil
}

func decodeExtField(r *reader, x *MessageExt, key []byte) (err error) {
	switch string(key) {
	case "queueId":
		x.QueueID, err = r.int32()
	case "queueOffset":
		x.QueueOffset, err = r.int64()
	case "commitLogOffset":
		x.CommitLogOffset, err = r.int64()
	case "storeSize":
		x.StoreSize, err = r.int32()
	case "bornTimestamp":
		x.BornTimestamp, err = r.int64()
	case "storeTimestamp":
		x.StoreTimestamp, err = r.int64()
	case "bornHost":
		x.BornHost, err = r.strSeen()
	case "storeHost":
		x.StoreHost, err = r.strSeen()
	case "msgId":
		x.MsgID, err = r.str()
	case "reconsumeTimes":
		x.ReconsumeTimes, err = r.int32()
	case "sysFlag":
		x.SysFlag, err = r.int32()
	case "bodyCRC":
		x.BodyCRC, err = r.uint32()
	default:
		err = r.skip()
	}
	return err
}

// decodeList validates body and decodes a msgpack array of at most max
// elements with dec. The slice grows as elements arrive: a declared count is
// never trusted for an allocation.
func decodeList[T any](body []byte, lim Limits, max int, what string, dec func(*reader, *T) error) ([]T, error) {
	if len(body) == 0 {
		return nil, nil
	}
	// No Validate pass first (it was a tenth of a consumer's CPU): dec is
	// hand-written on reader, which checks every length against the bytes
	// left before using it and steps over unknown values with walk (depth
	// bounded by HardMaxDepth); trailing bytes are refused below.
	// The list is one level and its elements' maps a second: what dec
	// skips inside an element may nest MaxDepth-2 deep, so that the body
	// as a whole stays within MaxDepth as Validate would hold it.
	r := &reader{b: body, rawProps: lim.RawProperties, skipDepth: depthBelow(lim, 2), useArena: true}
	n, err := r.arrayLen()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if n > max {
		return nil, fmt.Errorf("%w: %s: %d elements, limit %d", ErrFrameIllegal, what, n, max)
	}
	if n > (len(body)-r.p)/minListElem {
		return nil, fmt.Errorf("%w: %s: %d elements in %d bytes (each needs %d)", ErrFrameIllegal, what, n, len(body)-r.p, minListElem)
	}
	// Presize from the declared count, but never to more bytes than the
	// body holds (an element costs at least minListElem bytes of it, and
	// the allocation stays below the frame's size): a list of 256
	// messages was regrown nine times.
	var zero T
	presize := len(body) / int(unsafe.Sizeof(zero)+1)
	if presize < 16 {
		presize = 16
	}
	out := make([]T, min(n, presize))
	var soft error
	for i := range n {
		// Decoded in place: a local passed to dec (a func value) escaped,
		// one heap copy of every element (a third of a pull answer's
		// allocations). Beyond the presized part the slice grows as
		// elements arrive.
		if i == len(out) {
			out = append(out, zero)
		}
		if err := dec(r, &out[i]); err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", what, i, err)
		}
		if r.soft != nil && soft == nil {
			soft = within(fmt.Sprintf("%s[%d]", what, i), r.soft)
		}
	}
	if r.p != len(body) {
		return nil, fmt.Errorf("%w: %s: %d bytes after the list", ErrFrameIllegal, what, len(body)-r.p)
	}
	if soft != nil {
		return nil, soft
	}
	return out, nil
}

func decodeMessageList(body []byte, lim Limits) ([]Message, error) {
	return decodeList(body, lim, lim.MaxBatchMessages, "messages", func(r *reader, m *Message) error {
		if err := decodeMessage(r, m, nil); err != nil {
			return err
		}
		if len(m.Body) > lim.MaxMessageSize {
			return fmt.Errorf("%w: body is %d bytes, limit %d", ErrMessageIllegal, len(m.Body), lim.MaxMessageSize)
		}
		return nil
	})
}

// decodeMessageExtList decodes a list of stored messages. raw keeps their
// properties encoded (Message.RawProperties) whatever lim says: the
// decoders of answers choose, not the peer's limits.
func decodeMessageExtList(body []byte, lim Limits, raw bool) ([]MessageExt, error) {
	lim.RawProperties = raw
	return decodeList(body, lim, lim.MaxBatchMessages, "messages", func(r *reader, m *MessageExt) error {
		return decodeMessage(r, &m.Message, m)
	})
}

// DecodeMessage decodes one untrusted msgpack message map (as written by
// Message.AppendMsgpack). Body aliases b.
func DecodeMessage(b []byte, lim Limits) (Message, error) {
	lim = lim.norm()
	var m Message
	if err := Validate(b, lim.MaxDepth); err != nil {
		return m, fmt.Errorf("%w: %w", ErrFrameIllegal, err)
	}
	r := &reader{b: b}
	if err := decodeMessage(r, &m, nil); err != nil {
		return m, err
	}
	return m, r.soft
}

// DecodeMessageExt decodes one untrusted msgpack MessageExt map. Body aliases b.
func DecodeMessageExt(b []byte, lim Limits) (MessageExt, error) {
	lim = lim.norm()
	var m MessageExt
	if err := Validate(b, lim.MaxDepth); err != nil {
		return m, fmt.Errorf("%w: %w", ErrFrameIllegal, err)
	}
	r := &reader{b: b}
	if err := decodeMessage(r, &m.Message, &m); err != nil {
		return m, err
	}
	return m, r.soft
}
