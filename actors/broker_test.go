package actors

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/internal/vtime"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
	"github.com/wharfmq/wharf/storage/vfs"
)

// The broker in these tests runs on virtual time: its mailboxes, timers
// and blocking I/O are all work on one vtime.Loop, stepped by the test on
// its own goroutine, so a test is deterministic and a wait for a timeout
// takes no wall time.

// testEpoch is virtual time zero of the tests.
var testEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// loopEnv completes env with loop's clock, dispatcher and I/O (each only
// where env has none).
func loopEnv(loop *vtime.Loop[vtime.None], env Env) Env {
	if env.Clock == nil {
		env.Clock = &vtime.Clock[vtime.None]{L: loop}
	}
	if env.Dispatcher == nil {
		env.Dispatcher = &vtime.Dispatcher[vtime.None]{L: loop}
	}
	if env.RunIO == nil {
		env.RunIO = loop.RunIO
	}
	return env
}

// fakeConn collects the broker's responses by opaque.
type fakeConn struct {
	id     uint64
	loop   *vtime.Loop[vtime.None] // the broker's: waits step it
	mu     sync.Mutex
	resp   map[uint32]*protocol.Frame
	order  []uint32 // opaques in the order answered
	closed atomic.Bool
}

func newConn(loop *vtime.Loop[vtime.None]) *fakeConn {
	return &fakeConn{id: 1, loop: loop, resp: map[uint32]*protocol.Frame{}}
}
func (c *fakeConn) ID() uint64                { return c.id }
func (c *fakeConn) RemoteAddr() string        { return "127.0.0.1:5555" }
func (c *fakeConn) Close(reason string)       { c.closed.Store(true) }
func (c *fakeConn) Reply(r Response)          { c.write(encodeForTest(&r)) }
func (c *fakeConn) Send(req protocol.Request) {}

// encodeForTest encodes a typed answer as Wharf's codec does (actors may
// not import netio, which holds it): records become messages.
func encodeForTest(r *Response) []byte {
	fields := r.Fields
	if r.Records != nil {
		var msgs []protocol.MessageExt
		for _, raw := range r.Records.Raw {
			rec, err := storage.DecodeRecord(raw, true)
			if err != nil {
				panic(err)
			}
			msgs = append(msgs, recordToExt(&rec))
		}
		switch r.Records.Kind {
		case RecordsPull:
			p := *r.Records.Pull
			p.Messages = msgs
			fields = &p
		case RecordsQuery:
			fields = &protocol.QueryMessageResponse{Messages: msgs}
		case RecordsView:
			fields = &protocol.ViewMessageResponse{Message: msgs[0]}
		}
	}
	frame, err := protocol.AppendResponse(nil, r.Code, r.Opaque, r.Status, r.Remark, fields)
	if err != nil {
		panic(err)
	}
	return frame
}

func (c *fakeConn) write(frame []byte) {
	f, err := protocol.DecodeFrame(frame[:], protocol.DefaultLimits())
	if err != nil {
		panic(err)
	}
	c.mu.Lock()
	c.resp[f.Opaque] = f
	c.order = append(c.order, f.Opaque)
	c.mu.Unlock()
}

