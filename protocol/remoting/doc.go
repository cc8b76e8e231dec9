// Package remoting is RocketMQ's remoting wire format: the frame, its two
// header encodings and the request and response codes, so that RocketMQ's
// own clients (Java, Go) can talk to Wharf's daemons unchanged. It knows
// bytes and codes only; what a request means is netio's business
// (netio/remoting_codec.go maps commands to Wharf's typed requests).
//
// # Frame
//
//	| int32 length | int32 serializeType<<24 | headerLength | header | body |
//
// length counts everything after itself (4 + headerLength + bodyLength),
// big-endian. serializeType is SerializeJSON (0, what both clients send by
// default) or SerializeRocketMQ (1, the binary header); headerLength is the
// low 24 bits of the second word.
//
// # Contract
//
//   - Split says whether a buffer starts with a complete frame, from the
//     length words alone, and allocates nothing but an error: a declared
//     length above Limits.MaxFrameSize or a header length above
//     Limits.MaxHeaderSize or the frame is an error before any byte of the
//     frame is buffered.
//   - Decode parses one complete frame. It allocates nothing larger than
//     the frame (the ext-field strings and the copy-free body slice), checks
//     every length against the bytes left, and fails with an error wrapping
//     ErrFrame for anything malformed: an unknown serialize type, JSON that
//     does not parse or whose extFields values are not strings, a binary
//     length that runs past the header. A decoded Command's Body aliases the
//     frame.
//   - Append encodes a Command with the serialize type it names. Responses
//     are encoded the way the Java broker does (language "JAVA"), and JSON
//     object keys in sorted order, so answers are byte-for-byte stable.
//
// Codes: request codes are RocketMQ's RequestCode values, response codes
// its ResponseCode values (both int16 on the Go client's side).
//
// Imports: the standard library only.
package remoting
