package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// The browser test's chromium: Debian's, installed by scripts/test-setup.sh
// (make test-deps). Never a browser a library downloads.
func dashboardBrowser(t *testing.T) string {
	t.Helper()
	path := os.Getenv("WHARF_CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("WHARF_REQUIRE_BROWSER") == "1" {
			t.Fatalf("chromium %s: %v (make test-deps installs it: scripts/test-setup.sh)", path, err)
		}
		t.Skipf("chromium %s missing (%v): run scripts/test-setup.sh; make test sets WHARF_REQUIRE_BROWSER=1 and fails instead", path, err)
	}
	return path
}

// dashboardOutput is where the screenshots go: $WHARF_TEST_OUTPUT/dashboard,
// else ./test-output/dashboard (git-ignored).
func dashboardOutput(t *testing.T) string {
	t.Helper()
	root := os.Getenv("WHARF_TEST_OUTPUT")
	if root == "" {
		root = "test-output"
	}
	dir := filepath.Join(root, "dashboard")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// dashTopic is the topic the test fills; its group holds half of it.
const (
	dashTopic = "e2e-dash"
	dashGroup = "e2e-dash-group"
	dashSends = 20
)

// TestE2EDashboard runs the real `wharf dev`, opens its dashboard in
// headless chromium and checks what the page shows against the brokers'
// own answers: every queue's max offset (GET_MAX_OFFSET), a group's lag
// per queue (DESCRIBE_CONSUMER_GROUP), charts drawn as SVG with data; it
// creates a topic through the form and finds it on every master, deletes
// it with its button, looks a message up by key and by id and reads its
// body, sees a killed slave shown down, and saves screenshots.
func TestE2EDashboard(t *testing.T) {
	chromium := dashboardBrowser(t)
	out := dashboardOutput(t)
	port := e2eFreePorts(t, 1)[0]
	cmd, stdout, _, done, ns, _ := startDev(t, "--dashboardPort", strconv.Itoa(port))
	var url string
	testwait.For(t, testwait.Wall, 40*time.Second, "wharf dev to print the dashboard URL", func() bool {
		select {
		case <-done:
			t.Fatalf("wharf dev exited: %v", cmd.ProcessState)
		default:
		}
		if m := regexp.MustCompile(`Dashboard: (http://\S+)`).FindStringSubmatch(stdout.String()); m != nil {
			url = m[1]
		}
		return url != ""
	})
	if want := fmt.Sprintf("http://127.0.0.1:%d/", port); url != want {
		t.Fatalf("dashboard URL %s, want %s", url, want)
	}
	admin, err := client.NewAdmin("", client.WithNameServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ids := dashFill(t, admin, ns)

	tab := dashBrowser(t, chromium)
	run(t, tab, 20*time.Second, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`[data-testid="broker-row"]`)))
	b := &dashPage{t: t, tab: tab, out: out}
	b.waitEval("four brokers, all up and in their SyncStateSets", `[...document.querySelectorAll('[data-testid="broker-row"]')].filter(r =>
		r.querySelector('[data-testid="broker-health"]').textContent === "up" && r.querySelector('[data-testid="broker-insync"]').textContent === "yes").length === 4`)
	b.shot("cluster")
	b.checkOffsets(admin)
	b.checkLag(admin)
	b.checkCharts()
	b.createTopic(admin)
	b.lookup(ids)
	b.brokerDown(stdout.String())
}

// dashFill creates the topic, sends dashSends messages with keys and
// starts an orderly member of dashGroup that takes the first half of the
// bodies and holds the first of the rest in each queue, so that the
// group's lag stays put; it returns the messages' ids by body index.
func dashFill(t *testing.T, admin *client.Admin, ns string) []string {
	t.Helper()
	ctx := context.Background()
	if _, err := admin.CreateTopicInCluster(ctx, devCluster, dashTopic, 4); err != nil {
		t.Fatal(err)
	}
	p, err := client.NewProducer("", client.WithNameServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ids := make([]string, dashSends)
	testwait.For(t, testwait.Wall, 20*time.Second, "every send of "+dashTopic+" stored", func() bool {
		for i := range dashSends {
			if ids[i] != "" {
				continue
			}
			m := &protocol.Message{Topic: dashTopic, Body: []byte("body-" + strconv.Itoa(i))}
			m.SetKeys("key-" + strconv.Itoa(i))
			if r, err := p.Send(ctx, m); err == nil && r.Status.Stored() {
				ids[i] = r.MsgID
			}
		}
		return !slices.Contains(ids, "")
	})
	c, err := client.NewPushConsumer("", dashGroup, client.WithNameServer(ns), client.WithConsumeFrom(client.ConsumeFromFirst),
		client.WithConsumeOrderly(true), client.WithAckTimeout(10*time.Minute), client.WithCommitInterval(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	c.Subscribe(dashTopic, "*", func(ctx context.Context, msgs []*protocol.MessageExt) client.ConsumeResult {
		for _, m := range msgs {
			if n, _ := strconv.Atoi(string(m.Body[len("body-"):])); n >= dashSends/2 {
				<-ctx.Done() // held until Close
				return client.ConsumeRetryLater
			}
		}
		return client.ConsumeSuccess
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return ids
}

// dashBrowser starts headless chromium with the flags this machine needs
// (no background connections to Google, an empty profile) for the rest of
// the test: 90 s at most.
func dashBrowser(t *testing.T, chromium string) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1000),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true)}
	ctx, cancelAll := context.WithTimeout(context.Background(), 90*time.Second)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tab, cancelTab := chromedp.NewContext(alloc, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() { cancelTab(); cancelAlloc(); cancelAll() })
	if err := chromedp.Do(tab); err != nil { // starts the browser, bound to tab
		t.Fatalf("start chromium %s: %v", chromium, err)
	}
	return tab
}

// run runs steps on the tab within d.
func run(t *testing.T, tab context.Context, d time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, d)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}