// await runs the broker until the response to opaque arrives, failing if
// it has not within timeout of virtual time.
func (c *fakeConn) await(t *testing.T, opaque uint32, timeout time.Duration) *protocol.Frame {
	t.Helper()
	if !c.loop.RunUntil(func() bool { return c.has(opaque) }, timeout) {
		t.Fatalf("no response to request %d within %v", opaque, timeout)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.resp[opaque]
}

func (c *fakeConn) has(opaque uint32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.resp[opaque] != nil
}

type harness struct {
	t     *testing.T
	loop  *vtime.Loop[vtime.None]
	b     *Broker
	conn  *fakeConn
	next  uint32
	store *storage.Store
	gens  map[string]int64 // group generation each test member applied
}

func testStoreConfig() storage.Config {
	cfg := storage.DefaultConfig("/s")
	cfg.MappedFileSizeCommitLog = 64 << 10
	cfg.MappedFileSizeConsumeQueue = 64
	cfg.MaxMessageSize = 16 << 10
	cfg.MaxHashSlotNum = 64
	cfg.MaxIndexNum = 256
	cfg.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	return cfg
}

func startBroker(t *testing.T, fsys vfs.FS, mut func(*Config)) *harness {
	t.Helper()
	return startBrokerEnv(t, fsys, mut, Env{})
}

// startBrokerEnv starts a broker with env, on a new loop's clock,
// dispatcher and I/O where env has none.
func startBrokerEnv(t *testing.T, fsys vfs.FS, mut func(*Config), env Env) *harness {
	t.Helper()
	cfg := DefaultConfig()
	cfg.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	cfg.FlushIntervalCommitLog = 10 * time.Millisecond
	cfg.FlushIntervalConsumeQueue = 20 * time.Millisecond
	if mut != nil {
		mut(&cfg)
	}
	return startAt(t, fsys, cfg, vtime.NewFIFO(testEpoch), env)
}

// startAt starts a broker with cfg on loop.
func startAt(t *testing.T, fsys vfs.FS, cfg Config, loop *vtime.Loop[vtime.None], env Env) *harness {
	t.Helper()
	scfg := testStoreConfig()
	scfg.DispatchConfirmedOnly = cfg.EnableControllerMode
	st, _, err := storage.Open(fsys, scfg)
	if err != nil {
		t.Fatal(err)
	}
	b := New(cfg, loopEnv(loop, env), st, protocol.DefaultLimits())
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, loop: loop, b: b, conn: newConn(loop), store: st, gens: map[string]int64{}}
	t.Cleanup(func() { _ = h.stop() }) // a test may have failed the disk
	return h
}

// stop is Broker.Stop driven by the loop: each actor is poisoned and the
// loop stepped until it is gone. It returns the store's close error.
func (h *harness) stop() error {
	h.t.Helper()
	return h.b.stop(func(pid *actor.PID) {
		h.b.sys.Root.Poison(pid)
		gone := func() bool { _, ok := h.b.sys.ProcessRegistry.GetLocal(pid.Id); return !ok }
		if !h.loop.RunUntil(gone, time.Minute) {
			h.t.Errorf("actor %s did not stop", pid.Id)
		}
	})
}

// send delivers requests as one burst and returns their opaques.
func (h *harness) send(reqs ...protocol.Request) []uint32 {
	h.t.Helper()
	in := &Inbound{Conn: h.conn}
	var ops []uint32
	for _, r := range reqs {
		h.next++
		buf, err := protocol.AppendRequest(nil, h.next, 0, r)
		if err != nil {
			h.t.Fatal(err)
		}
		f, err := protocol.DecodeFrame(buf[:], protocol.DefaultLimits())
		if err != nil {
			h.t.Fatal(err)
		}
		in.Frames = append(in.Frames, f)
		ops = append(ops, h.next)
	}
	h.b.Deliver(in)
	return ops
}

func sendReq(topic string, q int32, body string, keys ...string) *protocol.SendRequest {
	r := &protocol.SendRequest{Topic: topic, QueueID: q, Body: []byte(body), BornTimestamp: 1}
	if len(keys) > 0 {
		m := r.Message()
		m.SetKeys(keys...)
		r.Properties = m.Properties
	}
	return r
}

func (h *harness) ok(opaque uint32, into protocol.Fields) *protocol.Frame {
	h.t.Helper()
	f := h.conn.await(h.t, opaque, 5*time.Second)
	if f.Status != protocol.StatusOK {
		h.t.Fatalf("request %d: status %v %q", opaque, f.Status, f.Remark)
	}
	if into != nil {
		if err := protocol.DecodeResponse(f, protocol.DefaultLimits(), into); err != nil {
			h.t.Fatal(err)
		}
	}
	return f
}

