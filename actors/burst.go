package actors

import (
	"sync/atomic"

	"github.com/wharfmq/wharf/protocol"
)

// Bursts of sends are reused. Per burst, Deliver made five slices sized
// by its frames (requests, send items, messages, their pointers, the
// decoded SENDs) and the writer's message: with the client's coalescing
// off, about 60 % of the bytes the broker allocated on async publish
// (docs/BENCHMARKS.md, issue 17). A burst of sends only is done with once
// the writer has appended it and answered or copied what its answers need
// (a reply waiting for the gate holds a copy of its request), which is
// when the writer gives back its bytes too; it then returns the burst to
// the broker's pool.
//
// The pool is a few slots, not a sync.Pool, for the reason netio's spare
// buffers are: a burst is put back on the writer's goroutine and taken on
// an event loop's, and a sync.Pool's per-P slot filled on one P is not
// seen from the other.

// spareBursts is the most bursts the pool keeps (as many as the loops
// read while the writer holds the ones before; netio keeps as many
// buffers per connection).
const spareBursts = 16

// maxSpareFrames bounds a kept burst: a rare huge one is not held.
const maxSpareFrames = 1 << 14

// burstPool holds spare bursts. get runs on an event loop, put on the
// writer's goroutine.
type burstPool struct {
	slots [spareBursts]atomic.Pointer[burst]
}

// get returns an empty burst for n frames: a spare large enough, else a
// new one (a spare too small is dropped: the next one made is larger).
func (p *burstPool) get(n int) *burst {
	for i := range p.slots {
		bu := p.slots[i].Swap(nil)
		if bu == nil {
			continue
		}
		if cap(bu.reqs) < n {
			break
		}
		bu.reqs = bu.reqs[:n]
		// The slices the burst fills must not grow past the capacity
		// they were made with (pointers into items and sendReqs stay
		// valid): made afresh, as newBurst's, if too small.
		if cap(bu.items) < n {
			bu.items = nil
		}
		if cap(bu.single) < n {
			bu.single = nil
		}
		if cap(bu.sendReqs) < n {
			bu.sendReqs = nil
		}
		return bu
	}
	return newBurst(n)
}

// put keeps bu if a slot is free. What the burst used is cleared first: a
// spare must not keep the last burst's buffers or connections alive. Only
// the used lengths: past them a spare is zero already (cleared when last
// used), and a spare made for a large burst is mostly reused for small ones.
func (p *burstPool) put(bu *burst) {
	if cap(bu.reqs) > maxSpareFrames {
		return
	}
	clear(bu.reqs)
	clear(bu.items)
	clear(bu.single)
	clear(bu.sends)
	clear(bu.sendReqs)
	bu.items, bu.single, bu.sends, bu.sendReqs = bu.items[:0], bu.single[:0], bu.sends[:0], bu.sendReqs[:0]
	bu.wb, bu.pool = writeBatch{}, nil
	for i := range p.slots {
		if p.slots[i].CompareAndSwap(nil, bu) {
			return
		}
	}
}

// recycle gives bu back to the pool it came from, if it is to go back.
// Nothing may use bu, its requests, items or messages afterwards.
func (bu *burst) recycle() {
	if p := bu.pool; p != nil {
		p.put(bu)
	}
}

// burst holds what the requests of one read burst need, allocated once
// per burst instead of several times per request (a burst often holds
// hundreds of sends), and, for a burst of sends only, reused: the writer
// hands it back to the pool it came from once the burst is appended
// (recycle), as it hands back the burst's bytes.
type burst struct {
	reqs     []request
	items    []sendItem // never grows past its capacity: pointers into it stay valid
	single   []protocol.Message
	sends    []*sendItem
	sendReqs []protocol.SendRequest // the decoded SENDs (capacity as items)
	wb       writeBatch             // the writer's message, for the sends
	pool     *burstPool             // set when the writer is to give it back
}

// newBurst makes a burst for n frames.
func newBurst(n int) *burst { return &burst{reqs: make([]request, n)} }

// decode decodes one request of the burst: a SEND into the burst's slice of
// them, its group and topic strings shared with the send before it (one
// allocation for the burst instead of three per send), anything else as
// protocol.DecodeRequest does.
func (bu *burst) decode(f *protocol.Frame, lim protocol.Limits) (protocol.Request, error) {
	if f.Code != protocol.CodeSendMessage {
		return protocol.DecodeRequest(f, lim)
	}
	if bu.sendReqs == nil {
		bu.sendReqs = make([]protocol.SendRequest, 0, len(bu.reqs))
	}
	var prev *protocol.SendRequest
	if n := len(bu.sendReqs); n > 0 {
		prev = &bu.sendReqs[n-1]
	}
	bu.sendReqs = append(bu.sendReqs, protocol.SendRequest{})
	r := &bu.sendReqs[len(bu.sendReqs)-1]
	ok, err := protocol.DecodeSendInto(f, lim, r, prev)
	switch {
	case !ok: // another listener's SEND, decoded already
		bu.sendReqs = bu.sendReqs[:len(bu.sendReqs)-1]
		return protocol.DecodeRequest(f, lim)
	case err != nil:
		return nil, err
	}
	return r, nil
}

func (bu *burst) send(r *request, m *protocol.SendRequest) {
	if bu.items == nil {
		bu.items = make([]sendItem, 0, len(bu.reqs))
	}
	if bu.single == nil {
		bu.single = make([]protocol.Message, 0, len(bu.reqs))
	}
	bu.single = append(bu.single, m.Message())
	n := len(bu.single)
	bu.items = append(bu.items, sendItem{request: r, topic: m.Topic, queueID: m.QueueID, bornTs: m.BornTimestamp,
		msgs: bu.single[n-1 : n : n]})
	bu.sends = append(bu.sends, &bu.items[len(bu.items)-1])
}

func (bu *burst) batch(r *request, m *protocol.SendBatchRequest) {
	if bu.items == nil {
		bu.items = make([]sendItem, 0, len(bu.reqs))
	}
	bu.items = append(bu.items, sendItem{request: r, topic: m.Topic, queueID: m.QueueID, bornTs: m.BornTimestamp,
		msgs: m.Messages, batch: true})
	bu.sends = append(bu.sends, &bu.items[len(bu.items)-1])
}
