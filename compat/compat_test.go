package compat

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/internal/brokertest"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// wharfBinary builds the wharf binary of the enclosing module once.
var wharfBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "wharf-compat-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "wharf")
	out, err := exec.Command("go", "build", "-C", "..", "-o", bin, "./cmd/wharf").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build wharf: %v\n%s", err, out)
	}
	return bin, nil
})

// freePorts picks ports below the ephemeral range (brokertest.FreePorts).
func freePorts(t *testing.T, n int) []int { return brokertest.FreePorts(t, n) }

// daemon runs the wharf binary with args until the test ends.
func daemon(t *testing.T, args ...string) *bytes.Buffer {
	t.Helper()
	_, logs := daemonProc(t, args...)
	return logs
}

// daemonProc is daemon, with the process (for a test to kill it).
func daemonProc(t *testing.T, args ...string) (*os.Process, *bytes.Buffer) {
	t.Helper()
	bin, err := wharfBinary()
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuf
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("wharf %v:\n%s", args[0], logs.String())
		}
	})
	return cmd.Process, &logs.b
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func waitListening(t *testing.T, addr string) {
	t.Helper()
	testwait.For(t, testwait.Wall, 20*time.Second, "a listener on "+addr, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// left is what remains of ctx's time (the polls' bound).
func left(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return time.Until(d)
	}
	return time.Minute
}

// cluster is a name server and one broker with their remoting ports on.
type cluster struct {
	nsAddr, nsRemoting, brokerAddr, brokerRemoting string
}

func startCluster(t *testing.T) cluster {
	t.Helper()
	p := freePorts(t, 5) // namesrv, its remoting; broker, its HA, its remoting
	c := cluster{nsAddr: addr(p[0]), nsRemoting: addr(p[1]), brokerAddr: addr(p[2]), brokerRemoting: addr(p[4])}
	daemon(t, "namesrv", "--bindAddress", "127.0.0.1", "--listenPort", strconv.Itoa(p[0]),
		"--remotingListenPort", strconv.Itoa(p[1]), "--metricsPort", "0")
	waitListening(t, c.nsRemoting)
	daemon(t, "broker", "--storePathRootDir", t.TempDir(), "--brokerIP1", "127.0.0.1", "--listenPort", strconv.Itoa(p[2]),
		"--haListenPort", strconv.Itoa(p[3]), "--remotingListenPort", strconv.Itoa(p[4]), "--metricsPort", "0",
		"--brokerName", "broker-a", "--brokerClusterName", "DefaultCluster", "--namesrvAddr", c.nsAddr,
		"--brokerHeartbeatInterval", "200")
	waitListening(t, addr(p[4]))
	return c
}

func addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// TestGoProducerToWharfAndGoPullConsumer: RocketMQ's Go producer sends
// sync messages with tags and keys through Wharf's remoting ports; Wharf's
// own client and RocketMQ's pull consumer both read them back with the
// properties intact.
func TestGoProducerToWharfAndGoPullConsumer(t *testing.T) {
	rlog.SetLogLevel("error")
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin, err := client.NewAdmin(c.brokerAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	createTopic(ctx, t, admin, "compat")

	p, err := producer.NewDefaultProducer(producer.WithNsResolver(primitive.NewPassthroughResolver([]string{c.nsRemoting})),
		producer.WithGroupName("compat-pg"), producer.WithRetry(2), producer.WithSendMsgTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown()
	type sent struct {
		res  *primitive.SendResult
		body string
		tag  string
		key  string
	}
	var sends []sent
	for i := range 6 {
		m := primitive.NewMessage("compat", []byte(fmt.Sprintf("message %d", i)))
		tag, key := fmt.Sprintf("tag%d", i%2), fmt.Sprintf("order-%d", i)
		m.WithTag(tag)
		m.WithKeys([]string{key})
		res, err := sendUntilRouted(ctx, p, m)
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if res.Status != primitive.SendOK || res.OffsetMsgID == "" || res.MsgID == "" {
			t.Fatalf("send %d: %+v", i, res)
		}
		sends = append(sends, sent{res, string(m.Body), tag, key})
	}

	wharf, rmq := wharfReader(t, c), rocketmqReader(t, c)
	for _, s := range sends {
		wharf(ctx, s.res, s.body, s.tag, s.key)
		rmq(ctx, s.res, s.body, s.tag, s.key)
	}
}

type reader func(ctx context.Context, res *primitive.SendResult, body, tag, key string)

// sendUntilRouted retries until the broker's first registration reached
// the name server (a fresh cluster has no route for a moment).
func sendUntilRouted(ctx context.Context, p interface {
	SendSync(context.Context, ...*primitive.Message) (*primitive.SendResult, error)
}, m *primitive.Message) (res *primitive.SendResult, err error) {
	testwait.Until(testwait.Wall, left(ctx), func() bool {
		res, err = p.SendSync(ctx, m)
		return err == nil || ctx.Err() != nil
	})
	return res, err
}

func createTopic(ctx context.Context, t *testing.T, a *client.Admin, topic string) {
	t.Helper()
	if err := a.CreateTopic(ctx, protocol.TopicConfig{Topic: topic, ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}); err != nil {
		t.Fatal(err)
	}
}

// wharfReader reads a message with Wharf's own client, on Wharf's port.
func wharfReader(t *testing.T, c cluster) reader {
	pc, err := client.NewPullConsumer(c.brokerAddr, "compat-wharf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return func(ctx context.Context, res *primitive.SendResult, body, tag, key string) {
		t.Helper()
		wharfRead(ctx, t, pc, res, body, tag, key)
	}
}

func wharfRead(ctx context.Context, t *testing.T, pc *client.PullConsumer, res *primitive.SendResult, body, tag, key string) {
	t.Helper()
	q := int32(res.MessageQueue.QueueId)
	r, err := pc.Pull(ctx, "compat", q, res.QueueOffset, 1, client.PullOptions{Suspend: 5 * time.Second}) // held until dispatched
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Messages) != 1 {
		t.Fatalf("Wharf pull at %d of queue %d: %+v", res.QueueOffset, q, r)
	}
	m := r.Messages[0]
	if string(m.Body) != body || m.Property("TAGS") != tag || m.Property("KEYS") != key ||
		m.Property("UNIQ_KEY") != res.MsgID || m.MsgID != res.OffsetMsgID {
		t.Fatalf("Wharf client read %q tags %q keys %q uniq %q id %s; sent %q %q %q %s %s", m.Body, m.Property("TAGS"),
			m.Property("KEYS"), m.Property("UNIQ_KEY"), m.MsgID, body, tag, key, res.MsgID, res.OffsetMsgID)
	}
}

// rocketmqReader reads it with RocketMQ's pull consumer: the raw records
// as the pull body, decoded by RocketMQ's client.
func rocketmqReader(t *testing.T, c cluster) reader {
	pc, err := consumer.NewPullConsumer(consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{c.nsRemoting})),
		consumer.WithGroupName("compat-cg"))
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Subscribe("compat", consumer.MessageSelector{}); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Shutdown() })
	return func(ctx context.Context, res *primitive.SendResult, body, tag, key string) {
		t.Helper()
		rocketmqRead(ctx, t, pc, res, body, tag, key)
	}
}

func rocketmqRead(ctx context.Context, t *testing.T, pc interface {
	PullFrom(context.Context, *primitive.MessageQueue, int64, int) (*primitive.PullResult, error)
}, res *primitive.SendResult, body, tag, key string) {
	t.Helper()
	r, err := pc.PullFrom(ctx, res.MessageQueue, res.QueueOffset, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != primitive.PullFound || len(r.GetMessageExts()) != 1 {
		t.Fatalf("RocketMQ pull: %+v", r)
	}
	m := r.GetMessageExts()[0]
	if string(m.Body) != body || m.GetTags() != tag || m.GetKeys() != key || m.MsgId != res.MsgID || m.OffsetMsgId != res.OffsetMsgID ||
		m.QueueOffset != res.QueueOffset {
		t.Fatalf("RocketMQ client read %q tags %q keys %q id %s offset id %s at %d; sent %q %q %q %s %s at %d", m.Body, m.GetTags(),
			m.GetKeys(), m.MsgId, m.OffsetMsgId, m.QueueOffset, body, tag, key, res.MsgID, res.OffsetMsgID, res.QueueOffset)
	}
}