func TestSendPullQuery(t *testing.T) {
	for _, mode := range []FlushDiskType{AsyncFlush, SyncFlush} {
		t.Run(string(mode), func(t *testing.T) {
			h := startBroker(t, vfs.NewMem(), func(c *Config) { c.FlushDiskType = mode })
			var reqs []protocol.Request
			for i := 0; i < 20; i++ {
				reqs = append(reqs, sendReq("orders", int32(i%2), fmt.Sprintf("m%d", i), fmt.Sprintf("key%d", i)))
			}
			ops := h.send(reqs...)
			for i, op := range ops {
				var r protocol.SendResponse
				h.ok(op, &r)
				if r.QueueID != int32(i%2) || r.QueueOffset != int64(i/2) {
					t.Fatalf("send %d: queue %d offset %d", i, r.QueueID, r.QueueOffset)
				}
			}
			op := h.send(&protocol.PullRequest{ConsumerGroup: "g", Topic: "orders", QueueID: 1, MaxMsgNums: 32, SuspendTimeoutMillis: 1000})[0]
			var pr protocol.PullResponse
			h.ok(op, &pr)
			if len(pr.Messages) != 10 || pr.NextBeginOffset != 10 || string(pr.Messages[3].Body) != "m7" {
				t.Fatalf("pull: %d messages, next %d", len(pr.Messages), pr.NextBeginOffset)
			}
			op = h.send(&protocol.QueryMessageRequest{Topic: "orders", Key: "key7", MaxNum: 4})[0]
			var qr protocol.QueryMessageResponse
			h.ok(op, &qr)
			if len(qr.Messages) != 1 || string(qr.Messages[0].Body) != "m7" {
				t.Fatalf("query: %+v", qr.Messages)
			}
			op = h.send(&protocol.ViewMessageRequest{MsgID: qr.Messages[0].MsgID})[0]
			var vr protocol.ViewMessageResponse
			h.ok(op, &vr)
			if string(vr.Message.Body) != "m7" {
				t.Fatalf("view: %q", vr.Message.Body)
			}
			// Offsets are published as queues dispatch: poll, bounded.
			var or protocol.OffsetResponse
			if !testwait.Until(h.loop, 3*time.Second, func() bool {
				h.ok(h.send(&protocol.GetMaxOffsetRequest{Topic: "orders", QueueID: 0})[0], &or)
				return or.Offset == 10
			}) {
				t.Fatalf("max offset %d", or.Offset)
			}
		})
	}
}

// TestHarnessIsDeterministic: the same requests on two fresh brokers are
// answered in the same order after the same steps of the loop, at the same
// virtual time: every mailbox run, timer and I/O job goes through the loop.
func TestHarnessIsDeterministic(t *testing.T) {
	run := func() string {
		h := startBroker(t, vfs.NewMem(), func(c *Config) { c.FlushDiskType = SyncFlush })
		var ops []uint32
		for i := range 20 {
			ops = append(ops, h.send(sendReq("t", int32(i%4), fmt.Sprint(i)))...)
		}
		ops = append(ops, h.send(&protocol.PullRequest{ConsumerGroup: "g", Topic: "t", QueueID: 1, QueueOffset: 5, MaxMsgNums: 8, SuspendTimeoutMillis: 500})...)
		ops = append(ops, h.send(sendReq("t", 2, "last"))...)
		for _, op := range ops {
			h.conn.await(t, op, 3*time.Second)
		}
		h.loop.Advance(time.Second)
		return fmt.Sprintf("answers %v after %d steps at %v", h.conn.order, h.loop.Steps(), h.loop.Now().Sub(testEpoch))
	}
	if a, b := run(), run(); a != b {
		t.Fatalf("two runs differ:\n%s\n%s", a, b)
	}
}

func TestLongPoll(t *testing.T) {
	h := startBroker(t, vfs.NewMem(), nil)
	// A pull of a topic that does not exist is answered at once (see
	// TestReadChecks): long polling needs the topic.
	h.ok(h.send(&protocol.CreateTopicRequest{TopicConfig: protocol.TopicConfig{Topic: "t", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}})[0], nil)
	start := h.loop.Now()
	op := h.send(&protocol.PullRequest{ConsumerGroup: "g", Topic: "t", QueueID: 0, QueueOffset: 0, MaxMsgNums: 8, SuspendTimeoutMillis: 300})[0]
	f := h.conn.await(t, op, 3*time.Second)
	if held := h.loop.Now().Sub(start); f.Status != protocol.StatusPullNotFound || held < 300*time.Millisecond {
		t.Fatalf("empty pull: %v after %v", f.Status, held)
	}
	op = h.send(&protocol.PullRequest{ConsumerGroup: "g", Topic: "t", QueueID: 0, QueueOffset: 0, MaxMsgNums: 8, SuspendTimeoutMillis: 10000})[0]
	h.loop.Advance(5 * time.Second)
	if h.conn.has(op) {
		t.Fatal("pull on an empty queue answered before a message arrived")
	}
	sent := h.loop.Now()
	h.send(sendReq("t", 0, "hello"))
	var pr protocol.PullResponse
	h.ok(op, &pr)
	if len(pr.Messages) != 1 || h.loop.Now().Sub(sent) > 100*time.Millisecond {
		t.Fatalf("held pull: %d messages after %v", len(pr.Messages), h.loop.Now().Sub(sent))
	}
}

