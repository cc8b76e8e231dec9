package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// A real broker serves /metrics and /healthz on --metricsPort: /healthz
// says ready once it serves, and the counters move with the sends.
func TestE2EMetrics(t *testing.T) {
	t.Parallel()
	port := e2eFreePorts(t, 1)[0]
	b := startBroker(t, t.TempDir(), "--metricsPort", strconv.Itoa(port))
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	get := httpGetter(base)
	waitHealthy(t, get)

	ctx := e2eCtx(t, 30*time.Second)
	p := e2eProducer(t, b.addr)
	for i := range 5 {
		m := e2eMessage("metrics-topic", fmt.Sprintf("k%d", i))
		if _, err := p.Send(ctx, m); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	code, body := get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	for _, want := range []string{
		`wharf_messages_in_total{topic="metrics-topic"} 5`,
		`wharf_send_latency_seconds_count{code="SEND_MESSAGE",status="SUCCESS"} 5`,
		`wharf_connections 1`,
		`go_goroutines `,
		`process_resident_memory_bytes `,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics has no %q", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}

// The name server serves the runtime's metrics and /healthz too, and a
// /status with the brokers and topics it knows and, with an embedded
// controller, the controller node's term and leader.
func TestE2ENamesrvMetrics(t *testing.T) {
	t.Parallel()
	ports := e2eFreePorts(t, 2)
	ctlPeer := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))
	ns := startNamesrv(t, "--metricsPort", strconv.Itoa(ports[0]), "--enableControllerInNamesrv",
		"--controllerPeers", "n0-"+ctlPeer, "--controllerSelfId", "n0", "--storePathRootDir", t.TempDir(),
		"--electionTimeoutMillis", "300", "--tickIntervalMillis", "50")
	get := httpGetter(fmt.Sprintf("http://127.0.0.1:%d", ports[0]))
	waitHealthy(t, get)
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "go_goroutines ") {
		t.Errorf("/metrics: %d, no go_goroutines:\n%s", code, body)
	}
	b := startBroker(t, t.TempDir(), "--namesrvAddr", ns.addr, "--brokerName", "status-b")
	ctx := e2eCtx(t, 30*time.Second)
	e2eCreateTopic(t, ctx, e2eAdmin(t, b.addr), "NST", 2)
	a, err := client.NewAdmin("", client.WithNameServer(ns.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var doc struct {
		Brokers []struct {
			BrokerName string `json:"brokerName"`
			BrokerAddr string `json:"brokerAddr"`
			Alive      bool   `json:"alive"`
		} `json:"brokers"`
		BrokerCount, AliveBrokerCount, TopicCount int
		Controller                                *struct {
			IsLeader bool  `json:"isLeader"`
			Term     int64 `json:"term"`
		} `json:"controller"`
	}
	testwait.For(t, testwait.Wall, 15*time.Second, "/status with the broker, its topics and a leading controller", func() bool {
		getJSON(t, get, "/status", &doc)
		topics, err := a.NameServerTopics(ctx)
		return err == nil && slices.Contains(topics, "NST") && doc.TopicCount == len(topics) &&
			doc.BrokerCount == 1 && doc.AliveBrokerCount == 1 && doc.Brokers[0].BrokerName == "status-b" &&
			doc.Brokers[0].BrokerAddr == b.addr && doc.Controller != nil && doc.Controller.IsLeader && doc.Controller.Term > 0
	})
}

// httpGetter GETs paths under base: the status and the body (0 and the
// error when the request failed).
func httpGetter(base string) func(path string) (int, string) {
	return func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
}

func waitHealthy(t *testing.T, get func(string) (int, string)) {
	t.Helper()
	testwait.For(t, testwait.Wall, 10*time.Second, "/healthz ready", func() bool {
		code, body := get("/healthz")
		return code == http.StatusOK && strings.TrimSpace(body) == "ready"
	})
}

// A real broker's gauges and JSON status endpoints agree with its own
// answers: a group consumes the first 20 messages of a topic and holds the
// next 10, and then the lag gauge of (group, topic) is DESCRIBE's lag, the
// lag in time is positive, /topics has GET_MAX_OFFSET's offsets, /groups
// DESCRIBE's, /status the runtime info's.
func TestE2EMetricsLagAndStatus(t *testing.T) {
	t.Parallel()
	port := e2eFreePorts(t, 1)[0]
	b := startBroker(t, t.TempDir(), "--metricsPort", strconv.Itoa(port), "--consumerHeartbeatInterval", "200")
	get := httpGetter(fmt.Sprintf("http://127.0.0.1:%d", port))
	waitHealthy(t, get)
	ctx := e2eCtx(t, 60*time.Second)
	a := e2eAdmin(t, b.addr)
	e2eCreateTopic(t, ctx, a, "LT", 4)
	p := e2eProducer(t, b.addr)
	first := e2eSendKeys(t, p, "LT", "a", 20)

	var hold atomic.Bool
	release := make(chan struct{})
	got := newE2EDeliveries()
	consume := got.handler(t, "m1")
	e2eMember(t, b.addr, "LG", "LT", "m1", func(ctx context.Context, msgs []*protocol.MessageExt) client.ConsumeResult {
		if hold.Load() {
			select { // not consumed: the group's lag
			case <-release:
			case <-ctx.Done():
			}
			return client.ConsumeRetryLater
		}
		return consume(ctx, msgs)
	})
	t.Cleanup(func() { close(release) }) // before the member closes
	testwait.For(t, testwait.Wall, 20*time.Second, "the first 20 consumed", func() bool { return got.has(first) })
	hold.Store(true)
	e2eSendKeys(t, p, "LT", "b", 10)

	// DESCRIBE's lag of LT settles at 10 once the commits are in.
	describeLag := func() int64 {
		d, err := a.DescribeGroup(ctx, "LG")
		if err != nil {
			return -1
		}
		var lag int64
		for _, q := range d.Queues {
			if q.Topic == "LT" {
				lag += q.Lag
			}
		}
		return lag
	}
	testwait.For(t, testwait.Wall, 20*time.Second, "DESCRIBE lag 10", func() bool { return describeLag() == 10 })
	var body string
	testwait.For(t, testwait.Wall, 10*time.Second, "the lag gauges", func() bool {
		_, body = get("/metrics")
		return promValue(body, `wharf_consumer_lag_messages{group="LG",topic="LT"}`) == float64(describeLag()) &&
			promValue(body, `wharf_consumer_lag_seconds{group="LG",topic="LT"}`) > 0
	})
	for _, name := range []string{"wharf_commitlog_disk_bytes", `wharf_mailbox_depth{actor="writer"}`,
		"wharf_commitlog_flush_behind_bytes", "wharf_commitlog_dispatch_behind_bytes", "wharf_outbound_queued_bytes",
		"wharf_in_sync_slaves", "wharf_sync_state_set_size"} {
		if promValue(body, name) < 0 {
			t.Errorf("/metrics has no %s", name)
		}
	}
	if v := promValue(body, "wharf_commitlog_disk_bytes"); v <= 0 {
		t.Errorf("wharf_commitlog_disk_bytes %v, want > 0", v)
	}
	e2eCheckTopicsDoc(t, ctx, a, get)
	e2eCheckGroupsDoc(t, ctx, a, get)
	e2eCheckStatusDocs(t, ctx, a, get)
}

// e2eCheckTopicsDoc: /topics lists LT's 4 queues with GET_MAX_OFFSET's
// and GET_MIN_OFFSET's offsets.
func e2eCheckTopicsDoc(t *testing.T, ctx context.Context, a *client.Admin, get func(string) (int, string)) {
	t.Helper()
	var doc struct {
		Topics []struct {
			Topic  string `json:"topic"`
			Queues []struct {
				QueueID   int32 `json:"queueId"`
				MinOffset int64 `json:"minOffset"`
				MaxOffset int64 `json:"maxOffset"`
			} `json:"queues"`
		} `json:"topics"`
	}
	getJSON(t, get, "/topics", &doc)
	var found bool
	for _, tp := range doc.Topics {
		if tp.Topic != "LT" {
			continue
		}
		found = true
		if len(tp.Queues) != 4 {
			t.Errorf("/topics: LT has %d queues, want 4", len(tp.Queues))
		}
		for _, q := range tp.Queues {
			hi, err1 := a.GetMaxOffset(ctx, "LT", q.QueueID)
			lo, err2 := a.GetMinOffset(ctx, "LT", q.QueueID)
			if err1 != nil || err2 != nil || q.MaxOffset != hi || q.MinOffset != lo {
				t.Errorf("/topics: LT queue %d [%d, %d), the broker says [%d, %d) (%v %v)", q.QueueID, q.MinOffset, q.MaxOffset, lo, hi, err1, err2)
			}
		}
	}
	if !found {
		t.Errorf("/topics has no LT: %+v", doc)
	}
}

// e2eCheckGroupsDoc: /groups has LG with its member, and per queue the
// committed offset and lag DESCRIBE answers.
func e2eCheckGroupsDoc(t *testing.T, ctx context.Context, a *client.Admin, get func(string) (int, string)) {
	t.Helper()
	type queue struct {
		Topic           string `json:"topic"`
		QueueID         int32  `json:"queueId"`
		CommittedOffset int64  `json:"committedOffset"`
		Lag             int64  `json:"lag"`
		LagMs           int64  `json:"lagMs"`
	}
	var doc struct {
		Groups []struct {
			Group   string `json:"group"`
			Members []struct {
				ClientID string `json:"clientId"`
			} `json:"members"`
			Queues []queue `json:"queues"`
			Lag    int64   `json:"lag"`
		} `json:"groups"`
	}
	getJSON(t, get, "/groups", &doc)
	d, err := a.DescribeGroup(ctx, "LG")
	if err != nil {
		t.Fatal(err)
	}
	want := map[[2]any]protocol.GroupQueue{}
	for _, q := range d.Queues {
		want[[2]any{q.Topic, q.QueueID}] = q
	}
	if len(doc.Groups) != 1 || doc.Groups[0].Group != "LG" || len(doc.Groups[0].Members) != 1 || doc.Groups[0].Members[0].ClientID != "m1" {
		t.Fatalf("/groups: %+v", doc)
	}
	for _, q := range doc.Groups[0].Queues {
		w := want[[2]any{q.Topic, q.QueueID}]
		if q.CommittedOffset != w.CommittedOffset || q.Lag != w.Lag {
			t.Errorf("/groups: %s-%d committed %d lag %d, DESCRIBE says %d and %d", q.Topic, q.QueueID, q.CommittedOffset, q.Lag, w.CommittedOffset, w.Lag)
		}
		if q.Lag > 0 && q.LagMs <= 0 {
			t.Errorf("/groups: %s-%d lags %d messages, lagMs %d", q.Topic, q.QueueID, q.Lag, q.LagMs)
		}
	}
}

// e2eCheckStatusDocs: /status has the runtime info's identity, offsets and
// counters; /replication a master without slaves; ?pretty indents.
func e2eCheckStatusDocs(t *testing.T, ctx context.Context, a *client.Admin, get func(string) (int, string)) {
	t.Helper()
	info, err := a.RuntimeInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		BrokerName  string `json:"brokerName"`
		BrokerRole  string `json:"brokerRole"`
		ClusterName string `json:"clusterName"`
		UptimeMs    int64  `json:"uptimeMs"`
		CommitLog   struct {
			MinOffset, MaxOffset, FlushBehindBytes, DispatchBehindBytes, DiskBytes int64
		} `json:"commitLog"`
		MsgPutTotal   int64            `json:"msgPutTotal"`
		Connections   int64            `json:"connections"`
		TopicCount    int              `json:"topicCount"`
		MailboxDepths map[string]int64 `json:"mailboxDepths"`
		Topics        any              `json:"topics"`
	}
	getJSON(t, get, "/status", &st)
	if st.BrokerName != info.BrokerName || st.BrokerRole != info.BrokerRole || st.CommitLog.MaxOffset != info.CommitLogMaxOffset ||
		st.MsgPutTotal != info.MsgPutTotal || st.UptimeMs <= 0 || st.CommitLog.DiskBytes <= 0 || st.Connections < 1 ||
		st.TopicCount == 0 || st.Topics != nil || len(st.MailboxDepths) == 0 {
		t.Errorf("/status %+v, runtime info %+v", st, info)
	}
	var repl struct {
		BrokerRole string `json:"brokerRole"`
		MaxOffset  int64  `json:"maxOffset"`
		Slaves     []any  `json:"slaves"`
	}
	getJSON(t, get, "/replication", &repl)
	if repl.BrokerRole != info.BrokerRole || repl.MaxOffset != info.CommitLogMaxOffset || repl.Slaves == nil || len(repl.Slaves) != 0 {
		t.Errorf("/replication %+v", repl)
	}
	if code, body := get("/status?pretty"); code != http.StatusOK || !strings.Contains(body, "\n  \"brokerName\"") {
		t.Errorf("/status?pretty: %d %s", code, body)
	}
}

// getJSON GETs path, checks the status and content type, and decodes the
// body into v.
func getJSON(t *testing.T, get func(string) (int, string), path string, v any) {
	t.Helper()
	code, body := get(path)
	if code != http.StatusOK {
		t.Fatalf("%s: %d %s", path, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("%s: %v in %s", path, err, body)
	}
}

// promValue is the value of series (name and labels as exposed) in an
// exposition body, -1 if absent.
func promValue(body, series string) float64 {
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			if v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64); err == nil {
				return v
			}
		}
	}
	return -1
}

