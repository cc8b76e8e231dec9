package client

import (
	"context"
	"fmt"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// Async sends are coalesced: the SendAsync calls for one topic that arrive
// while the connection's writer is busy (writing earlier frames) join one
// open batch, and the writer encodes it as one SEND_BATCH just before its
// next write; a batch of one goes out as a plain SEND. Nothing waits for a
// batch to fill: an idle connection writes the first message at once, and
// a batch that reaches callerWriteBytes before the writer ran is written
// by the caller that filled it. The broker then appends, answers and the
// client decodes one request per batch instead of one per message. The
// batch's queue is picked when it opens (round robin over the topic's
// queues, so queues stay balanced over time) and every message of the
// batch goes to it: Kafka's "sticky partitioner".

// maxCoalescedBytes bounds the body of one coalesced batch, so that one
// batch is never a long write and an answer never waits behind one.
const maxCoalescedBytes = 256 << 10

// callerWriteBytes: an open batch this large with no write under way is
// written by the SendAsync that filled it (one write(2), as a sync call's
// own write), not left to the writer goroutine.
//
// Why: kicking the writer readies it on the sender's P, where it waits
// until the sender blocks; with the other P busy (the reader, callbacks,
// on two cores the broker) a sender with a window of 256 in flight ran
// 330 µs at a time and the writer waited about 100 µs per wake-up, so
// batches grew towards the whole window and went out one round trip at a
// time (an execution trace of async-256: the writer runnable 24 % of the
// time, the two processes using 1.25 of two cores). Bounded, several
// batches are in flight at once. 32 KiB cost CPU (more, smaller writes:
// 0.98x msg/s), 128 KiB rarely applied (1.04x), 64 KiB gave 1.09-1.14x
// on a loaded host and 1.03x on a quiet one (docs/BENCHMARKS.md, issue 17).
const callerWriteBytes = 64 << 10

// sendPart is the outcome of one coalesced message.
type sendPart struct {
	// f is the answer to the request that carried the message (SEND or
	// SEND_BATCH); nil with a transport error.
	f *protocol.Frame
	// resp is this message's share of a stored answer: its id, queue and
	// offset.
	resp protocol.SendResponse
	// err is a transport error (f nil) or the failure to decode a stored
	// answer (f set).
	err error
	// batched: the message went in a SEND_BATCH with others, so a refusal
	// may be because of another message of the batch.
	batched bool
	// at is when the reader took the answer (zero without one).
	at time.Time
}

// queuePicker picks the queue of a batch that opens.
type queuePicker interface{ pick() int32 }

// partHandler gets the outcome of one coalesced message.
type partHandler interface{ part(sendPart) }

// partFunc is a func as a partHandler.
type partFunc func(sendPart)

func (fn partFunc) part(sp sendPart) { fn(sp) }

// openBatch is the batch being gathered on a session.
type openBatch struct {
	req      protocol.SendBatchRequest
	parts    []partHandler
	bytes    int
	start    time.Time // of the earliest message
	deadline time.Time // the earliest deadline of its messages
}

// sendCoalesced queues msg, for a SEND to topic, in the session's open
// batch (opening one, on the queue q picks, if there is none for
// topic) and wakes the writer. done gets the outcome on the conn's
// callback goroutine, exactly once. The answer is awaited until
// start+timeout, or ctx's deadline if earlier.
func (c *conn) sendCoalesced(ctx context.Context, group string, msg *protocol.Message, q queuePicker, born int64, start time.Time, timeout time.Duration, done partHandler) {
	fail := func(err error) { c.callbacks.run(func() { done.part(sendPart{err: err}) }) }
	if err := ctx.Err(); err != nil {
		fail(c.wrapErr(protocol.CodeSendMessage, start, err))
		return
	}
	s, err := c.session(ctx)
	if err != nil {
		fail(c.wrapErr(protocol.CodeSendMessage, start, err))
		return
	}
	deadline := start.Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	size := len(msg.Body) + len(msg.RawProperties) + 64
	for k, v := range msg.Properties {
		size += len(k) + len(v) + 2
	}
	lim := c.o.limits
	joinable := func() bool { // s.mu held
		b := s.open
		return b != nil && b.req.Topic == msg.Topic && b.req.ProducerGroup == group &&
			len(b.parts) < lim.MaxBatchMessages && b.bytes+size <= maxCoalescedBytes
	}
	// Joining the open batch needs no room in the write buffer (a batch is
	// bounded); a new one does, as any request. Sealing an unjoinable batch
	// may take the buffer past its bound by one batch.
	if err := s.lockRoom(ctx, joinable); err != nil {
		fail(c.wrapErr(protocol.CodeSendMessage, start, err))
		return
	}
	if !joinable() {
		s.sealLocked()
	}
	b := s.open
	kick := b == nil
	if kick {
		b = &openBatch{
			req:   protocol.SendBatchRequest{ProducerGroup: group, Topic: msg.Topic, QueueID: q.pick(), BornTimestamp: born},
			start: start, deadline: deadline,
			// The last batch's size: a busy connection's batches grow
			// to it without copying on the way.
			parts: make([]partHandler, 0, max(s.lastBatch, 1)),
		}
		b.req.Messages, s.spareMsgs = s.spareMsgs, nil
		s.open = b
	}
	b.req.Messages = append(b.req.Messages, *msg)
	b.parts = append(b.parts, done)
	b.bytes += size
	b.deadline = minTime(b.deadline, deadline)
	if b.bytes >= callerWriteBytes && !s.writing && s.raw != nil {
		s.sealLocked()
		w := s.takeLocked()
		s.mu.Unlock()
		s.writeOnce(w)
		return
	}
	s.mu.Unlock()
	if kick {
		select {
		case s.kick <- struct{}{}:
		default: // already kicked
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// sealLocked encodes the open batch into the write buffer and registers
// its answer. s.mu must be held.
func (s *session) sealLocked() {
	b := s.open
	s.open = nil
	if b == nil {
		return
	}
	c := s.c
	var req protocol.Request = &b.req
	single := len(b.parts) == 1
	if single {
		m := &b.req.Messages[0]
		req = &protocol.SendRequest{ProducerGroup: b.req.ProducerGroup, Topic: b.req.Topic, QueueID: b.req.QueueID,
			Flag: m.Flag, BornTimestamp: b.req.BornTimestamp, Properties: m.Properties, RawProperties: m.RawProperties, Body: m.Body}
	}
	code := req.RequestCode()
	opaque := c.opaque.Add(1)
	at := len(s.wbuf)
	out, err := protocol.AppendRequest(s.wbuf, opaque, 0, req)
	if err == nil {
		var n int
		if n, err = protocol.Split(out[at:], c.o.limits); err == nil && n != len(out)-at {
			err = errorIncompleteFrame
		}
	}
	s.recycle(b)
	if err != nil {
		// Every message passed Validate, and a batch is far below the
		// frame limit: this is a bug, reported to each sender.
		s.wbuf = out[:at]
		err = fmt.Errorf("wharf client: %v request: %w", code, err)
		for _, p := range b.parts {
			c.callbacks.run(func() { p.part(sendPart{err: err}) })
		}
		return
	}
	s.wbuf = out
	s.pending[opaque] = &pendingCall{code: code, start: b.start, deadline: b.deadline, done: batchAnswer(c, b.parts, single)}
	s.async++
}

// recycle keeps an encoded batch's message slice, its references
// cleared, for the next batch (its bytes are in the write buffer now), and
// its size as the next batch's capacity. s.mu must be held.
func (s *session) recycle(b *openBatch) {
	clear(b.req.Messages)
	s.spareMsgs = b.req.Messages[:0]
	s.lastBatch = len(b.parts)
}

// batchAnswer is the answerer of a coalesced request (a SEND if single,
// else a SEND_BATCH): each part gets its message's share of the answer.
// Its parts' latencies end when the reader took the answer.
func batchAnswer(c *conn, parts []partHandler, single bool) answerFunc {
	return func(f *protocol.Frame, at time.Time, err error) {
		switch {
		case err != nil:
			for _, p := range parts {
				p.part(sendPart{err: err, at: at})
			}
		case !f.Status.Stored():
			for _, p := range parts {
				p.part(sendPart{f: f, batched: !single, at: at})
			}
		case single:
			sp := sendPart{f: f, at: at}
			sp.err = c.decodeSend(f, &sp.resp)
			parts[0].part(sp)
		default:
			var resp protocol.SendBatchResponse
			derr := c.decodeSendBatch(f, &resp)
			for i, p := range parts {
				sp := sendPart{f: f, err: derr, batched: true, at: at}
				if derr == nil {
					sp.resp.QueueID, sp.resp.QueueOffset = resp.QueueID, resp.QueueOffset+int64(i)
					if i < len(resp.MsgIDs) {
						sp.resp.MsgID = resp.MsgIDs[i]
					}
				}
				p.part(sp)
			}
		}
	}
}