// seeingConn is a producer's connection that, when the broker writes an
// answer to it, runs the work already scheduled (nothing later: no virtual
// time passes) and records whether that answered the pull op on other.
type seeingConn struct {
	*fakeConn
	other *fakeConn
	op    uint32
	seen  []bool // per answer written to this connection
}

func (c *seeingConn) Reply(r Response) {
	c.seen = append(c.seen, c.loop.RunUntil(func() bool { return c.other.has(c.op) }, 0))
	c.fakeConn.Reply(r)
}

// TestConsumersToldBeforeAnswers: under ASYNC_FLUSH the writer tells the
// Reput actor of an append before it writes the sends' answers, so that a
// held pull is answered (on another worker) while the answers are written,
// not after them (e2e-10k's latency).
func TestConsumersToldBeforeAnswers(t *testing.T) {
	h := startBroker(t, vfs.NewMem(), nil)
	h.ok(h.send(&protocol.CreateTopicRequest{TopicConfig: protocol.TopicConfig{Topic: "t", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}})[0], nil)
	op := h.send(&protocol.PullRequest{ConsumerGroup: "g", Topic: "t", QueueID: 0, QueueOffset: 0, MaxMsgNums: 8, SuspendTimeoutMillis: 10000})[0]
	h.loop.Advance(time.Second)
	if h.conn.has(op) {
		t.Fatal("pull on an empty queue answered before a message arrived")
	}
	pc := &seeingConn{fakeConn: newConn(h.loop), other: h.conn, op: op}
	pc.id = 2
	buf, err := protocol.AppendRequest(nil, 1, 0, sendReq("t", 0, "hello"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := protocol.DecodeFrame(buf, protocol.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	h.b.Deliver(&Inbound{Conn: pc, Frames: []*protocol.Frame{f}})
	if st := pc.await(t, 1, time.Second).Status; st != protocol.StatusOK {
		t.Fatalf("send: %v", st)
	}
	if len(pc.seen) != 1 || !pc.seen[0] {
		t.Fatalf("held pull answerable when the send's answer was written: %v; want [true] (the Reput actor told first)", pc.seen)
	}
	var pr protocol.PullResponse
	h.ok(op, &pr)
	if len(pr.Messages) != 1 {
		t.Fatalf("held pull: %d messages, want 1", len(pr.Messages))
	}
}

// TestSyncFlushNeverAcksUnflushed: with fsync stalled beyond
// syncFlushTimeout, sends get FLUSH_DISK_TIMEOUT, and with fsync failing they
// never get OK.
func TestSyncFlushNeverAcksUnflushed(t *testing.T) {
	// A stalled disk holds every blocking job (the fsync among them) until
	// the test lets it go, on which the fsync fails.
	var stalled, failing bool
	var held []func()
	inj := vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpSyncRange && failing {
			return errors.New("EIO: device gone")
		}
		return nil
	})
	var h *harness
	runIO := func(fn func()) {
		if stalled {
			held = append(held, fn)
			return
		}
		h.loop.RunIO(fn)
	}
	h = startBrokerEnv(t, vfs.NewFaulty(vfs.NewMem(), inj), func(c *Config) {
		c.FlushDiskType = SyncFlush
		c.SyncFlushTimeout = 200 * time.Millisecond
	}, Env{RunIO: runIO})
	h.ok(h.send(sendReq("t", 0, "before"))[0], nil)
	stalled = true
	start := h.loop.Now()
	op := h.send(sendReq("t", 0, "stalled"))[0]
	f := h.conn.await(t, op, 3*time.Second)
	if waited := h.loop.Now().Sub(start); f.Status != protocol.StatusFlushDiskTimeout || waited < 200*time.Millisecond {
		t.Fatalf("stalled flush: %v after %v", f.Status, waited)
	}
	// Stored, though unconfirmed: the answer names the message.
	var res protocol.SendResponse
	if err := protocol.DecodeResponse(f, protocol.DefaultLimits(), &res); err != nil || res.MsgID == "" || res.QueueOffset != 1 {
		t.Errorf("FLUSH_DISK_TIMEOUT answer = %+v, %v; want the stored message's id and offset 1", res, err)
	}
	if len(held) == 0 {
		t.Fatal("no fsync was stalled")
	}
	stalled, failing = false, true // the fsync now fails
	for _, fn := range held {
		h.loop.RunIO(fn)
	}
	op = h.send(sendReq("t", 0, "after failure"))[0]
	f = h.conn.await(t, op, 3*time.Second)
	if f.Status == protocol.StatusOK {
		t.Fatal("a send after a failed fsync was acknowledged")
	}
}

// TestWriterPanicRestarts: a panicking writer is restarted and acknowledged
// data stays readable.
func TestWriterPanicRestarts(t *testing.T) {
	h := startBroker(t, vfs.NewMem(), nil)
	h.ok(h.send(sendReq("t", 0, "one"))[0], nil)
	h.b.sys.Root.Send(h.b.p.writer, &panicForTest{})
	h.ok(h.send(sendReq("t", 0, "two"))[0], nil)
	op := h.send(&protocol.PullRequest{ConsumerGroup: "g", Topic: "t", QueueID: 0, MaxMsgNums: 8})[0]
	var pr protocol.PullResponse
	h.ok(op, &pr)
	if len(pr.Messages) != 2 {
		t.Fatalf("after restart: %d messages", len(pr.Messages))
	}
}

// An actor that keeps panicking is not silently stopped: beyond its
// restart budget (10 a minute) the broker reports a fatal error.
func TestWriterPanickingForGoodIsFatal(t *testing.T) {
	var fatal []error
	h := startBrokerEnv(t, vfs.NewMem(), nil, Env{Fatal: func(err error) { fatal = append(fatal, err) }})
	for i := 0; i < 10; i++ {
		h.b.sys.Root.Send(h.b.p.writer, &panicForTest{})
		h.loop.Advance(time.Second)
	}
	if len(fatal) != 0 {
		t.Fatalf("10 panics within a minute, within the budget, were fatal: %v", fatal)
	}
	h.b.sys.Root.Send(h.b.p.writer, &panicForTest{})
	if !h.loop.RunUntil(func() bool { return len(fatal) > 0 }, 10*time.Second) {
		t.Fatal("11 panics within a minute and no fatal error")
	}
	if !strings.Contains(fatal[0].Error(), "writer") {
		t.Fatalf("fatal error does not name the actor: %v", fatal[0])
	}
}

func TestTopicsAndOffsets(t *testing.T) {
	h := startBroker(t, vfs.NewMem(), func(c *Config) { c.AutoCreateTopicEnable = false })
	f := h.conn.await(t, h.send(sendReq("nope", 0, "x"))[0], 2*time.Second)
	if f.Status != protocol.StatusTopicNotExist {
		t.Fatalf("send to a missing topic: %v", f.Status)
	}
	h.ok(h.send(&protocol.CreateTopicRequest{TopicConfig: protocol.TopicConfig{Topic: "t", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}})[0], nil)
	f = h.conn.await(t, h.send(&protocol.CreateTopicRequest{TopicConfig: protocol.TopicConfig{Topic: "t", ReadQueueNums: 2, WriteQueueNums: 2}})[0], 2*time.Second)
	if f.Status != protocol.StatusTopicExistAlready {
		t.Fatalf("create twice: %v", f.Status)
	}
	h.ok(h.send(sendReq("t", 1, "x"))[0], nil)
	f = h.conn.await(t, h.send(sendReq("t", 2, "x"))[0], 2*time.Second)
	if f.Status != protocol.StatusInvalidParameter {
		t.Fatalf("send to queue 2 of 2: %v", f.Status)
	}
	var lr protocol.TopicListResponse
	h.ok(h.send(&protocol.ListTopicsRequest{})[0], &lr)
	if len(lr.Topics) != 1 || lr.Topics[0].Topic != "t" {
		t.Fatalf("list: %+v", lr.Topics)
	}
	h.ok(h.send(&protocol.UpdateConsumerOffsetRequest{ConsumerGroup: "g", Topic: "t", QueueID: 1, CommitOffset: 1})[0], nil)
	var or protocol.OffsetResponse
	h.ok(h.send(&protocol.QueryConsumerOffsetRequest{ConsumerGroup: "g", Topic: "t", QueueID: 1})[0], &or)
	if or.Offset != 1 {
		t.Fatalf("committed offset %d", or.Offset)
	}
	h.ok(h.send(&protocol.DeleteTopicRequest{Topic: "t"})[0], nil)
	f = h.conn.await(t, h.send(sendReq("t", 0, "x"))[0], 2*time.Second)
	if f.Status != protocol.StatusTopicNotExist {
		t.Fatalf("send to a deleted topic: %v", f.Status)
	}
}
