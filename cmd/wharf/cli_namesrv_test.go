package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wharfmq/wharf/internal/brokertest"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// cliCluster is a name server with two broker groups (one master each)
// of cluster c1 registered.
type cliCluster struct {
	ns     *brokertest.NameServer
	g1, g2 *brokertest.Broker
}

func startCLICluster(t *testing.T) *cliCluster {
	t.Helper()
	c := &cliCluster{ns: brokertest.StartNameServer(t), g1: brokertest.Start(t), g2: brokertest.Start(t)}
	c.register()
	return c
}

// register (again) registers both groups, as a broker does after a topic change.
func (c *cliCluster) register() {
	c.g1.RegisterWith(c.ns, "c1", "g1")
	c.g2.RegisterWith(c.ns, "c1", "g2")
}

// The client commands run on a cluster with --namesrv: topic create puts
// the topic on both masters, produce spreads over both groups, consume gets
// every message from both, query merges both groups' answers, and topic
// delete removes the topic from the masters and the routes.
func TestCLINamesrvTopicProduceConsumeQuery(t *testing.T) {
	c := startCLICluster(t)
	ns := c.ns.Addr()
	out, stderr, err := runCLI(t, "topic", "create", "--namesrv", ns, "--cluster", "c1", "--topic", "T", "--queues", "2", "--json")
	if err != nil {
		t.Fatalf("topic create: %v\n%s", err, stderr)
	}
	var created struct {
		OK             bool     `json:"ok"`
		Cluster        string   `json:"cluster"`
		Masters        []string `json:"masters"`
		WriteQueueNums int32    `json:"write_queue_nums"`
	}
	lastJSON(t, out, &created)
	want := []string{c.g1.Addr(), c.g2.Addr()}
	slices.Sort(want)
	if !created.OK || created.Cluster != "c1" || !slices.Equal(created.Masters, want) || created.WriteQueueNums != 2 {
		t.Fatalf("topic create %+v, want masters %v", created, want)
	}
	if c.g1.QueueCount("T") != 2 || c.g2.QueueCount("T") != 2 {
		t.Fatalf("queues on the masters: %d, %d", c.g1.QueueCount("T"), c.g2.QueueCount("T"))
	}
	c.register()
	out, stderr, err = runCLI(t, "topic", "route", "--namesrv", ns, "--topic", "T", "--json")
	if err != nil {
		t.Fatalf("topic route: %v\n%s", err, stderr)
	}
	var route struct {
		QueueDatas []queueDataJSON `json:"queue_datas"`
		Brokers    []brokerJSON    `json:"brokers"`
	}
	if lastJSON(t, out, &route); len(route.QueueDatas) != 2 || len(route.Brokers) != 2 {
		t.Fatalf("topic route %s", out)
	}
	out, _, err = runCLI(t, "topic", "list", "--namesrv", ns, "--json")
	var list struct{ Topics []struct{ Topic string } }
	if lastJSON(t, out, &list); err != nil || !slices.ContainsFunc(list.Topics, func(x struct{ Topic string }) bool { return x.Topic == "T" }) {
		t.Fatalf("topic list: %v %+v", err, list)
	}

	out, stderr, err = runCLI(t, "produce", "--namesrv", ns, "--topic", "T", "--count", "200", "--key", "K", "--json")
	if err != nil {
		t.Fatalf("produce: %v\n%s", err, stderr)
	}
	var rep produceReport
	lastJSON(t, out, &rep)
	if rep.Acked != 200 || rep.Failed != 0 || rep.Stopped != "done" {
		t.Fatalf("produce report %+v", rep)
	}
	if n1, n2 := c.g1.Total("T"), c.g2.Total("T"); n1 == 0 || n2 == 0 || n1+n2 != 200 {
		t.Fatalf("groups hold %d and %d messages, want 200 over both", n1, n2)
	}

	out, stderr, err = runCLI(t, "consume", "--namesrv", ns, "--topic", "T", "--group", "G", "--count", "200", "--json", "--suspend", "1s")
	if err != nil {
		t.Fatalf("consume: %v\n%s", err, stderr)
	}
	var crep consumeReport
	lastJSON(t, out, &crep)
	if crep.Received != 200 || crep.Duplicates != 0 || crep.Stopped != "count" {
		t.Fatalf("consume report %+v", crep)
	}

	testCLINamesrvQuery(t, c)

	out, stderr, err = runCLI(t, "topic", "delete", "--namesrv", ns, "--topic", "T", "--json")
	if err != nil {
		t.Fatalf("topic delete: %v\n%s", err, stderr)
	}
	lastJSON(t, out, &created)
	if !slices.Equal(created.Masters, want) || c.g1.QueueCount("T") != 0 || c.g2.QueueCount("T") != 0 {
		t.Fatalf("topic delete %+v; queues left %d, %d", created, c.g1.QueueCount("T"), c.g2.QueueCount("T"))
	}
	if _, _, err := runCLI(t, "topic", "route", "--namesrv", ns, "--topic", "T"); err == nil || !strings.Contains(err.Error(), "TOPIC_NOT_EXIST") {
		t.Fatalf("route of the deleted topic: %v, want TOPIC_NOT_EXIST", err)
	}
}

