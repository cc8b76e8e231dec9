package client

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wharfmq/wharf/internal/brokertest"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newProducer(t *testing.T, b *brokertest.Broker, opts ...Option) *Producer {
	t.Helper()
	p, err := NewProducer(b.Addr(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func newAdmin(t *testing.T, b *brokertest.Broker) *Admin {
	t.Helper()
	a, err := NewAdmin(b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// clientGoroutines counts the goroutines running client code, but the
// caller's. The in-process broker's goroutines come and go with its
// actors' mailboxes and are no business of a client leak check.
func clientGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	stacks := strings.Split(string(buf), "\n\n")[1:] // the first is the caller's
	count := 0
	for _, st := range stacks {
		if strings.Contains(st, "github.com/wharfmq/wharf/client.") {
			count++
		}
	}
	return count
}

func msg(topic, body string) *protocol.Message {
	return &protocol.Message{Topic: topic, Body: []byte(body)}
}

func TestStatusErrorMapping(t *testing.T) {
	tests := []struct {
		status    protocol.Status
		sentinel  error
		retryable bool
	}{
		{protocol.StatusTopicNotExist, ErrTopicNotExist, true},
		{protocol.StatusMessageIllegal, ErrMessageIllegal, false},
		{protocol.StatusFlushDiskTimeout, ErrFlushDiskTimeout, false},
		{protocol.StatusFlushSlaveTimeout, ErrFlushSlaveTimeout, false},
		{protocol.StatusSlaveNotAvailable, ErrSlaveNotAvailable, false},
		{protocol.StatusDiskFull, ErrDiskFull, true},
		{protocol.StatusServiceNotAvailable, ErrServiceNotAvailable, true},
		{protocol.StatusSystemBusy, ErrSystemBusy, true},
		{protocol.StatusNoPermission, ErrNoPermission, true},
		{protocol.StatusSystemError, ErrSystemError, true},
		{protocol.StatusNotMaster, ErrNotMaster, true},
		{protocol.StatusTopicExistAlready, ErrTopicExist, false},
		{protocol.StatusQueryNotFound, ErrNotFound, false},
		{protocol.StatusInvalidParameter, ErrInvalidParameter, false},
		{protocol.StatusSubscriptionParseFailed, ErrSubscription, false},
		{protocol.StatusRequestCodeNotSupported, ErrNotSupported, false},
		{protocol.StatusFrameIllegal, ErrFrameIllegal, false},
		{protocol.Status(9999), nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.status.String(), func(t *testing.T) {
			var err error = &StatusError{Code: protocol.CodeSendMessage, Status: tt.status, Remark: "why"}
			err = fmt.Errorf("wrapped: %w", err)
			if tt.sentinel != nil && !errors.Is(err, tt.sentinel) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.sentinel)
			}
			for _, other := range statusSentinels {
				if other != tt.sentinel && errors.Is(err, other) {
					t.Errorf("%v also matches %v", err, other)
				}
			}
			if got := retryable(err); got != tt.retryable {
				t.Errorf("retryable = %v, want %v", got, tt.retryable)
			}
			st, ok := StatusFromError(err)
			if !ok || st != tt.status {
				t.Errorf("StatusFromError = %v, %v", st, ok)
			}
			if !strings.Contains(err.Error(), "why") || !strings.Contains(err.Error(), "SEND_MESSAGE") {
				t.Errorf("message %q lacks code or remark", err)
			}
		})
	}
	if retryable(fmt.Errorf("x: %w", ErrBrokerUnavailable)) != true {
		t.Error("connection errors must be retryable")
	}
	if retryable(fmt.Errorf("%w: %w", ErrTimeout, context.DeadlineExceeded)) {
		t.Error("timeouts must not be retried")
	}
}

func TestProducerSendRoundRobinAndPull(t *testing.T) {
	b := brokertest.Start(t)
	b.CreateTopic("T", 4)
	p := newProducer(t, b)
	ctx := testCtx(t)
	var results []SendResult
	for i := range 8 {
		m := msg("T", fmt.Sprintf("body-%d", i))
		m.SetKeys(fmt.Sprintf("k-%d", i))
		m.SetTags("a")
		res, err := p.Send(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != protocol.StatusOK || res.MsgID == "" || len(res.UniqKey) != 32 || res.Topic != "T" {
			t.Fatalf("result %+v", res)
		}
		results = append(results, res)
	}
	for q := range int32(4) {
		msgs := b.Messages("T", q)
		if len(msgs) != 2 {
			t.Fatalf("queue %d has %d messages, want 2 (round robin)", q, len(msgs))
		}
	}
	pc, err := NewPullConsumer(b.Addr(), "G")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	seen := map[string]bool{}
	for q := int32(0); q < 4; q++ {
		res, err := pc.Pull(ctx, "T", q, 0, 32, PullOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != protocol.PullFound || len(res.Messages) != 2 || res.NextBeginOffset != 2 || res.MaxOffset != 2 {
			t.Fatalf("pull q%d: %+v", q, res)
		}
		for i, m := range res.Messages {
			if m.QueueOffset != int64(i) || m.QueueID != q {
				t.Errorf("message at %d/%d, want %d/%d", m.QueueID, m.QueueOffset, q, i)
			}
			if m.BornTimestamp == 0 {
				t.Error("bornTimestamp not set")
			}
			seen[m.UniqKey()] = true
		}
	}
	for _, r := range results {
		if !seen[r.UniqKey] {
			t.Errorf("message %s not pulled", r.UniqKey)
		}
	}

	// Admin lookups of what was sent.
	a := newAdmin(t, b)
	found, err := a.QueryByKey(ctx, "T", "k-3", time.Time{}, time.Time{}, 10)
	if err != nil || len(found) != 1 || string(found[0].Body) != "body-3" {
		t.Fatalf("QueryByKey k-3 = %v, %v", found, err)
	}
	found, err = a.QueryByKey(ctx, "T", results[5].UniqKey, time.Time{}, time.Time{}, 10)
	if err != nil || len(found) != 1 || string(found[0].Body) != "body-5" {
		t.Fatalf("QueryByKey uniq = %v, %v", found, err)
	}
	found, err = a.QueryByKey(ctx, "T", "nope", time.Time{}, time.Time{}, 10)
	if err != nil || len(found) != 0 {
		t.Fatalf("QueryByKey nope = %v, %v", found, err)
	}
	m, err := a.ViewMessage(ctx, results[6].MsgID)
	if err != nil || string(m.Body) != "body-6" || m.QueueOffset != results[6].QueueOffset {
		t.Fatalf("ViewMessage = %+v, %v", m, err)
	}
	if _, err := a.ViewMessage(ctx, protocol.OffsetMsgID(b.StoreHost(), 1<<40)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ViewMessage of a missing id: %v", err)
	}
	if _, err := a.ViewMessage(ctx, "zz"); !errors.Is(err, ErrInvalidParameter) {
		t.Fatalf("ViewMessage of a malformed id: %v", err)
	}
}

func TestSendToQueueBatchAndOneway(t *testing.T) {
	b := brokertest.Start(t)
	b.CreateTopic("T", 4)
	p := newProducer(t, b)
	ctx := testCtx(t)
	res, err := p.Send(ctx, msg("T", "x"), ToQueue(3))
	if err != nil || res.QueueID != 3 || res.QueueOffset != 0 {
		t.Fatalf("Send ToQueue(3) = %+v, %v", res, err)
	}
	var batch []*protocol.Message
	for i := range 10 {
		batch = append(batch, msg("T", fmt.Sprint(i)))
	}
	br, err := p.SendBatch(ctx, batch, ToQueue(2))
	if err != nil {
		t.Fatal(err)
	}
	if br.QueueID != 2 || br.QueueOffset != 0 || len(br.MsgIDs) != 10 || len(br.UniqKeys) != 10 || br.Status != protocol.StatusOK {
		t.Fatalf("batch result %+v", br)
	}
	got := b.Messages("T", 2)
	for i, m := range got {
		if string(m.Body) != fmt.Sprint(i) || m.UniqKey() != br.UniqKeys[i] || m.MsgID != br.MsgIDs[i] {
			t.Fatalf("batch message %d: %q %s", i, m.Body, m.UniqKey())
		}
	}
	if _, err := p.SendBatch(ctx, []*protocol.Message{msg("T", "a"), msg("U", "b")}); !errors.Is(err, ErrMessageIllegal) {
		t.Fatalf("mixed-topic batch: %v", err)
	}
	if _, err := p.SendBatch(ctx, nil); !errors.Is(err, ErrMessageIllegal) {
		t.Fatalf("empty batch: %v", err)
	}
	if err := p.SendOneway(ctx, msg("T", "oneway"), ToQueue(1)); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, testwait.Wall, 5*time.Second, "oneway message stored", func() bool { return len(b.Messages("T", 1)) == 1 })
	if _, err := p.Send(ctx, msg("bad topic", "x")); !errors.Is(err, ErrMessageIllegal) {
		t.Fatalf("bad topic: %v", err)
	}
	if _, err := p.Send(ctx, &protocol.Message{Topic: "T", Body: make([]byte, protocol.DefaultMaxMessageSize+1)}); !errors.Is(err, ErrMessageIllegal) {
		t.Fatalf("oversized body: %v", err)
	}
}

func TestUnknownTopicLetsBrokerPick(t *testing.T) {
	ctx := testCtx(t)
	off := brokertest.Start(t, brokertest.WithAutoCreate(false))
	if _, err := newProducer(t, off).Send(ctx, msg("NEW", "x")); !errors.Is(err, ErrTopicNotExist) {
		t.Fatalf("send to a missing topic: %v", err)
	}
	b := brokertest.Start(t) // auto-creation on, as by default
	res, err := newProducer(t, b).Send(ctx, msg("NEW", "x"))
	if err != nil || res.QueueID < 0 || res.QueueID >= 8 {
		t.Fatalf("auto-created: %+v, %v", res, err)
	}
	if n := b.Total("NEW"); n != 1 {
		t.Fatalf("auto-created topic holds %d messages, want 1", n)
	}
}

func TestProducerRetries(t *testing.T) {
	tests := []struct {
		name      string
		failWith  protocol.Status
		failCount int // the first failCount sends get failWith
		retries   int
		wantErr   error
		wantSends int
		wantStore int // messages stored
	}{
		{"busy then ok", protocol.StatusSystemBusy, 2, 2, nil, 3, 1},
		{"busy exhausts retries", protocol.StatusSystemBusy, 5, 1, ErrSystemBusy, 2, 0},
		{"service unavailable then ok", protocol.StatusServiceNotAvailable, 1, 2, nil, 2, 1},
		{"disk full then ok", protocol.StatusDiskFull, 1, 2, nil, 2, 1},
		{"message illegal not retried", protocol.StatusMessageIllegal, 5, 2, ErrMessageIllegal, 1, 0},
		{"flush disk timeout not retried", protocol.StatusFlushDiskTimeout, 5, 2, ErrFlushDiskTimeout, 1, 1},
		{"flush slave timeout not retried", protocol.StatusFlushSlaveTimeout, 5, 2, ErrFlushSlaveTimeout, 1, 1},
		{"slave not available not retried", protocol.StatusSlaveNotAvailable, 5, 2, ErrSlaveNotAvailable, 1, 1},
		{"no permission exhausts", protocol.StatusNoPermission, 5, 2, ErrNoPermission, 3, 0},
	}
	for _, tt := range tests {
		for _, async := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/async=%v", tt.name, async), func(t *testing.T) {
				b := brokertest.Start(t)
				b.CreateTopic("T", 2)
				b.SetStatusHook(func(code protocol.Code, n int) protocol.Status {
					if code == protocol.CodeSendMessage && n <= tt.failCount {
						return tt.failWith
					}
					return 0
				})
				p := newProducer(t, b, WithRetries(tt.retries), WithRetryBackoff(time.Millisecond))
				res, err := sendMaybeAsync(t, p, msg("T", "x"), async)
				if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				if got := b.Count(protocol.CodeSendMessage); got != tt.wantSends {
					t.Errorf("%d sends, want %d", got, tt.wantSends)
				}
				if got := b.Total("T"); got != tt.wantStore {
					t.Errorf("%d stored, want %d", got, tt.wantStore)
				}
				if tt.failWith.Unconfirmed() {
					if res.Status != tt.failWith || res.MsgID == "" || res.QueueOffset != 0 {
						t.Errorf("unconfirmed result %+v: want status, id and offset", res)
					}
					var se *StatusError
					if !errors.As(err, &se) || se.Status != tt.failWith {
						t.Errorf("error %v is not a *StatusError with %v", err, tt.failWith)
					}
				}
				if err == nil && res.Status != protocol.StatusOK {
					t.Errorf("success with status %v", res.Status)
				}
			})
		}
	}
}

