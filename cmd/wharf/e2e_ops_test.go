package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// TestE2ETopicsTagsQueriesOffsets runs against a broker with
// autoCreateTopicEnable=false: topic admin (create, list, update, delete,
// sends to missing topics), tag filtering for push and pull consumers,
// queries by key, UNIQ_KEY and message id, and consumer offsets that
// survive a clean restart (SIGTERM: exit 0, no abort file) and a kill -9.
func TestE2ETopicsTagsQueriesOffsets(t *testing.T) {
	t.Parallel()
	b := startBroker(t, t.TempDir(), "--autoCreateTopicEnable=false")
	ctx := e2eCtx(t, 60*time.Second)
	a := e2eAdmin(t, b.addr)

	t.Run("topic admin", func(t *testing.T) {
		if err := a.CreateTopic(ctx, protocol.TopicConfig{Topic: "admin", ReadQueueNums: 4, WriteQueueNums: 4}); err != nil {
			t.Fatal(err)
		}
		if err := a.CreateTopic(ctx, protocol.TopicConfig{Topic: "admin"}); !errors.Is(err, client.ErrTopicExist) {
			t.Fatalf("creating an existing topic: %v, want ErrTopicExist", err)
		}
		topics, err := a.ListTopics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(topics, func(tc protocol.TopicConfig) bool { return tc.Topic == "admin" })
		if i < 0 || topics[i].ReadQueueNums != 4 || topics[i].WriteQueueNums != 4 || topics[i].Perm != protocol.PermRead|protocol.PermWrite {
			t.Fatalf("topic list %+v: want admin with 4/4 queues, perm 6", topics)
		}
		if err := a.UpdateTopic(ctx, protocol.TopicConfig{Topic: "admin", ReadQueueNums: 4, WriteQueueNums: 2, Perm: protocol.PermRead | protocol.PermWrite}); err != nil {
			t.Fatal(err)
		}
		if tc, err := a.GetTopic(ctx, "admin"); err != nil || tc.WriteQueueNums != 2 || tc.ReadQueueNums != 4 {
			t.Fatalf("after update: %+v %v", tc, err)
		}
		p := e2eProducer(t, b.addr)
		res, err := p.Send(ctx, e2eMessage("admin", "admin-1"))
		if err != nil || res.QueueID >= 2 {
			t.Fatalf("send to the 2 write queues: queue %d, %v", res.QueueID, err)
		}
		// PROTOCOL.md (7.1, 9) documents INVALID_PARAMETER for a queueId out
		// of range; the broker answers MESSAGE_ILLEGAL (actors/writer.go,
		// pinned by actors.TestTopicsAndOffsets). Either refuses the send.
		if _, err := p.Send(ctx, e2eMessage("admin", "admin-2"), client.ToQueue(3)); !errorsIsAny(err, client.ErrInvalidParameter, client.ErrMessageIllegal) {
			t.Errorf("send to read-only queue 3 of 2 write queues: %v, want INVALID_PARAMETER or MESSAGE_ILLEGAL", err)
		}
		if err := a.DeleteTopic(ctx, "admin"); err != nil {
			t.Fatal(err)
		}
		if err := a.DeleteTopic(ctx, "admin"); !errors.Is(err, client.ErrTopicNotExist) {
			t.Errorf("deleting a deleted topic: %v, want ErrTopicNotExist", err)
		}
		topics, err = a.ListTopics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(topics, func(tc protocol.TopicConfig) bool { return tc.Topic == "admin" }) {
			t.Fatalf("deleted topic still listed: %+v", topics)
		}
		// The producer above cached the route; both it and a new one must
		// get TOPIC_NOT_EXIST.
		for _, p := range []*client.Producer{p, e2eProducer(t, b.addr)} {
			if _, err := p.Send(ctx, e2eMessage("admin", "admin-3")); !errors.Is(err, client.ErrTopicNotExist) {
				t.Errorf("send to a deleted topic (autoCreateTopicEnable=false): %v, want ErrTopicNotExist", err)
			}
		}
		if _, err := p.Send(ctx, e2eMessage("never-created", "x")); !errors.Is(err, client.ErrTopicNotExist) {
			t.Errorf("send to an unknown topic (autoCreateTopicEnable=false): %v, want ErrTopicNotExist", err)
		}
	})

	// Tagged messages: tag a, b, c or none, 40 of each, over 4 queues.
	const tagged = "tagged"
	e2eCreateTopic(t, ctx, a, tagged, 4)
	p := e2eProducer(t, b.addr)
	wantTags := map[string]string{} // key -> tag
	var lastRes client.SendResult
	var lastKey string
	for i := range 160 {
		key := fmt.Sprintf("tag-%03d", i)
		m := e2eMessage(tagged, key)
		if tag := []string{"a", "b", "c", ""}[i%4]; tag != "" {
			m.SetTags(tag)
			wantTags[key] = tag
		}
		res, err := p.Send(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		lastRes, lastKey = res, key
	}

	t.Run("tag filtering", func(t *testing.T) {
		var mu sync.Mutex
		got := map[string]string{}
		var n atomic.Int64
		c, err := client.NewPushConsumer(b.addr, "tags-ab", client.WithConsumeFrom(client.ConsumeFromFirst), client.WithPullSuspend(500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		err = c.Subscribe(tagged, "a || b", func(_ context.Context, msgs []*protocol.MessageExt) client.ConsumeResult {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				got[m.Keys()[0]] = m.Tags()
			}
			n.Add(int64(len(msgs)))
			return client.ConsumeSuccess
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		testwait.Until(testwait.Wall, 10*time.Second, func() bool { return n.Load() >= 80 })
		// Room for anything that should not come (the wait ends early if
		// it does, and the count below fails the test).
		testwait.Until(testwait.Wall, 300*time.Millisecond, func() bool { return n.Load() > 80 })
		c.Close()
		mu.Lock()
		defer mu.Unlock()
		if n.Load() != 80 || len(got) != 80 {
			t.Errorf("subscription \"a || b\" got %d deliveries of %d keys, want 80", n.Load(), len(got))
		}
		for k, tag := range got {
			if tag != "a" && tag != "b" || wantTags[k] != tag {
				t.Errorf("subscription \"a || b\" got %s with tag %q", k, tag)
			}
		}
		// A pull consumer with the same expression, queue by queue.
		pc := e2ePuller(t, b.addr, "tags-pull")
		count := 0
		for q := range int32(4) {
			off := int64(0)
			for {
				res, err := pc.Pull(ctx, tagged, q, off, 7, client.PullOptions{Subscription: "b||c"})
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range res.Messages {
					if tg := m.Tags(); tg != "b" && tg != "c" {
						t.Errorf("pull \"b||c\": %s with tag %q", m.Keys()[0], tg)
					}
					count++
				}
				if res.Status == protocol.PullNoNewMsg {
					break
				}
				off = res.NextBeginOffset
			}
		}
		if count != 80 {
			t.Errorf("pull \"b||c\" returned %d messages, want 80", count)
		}
		if _, err := pc.Pull(ctx, tagged, 0, 0, 1, client.PullOptions{Subscription: "a || *"}); !errors.Is(err, client.ErrSubscription) {
			t.Errorf("malformed tag expression: %v, want ErrSubscription", err)
		}
	})

	t.Run("query by key and message id", func(t *testing.T) {
		// The index is built asynchronously: poll.
		var msgs []protocol.MessageExt
		testwait.Until(testwait.Wall, 10*time.Second, func() bool {
			var err error
			if msgs, err = a.QueryByKey(ctx, tagged, lastKey, time.Time{}, time.Time{}, 8); err != nil {
				t.Fatal(err)
			}
			return len(msgs) != 0
		})
		if len(msgs) != 1 {
			t.Fatalf("query by key %s: %d messages, want 1", lastKey, len(msgs))
		}
		m := msgs[0]
		if k, err := e2eCheckBody(m.Body); err != nil || k != lastKey || m.MsgID != lastRes.MsgID || m.QueueID != lastRes.QueueID || m.QueueOffset != lastRes.QueueOffset {
			t.Fatalf("query by key %s: got %s %s %d@%d (%v), sent %s %d@%d", lastKey, k, m.MsgID, m.QueueID, m.QueueOffset, err,
				lastRes.MsgID, lastRes.QueueID, lastRes.QueueOffset)
		}
		if byUniq, err := a.QueryByKey(ctx, tagged, lastRes.UniqKey, time.Time{}, time.Time{}, 8); err != nil || len(byUniq) != 1 || byUniq[0].MsgID != lastRes.MsgID {
			t.Fatalf("query by UNIQ_KEY %s: %d messages, %v", lastRes.UniqKey, len(byUniq), err)
		}
		if none, err := a.QueryByKey(ctx, tagged, "no-such-key", time.Time{}, time.Time{}, 8); err != nil || len(none) != 0 {
			t.Fatalf("query by an unknown key: %d messages, %v", len(none), err)
		}
		v, err := a.ViewMessage(ctx, lastRes.MsgID)
		if err != nil {
			t.Fatalf("view %s: %v", lastRes.MsgID, err)
		}
		if k, err := e2eCheckBody(v.Body); err != nil || k != lastKey || v.Topic != tagged || v.StoreHost != b.addr {
			t.Fatalf("view %s: key %s topic %s store host %s (%v)", lastRes.MsgID, k, v.Topic, v.StoreHost, err)
		}
		// An id past the log's end, on this broker.
		bogus := lastRes.MsgID[:16] + "00000000FFFFFFFF"
		if _, err := a.ViewMessage(ctx, bogus); !errorsIsAny(err, client.ErrNotFound, client.ErrInvalidParameter) {
			t.Errorf("view of an id past the end: %v, want ErrNotFound", err)
		}
	})

	t.Run("consumer offsets survive restarts", func(t *testing.T) {
		pc := e2ePuller(t, b.addr, "offsets-group")
		if _, err := pc.QueryOffset(ctx, tagged, 2); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("offset of a group that never committed: %v, want ErrNotFound", err)
		}
		for q := range int32(4) {
			if err := pc.CommitOffset(ctx, tagged, q, int64(10+q)); err != nil {
				t.Fatal(err)
			}
		}
		// A push consumer commits what it consumed on Close.
		var n atomic.Int64
		c, err := client.NewPushConsumer(b.addr, "offsets-push", client.WithConsumeFrom(client.ConsumeFromFirst), client.WithPullSuspend(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		_ = c.Subscribe(tagged, "*", func(_ context.Context, msgs []*protocol.MessageExt) client.ConsumeResult {
			n.Add(int64(len(msgs)))
			return client.ConsumeSuccess
		})
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		testwait.Until(testwait.Wall, 10*time.Second, func() bool { return n.Load() >= 160 })
		if err := c.Close(); err != nil {
			t.Fatalf("push consumer close (commits): %v", err)
		}
		if n.Load() != 160 {
			t.Fatalf("push consumer got %d of 160", n.Load())
		}
		pc.Close()
		a.Close()

		// Clean restart: SIGTERM, exit status 0, abort file gone.
		code, took := b.stop(syscall.SIGTERM, 15*time.Second)
		if code != 0 {
			t.Fatalf("broker exited %d after SIGTERM", code)
		}
		if b.abortFileExists() {
			t.Fatalf("abort file still there after a clean stop")
		}
		t.Logf("SIGTERM: exited 0 in %v", took.Round(time.Millisecond))
		b = b.restart()
		if rep := b.recoveryReport(); !strings.Contains(rep, "abnormal=false") || !strings.Contains(rep, "checkpoint=clean") {
			t.Errorf("start after SIGTERM reported %q, want abnormal=false checkpoint=clean", rep)
		}
		check := func(when string) {
			t.Helper()
			a2 := e2eAdmin(t, b.addr)
			for q := range int32(4) {
				off, err := a2.QueryConsumerOffset(ctx, "offsets-group", tagged, q)
				if err != nil || off != int64(10+q) {
					t.Fatalf("%s: offset of queue %d: %d %v, want %d", when, q, off, err, 10+q)
				}
			}
			offs, err := a2.GetConsumerOffsets(ctx, "offsets-push", tagged)
			if err != nil || len(offs) != 4 {
				t.Fatalf("%s: push consumer offsets %+v %v", when, offs, err)
			}
			for _, o := range offs {
				if o.ConsumerOffset != o.MaxOffset || o.MaxOffset != 40 {
					t.Fatalf("%s: push consumer offset %+v, want 40 = max offset", when, o)
				}
			}
		}
		check("after SIGTERM and restart")
		// An acknowledged commit is on disk: it survives kill -9 too.
		pc2 := e2ePuller(t, b.addr, "offsets-group")
		if err := pc2.CommitOffset(ctx, tagged, 3, 33); err != nil {
			t.Fatal(err)
		}
		b.kill()
		b = b.restart()
		if rep := b.recoveryReport(); !strings.Contains(rep, "abnormal=true") {
			t.Errorf("start after kill -9 reported %q, want abnormal=true", rep)
		}
		a3 := e2eAdmin(t, b.addr)
		if off, err := a3.QueryConsumerOffset(ctx, "offsets-group", tagged, 3); err != nil || off != 33 {
			t.Fatalf("after kill -9: committed offset %d %v, want 33", off, err)
		}
		// A new push consumer of the group resumes: it gets only new messages.
		if _, err := e2eProducer(t, b.addr).Send(ctx, e2eMessage(tagged, "after-restart"), client.ToQueue(1)); err != nil {
			t.Fatal(err)
		}
		got := make(chan string, 200)
		c2, err := client.NewPushConsumer(b.addr, "offsets-push", client.WithConsumeFrom(client.ConsumeFromFirst), client.WithPullSuspend(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()
		_ = c2.Subscribe(tagged, "*", func(_ context.Context, msgs []*protocol.MessageExt) client.ConsumeResult {
			for _, m := range msgs {
				got <- m.Keys()[0]
			}
			return client.ConsumeSuccess
		})
		if err := c2.Start(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case k := <-got:
			if k != "after-restart" {
				t.Fatalf("resumed consumer got %s first, want only after-restart", k)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("resumed consumer got nothing")
		}
		// Room for an old message to come again (the wait ends early if
		// one does).
		testwait.Until(testwait.Wall, 300*time.Millisecond, func() bool { return len(got) != 0 })
		if len(got) != 0 {
			t.Fatalf("resumed consumer got %d old messages again", len(got))
		}
	})
}

// e2eRun runs the wharf binary with args and returns stdout, stderr and the
// exit code.
func e2eRun(t *testing.T, timeout time.Duration, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, e2eBinary(t), args...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("wharf %s: no exit within %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), timeout, out.String(), errOut.String())
	}
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("wharf %s: %v", strings.Join(args, " "), err)
		}
		code = ee.ExitCode()
	}
	return out.String(), errOut.String(), code
}

// e2eLastJSON decodes the last line of out into a map.
func e2eLastJSON(t *testing.T, out string) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	var v map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &v); err != nil {
		t.Fatalf("last line of output is not a JSON object: %v\n%s", err, out)
	}
	return v
}

// e2eNum returns the number v[k], failing the test if it is missing.
func e2eNum(t *testing.T, v map[string]any, k string) float64 {
	t.Helper()
	x, ok := v[k].(float64)
	if !ok {
		t.Fatalf("JSON report %v: no number %q", v, k)
	}
	return x
}

// TestE2ECLI runs the wharf client commands as processes against a broker:
// produce, consume, query and topic, checking their --json reports; and
// produce and consume when the broker dies under them (they stop within a
// few seconds, print their summary and exit non-zero).
func TestE2ECLI(t *testing.T) {
	t.Parallel()
	b := startBroker(t, t.TempDir())
	const n = 5000

	out, errOut, code := e2eRun(t, 30*time.Second, "topic", "create", "--broker", b.addr, "--topic", "cli", "--queues", "4", "--json")
	if code != 0 {
		t.Fatalf("topic create: exit %d\n%s%s", code, out, errOut)
	}
	if v := e2eLastJSON(t, out); v["ok"] != true || v["topic"] != "cli" || e2eNum(t, v, "write_queue_nums") != 4 {
		t.Fatalf("topic create report %v", v)
	}

	out, errOut, code = e2eRun(t, 60*time.Second, "produce", "--broker", b.addr, "--topic", "cli", "--count", fmt.Sprint(n),
		"--size", "200", "--key", "ck", "--tag", "t1", "--json")
	if code != 0 {
		t.Fatalf("produce: exit %d\n%s%s", code, out, errOut)
	}
	pr := e2eLastJSON(t, out)
	if e2eNum(t, pr, "sent") != n || e2eNum(t, pr, "acked") != n || e2eNum(t, pr, "failed") != 0 || pr["stopped"] != "done" {
		t.Fatalf("produce report %v", pr)
	}
	if mps, p50, p99 := e2eNum(t, pr, "msgs_per_s"), e2eNum(t, pr, "p50_ms"), e2eNum(t, pr, "p99_ms"); mps <= 0 || p50 <= 0 || p99 < p50 {
		t.Fatalf("produce report %v: want msgs_per_s > 0 and 0 < p50_ms <= p99_ms", pr)
	}
	t.Logf("produce: %v", pr)

	// Batches too.
	out, errOut, code = e2eRun(t, 60*time.Second, "produce", "--broker", b.addr, "--topic", "cli", "--count", "1000", "--batch", "50", "--json")
	if v := e2eLastJSON(t, out); code != 0 || e2eNum(t, v, "acked") != 1000 {
		t.Fatalf("produce --batch 50: exit %d, report %v\n%s", code, v, errOut)
	}

	out, errOut, code = e2eRun(t, 60*time.Second, "consume", "--broker", b.addr, "--topic", "cli", "--group", "cli-g",
		"--from", "first", "--count", fmt.Sprint(n+1000), "--json")
	if code != 0 {
		t.Fatalf("consume: exit %d\n%s%s", code, out, errOut)
	}
	cr := e2eLastJSON(t, out)
	if e2eNum(t, cr, "received") != n+1000 || e2eNum(t, cr, "duplicates") != 0 || e2eNum(t, cr, "msgs_per_s") <= 0 || cr["stopped"] != "count" {
		t.Fatalf("consume report %v", cr)
	}
	t.Logf("consume: %v", cr)
	// The group committed: a second run finds nothing new and stops idle.
	out, errOut, code = e2eRun(t, 30*time.Second, "consume", "--broker", b.addr, "--topic", "cli", "--group", "cli-g",
		"--idle-exit", "1s", "--suspend", "500ms", "--json")
	if v := e2eLastJSON(t, out); code != 0 || e2eNum(t, v, "received") != 0 || v["stopped"] != "idle" {
		t.Fatalf("second consume of the group: exit %d, report %v\n%s", code, v, errOut)
	}
	// Tag expression: the batch messages have no tag.
	out, errOut, code = e2eRun(t, 30*time.Second, "consume", "--broker", b.addr, "--topic", "cli", "--group", "cli-tags",
		"--tag-expr", "t1 || t2", "--idle-exit", "3s", "--suspend", "500ms", "--json")
	if v := e2eLastJSON(t, out); code != 0 || e2eNum(t, v, "received") != n {
		t.Fatalf("consume --tag-expr: exit %d, report %v\n%s", code, v, errOut)
	}

	// Query by key (the index is asynchronous: retry a little).
	var qr map[string]any
	testwait.Until(testwait.Wall, 10*time.Second, func() bool {
		out, errOut, code = e2eRun(t, 30*time.Second, "query", "--broker", b.addr, "--topic", "cli", "--key", "ck-4321", "--json", "--body")
		return code == 0
	})
	if code != 0 {
		t.Fatalf("query --key: exit %d\n%s%s", code, out, errOut)
	}
	qr = e2eLastJSON(t, out)
	msgs, _ := qr["messages"].([]any)
	if e2eNum(t, qr, "count") != 1 || len(msgs) != 1 {
		t.Fatalf("query --key ck-4321: %v", qr)
	}
	m := msgs[0].(map[string]any)
	if m["tags"] != "t1" || e2eNum(t, m, "body_len") != 200 || !strings.HasPrefix(fmt.Sprint(m["body"]), "wharf-4321 ") {
		t.Fatalf("query --key ck-4321: message %v", m)
	}
	out, errOut, code = e2eRun(t, 30*time.Second, "query", "--broker", b.addr, "--msgid", fmt.Sprint(m["msg_id"]), "--json")
	if v := e2eLastJSON(t, out); code != 0 || e2eNum(t, v, "count") != 1 {
		t.Fatalf("query --msgid: exit %d, %v\n%s", code, v, errOut)
	}
	if _, _, code = e2eRun(t, 30*time.Second, "query", "--broker", b.addr, "--topic", "cli", "--key", "no-such-key"); code == 0 {
		t.Errorf("query of a missing key exited 0")
	}

	out, errOut, code = e2eRun(t, 30*time.Second, "topic", "list", "--broker", b.addr, "--json")
	if !strings.Contains(out, `"topic":"cli"`) || code != 0 {
		t.Fatalf("topic list: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code = e2eRun(t, 30*time.Second, "topic", "delete", "--broker", b.addr, "--topic", "cli"); code != 0 {
		t.Fatalf("topic delete: exit %d\n%s", code, errOut)
	}
	if out, _, _ = e2eRun(t, 30*time.Second, "topic", "list", "--broker", b.addr, "--json"); strings.Contains(out, `"topic":"cli"`) {
		t.Fatalf("deleted topic still listed: %s", out)
	}

	// The broker dies under a running produce and consume: both stop
	// within a few seconds, print their report and exit non-zero; produce
	// counts as acked only what the broker acknowledged.
	type result struct {
		out, errOut string
		code        int
		took        time.Duration
	}
	// run starts the command; stdout is its output so far.
	run := func(args ...string) (ch chan result, stdout *syncBuffer) {
		ch, stdout = make(chan result, 1), &syncBuffer{}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, e2eBinary(t), args...)
			var e strings.Builder
			o := stdout
			cmd.Stdout, cmd.Stderr = o, &e
			start := time.Now()
			err := cmd.Run()
			code := 0
			if err != nil {
				code = -1
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
				}
			}
			ch <- result{o.String(), e.String(), code, time.Since(start)}
		}()
		return ch, stdout
	}
	prod, _ := run("produce", "--broker", b.addr, "--topic", "dying", "--count", "100000000", "--inflight", "8", "--json")
	// Kill once both are under way: produce's messages stored, consume
	// printing what it received.
	admin := e2eAdmin(t, b.addr)
	testwait.For(t, testwait.Wall, 10*time.Second, "produce's messages stored", func() bool {
		n, err := admin.GetMaxOffset(e2eCtx(t, 5*time.Second), "dying", 0)
		return err == nil && n > 0
	})
	cons, consOut := run("consume", "--broker", b.addr, "--topic", "dying", "--group", "dying-g", "--print", "--json")
	testwait.For(t, testwait.Wall, 10*time.Second, "consume receiving", func() bool { return consOut.Len() > 0 })
	killedAt := time.Now()
	b.kill()
	for name, ch := range map[string]chan result{"produce": prod, "consume": cons} {
		r := <-ch
		if r.code <= 0 {
			t.Errorf("%s after the broker died: exit %d, want non-zero\n%s%s", name, r.code, r.out, r.errOut)
			continue
		}
		v := e2eLastJSON(t, r.out)
		if v["stopped"] != "broker_unavailable" {
			t.Errorf("%s after the broker died: report %v, want stopped broker_unavailable", name, v)
		}
		if name == "produce" && (e2eNum(t, v, "acked") <= 0 || e2eNum(t, v, "acked") > e2eNum(t, v, "sent")) {
			t.Errorf("produce after the broker died: report %v", v)
		}
		if name == "consume" && e2eNum(t, v, "received") <= 0 {
			t.Errorf("consume after the broker died: report %v", v)
		}
		t.Logf("%s stopped %v after the kill: %v", name, time.Since(killedAt).Round(time.Millisecond), v)
	}
	if d := time.Since(killedAt); d > 10*time.Second {
		t.Errorf("produce and consume took %v to stop after the broker died", d)
	}
}

// TestE2EGracefulShutdown: SIGTERM while a producer is sending. The broker
// exits 0 within a few seconds, removes its abort file, and the next start
// finds a clean checkpoint (abnormal=false); every message acknowledged
// before the stop is there. SIGINT does the same.
func TestE2EGracefulShutdown(t *testing.T) {
	t.Parallel()
	const topic = "graceful"
	b := startBroker(t, t.TempDir(), "--flushDiskType", "SYNC_FLUSH")
	ctx := e2eCtx(t, 60*time.Second)
	e2eCreateTopic(t, ctx, e2eAdmin(t, b.addr), topic, 4)
	if !b.abortFileExists() {
		t.Fatalf("no abort file while the broker runs")
	}
	p, err := client.NewProducer(b.addr, client.WithRetries(0), client.WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	acked := map[string]bool{}
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; loadCtx.Err() == nil; i++ {
				key := fmt.Sprintf("g%d-%d", g, i)
				res, err := p.Send(loadCtx, e2eMessage(topic, key))
				if err == nil && res.Status == protocol.StatusOK {
					mu.Lock()
					acked[key] = true
					mu.Unlock()
				} else if !sleepCtx(loadCtx, 5*time.Millisecond) {
					return
				}
			}
		}()
	}
	testwait.For(t, testwait.Wall, 10*time.Second, "sends acknowledged before the stop", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 500
	})
	code, took := b.stop(syscall.SIGTERM, 15*time.Second)
	stopLoad()
	if !testwait.Chan(wgDone(&wg), 10*time.Second) {
		t.Fatal("producers did not stop")
	}
	p.Close()
	if code != 0 {
		t.Fatalf("exit status %d after SIGTERM", code)
	}
	if took > 5*time.Second {
		t.Errorf("SIGTERM: exit took %v", took)
	}
	if b.abortFileExists() {
		t.Errorf("abort file left after SIGTERM")
	}
	for _, s := range []string{"shutting down", "broker stopped cleanly"} {
		if !strings.Contains(b.log(), s) {
			t.Errorf("broker log lacks %q", s)
		}
	}
	t.Logf("SIGTERM under load: exit 0 in %v, %d messages acknowledged", took.Round(time.Millisecond), len(acked))

	b = b.restart()
	if rep := b.recoveryReport(); !strings.Contains(rep, "abnormal=false") || !strings.Contains(rep, "checkpoint=clean") || !strings.Contains(rep, "torn_bytes=0") {
		t.Errorf("start after SIGTERM reported %q, want abnormal=false checkpoint=clean", rep)
	}
	stored := e2eReadAll(t, ctx, b.addr, topic)
	mu.Lock()
	for k := range acked {
		if _, ok := stored[k]; !ok {
			t.Errorf("acknowledged %s missing after a graceful stop", k)
		}
	}
	mu.Unlock()

	// SIGINT (Ctrl-C) is the same.
	code, took = b.stop(syscall.SIGINT, 15*time.Second)
	if code != 0 || b.abortFileExists() {
		t.Fatalf("SIGINT: exit %d, abort file left %v", code, b.abortFileExists())
	}
	b = b.restart()
	if rep := b.recoveryReport(); !strings.Contains(rep, "abnormal=false") {
		t.Errorf("start after SIGINT reported %q, want abnormal=false", rep)
	}
	t.Logf("SIGINT: exit 0 in %v", took.Round(time.Millisecond))
}