// testCLINamesrvQuery: query --namesrv by key finds the messages of both
// groups, and by message id (without --topic) the one message, on
// whichever group stored it.
func testCLINamesrvQuery(t *testing.T, c *cliCluster) {
	t.Helper()
	ns := c.ns.Addr()
	for _, b := range []*brokertest.Broker{c.g1, c.g2} {
		if _, stderr, err := runCLI(t, "produce", "--broker", b.Addr(), "--topic", "T", "--key", "D"); err != nil {
			t.Fatalf("produce to %s: %v\n%s", b.Addr(), err, stderr)
		}
	}
	out, stderr, err := runCLI(t, "query", "--namesrv", ns, "--topic", "T", "--key", "D-0", "--json")
	if err != nil {
		t.Fatalf("query by key: %v\n%s", err, stderr)
	}
	var q queryReport
	lastJSON(t, out, &q)
	if q.Count != 2 || q.Messages[0].StoreHost == q.Messages[1].StoreHost {
		t.Fatalf("query by key: %+v, want one message of each group", q)
	}
	var id string
	for _, m := range c.g2.Messages("T", 1) {
		id = m.MsgID
	}
	if id == "" {
		t.Fatal("g2 holds no message in queue 1")
	}
	out, stderr, err = runCLI(t, "query", "--namesrv", ns, "--msgid", id, "--json")
	if err != nil {
		t.Fatalf("query by id: %v\n%s", err, stderr)
	}
	lastJSON(t, out, &q)
	if q.Count != 1 || q.Messages[0].MsgID != id {
		t.Fatalf("query by id %s: %+v", id, q)
	}
}