// TestUnconfirmedSendFromTheBroker: a SYNC_MASTER without its slave stores
// a send and answers SLAVE_NOT_AVAILABLE: the error says so, the result
// still names the stored message, and the send is not retried.
func TestUnconfirmedSendFromTheBroker(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithRole(RoleSyncMaster))
	b.CreateTopic("T", 1)
	p := newProducer(t, b, WithRetries(2))
	res, err := p.Send(testCtx(t), msg("T", "x"))
	if !errors.Is(err, ErrSlaveNotAvailable) || res.Status != protocol.StatusSlaveNotAvailable || res.MsgID == "" {
		t.Fatalf("send = %+v, %v; want SLAVE_NOT_AVAILABLE with the message's id", res, err)
	}
	if n, stored := b.Count(protocol.CodeSendMessage), b.Messages("T", 0); n != 1 || len(stored) != 1 || stored[0].MsgID != res.MsgID {
		t.Errorf("%d sends, stored %v; want 1 send, stored under id %s", n, stored, res.MsgID)
	}
}

// sendMaybeAsync sends msg with Send or, async, with SendAsync to queue 0
// (a queue given by the caller needs no route lookup, so the send takes
// SendAsync's fast path).
func sendMaybeAsync(t *testing.T, p *Producer, m *protocol.Message, async bool) (SendResult, error) {
	t.Helper()
	if !async {
		return p.Send(testCtx(t), m)
	}
	type outcome struct {
		res SendResult
		err error
	}
	done := make(chan outcome, 1)
	p.SendAsync(testCtx(t), m, func(r SendResult, e error) { done <- outcome{r, e} }, ToQueue(0))
	select {
	case o := <-done:
		return o.res, o.err
	case <-time.After(10 * time.Second):
		t.Fatal("SendAsync: callback not called within 10 s")
		return SendResult{}, nil
	}
}

