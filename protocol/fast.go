package protocol

import "fmt"

// fieldsCodec is implemented by the request and response types of the hot
// paths (SEND and its answer, the answer to PULL): their fields map is encoded and decoded by
// hand instead of by msgpack's reflection, which was a tenth of the broker's
// CPU. The encoding is byte for byte the generic one (fields in declaration
// order, shortest integers, map keys sorted, empty properties left out); TestFastFieldsMatchGeneric
// holds that, and decoding accepts whatever the generic decoder accepts for
// these fields.
type fieldsCodec interface {
	fieldsAppender
	decodeFieldsMap(r *reader) error
}

// fieldsAppender is a type whose fields map is encoded by hand; decoding
// may still be generic (SendBatchResponse: its hand-written decoder,
// DecodeSendBatchResponse, validates the fields first).
type fieldsAppender interface {
	appendFieldsMap(b []byte) []byte
}

func (r *SendRequest) appendFieldsMap(b []byte) []byte {
	n := 5
	if len(r.Properties) > 0 || len(r.RawProperties) > 0 {
		n++
	}
	// The struct's field order, as the generic encoder writes it.
	b = appendMapHeader(b, n)
	b = appendStr(b, "producerGroup")
	b = appendStr(b, r.ProducerGroup)
	b = appendStr(b, "topic")
	b = appendStr(b, r.Topic)
	b = appendStr(b, "queueId")
	b = appendInt(b, int64(r.QueueID))
	b = appendStr(b, "flag")
	b = appendInt(b, int64(r.Flag))
	b = appendStr(b, "bornTimestamp")
	b = appendInt(b, r.BornTimestamp)
	return appendPropertiesField(b, r.Properties, r.RawProperties)
}

// decodeFieldsMap is SEND's, per message without coalescing: its loop is
// eachField's written out, because the indirect call per field cost 3 % of
// DecodeSendInto (BenchmarkDecodeSendInto1KiB, 327 -> 337 ns).
func (r *SendRequest) decodeFieldsMap(rd *reader) error {
	n, err := rd.mapLen()
	if err != nil {
		return err
	}
	for range n {
		key, err := rd.rawStr()
		if err != nil {
			return err
		}
		// The value readers take nil as the zero value (eachField).
		switch string(key) {
		case "producerGroup":
			r.ProducerGroup, err = rd.strAs(rd.prevGroup)
		case "topic":
			r.Topic, err = rd.strAs(rd.prevTopic)
		case "queueId":
			r.QueueID, err = rd.int32()
		case "flag":
			r.Flag, err = rd.int32()
		case "bornTimestamp":
			r.BornTimestamp, err = rd.int64()
		case "properties":
			if rd.rawProps {
				r.RawProperties, err = rawProperties(rd, true)
			} else {
				r.Properties, err = decodeProperties(rd, true)
			}
		default:
			err = rd.skip()
		}
		if err != nil {
			if err = rd.keep(string(key), err); err != nil {
				return fmt.Errorf("field %q: %w", key, err)
			}
		}
	}
	return nil
}

// eachField walks a fields map for a hand-written decoder: field reads the
// value of one key and steps over keys it does not know. The value readers
// take nil as the zero value, as msgpack sets a field to zero on nil (also
// over an earlier duplicate of its key), so no key sees nil apart. A value
// out of range is kept as the reader's soft error (reader.keep); any other
// error ends the walk.
func (rd *reader) eachField(field func(key []byte) error) error {
	n, err := rd.mapLen()
	if err != nil {
		return err
	}
	for range n {
		key, err := rd.rawStr()
		if err != nil {
			return err
		}
		if err := field(key); err != nil {
			if err = rd.keep(string(key), err); err != nil {
				return fmt.Errorf("field %q: %w", key, err)
			}
		}
	}
	return nil
}

// sendHeader reads key's value if it is one of the fields SEND and
// SEND_BATCH share (ok); otherwise the key is the caller's.
func (rd *reader) sendHeader(key []byte, group, topic *string, queueID *int32, born *int64) (ok bool, err error) {
	switch string(key) {
	case "producerGroup":
		*group, err = rd.strAs(rd.prevGroup)
	case "topic":
		*topic, err = rd.strAs(rd.prevTopic)
	case "queueId":
		*queueID, err = rd.int32()
	case "bornTimestamp":
		*born, err = rd.int64()
	default:
		return false, nil
	}
	return true, err
}

