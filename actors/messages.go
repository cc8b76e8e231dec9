package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/protocol"
)

// Messages that cross actors. Each is named after what it says; its
// receiver is noted.

// sendItem is one SEND or SEND_BATCH request (to the writer).
type sendItem struct {
	*request
	topic     string
	queueID   int32
	bornTs    int64
	msgs      []protocol.Message
	batch     bool
	sendBack  bool  // CONSUMER_SEND_MSG_BACK: answer OK without fields
	reconsume int32 // reconsume count of a retried or re-delivered message

	// Internal sends (the scheduler re-storing due messages) have no
	// client: the writer tells notify instead.
	notify *actor.PID
	tag    any
}

// internalStored answers an internal send (to its notify).
type internalStored struct {
	tag any
	end int64 // log end after the messages
	err error
}

// writeBatch is every send of one read burst (or a due delayed message's
// re-store): the writer appends them as one batch, together with every
// other burst queued for it meanwhile (sendQueue).
type writeBatch struct {
	items []*sendItem
	// release, if set, is Inbound.Release of the burst the items came
	// from: the writer calls it once they are appended and answered.
	release func()
	// burst, if set, is the burst the items (and this message) live in:
	// the writer recycles it after release.
	burst *burst
}

// logFlushed tells the Reput actor how far the log is durable (SYNC_FLUSH:
// consumers only see durable messages).
type logFlushed struct{ offset int64 }

// cleanTick runs retention (the writer: the log's only appender).
type cleanTick struct{}

// panicForTest makes the receiving actor panic (supervision tests).
type panicForTest struct{}

// metaSnapshot carries the offsets table to the writer (to replicate it).
type metaSnapshot struct {
	kind string
	data []byte
}

// exportOffsets asks the offset manager for its table (reply: metaSnapshot).
type exportOffsets struct{}

// importMeta merges metadata received from the other side of a master/slave
// pair (to the topic or offset manager).
type importMeta struct {
	kind string
	data []byte
}
