package compat

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/internal/testwait"
)

// TestGoProducerFailsOverWhenABrokerGroupDies: two broker groups host a
// topic; RocketMQ's Go producer sends to both through the name server's
// remoting port; broker-a is killed mid-run. Every send after the kill
// still succeeds (the producer's retry avoids the broker that failed, and
// the name server drops broker-a from the routes the moment its connection
// closes), every one lands on broker-b, and broker-b holds them all.
func TestGoProducerFailsOverWhenABrokerGroupDies(t *testing.T) {
	rlog.SetLogLevel("error")
	p := freePorts(t, 8) // namesrv, its remoting; two brokers, each its port and remoting
	nsAddr, nsRemoting := addr(p[0]), addr(p[1])
	daemon(t, "namesrv", "--bindAddress", "127.0.0.1", "--listenPort", strconv.Itoa(p[0]),
		"--remotingListenPort", strconv.Itoa(p[1]), "--metricsPort", "0")
	waitListening(t, nsRemoting)
	brokers := map[string]string{}
	var procA interface{ Kill() error }
	for i, name := range []string{"broker-a", "broker-b"} {
		port, ha, rmq := p[2+3*i], p[3+3*i], p[4+3*i]
		proc, _ := daemonProc(t, "broker", "--storePathRootDir", t.TempDir(), "--brokerIP1", "127.0.0.1",
			"--listenPort", strconv.Itoa(port), "--haListenPort", strconv.Itoa(ha), "--remotingListenPort", strconv.Itoa(rmq),
			"--metricsPort", "0", "--brokerName", name, "--brokerClusterName", "DefaultCluster", "--namesrvAddr", nsAddr,
			"--brokerHeartbeatInterval", "200")
		waitListening(t, addr(rmq))
		brokers[name] = addr(port)
		if name == "broker-a" {
			procA = proc
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, baddr := range brokers {
		admin, err := client.NewAdmin(baddr)
		if err != nil {
			t.Fatal(err)
		}
		createTopic(ctx, t, admin, "failover")
		admin.Close()
	}
	c := cluster{nsRemoting: nsRemoting}
	testwait.For(t, testwait.Wall, left(ctx), "a route for the topic", func() bool { return routed(c, "failover") })

	pr, err := producer.NewDefaultProducer(producer.WithNsResolver(primitive.NewPassthroughResolver([]string{nsRemoting})),
		producer.WithGroupName("failover-pg"), producer.WithRetry(2), producer.WithSendMsgTimeout(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := pr.Start(); err != nil {
		t.Fatal(err)
	}
	defer pr.Shutdown()
	send := func(i int) (*primitive.SendResult, error) {
		return pr.SendSync(ctx, primitive.NewMessage("failover", []byte(fmt.Sprintf("m-%d", i))))
	}
	// Before the kill: both groups take sends (round robin over 4 queues).
	seen := map[string]int{}
	for i := range 40 {
		res, err := sendUntilRouted(ctx, pr, primitive.NewMessage("failover", []byte(fmt.Sprintf("m-%d", i))))
		if err != nil {
			t.Fatalf("send %d before the kill: %v", i, err)
		}
		seen[res.MessageQueue.BrokerName]++
	}
	if seen["broker-a"] == 0 || seen["broker-b"] == 0 {
		t.Fatalf("before the kill the sends went to %v, want both groups", seen)
	}
	if err := procA.Kill(); err != nil {
		t.Fatal(err)
	}
	// After it: every send succeeds, on broker-b.
	const after = 60
	onB := 0
	for i := 40; i < 40+after; i++ {
		res, err := send(i)
		if err != nil {
			t.Fatalf("send %d after broker-a was killed: %v", i, err)
		}
		if res.Status != primitive.SendOK || res.MessageQueue.BrokerName != "broker-b" {
			t.Fatalf("send %d after the kill: %v on %s", i, res.Status, res.MessageQueue.BrokerName)
		}
		onB++
	}
	// broker-b holds what it acknowledged, before the kill and after.
	admin, err := client.NewAdmin(brokers["broker-b"])
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var held int64
	for q := range int32(2) {
		n, err := admin.GetMaxOffset(ctx, "failover", q)
		if err != nil {
			t.Fatal(err)
		}
		held += n
	}
	if want := int64(seen["broker-b"] + onB); held != want {
		t.Fatalf("broker-b holds %d messages of the topic, acknowledged %d", held, want)
	}
	t.Logf("before the kill %v; after it %d sends, all on broker-b", seen, onB)
}