// TestE2EDamagedConfigFiles: docs/STORAGE.md promises that if a config
// file (topics.json, consumerOffset.json) and its .bak are both damaged
// the broker refuses to start rather than forget topics or offsets.
func TestE2EDamagedConfigFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := startBroker(t, dir)
	ctx := e2eCtx(t, 30*time.Second)
	e2eCreateTopic(t, ctx, e2eAdmin(t, b.addr), "t", 1)
	pc := e2ePuller(t, b.addr, "g")
	if err := pc.CommitOffset(ctx, "t", 0, 5); err != nil {
		t.Fatal(err)
	}
	pc.Close()
	if code, _ := b.stop(syscall.SIGTERM, 15*time.Second); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
	for _, f := range []string{"consumerOffset.json", "consumerOffset.json.bak"} {
		if err := os.WriteFile(filepath.Join(dir, "config", f), []byte("{damaged"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The start must fail: run the broker in the foreground.
	out, errOut, code := e2eRun(t, 30*time.Second, append([]string{"broker", "--storePathRootDir", dir,
		"--listenPort", fmt.Sprint(e2eFreePorts(t, 1)[0]), "--haListenPort", fmt.Sprint(e2eFreePorts(t, 1)[0])}, e2eBaseFlags...)...)
	if code == 0 || !strings.Contains(errOut, "consumerOffset.json") {
		t.Fatalf("broker on damaged consumer offsets: exit %d\n%s%s", code, out, errOut)
	}
}