// --broker and --namesrv together is an error before anything is asked,
// and the modes that need one broker say so on --namesrv.
func TestCLINamesrvFlagErrors(t *testing.T) {
	c := startCLICluster(t)
	c.g1.CreateTopic("T", 2)
	c.register()
	ns, b := c.ns.Addr(), c.g1.Addr()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"produce", "--topic", "T", "--broker", b, "--namesrv", ns}, "not both"},
		{[]string{"consume", "--topic", "T", "--broker", b, "--namesrv", ns}, "not both"},
		{[]string{"query", "--topic", "T", "--key", "k", "--broker", b, "--namesrv", ns}, "not both"},
		{[]string{"topic", "create", "--topic", "T", "--broker", b, "--namesrv", ns}, "not both"},
		{[]string{"topic", "list", "--broker", b, "--namesrv", ns}, "not both"},
		{[]string{"group", "list", "--broker", b, "--namesrv", ns}, "not both"},
		{[]string{"produce", "--topic", "T", "--queue", "1", "--namesrv", ns}, "use --broker"},
		{[]string{"consume", "--topic", "T", "--slave", b, "--namesrv", ns}, "use --broker"},
		{[]string{"group", "describe", "--group", "G", "--broker", b, "--namesrv", ns}, "not both"},
		{[]string{"topic", "create", "--topic", "T", "--perm", "4", "--namesrv", ns}, "need --broker"},
		{[]string{"topic", "create", "--topic", "T", "--cluster", "c1", "--broker", b}, "--cluster needs --namesrv"},
	}
	for _, tc := range tests {
		_, _, err := runCLI(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("wharf %s: error %v, want one saying %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	if n := c.g1.Count(protocol.CodeSendMessage) + c.g1.Count(protocol.CodeUpdateAndCreateTopic) + c.g1.Count(protocol.CodeHeartbeat); n != 0 {
		t.Errorf("refused commands reached the broker %d times", n)
	}
}

// cluster list --json through the client's Admin: both brokers with their
// role and liveness, each live one's max offset and put rate; a stopped
// broker is listed dead, without stats.
func TestCLIClusterListStats(t *testing.T) {
	c := startCLICluster(t)
	c.g1.CreateTopic("T", 2)
	if _, stderr, err := runCLI(t, "produce", "--broker", c.g1.Addr(), "--topic", "T", "--count", "10"); err != nil {
		t.Fatalf("produce: %v\n%s", err, stderr)
	}
	type broker struct {
		Group       string   `json:"group"`
		Address     string   `json:"address"`
		Alive       bool     `json:"alive"`
		MaxOffset   *int64   `json:"max_offset"`
		MsgPutTotal int64    `json:"msg_put_total"`
		PutTPS      *float64 `json:"put_tps"`
	}
	list := func() map[string]broker {
		t.Helper()
		out, stderr, err := runCLI(t, "cluster", "list", "--namesrv", "127.0.0.1:1;"+c.ns.Addr(), "--tps-window", "100ms", "--json")
		if err != nil {
			t.Fatalf("cluster list: %v\n%s", err, stderr)
		}
		var got struct{ Brokers []broker }
		lastJSON(t, out, &got)
		m := map[string]broker{}
		for _, b := range got.Brokers {
			m[b.Group] = b
		}
		return m
	}
	got := list()
	g1, g2 := got["g1"], got["g2"]
	if len(got) != 2 || !g1.Alive || !g2.Alive || g1.Address != c.g1.Addr() || g1.MaxOffset == nil || *g1.MaxOffset <= 0 ||
		g1.MsgPutTotal != 10 || g1.PutTPS == nil || g2.MaxOffset == nil || *g2.MaxOffset != 0 {
		t.Fatalf("cluster list %+v", got)
	}
	out, _, err := runCLI(t, "cluster", "list", "--namesrv", c.ns.Addr(), "--tps-window", "0")
	if err != nil || !strings.Contains(out, "MAX OFFSET") || !strings.Contains(out, c.g2.Addr()) {
		t.Fatalf("human cluster list: %v\n%s", err, out)
	}
	c.g2.Stop()
	testwait.For(t, testwait.Wall, 5*time.Second, "g2 to be listed dead", func() bool { return !list()["g2"].Alive })
	if g2 := list()["g2"]; g2.MaxOffset != nil {
		t.Fatalf("dead broker with stats: %+v", g2)
	}
}

// produce --namesrv keeps sending to the other group when one group's
// master stops mid-run (where produce --broker would stop): every message
// is acked or counted failed, and the run ends "done"; batches go through
// the routes too.
func TestCLINamesrvProduceAroundAStoppedGroup(t *testing.T) {
	c := startCLICluster(t)
	c.g1.CreateTopic("T", 2)
	c.g2.CreateTopic("T", 2)
	c.register()
	ns := c.ns.Addr()
	out, stderr, err := runCLI(t, "produce", "--namesrv", ns, "--topic", "T", "--count", "40", "--batch", "10", "--json")
	var rep produceReport
	if lastJSON(t, out, &rep); err != nil || rep.Acked != 40 {
		t.Fatalf("produce --batch: %v %+v\n%s", err, rep, stderr)
	}

	const n = 3000
	done := make(chan struct{})
	go func() {
		defer close(done)
		out, stderr, err = runCLI(t, "produce", "--namesrv", ns, "--topic", "T", "--count", fmt.Sprint(n), "--inflight", "4", "--retries", "0", "--json")
	}()
	before := c.g2.Total("T")
	testwait.For(t, testwait.Wall, 10*time.Second, "g2 to take sends", func() bool { return c.g2.Total("T") >= before+200 })
	c.g2.Stop()
	if !testwait.Chan(done, 20*time.Second) {
		t.Fatal("produce did not finish")
	}
	lastJSON(t, out, &rep)
	if err != nil && !strings.Contains(err.Error(), "not acknowledged") {
		t.Fatalf("produce: %v\n%s", err, stderr)
	}
	if rep.Stopped != "done" || rep.Sent != n || rep.Acked+rep.Failed != n || rep.Acked < n/2 {
		t.Fatalf("produce report %+v, want all %d sent and a run to the end", rep, n)
	}
	// No acked message lost: both groups (g2 back on its store) hold them.
	c.g2.Restart()
	if stored := c.g1.Total("T") + c.g2.Total("T"); int64(stored) < 40+rep.Acked {
		t.Fatalf("the groups hold %d messages, fewer than the %d acked", stored, 40+rep.Acked)
	}
	t.Logf("with g2 stopped mid-run: %d acked, %d failed %v", rep.Acked, rep.Failed, rep.Errors)
}

// consume --namesrv reads a group whose master is gone from its slave
// (the routes name it; no --slave): it gets every message of both groups,
// each once.
func TestCLINamesrvConsumeFromASlave(t *testing.T) {
	ns := brokertest.StartNameServer(t)
	m1, m2 := brokertest.Start(t), brokertest.Start(t)
	s1 := brokertest.Start(t, brokertest.SlaveOf(m1))
	m1.CreateTopic("T", 2)
	m2.CreateTopic("T", 2)
	for _, b := range []*brokertest.Broker{m1, s1} {
		b.RegisterWith(ns, "c1", "g1")
	}
	m2.RegisterWith(ns, "c1", "g2")
	if _, stderr, err := runCLI(t, "produce", "--namesrv", ns.Addr(), "--topic", "T", "--count", "100"); err != nil {
		t.Fatalf("produce: %v\n%s", err, stderr)
	}
	testwait.For(t, testwait.Wall, 5*time.Second, "s1 to catch up", func() bool {
		return m1.Total("T") > 0 && s1.Total("T") == m1.Total("T")
	})
	m1.Stop()
	out, stderr, err := runCLI(t, "consume", "--namesrv", ns.Addr(), "--topic", "T", "--group", "G", "--count", "100",
		"--broker-wait", "200ms", "--suspend", "200ms", "--json")
	if err != nil {
		t.Fatalf("consume: %v\n%s", err, stderr)
	}
	var rep consumeReport
	lastJSON(t, out, &rep)
	if rep.Received != 100 || rep.Duplicates != 0 || rep.Stopped != "count" {
		t.Fatalf("consume report %+v", rep)
	}
}

// group list --namesrv lists a consumer group once per broker group it
// is a member on, while its consumer runs; group describe --namesrv shows
// its members, queues and lag on every broker group, each row naming its
// broker group.
func TestCLINamesrvGroupList(t *testing.T) {
	c := startCLICluster(t)
	c.g1.CreateTopic("T", 2)
	c.g2.CreateTopic("T", 2)
	c.register()
	ns := c.ns.Addr()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, stderr, err := runCLI(t, "consume", "--namesrv", ns, "--topic", "T", "--group", "G", "--idle-exit", "1s", "--suspend", "200ms"); err != nil {
			t.Errorf("consume: %v\n%s", err, stderr)
		}
	}()
	testwait.For(t, testwait.Wall, 5*time.Second, "G's member on both broker groups", func() bool {
		return len(c.g1.GroupMembers("G")) == 1 && len(c.g2.GroupMembers("G")) == 1
	})
	out, stderr, err := runCLI(t, "group", "list", "--namesrv", ns, "--json")
	if err != nil {
		t.Fatalf("group list: %v\n%s", err, stderr)
	}
	var groups groupListJSON
	lastJSON(t, out, &groups)
	var in []string
	for _, g := range groups.Groups {
		if g.Group == "G" && g.Members == 1 {
			in = append(in, g.BrokerGroup)
		}
	}
	if !slices.Equal(in, []string{"g1", "g2"}) {
		t.Fatalf("group list --namesrv: G with its member on broker groups %v, want [g1 g2]\n%s", in, out)
	}
	out, _, err = runCLI(t, "group", "list", "--namesrv", ns)
	if err != nil || !strings.Contains(out, "BROKER GROUP") {
		t.Fatalf("human group list: %v\n%s", err, out)
	}
	checkGroupDescribeInCluster(t, ns)
	if !testwait.Chan(done, 20*time.Second) {
		t.Fatal("consume did not stop")
	}
}

