package client

import (
	"fmt"
	"testing"
	"time"

	"github.com/wharfmq/wharf/internal/brokertest"
	"github.com/wharfmq/wharf/protocol"
)

// sendAsyncAll sends n messages with bodies "0".."n-1" with SendAsync as
// fast as it can and waits for every callback.
func sendAsyncAll(t *testing.T, p *Producer, n int) []SendResult {
	t.Helper()
	type outcome struct {
		i   int
		r   SendResult
		err error
	}
	out := make(chan outcome, n)
	for i := range n {
		p.SendAsync(testCtx(t), msg("T", fmt.Sprint(i)), func(r SendResult, err error) { out <- outcome{i, r, err} })
	}
	results := make([]SendResult, n)
	deadline := time.After(30 * time.Second)
	for range n {
		select {
		case o := <-out:
			if o.err != nil {
				t.Fatalf("message %d: %v", o.i, o.err)
			}
			results[o.i] = o.r
		case <-deadline:
			t.Fatal("callbacks missing after 30 s")
		}
	}
	return results
}

// checkStored checks that each result names the message the broker stored
// under its queue and offset (body and id), and that each queue holds its
// messages in the order they were sent.
func checkStored(t *testing.T, b *brokertest.Broker, results []SendResult) {
	t.Helper()
	last := map[int32]int{}
	queues := map[int32][]protocol.MessageExt{}
	for i, r := range results {
		if r.Status != protocol.StatusOK || r.QueueID < 0 {
			t.Fatalf("message %d: %+v", i, r)
		}
		stored, ok := queues[r.QueueID]
		if !ok {
			stored = b.Messages("T", r.QueueID)
			queues[r.QueueID] = stored
		}
		if r.QueueOffset < 0 || r.QueueOffset >= int64(len(stored)) {
			t.Fatalf("message %d: offset %d outside queue %d of %d messages", i, r.QueueOffset, r.QueueID, len(stored))
		}
		m := stored[r.QueueOffset]
		if string(m.Body) != fmt.Sprint(i) || m.MsgID != r.MsgID || m.UniqKey() != r.UniqKey {
			t.Fatalf("message %d: result %+v names the stored message %q (id %s, key %s)", i, r, m.Body, m.MsgID, m.UniqKey())
		}
		if prev, ok := last[r.QueueID]; ok && prev > int(r.QueueOffset) {
			t.Fatalf("queue %d: message %d stored before an earlier one", r.QueueID, i)
		}
		last[r.QueueID] = int(r.QueueOffset)
	}
}

func TestSendAsyncCoalescesIntoBatches(t *testing.T) {
	const n = 3000
	b := brokertest.Start(t)
	b.CreateTopic("T", 4)
	p := newProducer(t, b)
	if _, err := p.Send(testCtx(t), msg("T", "route")); err != nil { // fetches the route; queue 0 offset 0
		t.Fatal(err)
	}
	results := sendAsyncAll(t, p, n)
	checkStored(t, b, results)
	batches, sends := b.Count(protocol.CodeSendBatchMessage), b.Count(protocol.CodeSendMessage)
	if batches == 0 || batches+sends-1 >= n {
		t.Fatalf("%d messages sent as %d SEND_BATCH and %d SEND: nothing coalesced", n, batches, sends-1)
	}
	used := map[int32]bool{}
	for _, r := range results {
		used[r.QueueID] = true
	}
	if len(used) < 2 {
		t.Fatalf("every batch went to queue(s) %v: the batch queue should rotate", used)
	}
	t.Logf("%d messages in %d requests (%d SEND_BATCH)", n, batches+sends-1, batches)
}

func TestSendCoalescingOff(t *testing.T) {
	b := brokertest.Start(t)
	b.CreateTopic("T", 4)
	p := newProducer(t, b, WithSendCoalescing(false))
	if _, err := p.Send(testCtx(t), msg("T", "route")); err != nil {
		t.Fatal(err)
	}
	results := sendAsyncAll(t, p, 500)
	if got := b.Count(protocol.CodeSendBatchMessage); got != 0 {
		t.Fatalf("%d SEND_BATCH with coalescing off", got)
	}
	checkStored(t, b, results)
}

// A refused batch may be refused for one message only: each of its
// messages is sent again on its own, so the others still get stored.
func TestRefusedCoalescedBatchIsSentAgainMessageByMessage(t *testing.T) {
	const n = 2000
	b := brokertest.Start(t)
	b.CreateTopic("T", 4)
	b.SetStatusHook(func(code protocol.Code, _ int) protocol.Status {
		if code == protocol.CodeSendBatchMessage {
			return protocol.StatusMessageIllegal
		}
		return 0
	})
	p := newProducer(t, b, WithRetries(0))
	if _, err := p.Send(testCtx(t), msg("T", "route")); err != nil {
		t.Fatal(err)
	}
	results := sendAsyncAll(t, p, n)
	if b.Count(protocol.CodeSendBatchMessage) == 0 {
		t.Fatal("no SEND_BATCH was sent: nothing was coalesced, so nothing was tested")
	}
	if got := b.Total("T"); got != n+1 {
		t.Fatalf("broker stored %d, want %d", got, n+1)
	}
	for i, r := range results {
		if r.MsgID == "" || r.QueueOffset < 0 {
			t.Fatalf("message %d: %+v", i, r)
		}
	}
}

// A batch still being gathered when the connection breaks fails its
// messages like any request in flight: no callback is lost.
func TestOpenBatchFailsWithTheConnection(t *testing.T) {
	b := brokertest.Start(t)
	b.CreateTopic("T", 4)
	p := newProducer(t, b, WithRetries(0), WithTimeout(time.Minute))
	if _, err := p.Send(testCtx(t), msg("T", "route")); err != nil {
		t.Fatal(err)
	}
	s, err := p.c.session(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	// An open batch put in place by hand, without waking the writer: it
	// is still open when the connection breaks.
	done := make(chan error, 3)
	s.mu.Lock()
	s.open = &openBatch{req: protocol.SendBatchRequest{Topic: "T", QueueID: 1}, start: time.Now(), deadline: time.Now().Add(time.Minute)}
	for range 3 {
		s.open.req.Messages = append(s.open.req.Messages, *msg("T", "x"))
		s.open.parts = append(s.open.parts, partFunc(func(sp sendPart) { done <- sp.err }))
	}
	s.mu.Unlock()
	s.fail(fmt.Errorf("test: connection broken"))
	for range 3 {
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("a message of the open batch succeeded after the connection broke")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a message of the open batch never completed")
		}
	}
}
