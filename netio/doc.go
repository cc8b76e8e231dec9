// Package netio owns every socket of the daemons: the gnet engines, one
// codec per listener, the connection registry and outbound links (a
// slave's to its master; name servers and controllers next). It turns
// frames into typed requests and the actors' typed answers (actors.Response,
// actors.Records) into frames, and enforces per-connection limits, which
// gnet does not have.
//
// # Codecs
//
// A listener's codec (Options.Codec, actors.Codec) is the one place an
// answer becomes bytes: WharfCodec is Wharf's msgpack protocol
// (docs/PROTOCOL.md). Answers made of log records (pulls, queries, a view
// by id) carry the records as read from the log; WharfCodec decodes them
// into the wire's message list (storage.DecodeRecord: netio reads the
// record layout, nothing else of storage), so a codec whose pull body is
// the raw records (RocketMQ's remoting) serves the same actors.
//
// RemotingCodec is RocketMQ's remoting protocol (protocol/remoting;
// docs/PROTOCOL.md section 11c). A codec that reads a wire of its own
// also frames and decodes the listener's inbound bytes: it turns each
// remoting request into the typed request Wharf's frames decode to, carried
// in protocol.Frame.Request (or the error it earned in RequestErr, answered
// without closing the connection), so the handlers cannot tell the
// listeners apart. Its answers put the typed fields where RocketMQ's
// clients read them (ext fields, JSON bodies for the name server's routes
// naming the brokers' remoting addresses) and a pull's records, as stored,
// in the body.
//
// # Server
//
// A Server is one gnet engine (SO_REUSEADDR on, SO_REUSEPORT off, Nagle
// off) delivering to an actors.Handler:
//
//   - Inbound: on every read, all complete frames buffered on the
//     connection are split (protocol.Split, or the codec's own framing),
//     copied once out of gnet's memory, decoded (protocol.DecodeFrame,
//     header validated first; or the codec's decode) and
//     handed to Handler.Deliver as ONE actors.Inbound, in order. A partial
//     frame stays buffered until the rest arrives; a large partial frame is
//     not re-examined until enough bytes for it are buffered.
//   - Malformed input: a frame that Split or DecodeFrame rejects (bad
//     lengths, a declared length above Limits.MaxFrameSize, which is caught
//     from the 4-byte prefix alone, hostile msgpack), or a response frame
//     sent by a client, gets one FRAME_ILLEGAL response (code and opaque of
//     the frame when its header decoded, else 0) and the connection is
//     closed once that response is written. Good frames of the same burst
//     before the bad one are delivered first, and their responses written
//     during Deliver go out before the error. Other connections are not
//     affected.
//   - Outbound: Conn.Reply encodes the answer with the listener's codec on
//     the answering goroutine and queues the frame with gnet's AsyncWrite
//     (or writes it directly, see conn.write) and returns at once. A connection whose unsent bytes (queued for the loop
//     plus gnet's outbound buffer) exceed Options.MaxOutboundBytes has a
//     peer that stopped reading: it is closed and the frame dropped, so one
//     peer never holds more than about twice the limit. Writes after close
//     are dropped.
//   - Idle: with Options.IdleTimeout > 0, a connection with no traffic in
//     either direction for that long, and no request still unanswered (a
//     held long poll counts), is closed.
//   - Handler.Disconnected is called exactly once per accepted connection,
//     whoever closed it (peer, limits, idle timeout, handler, Stop).
//
// # Threading
//
// Deliver and Disconnected run on the connection's event loop: they must
// not block (send to an actor and return). Callbacks of one connection are
// serialized; different connections run in parallel on different loops.
// Conn.Write and Conn.Close are safe from any goroutine. Frames in an
// Inbound own their bytes (nothing aliases gnet memory) until the handler
// calls Inbound.Release: a burst of sends (Wharf's wire) may be read into
// one of its connection's spare buffers, which Release gives back for the
// next burst; a handler that never calls it keeps the bytes for good. The
// frame passed to Write belongs to netio until it is written.
//
// gnet's logger is process-global: netio installs one slog adapter
// (warnings and errors only), bound to the Logger of the first Server
// started in the process.
//
// Imports: protocol (and protocol/remoting), actors (request, answer and
// codec types), storage (the record layout), gnet, x/sys.
package netio
