// Package meta holds the broker's metadata as plain state machines: the
// topic table (topics.json) and the consumer offset table
// (consumerOffset.json).
//
// Contract: a core takes inputs (requests as protocol types with an opaque
// token naming the caller's request, load results, timer firings, the
// outcome of a write) and collects its outputs until the caller takes them
// with Ready: replies addressed by token, a table to write, a snapshot to
// publish, a timer to arm. The caller runs the write (storage.SaveJSON
// through the FS seam) and reports its outcome with Persisted before it
// feeds the next input. The core alone decides when a table is written and
// which replies wait for that write: an acknowledged change is answered only
// once the write that holds it succeeded. Cores have no goroutines, no clock
// and no I/O, and are not safe for concurrent use.
//
// Imports: protocol, storage.
package meta

import "github.com/wharfmq/wharf/protocol"

// Reply answers the request the caller passed in as To.
type Reply struct {
	To     any
	Status protocol.Status
	Remark string
	Fields protocol.Fields
}
