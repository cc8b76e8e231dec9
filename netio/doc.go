// Package netio owns every socket of the daemons: the gnet engines, the
// framing glue, the connection registry and (later) outbound links to
// slaves and name servers. It turns frames into actor messages and actor
// replies into frames, and enforces per-connection limits, which gnet does
// not have.
//
// # Server
//
// A Server is one gnet engine (SO_REUSEADDR on, SO_REUSEPORT off, Nagle
// off) delivering to an actors.Handler:
//
//   - Inbound: on every read, all complete frames buffered on the
//     connection are split (protocol.Split), copied once out of gnet's
//     memory, decoded (protocol.DecodeFrame, header validated first) and
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
//   - Outbound: Conn.Write queues the frame with gnet's AsyncWrite and
//     returns at once. A connection whose unsent bytes (queued for the loop
//     plus gnet's outbound buffer) exceed Options.MaxOutboundBytes has a
//     peer that stopped reading: it is closed and the frame dropped, so one
//     peer never holds more than about twice the limit. Writes after close
//     are dropped.
//   - Idle: with Options.IdleTimeout > 0, a connection with no traffic in
//     either direction for that long is closed.
//   - Handler.Disconnected is called exactly once per accepted connection,
//     whoever closed it (peer, limits, idle timeout, handler, Stop).
//
// # Threading
//
// Deliver and Disconnected run on the connection's event loop: they must
// not block (send to an actor and return). Callbacks of one connection are
// serialized; different connections run in parallel on different loops.
// Conn.Write and Conn.Close are safe from any goroutine. Frames in an
// Inbound own their bytes (nothing aliases gnet memory); the frame passed
// to Write belongs to netio until it is written.
//
// gnet's logger is process-global: netio installs one slog adapter
// (warnings and errors only), bound to the Logger of the first Server
// started in the process.
//
// Imports: protocol, actors (message types), gnet.
package netio
