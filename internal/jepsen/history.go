package jepsen

import (
	"fmt"
	"sync"
	"time"
)

// Queue names a queue of one broker group.
type Queue struct {
	Group string // the broker group (brokerName)
	Topic string
	ID    int32
}

// Pos is a message's place: a queue and its offset in the queue.
type Pos struct {
	Queue
	Offset int64
}

func (p Pos) String() string { return fmt.Sprintf("%s/%s/%d@%d", p.Group, p.Topic, p.ID, p.Offset) }

// Outcome is how a send ended.
type Outcome uint8

const (
	// Indeterminate: the send may or may not be stored (a timeout, a
	// broken connection, FLUSH_SLAVE_TIMEOUT and its kin, or no completion).
	Indeterminate Outcome = iota
	// Acked: SEND_OK, at the position the broker named.
	Acked
	// Failed: the broker said the message was not stored.
	Failed
)

func (o Outcome) String() string {
	switch o {
	case Acked:
		return "acked"
	case Failed:
		return "failed"
	default:
		return "indeterminate"
	}
}

// Kind is the kind of an Op.
type Kind uint8

const (
	Invoke   Kind = iota // a send began
	Complete             // a send ended
	Read                 // a reader saw a message
)

// Op is one record of a History.
type Op struct {
	Seq     int       // its place in the history, from 0
	Time    time.Time // the recorder's clock when recorded
	Kind    Kind
	Process string  // the producer or the reader
	Key     string  // the message's key
	Outcome Outcome // Complete only
	Pos     Pos     // Complete with Acked: the position acknowledged; Read: the position read
	Node    string  // Read: the replica that served it
	Err     string  // Complete: the error, if any
}

// History is a record of sends and reads, safe for concurrent use. The
// zero value is ready and stamps records with time.Now.
type History struct {
	// Clock stamps the records; nil means time.Now. Set it before the
	// first record.
	Clock func() time.Time

	mu  sync.Mutex
	ops []Op
}

func (h *History) add(op Op) {
	now := time.Now
	if h.Clock != nil {
		now = h.Clock
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	op.Seq, op.Time = len(h.ops), now()
	h.ops = append(h.ops, op)
}

// Invoke records that process begins sending key.
func (h *History) Invoke(process, key string) {
	h.add(Op{Kind: Invoke, Process: process, Key: key})
}

// Complete records how process's send of key ended; pos matters only for
// Acked, err only for the record.
func (h *History) Complete(process, key string, out Outcome, pos Pos, err error) {
	op := Op{Kind: Complete, Process: process, Key: key, Outcome: out}
	if out == Acked {
		op.Pos = pos
	}
	if err != nil {
		op.Err = err.Error()
	}
	h.add(op)
}

// Read records that reader saw key at pos, served by replica node.
func (h *History) Read(reader, node string, pos Pos, key string) {
	h.add(Op{Kind: Read, Process: reader, Node: node, Pos: pos, Key: key})
}

// Ops returns a copy of the records so far, in order.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Op(nil), h.ops...)
}

// Len is the number of records so far: a mark for Between.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// Between narrows ops to a window, for checks of what held at one moment:
// the sends invoked at or after mark from, with only their completions
// recorded before mark to (a later one is dropped, so the send counts as
// indeterminate), and the reads that keep accepts, of those keys only.
// Between(ops, 0, len(ops), keep) keeps every send and chooses the reads.
func Between(ops []Op, from, to int, keep func(Op) bool) []Op {
	in := map[string]bool{}
	var out []Op
	for _, op := range ops {
		switch op.Kind {
		case Invoke:
			if op.Seq >= from {
				in[op.Key] = true
				out = append(out, op)
			}
		case Complete:
			if in[op.Key] && op.Seq < to {
				out = append(out, op)
			}
		case Read:
			if in[op.Key] && keep(op) {
				out = append(out, op)
			}
		}
	}
	return out
}
