package netio

import (
	"fmt"
	"net/netip"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

// WharfCodec is the codec of Wharf's msgpack protocol (docs/PROTOCOL.md):
// the one place typed answers become Wharf frames. Answers made of log
// records (pulls, queries) are decoded here into the wire's message list,
// so a listener with another codec (RocketMQ's remoting, whose pull body
// is the raw records) serves the same actors.
type WharfCodec struct{}

var _ actors.Codec = WharfCodec{}

// AppendResponse implements actors.Codec. An answer that cannot be encoded
// (a bug) becomes a SYSTEM_ERROR answer, never a dropped one.
func (WharfCodec) AppendResponse(dst []byte, r *actors.Response) []byte {
	fields := r.Fields
	if r.Records != nil {
		msgs, err := RecordsToMessages(r.Records.Raw)
		if err != nil {
			return protocol.AppendErrorResponse(dst, r.Code, r.Opaque, protocol.StatusSystemError, "decode record: "+err.Error())
		}
		switch {
		case r.Records.Kind == actors.RecordsPull && r.Records.Pull != nil:
			p := *r.Records.Pull
			p.Messages = msgs
			fields = &p
		case r.Records.Kind == actors.RecordsView && len(msgs) == 1:
			fields = &protocol.ViewMessageResponse{Message: msgs[0]}
		case r.Records.Kind == actors.RecordsQuery:
			fields = &protocol.QueryMessageResponse{Messages: msgs}
		default:
			return protocol.AppendErrorResponse(dst, r.Code, r.Opaque, protocol.StatusSystemError,
				fmt.Sprintf("records answer of kind %d with %d records", r.Records.Kind, len(msgs)))
		}
	}
	dst = reserve(dst, sizeHint(fields))
	frame, err := protocol.AppendResponse(dst, r.Code, r.Opaque, r.Status, r.Remark, fields)
	if err != nil {
		return protocol.AppendErrorResponse(dst[:0], r.Code, r.Opaque, protocol.StatusSystemError, "encode response: "+err.Error())
	}
	return frame
}

// AppendRequest implements actors.Codec: a oneway request.
func (WharfCodec) AppendRequest(dst []byte, req protocol.Request) ([]byte, error) {
	return protocol.AppendRequest(dst, 0, protocol.FlagOneway, req)
}

// RecordsToMessages turns whole stored records into wire messages. The
// bodies alias the records' bytes, which must stay valid until the answer
// is encoded.
func RecordsToMessages(raw [][]byte) ([]protocol.MessageExt, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	msgs := make([]protocol.MessageExt, 0, len(raw))
	xb := ExtBuilder{props: make([]byte, 0, 48*len(raw))}
	for _, b := range raw {
		rec, err := storage.DecodeRecord(b, false)
		if err != nil {
			return nil, fmt.Errorf("record %d of %d: %w", len(msgs), len(raw), err)
		}
		msgs = append(msgs, xb.Ext(&rec))
	}
	return msgs, nil
}

// ExtBuilder converts stored records into wire messages for one answer
// without a Go map per message: each record's properties are re-encoded
// straight into one buffer as the msgpack map Message.RawProperties holds
// (the answer is encoded from it at once), and the strings that repeat from
// record to record (topic, hosts) are made once. A pull answer of 256
// messages built maps and host strings for each until then: a fifth of the
// broker's CPU while consumers caught up.
type ExtBuilder struct {
	props        []byte
	topic        string
	born, store  netip.AddrPort
	bornS, storS string
}

// Ext converts one record.
func (x *ExtBuilder) Ext(r *storage.Record) protocol.MessageExt {
	var raw []byte
	if len(r.Properties) > 0 {
		n := 0
		storage.EachProperty(r.Properties, func(_, _ []byte) { n++ })
		at := len(x.props)
		x.props = protocol.AppendPropertyMapHeader(x.props, n)
		storage.EachProperty(r.Properties, func(k, v []byte) { x.props = protocol.AppendPropertyPair(x.props, k, v) })
		raw = x.props[at:len(x.props):len(x.props)]
	}
	if x.topic != string(r.Topic) {
		x.topic = string(r.Topic)
	}
	if r.BornHost != x.born || x.bornS == "" {
		x.born, x.bornS = r.BornHost, r.BornHost.String()
	}
	if r.StoreHost != x.store || x.storS == "" {
		x.store, x.storS = r.StoreHost, r.StoreHost.String()
	}
	return protocol.MessageExt{
		Message:         protocol.Message{Topic: x.topic, Flag: r.Flag, Body: r.Body, RawProperties: raw},
		QueueID:         r.QueueID,
		QueueOffset:     r.QueueOffset,
		CommitLogOffset: r.PhysicalOffset,
		StoreSize:       r.TotalSize,
		BornTimestamp:   r.BornTimestamp,
		StoreTimestamp:  r.StoreTimestamp,
		BornHost:        x.bornS,
		StoreHost:       x.storS,
		MsgID:           protocol.OffsetMsgID(r.StoreHost, r.PhysicalOffset),
		ReconsumeTimes:  r.ReconsumeTimes,
		SysFlag:         r.SysFlag,
		BodyCRC:         r.BodyCRC,
	}
}

// reserve returns dst with room for n more bytes: a pooled buffer too small
// for an answer is replaced once, instead of growing by appends.
func reserve(dst []byte, n int) []byte {
	if cap(dst)-len(dst) >= n {
		return dst
	}
	b := make([]byte, len(dst), len(dst)+n)
	copy(b, dst)
	return b
}

// sizeHint estimates an answer's encoded size, so answers carrying
// messages are encoded into one allocation instead of a growing buffer.
func sizeHint(resp protocol.Fields) int {
	var msgs []protocol.MessageExt
	switch r := resp.(type) {
	case *protocol.PullResponse:
		msgs = r.Messages
	case *protocol.QueryMessageResponse:
		msgs = r.Messages
	default:
		return 160 // a send's answer with its header
	}
	n := 512
	for i := range msgs {
		n += len(msgs[i].Body) + len(msgs[i].RawProperties) + 384
		for k, v := range msgs[i].Properties {
			n += len(k) + len(v) + 4
		}
	}
	return n
}
