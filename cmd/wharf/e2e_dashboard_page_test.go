package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// dashPage is the dashboard open in the browser.
type dashPage struct {
	t   *testing.T
	tab context.Context
	out string
	n   int // screenshots taken
}

// eval evaluates expr in the page into v, within 5 s.
func (p *dashPage) eval(expr string, v any) error {
	ctx, cancel := context.WithTimeout(p.tab, 5*time.Second)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](expr))
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}

// waitEval waits up to 20 s (ten refreshes) for expr to be true.
func (p *dashPage) waitEval(what, expr string) {
	p.t.Helper()
	testwait.For(p.t, testwait.Wall, 20*time.Second, what, func() bool {
		var ok bool
		return p.eval(expr, &ok) == nil && ok
	})
}

// shot saves a full-page PNG as NN-name.png.
func (p *dashPage) shot(name string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.tab, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatalf("screenshot %s: %v", name, err)
	}
	p.n++
	path := filepath.Join(p.out, fmt.Sprintf("%02d-%s.png", p.n, name))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("screenshot %s (%d bytes)", path, len(png))
}

// masters are the live masters by broker group, as the name server has them.
func dashMasters(t *testing.T, admin *client.Admin) map[string]*client.Admin {
	t.Helper()
	ci, err := admin.ClusterInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*client.Admin{}
	for _, b := range ci.Brokers {
		if b.Alive && b.BrokerID == protocol.MasterID {
			a, err := client.NewAdmin(b.BrokerAddr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { a.Close() })
			out[b.BrokerName] = a
		}
	}
	if len(out) != 2 {
		t.Fatalf("masters %v, want broker-a and broker-b", out)
	}
	return out
}

// checkOffsets: every queue's max offset on the page is the master's
// GET_MAX_OFFSET, and they add up to the sends.
func (p *dashPage) checkOffsets(admin *client.Admin) {
	p.t.Helper()
	want, total := map[string]string{}, 0
	for group, a := range dashMasters(p.t, admin) {
		for q := range int32(4) {
			max, err := a.GetMaxOffset(context.Background(), dashTopic, q)
			if err != nil {
				p.t.Fatal(err)
			}
			want[group+"/"+strconv.Itoa(int(q))] = strconv.FormatInt(max, 10)
			total += int(max)
		}
	}
	if total != dashSends {
		p.t.Fatalf("brokers' max offsets add up to %d, want %d", total, dashSends)
	}
	var got map[string]string
	expr := fmt.Sprintf(`Object.fromEntries([...document.querySelectorAll('[data-testid="queue-row"][data-topic=%q]')].map(r =>
		[r.dataset.broker + "/" + r.dataset.queue, r.querySelector('[data-testid="queue-max"]').textContent]))`, dashTopic)
	ok := testwait.Until(testwait.Wall, 20*time.Second, func() bool { return p.eval(expr, &got) == nil && maps.Equal(got, want) })
	p.shot("topics")
	if !ok {
		p.t.Fatalf("max offsets on the page %v, the brokers say %v", got, want)
	}
}

// checkLag: the group's lag per queue on the page is DESCRIBE's, once
// the member holds half of the topic.
func (p *dashPage) checkLag(admin *client.Admin) {
	p.t.Helper()
	masters := dashMasters(p.t, admin)
	want := map[string]string{}
	describe := func() bool {
		clear(want)
		var lag int64
		for group, a := range masters {
			d, err := a.DescribeGroup(context.Background(), dashGroup)
			if err != nil {
				return false
			}
			for _, q := range d.Queues {
				if q.Topic == dashTopic {
					want[group+"/"+strconv.Itoa(int(q.QueueID))] = strconv.FormatInt(q.Lag, 10)
					lag += q.Lag
				}
			}
		}
		return lag == dashSends/2 && len(want) == 8
	}
	testwait.For(p.t, testwait.Wall, 30*time.Second, "DESCRIBE to show the held half of "+dashTopic+" as lag", describe)
	var got map[string]string
	expr := fmt.Sprintf(`Object.fromEntries([...document.querySelectorAll('[data-testid="group-queue-row"][data-group=%q][data-topic=%q]')].map(r =>
		[r.dataset.broker + "/" + r.dataset.queue, r.querySelector('[data-testid="group-lag"]').textContent]))`, dashGroup, dashTopic)
	ok := testwait.Until(testwait.Wall, 20*time.Second, func() bool { return p.eval(expr, &got) == nil && maps.Equal(got, want) })
	run(p.t, p.tab, 5*time.Second, chromedp.ScrollIntoView(chromedp.CSS(`#groups`)))
	p.shot("groups")
	if !ok {
		p.t.Fatalf("lag on the page %v, DESCRIBE says %v", got, want)
	}
}

// checkCharts: every broker has a throughput and a latency chart, drawn
// as SVG polylines with points, and a master's shows the sends.
func (p *dashPage) checkCharts() {
	p.t.Helper()
	p.waitEval("SVG charts with points for the four brokers", `(() => {
		const cards = [...document.querySelectorAll('[data-testid="chart-card"]')];
		const lines = (c, id) => [...c.querySelectorAll('svg[data-testid="' + id + '"] polyline[data-testid="chart-line"]')];
		return cards.length === 4 && cards.every(c => lines(c, "chart-throughput").length === 2 &&
			lines(c, "chart-throughput").every(l => +l.dataset.points >= 2 && l.getAttribute("points").split(" ").length >= 2)) &&
			cards.some(c => lines(c, "chart-latency").some(l => +l.dataset.points >= 1));
	})()`)
	run(p.t, p.tab, 5*time.Second, chromedp.ScrollIntoView(chromedp.CSS(`#charts`)))
	p.shot("charts")
}

