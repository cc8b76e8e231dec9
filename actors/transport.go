package actors

import (
	"slices"

	"github.com/wharfmq/wharf/protocol"
)

// Conn is the Transport seam for one peer connection (a client today; slaves
// and name servers later). Production connections are gnet connections
// (netio); the simulator's are in-memory links.
type Conn interface {
	// ID identifies the connection for the life of the process.
	ID() uint64
	// RemoteAddr is the peer's address, for logs and stats.
	RemoteAddr() string
	// Reply queues the answer to one request and returns at once; the
	// connection's codec (Wharf msgpack, or another listener's) encodes it,
	// so no actor knows a wire format. A connection whose unsent bytes
	// exceed its outbound limit (a peer that stopped reading) is closed by
	// the transport, never buffered without bound.
	Reply(r Response)
	// Send queues a oneway request to the peer (the replication stream,
	// notifications), encoded by the connection's codec.
	Send(req protocol.Request)
	// Close closes the connection; reason is logged.
	Close(reason string)
}

// parked tells c's transport, if it wants to know (netio does), that delta
// of its requests were parked as long polls (+1) or taken out of parking
// (-1, just before the answer is written). A parked request's answer comes
// at an unknown time, so the transport need not wait for it to batch
// answers: it writes the others straight away once none but parked ones are
// left.
func parked(c Conn, delta int) {
	if p, ok := c.(interface{ Parked(delta int) }); ok {
		p.Parked(delta)
	}
}

// corker is a Conn that can hold the answers written to it (Cork) and
// write them together (Uncork): netio's connections. Cork calls nest.
type corker interface {
	Cork()
	Uncork()
}

// corkAll corks the distinct connections of items that can be corked, and
// returns them (appended to into) for uncorkAll. A burst's sends share
// their connection: most batches cork one.
func corkAll(into []corker, items []*sendItem) []corker {
	var last Conn
	for _, it := range items {
		if it.conn == last || it.conn == nil {
			continue
		}
		last = it.conn
		c, ok := it.conn.(corker)
		if !ok || slices.Contains(into, c) {
			continue
		}
		c.Cork()
		into = append(into, c)
	}
	return into
}

// uncorkAll ends corkAll: each connection writes what it held.
func uncorkAll(cs []corker) []corker {
	for i, c := range cs {
		c.Uncork()
		cs[i] = nil
	}
	return cs[:0]
}

// Inbound is one read burst of a connection: every complete request frame
// that arrived together, in order. The transport hands the broker one
// Inbound per burst, not one message per frame, so the writer can append a
// whole burst as one batch.
type Inbound struct {
	Conn   Conn
	Frames []*protocol.Frame
	// Release, if set, gives the frames' bytes back to the transport for
	// reuse: the frames' fields and bodies alias one buffer. The handler
	// calls it at most once, when nothing of the burst is held any more
	// (the broker: after the writer appended a burst of sends only, their
	// answers encoded or their fields copied). A handler that never calls
	// it leaves the buffer to the garbage collector.
	Release func()
}

// Handler is what a transport delivers to: the broker.
type Handler interface {
	// Deliver hands over one read burst. It must not block.
	Deliver(in *Inbound)
	// Disconnected reports a closed connection; requests still held for it
	// (long polls) are dropped.
	Disconnected(c Conn)
}

// closed reports whether c is known to be closed (transports that can tell
// implement Closed), so work whose answer nobody would read is skipped.
func closed(c Conn) bool {
	x, ok := c.(interface{ Closed() bool })
	return ok && x.Closed()
}

// Response is a typed answer to one request. The connection's codec turns
// it into bytes; actors and cores only ever build these.
type Response struct {
	Code   protocol.Code
	Opaque uint32
	Status protocol.Status
	Remark string
	// Fields is the typed body (nil for none).
	Fields protocol.Fields
	// Records, when set, is an answer made of log records as read (a pull
	// or a query by key): each codec encodes them its own way (Wharf's as
	// a message list, RocketMQ's remoting as the raw records).
	Records *Records
}

// Records is an answer of whole log records, as stored.
type Records struct {
	Kind RecordsKind
	Raw  [][]byte
	// Pull holds a pull answer's other fields (Messages unset).
	Pull *protocol.PullResponse
}

// RecordsKind says which answer a Records is.
type RecordsKind uint8

const (
	RecordsPull  RecordsKind = iota // PULL_MESSAGE: Pull's fields and the messages
	RecordsQuery                    // QUERY_MESSAGE: the messages
	RecordsView                     // VIEW_MESSAGE_BY_ID: exactly one message
)

// Codec encodes typed answers and oneway requests into frames: one per
// listener. netio holds Wharf's msgpack codec; the simulator uses the same.
type Codec interface {
	AppendResponse(dst []byte, r *Response) []byte
	AppendRequest(dst []byte, req protocol.Request) ([]byte, error)
}