// checkGroupDescribeInCluster: G, consumed on both broker groups of the
// cluster at ns, is described on both.
func checkGroupDescribeInCluster(t *testing.T, ns string) {
	t.Helper()
	out, stderr, err := runCLI(t, "group", "describe", "--namesrv", ns, "--group", "G", "--json")
	if err != nil {
		t.Fatalf("group describe --namesrv: %v\n%s", err, stderr)
	}
	var d groupDescribeJSON
	lastJSON(t, out, &d)
	var coords []string
	for _, c := range d.BrokerGroups {
		if c.Members == 1 && c.BrokerAddr != "" {
			coords = append(coords, c.BrokerGroup)
		}
	}
	members := map[string]int{}
	for _, m := range d.Members {
		members[m.BrokerGroup]++
	}
	queues := map[string][]int32{}
	var lag int64
	for _, q := range d.Queues {
		if q.Topic == "T" {
			queues[q.BrokerGroup] = append(queues[q.BrokerGroup], q.QueueID)
		}
		lag += q.Lag
	}
	if !slices.Equal(coords, []string{"g1", "g2"}) || members["g1"] != 1 || members["g2"] != 1 ||
		!slices.Equal(queues["g1"], []int32{0, 1}) || !slices.Equal(queues["g2"], []int32{0, 1}) || lag != d.Lag {
		t.Errorf("group describe --namesrv --json: coordinators %v, members %v, queues of T %v, lag %d of %d\n%s",
			coords, members, queues, lag, d.Lag, out)
	}
	out, _, err = runCLI(t, "group", "describe", "--namesrv", ns, "--group", "G")
	if err != nil || !strings.Contains(out, "broker groups (2)") || strings.Count(out, "BROKER GROUP") != 3 || !strings.Contains(out, "total lag") {
		t.Errorf("human group describe --namesrv: %v\n%s", err, out)
	}
	if _, _, err := runCLI(t, "group", "describe", "--namesrv", ns, "--group", "nope"); err == nil ||
		!strings.Contains(err.Error(), "not found on any broker group") {
		t.Errorf("describing an unknown group on the cluster: %v", err)
	}
}
