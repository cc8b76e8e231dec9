package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/internal/testwait"
)

// TestE2EDeleteTopicForgetsMessages: `wharf topic delete` takes the
// topic's messages with it. Re-created by an auto-creating send, the topic
// starts at queue offset 0 and consumers (a group that had committed
// offsets, a new group, a pull from 0, a query by key) see only the new
// messages, also after kill -9 and a restart.
func TestE2EDeleteTopicForgetsMessages(t *testing.T) {
	t.Parallel()
	b := startBroker(t, t.TempDir())
	ctx := e2eCtx(t, 90*time.Second)
	p := e2eProducer(t, b.addr)
	const topic, old = "gone", 40
	for i := range old {
		if _, err := p.Send(ctx, e2eMessage(topic, fmt.Sprintf("old-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	consume := func(group string) map[string]any {
		t.Helper()
		out, errOut, code := e2eRun(t, 60*time.Second, "consume", "--broker", b.addr, "--topic", topic, "--group", group,
			"--idle-exit", "2s", "--suspend", "500ms", "--json")
		if code != 0 {
			t.Fatalf("consume %s: exit %d\n%s%s", group, code, out, errOut)
		}
		return e2eLastJSON(t, out)
	}
	if r := consume("had-offsets"); e2eNum(t, r, "received") != old {
		t.Fatalf("consume before the deletion: %v", r)
	}
	if out, errOut, code := e2eRun(t, 30*time.Second, "topic", "delete", "--broker", b.addr, "--topic", topic); code != 0 {
		t.Fatalf("topic delete: exit %d\n%s%s", code, out, errOut)
	}
	const fresh = 5
	for i := range fresh {
		res, err := p.Send(ctx, e2eMessage(topic, fmt.Sprintf("new-%d", i)), client.ToQueue(0))
		if err != nil {
			t.Fatal(err)
		}
		if res.QueueOffset != int64(i) {
			t.Fatalf("send %d to the re-created topic: queue offset %d, want %d", i, res.QueueOffset, i)
		}
	}
	onlyNew := func(when string, b *e2eBroker) {
		t.Helper()
		pc := e2ePuller(t, b.addr, "probe")
		a := e2eAdmin(t, b.addr)
		for q := int32(0); q < 4; q++ {
			res, err := pc.Pull(ctx, topic, q, 0, 64, client.PullOptions{})
			if err != nil {
				t.Fatalf("%s: pull of queue %d: %v", when, q, err)
			}
			for _, m := range res.Messages {
				if k := m.Keys(); len(k) == 0 || !strings.HasPrefix(k[0], "new-") {
					t.Fatalf("%s: queue %d from 0 holds %v, a message of the deleted topic", when, q, k)
				}
			}
			if max, err := a.GetMaxOffset(ctx, topic, q); err != nil || (q == 0 && max != fresh) || (q != 0 && max != 0) {
				t.Fatalf("%s: max offset of queue %d: %d %v", when, q, max, err)
			}
		}
		if msgs, err := a.QueryByKey(ctx, topic, "old-7", time.Time{}, time.Now().Add(time.Hour), 8); err == nil && len(msgs) > 0 {
			t.Fatalf("%s: a query by an old key found %d messages", when, len(msgs))
		}
	}
	onlyNew("after the deletion", b)
	if r := consume("had-offsets"); e2eNum(t, r, "received") != fresh {
		t.Fatalf("the group that had consumed the deleted topic: %v, want the %d new messages", r, fresh)
	}
	b.kill()
	b = b.restart()
	onlyNew("after kill -9 and a restart", b)
	if r := consume("new-group"); e2eNum(t, r, "received") != fresh {
		t.Fatalf("a new group after the restart: %v, want the %d new messages", r, fresh)
	}
}

// TestE2EDeleteTopicReachesSlave: a slave follows its master's deletion
// (sent with the metadata): once it has, a pull from the slave from 0 sees
// only the re-created topic's messages, also after the slave's kill -9.
func TestE2EDeleteTopicReachesSlave(t *testing.T) {
	t.Parallel()
	const topic = "gone"
	haPort := haFreePort(t)
	m := startHAMaster(t, t.TempDir(), "ASYNC_MASTER", haPort)
	s := startHASlave(t, t.TempDir(), haPort)
	ctx := e2eCtx(t, 2*time.Minute)
	p := e2eProducer(t, m.addr)
	for i := range 20 {
		if _, err := p.Send(ctx, e2eMessage(topic, fmt.Sprintf("old-%d", i)), client.ToQueue(int32(i%2))); err != nil {
			t.Fatal(err)
		}
	}
	haWaitCaughtUp(t, m, s, 30*time.Second)
	if err := e2eAdmin(t, m.addr).DeleteTopic(ctx, topic); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := p.Send(ctx, e2eMessage(topic, fmt.Sprintf("new-%d", i)), client.ToQueue(0)); err != nil {
			t.Fatal(err)
		}
	}
	haWaitCaughtUp(t, m, s, 30*time.Second)
	// keys pulls queues 0 and 1 from 0 on b.
	keys := func(pc *client.PullConsumer) []string {
		var out []string
		for q := int32(0); q < 2; q++ {
			res, err := pc.Pull(ctx, topic, q, 0, 64, client.PullOptions{})
			if err != nil {
				return []string{err.Error()}
			}
			for _, msg := range res.Messages {
				out = append(out, msg.Keys()...)
			}
		}
		return out
	}
	want := "[new-0 new-1 new-2]"
	wait := func(what string, b *e2eBroker) {
		t.Helper()
		pc := e2ePuller(t, b.addr, "probe")
		var got []string
		if !testwait.Until(testwait.Wall, 20*time.Second, func() bool { got = keys(pc); return fmt.Sprint(got) == want }) {
			t.Fatalf("%s: pulls from 0 see %v, want %s", what, got, want)
		}
	}
	wait("the master", m)
	wait("the slave after the metadata sync", s)
	s.kill()
	s = s.restart()
	haWaitCaughtUp(t, m, s, 30*time.Second)
	wait("the slave after kill -9", s)
}
