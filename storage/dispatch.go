package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/wharfmq/wharf/storage/cq"
	"github.com/wharfmq/wharf/storage/index"
)

// DispatchRequest is what the reput of one record produces: its ConsumeQueue
// entry and its index keys.
type DispatchRequest struct {
	Key            QueueKey
	QueueOffset    int64
	Entry          cq.Entry
	StoreTimestamp int64
	// KeyHashes are the index hashes (index.KeyHash) of the record's
	// UNIQ_KEY, if it has one, then of each of its KEYS (separated by
	// white space), in that order: the index keeps nothing of a key but
	// its hash, so the request carries no key strings.
	KeyHashes []int32
}

// DispatchRecord is the part of a record that dispatching reads. Topic
// and Properties alias the bytes it was decoded from; Properties excludes
// the record CRC property.
type DispatchRecord struct {
	TotalSize      int32
	QueueID        int32
	QueueOffset    int64
	PhysicalOffset int64
	StoreTimestamp int64
	Topic          []byte
	Properties     []byte
}

// DispatchRecord returns the part of r that dispatching reads.
func (r *Record) DispatchRecord() DispatchRecord {
	return DispatchRecord{TotalSize: r.TotalSize, QueueID: r.QueueID, QueueOffset: r.QueueOffset, PhysicalOffset: r.PhysicalOffset,
		StoreTimestamp: r.StoreTimestamp, Topic: r.Topic, Properties: r.Properties}
}

// NewDispatchRequest builds the dispatch request of the record r at off;
// it is the one way to build one (the Reput actor, recovery, the store's
// own Dispatch and Check). topic becomes Key.Topic if it is r's topic,
// saving the allocation of the string: a walk over the records of a few
// topics passes the last one, or one it keeps per topic.
//
// The hashes of the record's keys are appended to *hashes, and KeyHashes
// is that part of it, its capacity capped (an append to one request's
// hashes cannot reach another's). Requests built into one arena share
// it: a caller that hands them to another goroutine gives each batch an
// arena of its own; one that applies each request before building the
// next may reuse one.
func NewDispatchRequest(off int64, r *DispatchRecord, topic string, hashes *[]int32) DispatchRequest {
	if topic != string(r.Topic) { // no allocation: compared in place
		topic = string(r.Topic)
	}
	d := DispatchRequest{
		Key:            QueueKey{topic, r.QueueID},
		QueueOffset:    r.QueueOffset,
		Entry:          cq.Entry{Offset: off, Size: r.TotalSize},
		StoreTimestamp: r.StoreTimestamp,
	}
	schedule := string(r.Topic) == ScheduleTopic
	var keys, uniq []byte // the last of each, as the properties map of a message keeps it
	EachProperty(r.Properties, func(k, v []byte) {
		switch string(k) {
		case PropDeliverMs:
			if schedule {
				d.Entry.TagsCode, _ = strconv.ParseInt(string(v), 10, 64)
			}
		case PropTags:
			if !schedule {
				d.Entry.TagsCode = tagsHashCode(v)
			}
		case PropKeys:
			keys = v
		case PropUniqKey:
			uniq = v
		}
	})
	if len(keys) == 0 && len(uniq) == 0 {
		return d
	}
	start := len(*hashes)
	if len(uniq) > 0 {
		*hashes = append(*hashes, index.KeyHash(topic, uniq))
	}
	for k := range bytes.FieldsSeq(keys) {
		*hashes = append(*hashes, index.KeyHash(topic, k))
	}
	d.KeyHashes = (*hashes)[start:len(*hashes):len(*hashes)]
	return d
}

// tagsHashCode is TagsHashCode of tags as a string, without making it.
func tagsHashCode(tags []byte) int64 {
	for _, c := range tags {
		if c >= 0x80 {
			return TagsHashCode(string(tags)) // runes: the rare case
		}
	}
	var h int32
	for _, c := range tags {
		h = 31*h + int32(c)
	}
	return int64(h)
}

// ForEachDispatch is ForEachRecord(from, to, false, ...) for a walk that
// dispatches: it decodes of each record only its DispatchRecord (no hosts,
// no body, no CRC: ForEachRecord does not check it on this path either),
// and stops where ForEachRecord stops, with the same error. fn must not
// keep r: the same DispatchRecord is reused for every call.
func (s *Store) ForEachDispatch(from, to int64, fn func(off int64, r *DispatchRecord) error) (next int64, err error) {
	var r DispatchRecord
	return s.walkLog(from, to, func(off int64, b []byte) (int32, error) {
		var ok bool
		if r, ok = decodeDispatch(b); !ok {
			return 0, dispatchDecodeError(b)
		}
		if r.PhysicalOffset != off {
			return 0, fmt.Errorf("%w: record at %d says it is at %d", ErrBadLength, off, r.PhysicalOffset)
		}
		return r.TotalSize, fn(off, &r)
	})
}

// dispatchDecodeError is the error of a record decodeDispatch refused:
// DecodeRecord's, so that both walks report a bad record alike (a cold
// path: the log's end or a corrupt record).
func dispatchDecodeError(b []byte) error {
	if _, err := DecodeRecord(b, false); err != nil {
		return err
	}
	// Unreachable: FuzzDecodeDispatch holds both decoders to the same verdicts.
	return fmt.Errorf("%w: record refused by the dispatch decoder only", ErrBadLength)
}

// decodeDispatch decodes the DispatchRecord of the record at the start of
// b with the checks of DecodeRecord(b, false), in its order; false: the
// record does not decode (DecodeRecord says why). It never reads past
// len(b) and never allocates.
func decodeDispatch(b []byte) (r DispatchRecord, ok bool) {
	size, magic, ok := PeekHeader(b)
	if !ok || magic != MagicV1 && magic != MagicV2 || size < fixedV1IPv4 || int(size) > len(b) {
		return r, false
	}
	b = b[:size]
	be := binary.BigEndian
	r.TotalSize = size
	r.QueueID = int32(be.Uint32(b[12:]))
	r.QueueOffset = int64(be.Uint64(b[20:]))
	r.PhysicalOffset = int64(be.Uint64(b[28:]))
	sysFlag := int32(be.Uint32(b[36:]))
	p := 48 + hostSize(sysFlag&SysFlagBornHostV6 != 0)
	if len(b) < p+8 {
		return r, false
	}
	r.StoreTimestamp = int64(be.Uint64(b[p:]))
	p += 8 + hostSize(sysFlag&SysFlagStoreHostV6 != 0)
	if len(b) < p+16 {
		return r, false
	}
	bodyLen := int(be.Uint32(b[p+12:]))
	p += 16
	if bodyLen < 0 || bodyLen > len(b)-p {
		return r, false
	}
	p += bodyLen
	var topicLen int
	if magic == MagicV1 {
		if len(b) < p+1 {
			return r, false
		}
		topicLen = int(b[p])
		p++
	} else {
		if len(b) < p+2 {
			return r, false
		}
		topicLen = int(be.Uint16(b[p:]))
		p += 2
	}
	if topicLen > len(b)-p {
		return r, false
	}
	r.Topic = b[p : p+topicLen]
	p += topicLen
	if len(b) < p+2 || int(be.Uint16(b[p:])) != len(b)-p-2 {
		return r, false
	}
	r.Properties = b[p+2:]
	if _, hasCRC := propCRC(r.Properties); hasCRC {
		r.Properties = r.Properties[:len(r.Properties)-propCRCLen]
	}
	return r, true
}

// hostSize is the size of a host field (getHost's), IPv6 or IPv4.
func hostSize(v6 bool) int {
	if v6 {
		return 20
	}
	return 8
}