func TestReconnectAfterBrokerRestart(t *testing.T) {
	b := brokertest.Start(t)
	b.CreateTopic("T", 2)
	p := newProducer(t, b, WithRetries(0), WithReconnectBackoff(10*time.Millisecond, 50*time.Millisecond))
	ctx := testCtx(t)
	if _, err := p.Send(ctx, msg("T", "before")); err != nil {
		t.Fatal(err)
	}
	b.Stop()
	start := time.Now()
	_, err := p.Send(ctx, msg("T", "down"))
	if !errors.Is(err, ErrBrokerUnavailable) {
		t.Fatalf("send to a stopped broker: %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Errorf("failing send took %v", time.Since(start))
	}
	b.Restart()
	testwait.For(t, testwait.Wall, 5*time.Second, "send after restart", func() bool {
		_, err := p.Send(ctx, msg("T", "after"))
		return err == nil
	})
}

func TestPendingCallsFailWhenConnectionDrops(t *testing.T) {
	b := brokertest.Start(t)
	b.CreateTopic("T", 2)
	b.SetStall(protocol.CodeSendMessage, true)
	p := newProducer(t, b, WithRetries(0), WithTimeout(10*time.Second))
	ctx := testCtx(t)
	const n = 5
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := p.Send(ctx, msg("T", "x"), ToQueue(0))
			errs <- err
		}()
	}
	testwait.For(t, testwait.Wall, 5*time.Second, "sends reach the broker", func() bool { return b.Count(protocol.CodeSendMessage) == n })
	start := time.Now()
	b.DropConns()
	for range n {
		select {
		case err := <-errs:
			if !errors.Is(err, ErrBrokerUnavailable) {
				t.Errorf("pending send: %v, want ErrBrokerUnavailable", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("pending sends did not fail after the connection dropped")
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("pending calls took %v to fail", d)
	}
	b.SetStall(protocol.CodeSendMessage, false)
	if _, err := p.Send(ctx, msg("T", "again")); err != nil {
		t.Fatalf("send after reconnect: %v", err)
	}
}

func TestContextTimeoutAndCancel(t *testing.T) {
	b := brokertest.Start(t)
	b.CreateTopic("T", 2)
	b.SetStall(protocol.CodeSendMessage, true)
	p := newProducer(t, b, WithRetries(3))

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.Send(ctx, msg("T", "x"))
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrTimeout and DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("timeout took %v", d)
	}
	if n := b.Count(protocol.CodeSendMessage); n != 1 {
		t.Errorf("a timed-out send was retried: %d sends", n)
	}

	// The per-request timeout option.
	p2 := newProducer(t, b, WithRetries(0), WithTimeout(100*time.Millisecond))
	if _, err := p2.Send(context.Background(), msg("T", "x")); !errors.Is(err, ErrTimeout) {
		t.Fatalf("WithTimeout: %v", err)
	}

	ctx2, cancel2 := context.WithCancel(context.Background())
	before := b.Count(protocol.CodeSendMessage)
	go func() { // cancel once the send is at the broker (stalled there)
		testwait.Until(testwait.Wall, 5*time.Second, func() bool { return b.Count(protocol.CodeSendMessage) > before })
		cancel2()
	}()
	_, err = p.Send(ctx2, msg("T", "x"))
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeout) {
		t.Fatalf("cancelled: %v", err)
	}
}

