package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/internal/brokertest"
	"github.com/wharfmq/wharf/protocol"
)

// fixture is one broker group registered with a name server, a topic
// with messages, and the dashboard over them, served by httptest.
type fixture struct {
	b     *brokertest.Broker
	admin *client.Admin
	srv   *httptest.Server
	ids   []string // msg ids of body-0...
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ns := brokertest.StartNameServer(t)
	b := brokertest.Start(t)
	b.CreateTopic("orders", 2)
	b.RegisterWith(ns, "c1", "g1")
	p, err := client.NewProducer(b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	f := &fixture{b: b}
	ctx := context.Background()
	for i := range 5 {
		m := &protocol.Message{Topic: "orders", Body: fmt.Appendf(nil, "body-%d", i)}
		m.SetKeys(fmt.Sprintf("k-%d", i))
		r, err := p.Send(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		f.ids = append(f.ids, r.MsgID)
	}
	b.WaitDispatched()
	if f.admin, err = client.NewAdmin(b.Addr()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.admin.Close() })
	s := New(Config{NameServer: ns.Addr(), Timeout: 2 * time.Second})
	t.Cleanup(s.pool.close)
	s.sampleOnce(ctx)
	s.sampleOnce(ctx)
	f.srv = httptest.NewServer(s)
	t.Cleanup(f.srv.Close)
	return f
}

// do sends method path (body as JSON, with the dashboard's header if
// header) and decodes the answer into v and returns the status.
func (f *fixture) do(t *testing.T, method, path string, body any, header bool, v any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, f.srv.URL+path, rd)
	if header {
		req.Header.Set("X-Wharf-Dashboard", "1")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if v != nil {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return resp.StatusCode
}

// TestAPIReadsTheCluster checks every read endpoint's numbers against
// the broker's own answers.
func TestAPIReadsTheCluster(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()

	var c clusterJSON
	if st := f.do(t, "GET", "/api/cluster", nil, false, &c); st != 200 || len(c.Brokers) != 1 {
		t.Fatalf("cluster: %d %+v", st, c)
	}
	if b := c.Brokers[0]; b.Health != "up" || b.MsgPutTotal != 5 || b.Group != "g1" || b.Addr != f.b.Addr() {
		t.Errorf("broker row = %+v", b)
	}

	var topics struct{ Topics []topicJSON }
	f.do(t, "GET", "/api/topics", nil, false, &topics)
	if len(topics.Topics) != 1 || topics.Topics[0].Topic != "orders" || len(topics.Topics[0].Queues) != 2 {
		t.Fatalf("topics = %+v", topics)
	}
	var total int64
	for _, q := range topics.Topics[0].Queues {
		want, err := f.admin.GetMaxOffset(ctx, "orders", q.QueueID)
		if err != nil || q.Max != want || q.Error != "" {
			t.Errorf("queue %d: max %d (%s), broker says %d (%v)", q.QueueID, q.Max, q.Error, want, err)
		}
		total += q.Max
	}
	if total != 5 {
		t.Errorf("max offsets sum to %d, want 5", total)
	}

	var h struct {
		Brokers []seriesJSON
	}
	f.do(t, "GET", "/api/history", nil, false, &h)
	if len(h.Brokers) != 1 || len(h.Brokers[0].Points) != 1 || h.Brokers[0].LatencyError == "" {
		t.Errorf("history = %+v (want one point, latency unknown without a metrics port)", h)
	}

	var groups struct {
		Groups []groupJSON
		Errors []brokerErr
	}
	if st := f.do(t, "GET", "/api/groups", nil, false, &groups); st != 200 || len(groups.Errors) != 0 || groups.Groups == nil {
		t.Errorf("groups: %d %+v", st, groups)
	}
	var repl struct{ Groups []replJSON }
	if st := f.do(t, "GET", "/api/replication", nil, false, &repl); st != 200 || len(repl.Groups) != 1 || repl.Groups[0].Master != f.b.Addr() {
		t.Errorf("replication: %d %+v", st, repl)
	}
}

// TestAPIMessageLookup finds a message by key and by id.
func TestAPIMessageLookup(t *testing.T) {
	f := newFixture(t)
	type result struct {
		Messages []messageJSON
		Errors   []string
	}
	var byKey, byID, none result
	f.do(t, "GET", "/api/message?topic=orders&key=k-2", nil, false, &byKey)
	if len(byKey.Messages) != 1 || byKey.Messages[0].BodyText == nil || *byKey.Messages[0].BodyText != "body-2" || byKey.Messages[0].MsgID != f.ids[2] {
		t.Errorf("by key = %+v", byKey)
	}
	f.do(t, "GET", "/api/message?id="+f.ids[3], nil, false, &byID)
	if len(byID.Messages) != 1 || *byID.Messages[0].BodyText != "body-3" || len(byID.Errors) != 0 {
		t.Errorf("by id = %+v", byID)
	}
	f.do(t, "GET", "/api/message?topic=orders&key=nope", nil, false, &none)
	if len(none.Messages) != 0 || len(none.Errors) != 0 {
		t.Errorf("unknown key = %+v", none)
	}
	if st := f.do(t, "GET", "/api/message?topic=orders", nil, false, nil); st != 400 {
		t.Errorf("no key: status %d, want 400", st)
	}
}

// TestAPITopicCreateDelete creates and deletes a topic on the broker; a
// request without the dashboard's header is refused.
func TestAPITopicCreateDelete(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if st := f.do(t, "POST", "/api/topics", createReq{Topic: "fresh", Queues: 3}, false, nil); st != 403 {
		t.Errorf("create without header: %d, want 403", st)
	}
	var m mutationJSON
	if st := f.do(t, "POST", "/api/topics", createReq{Topic: "fresh", Queues: 3}, true, &m); st != 200 || m.Error != "" || len(m.Brokers) != 1 {
		t.Fatalf("create: %d %+v", st, m)
	}
	if tc, err := f.admin.GetTopic(ctx, "fresh"); err != nil || tc.WriteQueueNums != 3 {
		t.Errorf("broker's topic = %+v, %v", tc, err)
	}
	if st := f.do(t, "POST", "/api/topics", createReq{Topic: "bad topic!"}, true, &m); st != 400 {
		t.Errorf("bad name: %d %+v, want 400", st, m)
	}
	var del mutationJSON
	if st := f.do(t, "DELETE", "/api/topics/fresh", nil, true, &del); st != 200 || del.Error != "" {
		t.Fatalf("delete: %d %+v", st, del)
	}
	if _, err := f.admin.GetTopic(ctx, "fresh"); !errors.Is(err, client.ErrTopicNotExist) {
		t.Errorf("after delete: %v, want ErrTopicNotExist", err)
	}
}

// TestPageAndDownNameServer: the page and its script are served from the
// binary, and a name server that does not answer is a 502 with a reason.
func TestPageAndDownNameServer(t *testing.T) {
	s := New(Config{NameServer: "127.0.0.1:1", Timeout: 200 * time.Millisecond})
	t.Cleanup(s.pool.close)
	srv := httptest.NewServer(s)
	defer srv.Close()
	for path, want := range map[string]string{"/": `data-testid="cluster-table"`, "/app.js": "function refresh", "/style.css": "body"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Errorf("%s: %d, want %q in the body", path, resp.StatusCode, want)
		}
	}
	resp, err := http.Get(srv.URL + "/api/cluster")
	if err != nil {
		t.Fatal(err)
	}
	var e apiError
	_ = json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(e.Error, "127.0.0.1:1") {
		t.Errorf("down name server: %d %+v", resp.StatusCode, e)
	}
}