// createTopic fills the form, confirms, and finds the topic on every
// master with the queues asked for; then deletes it with its button and
// finds it on none.
func (p *dashPage) createTopic(admin *client.Admin) {
	p.t.Helper()
	const topic = "e2e-dash-created"
	run(p.t, p.tab, 10*time.Second,
		chromedp.ScrollIntoView(chromedp.CSS(`#topics`)),
		chromedp.SetValue(chromedp.CSS(`[data-testid="topic-create-name"]`), topic),
		chromedp.SetValue(chromedp.CSS(`[data-testid="topic-create-queues"]`), "3"),
		chromedp.Click(chromedp.CSS(`[data-testid="topic-create-submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="confirm-yes"]`)))
	p.shot("create-confirm")
	run(p.t, p.tab, 5*time.Second, chromedp.Click(chromedp.CSS(`[data-testid="confirm-yes"]`)))
	p.waitEval("the page to say the topic was created", `document.querySelector('[data-testid="topic-action-status"]').textContent.startsWith("created `+topic+`")`)
	for group, a := range dashMasters(p.t, admin) {
		tc, err := a.GetTopic(context.Background(), topic)
		if err != nil || tc.WriteQueueNums != 3 || tc.ReadQueueNums != 3 {
			p.t.Errorf("%s's master: topic %s = %+v, %v; want 3 queues", group, topic, tc, err)
		}
	}
	p.waitEval("the new topic listed", fmt.Sprintf(`document.querySelectorAll('[data-testid="queue-row"][data-topic=%q]').length === 6`, topic))
	p.shot("created")

	run(p.t, p.tab, 10*time.Second,
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-testid="topic-delete"][data-topic=%q]`, topic))),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="confirm-yes"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="confirm-yes"]`)))
	p.waitEval("the page to say the topic was deleted", `document.querySelector('[data-testid="topic-action-status"]').textContent.startsWith("deleted `+topic+`")`)
	for group, a := range dashMasters(p.t, admin) {
		if _, err := a.GetTopic(context.Background(), topic); !errors.Is(err, client.ErrTopicNotExist) {
			p.t.Errorf("%s's master after the delete: %v, want ErrTopicNotExist", group, err)
		}
	}
	p.waitEval("the deleted topic gone from the page", fmt.Sprintf(`document.querySelectorAll('[data-testid="topic"][data-topic=%q]').length === 0`, topic))
}

// lookup finds a message by key and another by id and reads their bodies.
func (p *dashPage) lookup(ids []string) {
	p.t.Helper()
	run(p.t, p.tab, 10*time.Second,
		chromedp.ScrollIntoView(chromedp.CSS(`#lookup`)),
		chromedp.SetValue(chromedp.CSS(`[data-testid="lookup-topic"]`), dashTopic),
		chromedp.SetValue(chromedp.CSS(`[data-testid="lookup-key"]`), "key-7"),
		chromedp.Click(chromedp.CSS(`[data-testid="lookup-key-submit"]`)))
	p.waitEval("message key-7 found by key", fmt.Sprintf(`(() => {
		const ms = document.querySelectorAll('[data-testid="message"]');
		return ms.length === 1 && ms[0].querySelector('[data-testid="message-body"]').textContent === "body-7" &&
			ms[0].querySelector('[data-testid="message-id"]').textContent === %q;
	})()`, ids[7]))
	p.shot("lookup-key")
	run(p.t, p.tab, 10*time.Second,
		chromedp.SetValue(chromedp.CSS(`[data-testid="lookup-id"]`), ids[3]),
		chromedp.Click(chromedp.CSS(`[data-testid="lookup-id-submit"]`)))
	p.waitEval("message 3 found by id", `(() => {
		const ms = document.querySelectorAll('[data-testid="message"]');
		return ms.length === 1 && ms[0].querySelector('[data-testid="message-body"]').textContent === "body-3";
	})()`)
	p.shot("lookup-id")
}

// brokerDown kills a slave with SIGKILL: the page shows it down, with
// the error, and goes on showing the others.
func (p *dashPage) brokerDown(devOut string) {
	p.t.Helper()
	m := regexp.MustCompile(`broker-\S+\s+slave of broker-b\s+(\S+)\s+pid (\d+)`).FindStringSubmatch(devOut)
	if m == nil {
		p.t.Fatalf("no slave of broker-b in:\n%s", devOut)
	}
	addr, pid := m[1], m[2]
	n, _ := strconv.Atoi(pid)
	if err := syscall.Kill(n, syscall.SIGKILL); err != nil {
		p.t.Fatal(err)
	}
	p.waitEval("the killed slave shown down, the others up", fmt.Sprintf(`(() => {
		const rows = [...document.querySelectorAll('[data-testid="broker-row"]')];
		const health = (r) => r.querySelector('[data-testid="broker-health"]');
		const dead = rows.filter(r => r.dataset.addr === %q);
		return rows.length === 4 && dead.length === 1 && health(dead[0]).textContent.startsWith("down") && health(dead[0]).title !== "" &&
			rows.filter(r => health(r).textContent === "up").length === 3;
	})()`, addr))
	run(p.t, p.tab, 5*time.Second, chromedp.ScrollIntoView(chromedp.CSS(`#cluster`)))
	p.shot("broker-down")
}