// A coalesced batch's header (SEND_BATCH): one per request, but with send
// coalescing on, every async send goes in one, and msgpack's reflection
// (with a Validate pass first) was 2 % of the broker's CPU at async-256.
func (r *SendBatchRequest) appendFieldsMap(b []byte) []byte {
	b = appendMapHeader(b, 4)
	b = appendStr(b, "producerGroup")
	b = appendStr(b, r.ProducerGroup)
	b = appendStr(b, "topic")
	b = appendStr(b, r.Topic)
	b = appendStr(b, "queueId")
	b = appendInt(b, int64(r.QueueID))
	b = appendStr(b, "bornTimestamp")
	return appendInt(b, r.BornTimestamp)
}

func (r *SendBatchRequest) decodeFieldsMap(rd *reader) error {
	return rd.eachField(func(key []byte) error {
		if ok, err := rd.sendHeader(key, &r.ProducerGroup, &r.Topic, &r.QueueID, &r.BornTimestamp); ok {
			return err
		}
		return rd.skip()
	})
}

func (r *SendResponse) appendFieldsMap(b []byte) []byte {
	b = appendMapHeader(b, 3)
	b = appendStr(b, "msgId")
	b = appendStr(b, r.MsgID)
	b = appendStr(b, "queueId")
	b = appendInt(b, int64(r.QueueID))
	b = appendStr(b, "queueOffset")
	return appendInt(b, r.QueueOffset)
}

func (r *SendResponse) decodeFieldsMap(rd *reader) error {
	return rd.eachField(func(key []byte) (err error) {
		switch string(key) {
		case "msgId":
			r.MsgID, err = rd.str()
		case "queueId":
			r.QueueID, err = rd.int32()
		case "queueOffset":
			r.QueueOffset, err = rd.int64()
		default:
			err = rd.skip()
		}
		return err
	})
}

// The answer to a coalesced batch: one per batch, and with send coalescing
// on every async send's answer is one; msgpack's reflection encoding it was
// 2.3 % of the broker's CPU at async-256. A nil list of ids is msgpack's nil,
// as the generic encoder writes it.
func (r *SendBatchResponse) appendFieldsMap(b []byte) []byte {
	b = appendMapHeader(b, 3)
	b = appendStr(b, "queueId")
	b = appendInt(b, int64(r.QueueID))
	b = appendStr(b, "queueOffset")
	b = appendInt(b, r.QueueOffset)
	b = appendStr(b, "msgIds")
	if r.MsgIDs == nil {
		return append(b, 0xc0)
	}
	b = appendArrayHeader(b, len(r.MsgIDs))
	for _, id := range r.MsgIDs {
		b = appendStr(b, id)
	}
	return b
}

// DecodeSendBatchResponse is DecodeResponse(f, lim, r) for the answer to a
// SEND_BATCH, by the hand-written reader instead of the reflective
// decoder: the ids' strings share one allocation, and r stays on the
// caller's stack (a producer that coalesces its sends decodes one per
// batch). It accepts what DecodeResponse accepts, into the same values;
// MsgIDs is nil rather than empty for an empty list.
func DecodeSendBatchResponse(f *Frame, lim Limits, r *SendBatchResponse) error {
	lim = lim.norm()
	if !f.IsResponse() {
		return fmt.Errorf("%w: a request where a response was expected", ErrFrameIllegal)
	}
	if len(f.Fields) == 0 {
		return nil
	}
	if err := Validate(f.Fields, lim.MaxDepth); err != nil {
		return fmt.Errorf("%v response: %w: fields: %w", f.Code, ErrFrameIllegal, err)
	}
	rd := reader{b: f.Fields, useArena: true, arena: make([]byte, 0, len(f.Fields))}
	if err := fieldsDone(&rd, r.decodeFieldsMap(&rd)); err != nil {
		return fmt.Errorf("%v response: %w", f.Code, err)
	}
	return nil
}

func (r *SendBatchResponse) decodeFieldsMap(rd *reader) error {
	return rd.eachField(func(key []byte) (err error) {
		switch string(key) {
		case "queueId":
			r.QueueID, err = rd.int32()
		case "queueOffset":
			r.QueueOffset, err = rd.int64()
		case "msgIds":
			r.MsgIDs, err = rd.strList()
		default:
			err = rd.skip()
		}
		return err
	})
}

// strList reads an array of strings (nil: an empty list).
func (rd *reader) strList() ([]string, error) {
	n, err := rd.arrayLen() // nil reads as empty
	if err != nil || n == 0 {
		return nil, err
	}
	out := make([]string, n)
	for i := range out {
		if out[i], err = rd.str(); err != nil {
			return nil, err
		}
	}
	return out, nil
}
