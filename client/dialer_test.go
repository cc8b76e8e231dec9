package client

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// pipeBroker answers a producer over net.Pipe connections handed out by
// its dial, the WithDialer seam: no socket anywhere. It knows one topic T
// with two write queues and answers SENDs with the statuses of sends in
// order (then SUCCESS).
type pipeBroker struct {
	wg sync.WaitGroup // serve goroutines

	mu     sync.Mutex
	dials  []string          // "network addr" of every dial
	sends  []protocol.Status // answers to the next SENDs
	queues []int32           // queue of every SEND received
	lists  int               // GET_ALL_TOPIC_CONFIG requests received
	// holdLists, if set, holds every topic list's answer until it is
	// closed (the connection goes on answering other requests).
	holdLists chan struct{}
}

func newPipeBroker(t *testing.T, sends ...protocol.Status) *pipeBroker {
	b := &pipeBroker{sends: sends}
	t.Cleanup(b.wg.Wait) // after the client's Close (cleanups run last first)
	return b
}

func (b *pipeBroker) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	b.mu.Lock()
	b.dials = append(b.dials, network+" "+addr)
	b.mu.Unlock()
	client, server := net.Pipe()
	b.wg.Add(1)
	go b.serve(server)
	return client, nil
}

// serve answers the frames of one connection until the client closes it.
func (b *pipeBroker) serve(nc net.Conn) {
	defer b.wg.Done()
	defer nc.Close()
	lim := protocol.DefaultLimits()
	br := bufio.NewReader(nc)
	var wmu sync.Mutex // held answers are written from goroutines of their own
	write := func(out []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		_, err := nc.Write(out)
		return err
	}
	for {
		var prefix [4]byte
		if _, err := io.ReadFull(br, prefix[:]); err != nil {
			return
		}
		frame := make([]byte, 4+binary.BigEndian.Uint32(prefix[:]))
		copy(frame, prefix[:])
		if _, err := io.ReadFull(br, frame[4:]); err != nil {
			return
		}
		f, err := protocol.DecodeFrame(frame, lim)
		if err != nil {
			return
		}
		req, err := protocol.DecodeRequest(f, lim)
		if err != nil {
			return
		}
		st, remark, fields := b.answer(req)
		out, err := protocol.AppendResponse(nil, f.Code, f.Opaque, st, remark, fields)
		if err != nil {
			panic(err)
		}
		b.mu.Lock()
		hold := b.holdLists
		b.mu.Unlock()
		if hold != nil && f.Code == protocol.CodeGetAllTopicConfig {
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				<-hold
				_ = write(out) // a closed pipe: the client is gone
			}()
			continue
		}
		if err := write(out); err != nil {
			return
		}
	}
}

// answer is the status, remark and fields of the answer to req.
func (b *pipeBroker) answer(req protocol.Request) (protocol.Status, string, protocol.Fields) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch r := req.(type) {
	case *protocol.HeartbeatRequest:
		return protocol.StatusOK, "", nil
	case *protocol.SendRequest:
		b.queues = append(b.queues, r.QueueID)
		st := protocol.StatusOK
		if len(b.sends) > 0 {
			st, b.sends = b.sends[0], b.sends[1:]
		}
		if !st.Stored() {
			return st, "scripted", nil
		}
		return st, "", &protocol.SendResponse{MsgID: "m", QueueID: r.QueueID, QueueOffset: int64(len(b.queues))}
	}
	if req.RequestCode() == protocol.CodeGetAllTopicConfig {
		b.lists++
		return protocol.StatusOK, "", &protocol.TopicListResponse{Topics: []protocol.TopicConfig{
			{Topic: "T", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6},
		}}
	}
	return protocol.StatusRequestCodeNotSupported, "", nil
}

// TestWithDialerCarriesTheProducer: every byte of a producer's sends,
// retries included, goes through the dialer's connections.
func TestWithDialerCarriesTheProducer(t *testing.T) {
	b := newPipeBroker(t, protocol.StatusSystemBusy)
	p, err := NewProducer("in-memory:1", WithDialer(b.dial), WithRetryBackoff(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	ctx := testCtx(t)
	for i, wantQueue := range []int32{1, 0} { // the busy attempt took queue 0
		res, err := p.Send(ctx, msg("T", "x"))
		if err != nil || res.Status != protocol.StatusOK || res.QueueID != wantQueue {
			t.Fatalf("send %d: %+v, %v; want stored in queue %d", i, res, err, wantQueue)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !slices.Equal(b.dials, []string{"tcp in-memory:1"}) {
		t.Errorf("dials = %q, want one to in-memory:1", b.dials)
	}
	if !slices.Equal(b.queues, []int32{0, 1, 0}) {
		t.Errorf("SENDs went to queues %v, want [0 1 0] (round robin, the retry included)", b.queues)
	}
}

// TestWithDialerFailure: a dialer's error is the broker's unavailability,
// and the dialer gets the dial timeout as its context's deadline.
func TestWithDialerFailure(t *testing.T) {
	refused := errors.New("refused by the test's dialer")
	var deadline time.Time
	var hasDeadline bool
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		deadline, hasDeadline = ctx.Deadline()
		return nil, refused
	}
	start := time.Now()
	_, err := NewProducer("in-memory:2", WithDialer(dial), WithDialTimeout(time.Minute))
	if !errors.Is(err, ErrBrokerUnavailable) || !errors.Is(err, refused) {
		t.Errorf("NewProducer: %v, want ErrBrokerUnavailable wrapping the dialer's error", err)
	}
	if !hasDeadline || deadline.Before(start.Add(time.Minute)) || deadline.After(time.Now().Add(time.Minute)) {
		t.Errorf("the dialer's context deadline %v (%v), want the dial timeout from now", deadline, hasDeadline)
	}
	nilConn := func(context.Context, string, string) (net.Conn, error) { return nil, nil }
	if _, err := NewProducer("in-memory:3", WithDialer(nilConn)); !errors.Is(err, ErrBrokerUnavailable) {
		t.Errorf("NewProducer with a dialer that returns no connection: %v, want ErrBrokerUnavailable", err)
	}
}

// TestFirstSendsShareTheRouteFetch: sends started together on a new
// producer fetch the topic's route once, not once each.
func TestFirstSendsShareTheRouteFetch(t *testing.T) {
	b := newPipeBroker(t)
	b.holdLists = make(chan struct{})
	p, err := NewProducer("in-memory:1", WithDialer(b.dial))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	ctx := testCtx(t)
	const n = 16
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := p.Send(ctx, msg("T", "x"))
			errs <- err
		}()
	}
	testwait.For(t, testwait.Wall, 10*time.Second, "every send fetching or waiting for the route", func() bool {
		b.mu.Lock()
		lists := b.lists
		b.mu.Unlock()
		p.mu.Lock()
		joined := p.joined
		p.mu.Unlock()
		return lists+joined == n
	})
	close(b.holdLists)
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lists != 1 || len(b.queues) != n {
		t.Fatalf("%d topic list requests and %d sends for %d sends started together; want 1 and %d", b.lists, len(b.queues), n, n)
	}
}