// A controller node's /status has its term, whether it leads, and each
// broker group's master, epoch and SyncStateSet; a broker in controller
// mode says the same epoch and set in /replication.
func TestE2EControllerStatus(t *testing.T) {
	t.Parallel()
	ports := e2eFreePorts(t, 3)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	ctl := &e2eBroker{t: t, dir: t.TempDir(), addr: addr, stderr: &syncBuffer{}, done: make(chan struct{})}
	ctl.launch(e2eBinary(t), append(append([]string{"controller", "--controllerPeers", "n0-" + addr, "--controllerSelfId", "n0",
		"--storePathRootDir", ctl.dir}, e2eControllerFlags...), "--metricsPort", strconv.Itoa(ports[1])))
	getCtl := httpGetter(fmt.Sprintf("http://127.0.0.1:%d", ports[1]))
	waitHealthy(t, getCtl)
	startBroker(t, t.TempDir(), "--brokerName", "ctl-status", "--enableControllerMode=true", "--controllerAddr", addr,
		"--metricsPort", strconv.Itoa(ports[2]))
	getBroker := httpGetter(fmt.Sprintf("http://127.0.0.1:%d", ports[2]))
	type group struct {
		BrokerName   string  `json:"brokerName"`
		MasterID     int64   `json:"masterId"`
		MasterEpoch  int32   `json:"masterEpoch"`
		SyncStateSet []int64 `json:"syncStateSet"`
	}
	var node struct {
		IsLeader bool    `json:"isLeader"`
		Term     int64   `json:"term"`
		Groups   []group `json:"groups"`
	}
	var repl struct {
		BrokerRole   string  `json:"brokerRole"`
		CtlID        int64   `json:"controllerBrokerId"`
		Epoch        int32   `json:"epoch"`
		SyncStateSet []int64 `json:"syncStateSet"`
	}
	testwait.For(t, testwait.Wall, 20*time.Second, "the controller's group and the broker's /replication to agree", func() bool {
		getJSON(t, getCtl, "/status", &node)
		if code, _ := getBroker("/replication"); code != http.StatusOK {
			return false
		}
		getJSON(t, getBroker, "/replication", &repl)
		if !node.IsLeader || node.Term == 0 || len(node.Groups) != 1 {
			return false
		}
		g := node.Groups[0]
		return g.BrokerName == "ctl-status" && g.MasterEpoch > 0 && repl.Epoch == g.MasterEpoch && repl.CtlID == g.MasterID &&
			repl.BrokerRole != "SLAVE" && slices.Equal(repl.SyncStateSet, g.SyncStateSet)
	})
}
