package protocol

// The consumer's hot path: a pull answer, decoded by hand (fieldsCodec for
// its fields map, decodePullMessages for its body) instead of by msgpack's
// reflection and a Go map of properties per message, which were most of a
// consumer's CPU. It accepts and refuses exactly what the generic decoders
// do (Validate, msgpack.Unmarshal and checkInts for the fields; the message
// list of a query answer for the body, with its properties as maps);
// FuzzPullDecodeMatchesGeneric holds that.
//
// Aliasing: the messages' Body and RawProperties are sub-slices of the
// frame's body, and their strings are built once per answer (the topic and
// hosts, which repeat, once per distinct value). Nothing is copied per
// message, so whoever decodes must not reuse the frame's buffer while the
// messages are in use: the client reads every frame into a buffer of its
// own.

func (r *PullResponse) appendFieldsMap(b []byte) []byte {
	// The struct's field order, as the generic encoder writes it.
	b = appendMapHeader(b, 4)
	b = appendStr(b, "nextBeginOffset")
	b = appendInt(b, r.NextBeginOffset)
	b = appendStr(b, "minOffset")
	b = appendInt(b, r.MinOffset)
	b = appendStr(b, "maxOffset")
	b = appendInt(b, r.MaxOffset)
	b = appendStr(b, "suggestWhichBrokerId")
	return appendInt(b, r.SuggestWhichBrokerID)
}

func (r *PullResponse) decodeFieldsMap(rd *reader) error {
	return rd.eachField(func(key []byte) (err error) {
		switch string(key) {
		case "nextBeginOffset":
			r.NextBeginOffset, err = rd.int64()
		case "minOffset":
			r.MinOffset, err = rd.int64()
		case "maxOffset":
			r.MaxOffset, err = rd.int64()
		case "suggestWhichBrokerId":
			r.SuggestWhichBrokerID, err = rd.int64()
		default:
			err = rd.skip()
		}
		return err
	})
}

// decodePullMessages decodes a pull answer's body: the list of a query
// answer, with every message's properties kept encoded
// (Message.RawProperties, read through Property and decoded into a map
// only by PropertyMap).
func decodePullMessages(body []byte, lim Limits) ([]MessageExt, error) {
	return decodeMessageExtList(body, lim, true)
}