func TestLongPolling(t *testing.T) {
	b := brokertest.Start(t)
	b.CreateTopic("T", 1)
	pc, err := NewPullConsumer(b.Addr(), "G")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	p := newProducer(t, b)
	ctx := testCtx(t)

	type out struct {
		res PullResult
		err error
		at  time.Time
	}

	// Empty queue: the pull is held for its suspend on the broker's clock,
	// then answered PullNoNewMsg.
	empty := make(chan out, 1)
	go func() {
		r, err := pc.Pull(ctx, "T", 0, 0, 32, PullOptions{Suspend: 10 * time.Second})
		empty <- out{r, err, time.Now()}
	}()
	testwait.For(t, testwait.Wall, 5*time.Second, "the empty pull held", func() bool { return b.Held("T") == 1 })
	b.Clock().Advance(10 * time.Second)
	select {
	case o := <-empty:
		if o.err != nil || o.res.Status != protocol.PullNoNewMsg || o.res.NextBeginOffset != 0 {
			t.Fatalf("empty pull = %+v, %v", o.res, o.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the empty pull still held after its suspend on the broker's clock")
	}

	// A message arriving during the suspend ends it at once; a held pull
	// does not block other calls on the connection.
	done := make(chan out, 1)
	go func() {
		r, err := pc.Pull(ctx, "T", 0, 0, 32, PullOptions{Suspend: 10 * time.Second})
		done <- out{r, err, time.Now()}
	}()
	testwait.For(t, testwait.Wall, 5*time.Second, "pull held", func() bool { return b.Held("T") == 1 })
	if _, err := pc.MaxOffset(ctx, "T", 0); err != nil {
		t.Fatalf("a call beside a held pull: %v", err)
	}
	sent := time.Now()
	if _, err := p.Send(ctx, msg("T", "wake")); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-done:
		if o.err != nil || o.res.Status != protocol.PullFound || len(o.res.Messages) != 1 || string(o.res.Messages[0].Body) != "wake" {
			t.Fatalf("woken pull = %+v, %v", o.res, o.err)
		}
		if d := o.at.Sub(sent); d > 2*time.Second {
			t.Errorf("pull returned %v after the send", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("held pull did not return after a message arrived")
	}

	// Offsets out of range.
	res, err := pc.Pull(ctx, "T", 0, 100, 32, PullOptions{})
	if err != nil || res.Status != protocol.PullOffsetIllegal || res.NextBeginOffset != 1 {
		t.Fatalf("pull past the end = %+v, %v", res, err)
	}
	if _, err := pc.Pull(ctx, "T", 0, 0, 32, PullOptions{Subscription: "a ||"}); !errors.Is(err, ErrSubscription) {
		t.Fatalf("bad subscription: %v", err)
	}
	if _, err := pc.Pull(ctx, "NOPE", 0, 0, 32, PullOptions{}); !errors.Is(err, ErrTopicNotExist) {
		t.Fatalf("missing topic: %v", err)
	}
}

func TestPullTagFilterAndOffsets(t *testing.T) {
	b := brokertest.Start(t)
	b.CreateTopic("T", 1)
	p := newProducer(t, b)
	ctx := testCtx(t)
	for i, tag := range []string{"a", "b", "c", "a", "b"} {
		m := msg("T", fmt.Sprint(i))
		m.SetTags(tag)
		if _, err := p.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	pc, err := NewPullConsumer(b.Addr(), "G")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	b.WaitDispatched() // the pulls do not wait: what was sent must be in the queue
	res, err := pc.Pull(ctx, "T", 0, 0, 32, PullOptions{Subscription: "b || c"})
	if err != nil || len(res.Messages) != 3 || res.NextBeginOffset != 5 {
		t.Fatalf("filtered pull = %+v, %v", res, err)
	}
	for _, m := range res.Messages {
		if m.Tags() == "a" {
			t.Errorf("tag a passed the filter b || c")
		}
	}
	res, err = pc.Pull(ctx, "T", 0, 2, 1, PullOptions{Subscription: "zzz"})
	if err != nil || res.Status != protocol.PullNoMatchedMsg || res.NextBeginOffset < 3 || len(res.Messages) != 0 {
		t.Fatalf("unmatched pull = %+v, %v", res, err)
	}
	if _, err := pc.QueryOffset(ctx, "T", 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("QueryOffset before commit: %v", err)
	}
	if err := pc.CommitOffset(ctx, "T", 0, 4); err != nil {
		t.Fatal(err)
	}
	if off, err := pc.QueryOffset(ctx, "T", 0); err != nil || off != 4 {
		t.Fatalf("QueryOffset = %d, %v", off, err)
	}
	commit := int64(5)
	if _, err := pc.Pull(ctx, "T", 0, 5, 1, PullOptions{CommitOffset: &commit}); err != nil {
		t.Fatal(err)
	}
	if off, _ := pc.QueryOffset(ctx, "T", 0); off != 5 {
		t.Fatalf("commit with pull: offset %d", off)
	}
}

func TestAdmin(t *testing.T) {
	b := brokertest.Start(t)
	a := newAdmin(t, b)
	ctx := testCtx(t)
	if err := a.CreateTopic(ctx, protocol.TopicConfig{Topic: "A", ReadQueueNums: 3, WriteQueueNums: 3}); err != nil {
		t.Fatal(err)
	}
	if err := a.CreateTopic(ctx, protocol.TopicConfig{Topic: "A"}); !errors.Is(err, ErrTopicExist) {
		t.Fatalf("second create: %v", err)
	}
	if err := a.UpdateTopic(ctx, protocol.TopicConfig{Topic: "A", WriteQueueNums: 5}); err != nil {
		t.Fatal(err)
	}
	tc, err := a.GetTopic(ctx, "A")
	if err != nil || tc.WriteQueueNums != 5 || tc.ReadQueueNums != 5 || tc.Perm != 6 {
		t.Fatalf("GetTopic = %+v, %v", tc, err)
	}
	if err := a.CreateTopic(ctx, protocol.TopicConfig{Topic: "bad topic"}); !errors.Is(err, ErrInvalidParameter) {
		t.Fatalf("bad name: %v", err)
	}
	topics, err := a.ListTopics(ctx)
	if err != nil || len(topics) != 1 || topics[0].Topic != "A" {
		t.Fatalf("ListTopics = %+v, %v", topics, err)
	}
	p := newProducer(t, b)
	for range 3 {
		if _, err := p.Send(ctx, msg("A", "x"), ToQueue(1)); err != nil {
			t.Fatal(err)
		}
	}
	b.WaitDispatched()
	if off, err := a.GetMaxOffset(ctx, "A", 1); err != nil || off != 3 {
		t.Fatalf("GetMaxOffset = %d, %v", off, err)
	}
	if off, err := a.GetMinOffset(ctx, "A", 1); err != nil || off != 0 {
		t.Fatalf("GetMinOffset = %d, %v", off, err)
	}
	if err := a.UpdateConsumerOffset(ctx, "G", "A", 1, 2); err != nil {
		t.Fatal(err)
	}
	if off, err := a.QueryConsumerOffset(ctx, "G", "A", 1); err != nil || off != 2 {
		t.Fatalf("QueryConsumerOffset = %d, %v", off, err)
	}
	offs, err := a.GetConsumerOffsets(ctx, "G", "")
	if err != nil || len(offs) != 1 || offs[0].ConsumerOffset != 2 || offs[0].MaxOffset != 3 {
		t.Fatalf("GetConsumerOffsets = %+v, %v", offs, err)
	}
	info, err := a.RuntimeInfo(ctx)
	if err != nil || info.BrokerName != "broker-a" || info.TopicCount != 1 {
		t.Fatalf("RuntimeInfo = %+v, %v", info, err)
	}
	if err := a.DeleteTopic(ctx, "A"); err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteTopic(ctx, "A"); !errors.Is(err, ErrTopicNotExist) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := a.GetTopic(ctx, "A"); !errors.Is(err, ErrTopicNotExist) {
		t.Fatalf("GetTopic after delete: %v", err)
	}
}

// TestAdminUpdateBrokerRole: bad roles, addresses and ids are refused
// before anything is sent; a role the broker accepts is reported by
// RuntimeInfo; the broker's refusals map to their sentinels.
func TestAdminUpdateBrokerRole(t *testing.T) {
	b := brokertest.Start(t)
	a := newAdmin(t, b)
	ctx := testCtx(t)
	bad := []struct {
		role, master string
		id           int64
		want         string
	}{
		{"MASTER", "", 0, `role "MASTER"`},
		{"slave", "127.0.0.1:10912", 0, `role "slave"`},
		{"", "", 0, `role ""`},
		{RoleSlave, "", 0, "needs its master's address"},
		{RoleSlave, "127.0.0.1", 0, `"127.0.0.1": want host:port`},
		{RoleSlave, ":10912", 0, `":10912": want host:port`},
		{RoleSlave, "127.0.0.1:0", 0, "want host:port"},
		{RoleSlave, "127.0.0.1:65536", 0, "want host:port"},
		{RoleSlave, "127.0.0.1:x", 0, "want host:port"},
		{RoleSlave, "127.0.0.1:10912", -1, "brokerId -1"},
		{RoleAsyncMaster, "127.0.0.1:10912", 0, "has no master"},
		{RoleSyncMaster, "", 2, "brokerId 0, not 2"},
	}
	for _, tc := range bad {
		err := a.UpdateBrokerRole(ctx, tc.role, tc.master, tc.id)
		if !errors.Is(err, ErrInvalidParameter) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("UpdateBrokerRole(%q, %q, %d) = %v; want ErrInvalidParameter with %q", tc.role, tc.master, tc.id, err, tc.want)
		}
	}
	if n := b.Count(protocol.CodeUpdateBrokerRole); n != 0 {
		t.Fatalf("%d invalid role changes reached the broker", n)
	}

	steps := []struct {
		role, master string
		id           int64
		wantRole     string
		wantID       int64
	}{
		{RoleSlave, "127.0.0.1:10912", 0, RoleSlave, 1},
		{RoleSlave, "localhost:10912", 3, RoleSlave, 3},
		{RoleSyncMaster, "", 0, RoleSyncMaster, 0},
		{RoleAsyncMaster, "", 0, RoleAsyncMaster, 0},
	}
	for _, s := range steps {
		if err := a.UpdateBrokerRole(ctx, s.role, s.master, s.id); err != nil {
			t.Fatalf("UpdateBrokerRole(%q, %q, %d): %v", s.role, s.master, s.id, err)
		}
		info, err := a.RuntimeInfo(ctx)
		if err != nil || info.BrokerRole != s.wantRole || info.BrokerID != s.wantID {
			t.Fatalf("after UpdateBrokerRole(%q, %q, %d): role %q id %d, %v; want %q id %d",
				s.role, s.master, s.id, info.BrokerRole, info.BrokerID, err, s.wantRole, s.wantID)
		}
	}

	for st, want := range map[protocol.Status]error{
		protocol.StatusSystemBusy:       ErrSystemBusy,
		protocol.StatusInvalidParameter: ErrInvalidParameter,
	} {
		b.SetStatusHook(func(code protocol.Code, _ int) protocol.Status {
			if code == protocol.CodeUpdateBrokerRole {
				return st
			}
			return 0
		})
		err := a.UpdateBrokerRole(ctx, RoleSlave, "127.0.0.1:10912", 0)
		var se *StatusError
		if !errors.Is(err, want) || !errors.As(err, &se) || se.Code != protocol.CodeUpdateBrokerRole {
			t.Errorf("broker answering %v: %v; want a StatusError wrapping %v", st, err, want)
		}
	}
}

// pushRecorder records what a push handler saw, per queue.
type pushRecorder struct {
	mu      sync.Mutex
	offsets map[int32][]int64
	bodies  map[string]int
	total   atomic.Int64
}

func newPushRecorder() *pushRecorder {
	return &pushRecorder{offsets: map[int32][]int64{}, bodies: map[string]int{}}
}

func (r *pushRecorder) handle(_ context.Context, msgs []*protocol.MessageExt) ConsumeResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		r.offsets[m.QueueID] = append(r.offsets[m.QueueID], m.QueueOffset)
		r.bodies[string(m.Body)]++
	}
	r.total.Add(int64(len(msgs)))
	return ConsumeSuccess
}

func TestPushConsumerDeliversInOrderPerQueue(t *testing.T) {
	b := brokertest.Start(t)
	b.CreateTopic("T", 4)
	p := newProducer(t, b)
	ctx := testCtx(t)
	const before = 200
	for i := range before {
		if _, err := p.Send(ctx, msg("T", fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	rec := newPushRecorder()
	c, err := NewPushConsumer(b.Addr(), "G", WithStaticAssignment(), WithConsumeFrom(ConsumeFromFirst), WithConsumeBatchSize(3),
		WithPullBatchSize(7), WithPullSuspend(time.Second), WithCommitInterval(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe("T", "*", rec.handle); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// More while consuming (long polls wake up).
	const after = 100
	for i := before; i < before+after; i++ {
		if _, err := p.Send(ctx, msg("T", fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, testwait.Wall, 10*time.Second, "all messages consumed", func() bool { return rec.total.Load() >= before+after })
	// Offsets are committed on the interval, before Close.
	a := newAdmin(t, b)
	testwait.For(t, testwait.Wall, 5*time.Second, "offsets committed on the interval", func() bool {
		sum := int64(0)
		for q := int32(0); q < 4; q++ {
			off, err := a.QueryConsumerOffset(ctx, "G", "T", q)
			if err != nil {
				return false
			}
			sum += off
		}
		return sum == before+after
	})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for q, offs := range rec.offsets {
		if !slices.IsSorted(offs) {
			t.Errorf("queue %d delivered out of order: %v", q, offs)
		}
		for i, o := range offs {
			if o != int64(i) {
				t.Fatalf("queue %d: delivery %d has offset %d", q, i, o)
			}
		}
	}
	if len(rec.bodies) != before+after {
		t.Errorf("%d distinct bodies, want %d", len(rec.bodies), before+after)
	}
	for body, n := range rec.bodies {
		if n != 1 {
			t.Errorf("body %s delivered %d times", body, n)
		}
	}
}

func TestPushConsumerResumesFromCommittedOffset(t *testing.T) {
	b := brokertest.Start(t)
	b.CreateTopic("T", 2)
	p := newProducer(t, b)
	ctx := testCtx(t)
	send := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := p.Send(ctx, msg("T", fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(0, 10)
	run := func(from ConsumeFrom, want int64) *pushRecorder {
		rec := newPushRecorder()
		c, err := NewPushConsumer(b.Addr(), "G", WithConsumeFrom(from), WithPullSuspend(200*time.Millisecond),
			WithCommitInterval(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Subscribe("T", "", rec.handle); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		testwait.For(t, testwait.Wall, 5*time.Second, "consumed", func() bool { return rec.total.Load() >= want })
		// Nothing more should come: every queue's pull is held at the
		// broker, at the end of what there is.
		testwait.For(t, testwait.Wall, 5*time.Second, "both queues' pulls held", func() bool { return b.Held("T") == 2 })
		if err := c.Close(); err != nil { // commits
			t.Fatal(err)
		}
		if got := rec.total.Load(); got != want {
			t.Fatalf("consumed %d, want %d", got, want)
		}
		return rec
	}
	b.WaitDispatched()      // "last" is the max offset the consumer finds
	run(ConsumeFromLast, 0) // new group from last: nothing; commits max
	send(10, 14)
	rec := run(ConsumeFromFirst, 4) // committed offsets win over ConsumeFrom
	for i := 10; i < 14; i++ {
		if rec.bodies[fmt.Sprint(i)] != 1 {
			t.Errorf("message %d not consumed once", i)
		}
	}
}

func TestPushConsumerRetryLaterRedeliversInOrder(t *testing.T) {
	b := brokertest.Start(t)
	b.CreateTopic("T", 1)
	p := newProducer(t, b)
	ctx := testCtx(t)
	for i := range 5 {
		if _, err := p.Send(ctx, msg("T", fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var seen []string
	failed := false
	c, err := NewPushConsumer(b.Addr(), "G", WithStaticAssignment(), WithConsumeFrom(ConsumeFromFirst), WithRetryLaterDelay(20*time.Millisecond),
		WithPullSuspend(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Subscribe("T", "*", func(_ context.Context, msgs []*protocol.MessageExt) ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		body := string(msgs[0].Body)
		seen = append(seen, body)
		if body == "2" && !failed {
			failed = true
			return ConsumeRetryLater
		}
		return ConsumeSuccess
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, testwait.Wall, 5*time.Second, "all consumed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) >= 6
	})
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"0", "1", "2", "2", "3", "4"}; !slices.Equal(seen, want) {
		t.Fatalf("deliveries %v, want %v", seen, want)
	}
}

func TestPushConsumerErrors(t *testing.T) {
	b := brokertest.Start(t)
	c, err := NewPushConsumer(b.Addr(), "G")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := func(context.Context, []*protocol.MessageExt) ConsumeResult { return ConsumeSuccess }
	if err := c.Subscribe("T", "a ||", h); !errors.Is(err, ErrSubscription) {
		t.Errorf("bad expression: %v", err)
	}
	if err := c.Subscribe("T", "*", nil); err == nil {
		t.Error("nil handler accepted")
	}
	if err := c.Start(testCtx(t)); err == nil {
		t.Error("Start without subscriptions succeeded")
	}
	if err := c.Subscribe("T", "*", h); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(testCtx(t)); !errors.Is(err, ErrTopicNotExist) {
		t.Errorf("Start on a missing topic: %v", err)
	}
	if _, err := NewPushConsumer(b.Addr(), ""); err == nil {
		t.Error("empty group accepted")
	}
}

func TestConstructorsFailWithoutBroker(t *testing.T) {
	b := brokertest.Start(t)
	addr := b.Addr()
	b.Stop()
	if _, err := NewProducer(addr, WithDialTimeout(time.Second)); !errors.Is(err, ErrBrokerUnavailable) {
		t.Errorf("NewProducer: %v", err)
	}
	if _, err := NewAdmin(addr); !errors.Is(err, ErrBrokerUnavailable) {
		t.Errorf("NewAdmin: %v", err)
	}
	if _, err := NewProducer(addr, WithTimeout(-1)); err == nil {
		t.Error("negative timeout accepted")
	}
}

func TestCloseWithCallsInFlight(t *testing.T) {
	b := brokertest.Start(t)
	b.CreateTopic("T", 2)
	b.SetStall(protocol.CodeSendMessage, true)
	b.SetStall(protocol.CodeGetMaxOffset, true)
	p := newProducer(t, b, WithTimeout(time.Minute))
	ctx := testCtx(t)
	const n = 20
	var wg sync.WaitGroup
	var closedErrs atomic.Int32
	wg.Add(n)
	for range n {
		p.SendAsync(ctx, msg("T", "x"), func(_ SendResult, err error) {
			defer wg.Done()
			if errors.Is(err, ErrClosed) {
				closedErrs.Add(1)
			}
		})
	}
	testwait.For(t, testwait.Wall, 5*time.Second, "sends in flight", func() bool { return b.Count(protocol.CodeSendMessage) == n })

	a := newAdmin(t, b)
	adminErr := make(chan error, 1)
	go func() {
		_, err := a.GetMaxOffset(context.Background(), "T", 0)
		adminErr <- err
	}()
	testwait.For(t, testwait.Wall, 5*time.Second, "admin call in flight", func() bool { return b.Count(protocol.CodeGetMaxOffset) == 1 })

	start := time.Now()
	p.Close()
	a.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %v", d)
	}
	wg.Wait() // Close returns after the callbacks ran
	if got := closedErrs.Load(); got != n {
		t.Errorf("%d of %d callbacks got ErrClosed", got, n)
	}
	select {
	case err := <-adminErr:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("admin call: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("admin call still pending after Close")
	}
	if _, err := p.Send(ctx, msg("T", "x")); !errors.Is(err, ErrClosed) {
		t.Errorf("Send after Close: %v", err)
	}
	called := false
	p.SendAsync(ctx, msg("T", "x"), func(_ SendResult, err error) { called = errors.Is(err, ErrClosed) })
	if !called {
		t.Error("SendAsync after Close did not report ErrClosed synchronously")
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestNoGoroutineLeaks(t *testing.T) {
	b := brokertest.Start(t)
	b.CreateTopic("T", 4)
	ctx := testCtx(t)
	base := clientGoroutines()

	p, err := NewProducer(b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}, 50)
	for i := range 50 {
		p.SendAsync(ctx, msg("T", fmt.Sprint(i)), func(SendResult, error) { done <- struct{}{} })
	}
	for range 50 {
		<-done
	}
	pc, err := NewPullConsumer(b.Addr(), "G1")
	if err != nil {
		t.Fatal(err)
	}
	// A long poll in flight when the consumer closes.
	pullDone := make(chan error, 1)
	go func() {
		_, err := pc.Pull(ctx, "T", 0, 1000, 1, PullOptions{Suspend: 10 * time.Second})
		pullDone <- err
	}()
	rec := newPushRecorder()
	c, err := NewPushConsumer(b.Addr(), "G2", WithConsumeFrom(ConsumeFromFirst), WithPullSuspend(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe("T", "*", rec.handle); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, testwait.Wall, 5*time.Second, "push consumer caught up", func() bool { return rec.total.Load() == 50 })
	testwait.For(t, testwait.Wall, 5*time.Second, "the push consumer's pulls held at the broker", func() bool { return b.Held("T") == 4 })

	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	pc.Close()
	p.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("closing took %v", d)
	}
	<-pullDone
	testwait.For(t, testwait.Wall, 5*time.Second, fmt.Sprintf("client goroutines back to %d", base), func() bool {
		return clientGoroutines() <= base
	})
}

func TestHeartbeatOnConnect(t *testing.T) {
	b := brokertest.Start(t)
	c, err := NewPullConsumer(b.Addr(), "G")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	testwait.For(t, testwait.Wall, 5*time.Second, "heartbeat", func() bool { return b.Heartbeats() >= 1 })
}

func TestFrameLimits(t *testing.T) {
	b := brokertest.Start(t)
	b.CreateTopic("T", 1)
	ctx := testCtx(t)
	lim := protocol.DefaultLimits()
	lim.MaxFrameSize = 4096
	p := newProducer(t, b, WithLimits(lim), WithRetries(0))
	// A request above the frame limit never leaves the client.
	if _, err := p.Send(ctx, &protocol.Message{Topic: "T", Body: make([]byte, 8192)}); !errors.Is(err, protocol.ErrFrameTooLarge) {
		t.Fatalf("oversized request: %v", err)
	}
	if n := b.Count(protocol.CodeSendMessage); n != 0 {
		t.Fatalf("%d sends reached the broker", n)
	}
	big := newProducer(t, b)
	if _, err := big.Send(ctx, &protocol.Message{Topic: "T", Body: make([]byte, 8192)}); err != nil {
		t.Fatal(err)
	}
	// A response above the limit ends the connection before it is buffered.
	b.WaitDispatched()
	pc, err := NewPullConsumer(b.Addr(), "G", WithLimits(lim))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	_, err = pc.Pull(ctx, "T", 0, 0, 1, PullOptions{})
	if !errors.Is(err, ErrBrokerUnavailable) || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("oversized response: %v", err)
	}
}

func TestSendAsyncTimeoutConnectionLossAndVolume(t *testing.T) {
	collect := func(t *testing.T, p *Producer, n int, opts ...SendOption) (chan error, chan SendResult) {
		errs := make(chan error, n)
		results := make(chan SendResult, n)
		for i := range n {
			p.SendAsync(testCtx(t), msg("T", fmt.Sprint(i)), func(r SendResult, err error) {
				results <- r
				errs <- err
			}, opts...)
		}
		return errs, results
	}
	wait := func(t *testing.T, errs chan error, n int, within time.Duration, check func(error) bool, want string) {
		t.Helper()
		deadline := time.After(within)
		for i := range n {
			select {
			case err := <-errs:
				if !check(err) {
					t.Fatalf("callback %d: %v, want %s", i, err, want)
				}
			case <-deadline:
				t.Fatalf("%d of %d callbacks within %v", i, n, within)
			}
		}
	}
	t.Run("timeout", func(t *testing.T) {
		b := brokertest.Start(t)
		b.CreateTopic("T", 2)
		b.SetStall(protocol.CodeSendMessage, true)
		p := newProducer(t, b, WithRetries(2), WithTimeout(150*time.Millisecond))
		start := time.Now()
		errs, _ := collect(t, p, 10, ToQueue(0))
		wait(t, errs, 10, 5*time.Second, func(err error) bool {
			return errors.Is(err, ErrTimeout) && errors.Is(err, context.DeadlineExceeded)
		}, "ErrTimeout")
		if d := time.Since(start); d < 150*time.Millisecond {
			t.Errorf("timed out after %v, before the 150 ms timeout", d)
		}
		if n := b.Count(protocol.CodeSendMessage); n != 10 {
			t.Errorf("%d sends reached the broker, want 10 (a timed-out send may be stored: never resent)", n)
		}
	})
	t.Run("connection lost", func(t *testing.T) {
		b := brokertest.Start(t)
		b.CreateTopic("T", 2)
		b.SetStall(protocol.CodeSendMessage, true)
		p := newProducer(t, b, WithRetries(0), WithTimeout(time.Minute))
		errs, _ := collect(t, p, 10, ToQueue(1))
		testwait.For(t, testwait.Wall, 5*time.Second, "sends reach the broker", func() bool { return b.Count(protocol.CodeSendMessage) == 10 })
		b.DropConns()
		wait(t, errs, 10, 5*time.Second, func(err error) bool { return errors.Is(err, ErrBrokerUnavailable) }, "ErrBrokerUnavailable")
	})
	t.Run("volume", func(t *testing.T) {
		b := brokertest.Start(t)
		b.CreateTopic("T", 4)
		p := newProducer(t, b)
		if _, err := p.Send(testCtx(t), msg("T", "route")); err != nil { // fetches the route
			t.Fatal(err)
		}
		const n = 2000
		errs, results := collect(t, p, n)
		wait(t, errs, n, 30*time.Second, func(err error) bool { return err == nil }, "success")
		seen := map[[2]int64]bool{}
		for range n {
			r := <-results
			k := [2]int64{int64(r.QueueID), r.QueueOffset}
			if r.MsgID == "" || r.QueueID < 0 || seen[k] {
				t.Fatalf("result %+v: no id, no queue, or a queue offset given twice", r)
			}
			seen[k] = true
		}
		if got := b.Total("T"); got != n+1 {
			t.Errorf("broker stored %d, want %d", got, n+1)
		}
	})
}
