package client

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wharfmq/wharf/internal/brokertest"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// cluster is two broker groups (one master each) registered with one or
// more real name servers, as the producer's tests need them.
type cluster struct {
	ns      []*brokertest.NameServer
	brokers []*brokertest.Broker // group g1, g2, ...
}

func startCluster(t *testing.T, nameServers, groups int, topic string, queues int32) *cluster {
	t.Helper()
	c := &cluster{}
	for range nameServers {
		c.ns = append(c.ns, brokertest.StartNameServer(t))
	}
	for i := range groups {
		b := brokertest.Start(t)
		b.CreateTopic(topic, queues)
		for _, ns := range c.ns {
			b.RegisterWith(ns, "c1", groupName(i))
		}
		c.brokers = append(c.brokers, b)
	}
	return c
}

func groupName(i int) string { return "g" + string(rune('1'+i)) }

// nameServerList is the WithNameServer list of c's name servers.
func (c *cluster) nameServerList() string {
	var s string
	for i, ns := range c.ns {
		if i > 0 {
			s += ";"
		}
		s += ns.Addr()
	}
	return s
}

// routeBrokers is the brokers of the producer's route of topic, sorted.
func routeBrokers(p *Producer, topic string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, _ := p.table.Route(topic)
	var bs []string
	for _, q := range r.Queues {
		if !slices.Contains(bs, q.Broker) {
			bs = append(bs, q.Broker)
		}
	}
	slices.Sort(bs)
	return bs
}

func sorted(s ...string) []string { slices.Sort(s); return s }

func newNSProducer(t *testing.T, list string, opts ...Option) *Producer {
	t.Helper()
	p, err := NewProducer("", append([]Option{WithNameServer(list), WithRouteRefresh(200 * time.Millisecond),
		WithRetryBackoff(20 * time.Millisecond), WithTimeout(2 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// storedKeys is every UNIQ_KEY of topic stored on the brokers.
func storedKeys(bs []*brokertest.Broker, topic string) map[string]bool {
	keys := map[string]bool{}
	for _, b := range bs {
		b.WaitDispatched()
		for q := range int32(b.QueueCount(topic)) {
			for _, m := range b.Messages(topic, q) {
				keys[m.UniqKey()] = true
			}
		}
	}
	return keys
}

func TestProducerRoundRobinOverGroups(t *testing.T) {
	const topic = "orders"
	c := startCluster(t, 1, 2, topic, 2)
	p := newNSProducer(t, c.nameServerList())
	ctx := testCtx(t)
	for i := range 8 {
		if _, err := p.Send(ctx, &protocol.Message{Topic: topic, Body: []byte{byte(i)}}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if got, want := routeBrokers(p, topic), sorted(c.brokers[0].Addr(), c.brokers[1].Addr()); !slices.Equal(got, want) {
		t.Fatalf("route brokers = %v, want %v", got, want)
	}
	for i, b := range c.brokers {
		b.WaitDispatched()
		if n := b.Total(topic); n != 4 {
			t.Errorf("group %s stored %d of 8 messages, want 4 (round robin over 2x2 queues)", groupName(i), n)
		}
	}
	if _, err := p.Send(ctx, &protocol.Message{Topic: topic, Body: []byte("q")}, ToQueue(1)); !errors.Is(err, ErrInvalidParameter) {
		t.Errorf("ToQueue on name-server routes: %v, want ErrInvalidParameter", err)
	}
	if _, err := NewProducer(c.brokers[0].Addr(), WithNameServer(c.nameServerList())); !errors.Is(err, ErrInvalidParameter) {
		t.Errorf("NewProducer with an address and WithNameServer: %v, want ErrInvalidParameter", err)
	}
	if _, err := NewProducer("", WithNameServer("127.0.0.1:1")); !errors.Is(err, ErrBrokerUnavailable) {
		t.Errorf("NewProducer without a reachable name server: %v, want ErrBrokerUnavailable", err)
	}
	// A topic no group hosts: the name server says so.
	_, err := p.Send(ctx, &protocol.Message{Topic: "nowhere", Body: []byte("x")})
	if !errors.Is(err, ErrTopicNotExist) {
		t.Errorf("send to an unknown topic: %v, want ErrTopicNotExist", err)
	}
}

// TestProducerSurvivesAGroupsDeath: one group's broker stops mid-load;
// the producer keeps sending to the other group, the dead broker is out
// of its route within a second, and every acknowledged message is stored.
func TestProducerSurvivesAGroupsDeath(t *testing.T) {
	const topic = "orders"
	c := startCluster(t, 1, 2, topic, 2)
	p := newNSProducer(t, c.nameServerList())
	ctx := testCtx(t)

	var mu sync.Mutex
	var acked []string
	failed, sentAfterStop := 0, 0
	stopped := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			default:
			}
			res, err := p.Send(ctx, &protocol.Message{Topic: topic, Body: []byte("m")})
			mu.Lock()
			if err == nil {
				acked = append(acked, res.UniqKey)
			} else {
				failed++
			}
			select {
			case <-stopped:
				if err == nil {
					sentAfterStop++
				}
			default:
			}
			n := sentAfterStop
			mu.Unlock()
			if n >= 100 {
				return
			}
		}
	}()
	testwait.For(t, testwait.Wall, 10*time.Second, "100 sends before the stop", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 100
	})
	dead := c.brokers[0]
	dead.Stop()
	close(stopped)
	start := time.Now()
	testwait.For(t, testwait.Wall, time.Second, "the stopped broker out of the route", func() bool {
		return slices.Equal(routeBrokers(p, topic), []string{c.brokers[1].Addr()})
	})
	t.Logf("stopped broker out of the route after %v", time.Since(start).Round(time.Millisecond))
	if !testwait.Chan(done, 15*time.Second) {
		t.Fatal("the producer did not get 100 sends through after the stop")
	}
	dead.Restart() // its stored messages are read back from its store
	keys := storedKeys(c.brokers, topic)
	mu.Lock()
	defer mu.Unlock()
	lost := 0
	for _, k := range acked {
		if !keys[k] {
			lost++
		}
	}
	t.Logf("%d acknowledged, %d failed sends, %d stored", len(acked), failed, len(keys))
	if n := dead.Total(topic); n == 0 {
		t.Error("the stopped broker had stored nothing: the load did not reach both groups")
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged messages lost", lost, len(acked))
	}
}

// TestProducerMovesToAnotherNameServer: with the name server it asks
// gone, the producer takes its routes from the next one; the second
// server missed group g2's registration, and its route is taken although
// its numbers are another server's (see routeBook).
func TestProducerMovesToAnotherNameServer(t *testing.T) {
	const topic = "orders"
	ns1, ns2 := brokertest.StartNameServer(t), brokertest.StartNameServer(t)
	b1, b2 := brokertest.Start(t), brokertest.Start(t)
	for _, b := range []*brokertest.Broker{b1, b2} {
		b.CreateTopic(topic, 1)
		b.RegisterWith(ns1, "c1", map[*brokertest.Broker]string{b1: "g1", b2: "g2"}[b])
	}
	b1.RegisterWith(ns2, "c1", "g1")
	p := newNSProducer(t, ns1.Addr()+";"+ns2.Addr())
	ctx := testCtx(t)
	if _, err := p.Send(ctx, &protocol.Message{Topic: topic, Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if got, want := routeBrokers(p, topic), sorted(b1.Addr(), b2.Addr()); !slices.Equal(got, want) {
		t.Fatalf("route from the first name server = %v, want %v", got, want)
	}
	ns1.Stop()
	testwait.For(t, testwait.Wall, 5*time.Second, "the route from the second name server", func() bool {
		return slices.Equal(routeBrokers(p, topic), []string{b1.Addr()})
	})
	if _, err := p.Send(ctx, &protocol.Message{Topic: topic, Body: []byte("y")}); err != nil {
		t.Fatalf("send on the second name server's route: %v", err)
	}
}

func TestAdminCluster(t *testing.T) {
	c := startCluster(t, 1, 2, "orders", 1)
	a, err := NewAdmin("", WithNameServer(c.nameServerList()))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := testCtx(t)
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := sorted(c.brokers[0].Addr(), c.brokers[1].Addr())
	if got := clusterMasters(ci, "c1"); !slices.Equal(got, want) {
		t.Fatalf("masters of c1 = %v, want %v", got, want)
	}
	if got := clusterMasters(ci, "c2"); len(got) != 0 {
		t.Errorf("masters of an unknown cluster = %v", got)
	}
	done, err := a.CreateTopicInCluster(ctx, "c1", "invoices", 3)
	if err != nil || !slices.Equal(done, want) {
		t.Fatalf("CreateTopicInCluster = %v, %v; want %v", done, err, want)
	}
	for _, b := range c.brokers {
		if n := b.QueueCount("invoices"); n != 3 {
			t.Errorf("%s has %d queues of invoices, want 3", b.Addr(), n)
		}
		b.RegisterWith(c.ns[0], "c1", groupName(slices.Index(c.brokers, b)))
	}
	rd, err := a.TopicRoute(ctx, "invoices")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(writeQueues(&rd)); got != 6 {
		t.Errorf("route of invoices has %d writable queues, want 6: %+v", got, rd)
	}
	if _, err := a.TopicRoute(ctx, "nowhere"); !errors.Is(err, ErrTopicNotExist) {
		t.Errorf("route of an unknown topic: %v, want ErrTopicNotExist", err)
	}
	if _, err := a.CreateTopicInCluster(ctx, "c2", "x", 1); !errors.Is(err, ErrBrokerUnavailable) {
		t.Errorf("create in a cluster without masters: %v, want ErrBrokerUnavailable", err)
	}
	if _, err := a.GetTopic(ctx, "orders"); !errors.Is(err, ErrInvalidParameter) {
		t.Errorf("a broker's call without a broker address: %v, want ErrInvalidParameter", err)
	}
	var plain *Admin
	if plain, err = NewAdmin(c.brokers[0].Addr()); err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.ClusterInfo(context.Background()); !errors.Is(err, ErrInvalidParameter) {
		t.Errorf("ClusterInfo without a name server: %v, want ErrInvalidParameter", err)
	}
}

// TestProducerAsyncBatchOnewayOverGroups: every kind of send finds its
// broker on name-server routes: SendAsync (coalesced and not), SendBatch,
// SendOneway.
func TestProducerAsyncBatchOnewayOverGroups(t *testing.T) {
	const topic = "orders"
	c := startCluster(t, 1, 2, topic, 2)
	ctx := testCtx(t)
	total := 0
	for _, coalesce := range []bool{true, false} {
		p := newNSProducer(t, c.nameServerList(), WithSendCoalescing(coalesce))
		if _, err := p.Send(ctx, &protocol.Message{Topic: topic, Body: []byte("route")}); err != nil {
			t.Fatal(err)
		}
		const n = 200
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []error
		for range n {
			wg.Add(1)
			p.SendAsync(ctx, &protocol.Message{Topic: topic, Body: []byte("a")}, func(_ SendResult, err error) {
				defer wg.Done()
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("coalesce %v: %d async sends failed, first: %v", coalesce, len(errs), errs[0])
		}
		batch := []*protocol.Message{{Topic: topic, Body: []byte("b1")}, {Topic: topic, Body: []byte("b2")}}
		if _, err := p.SendBatch(ctx, batch); err != nil {
			t.Fatalf("batch: %v", err)
		}
		if err := p.SendOneway(ctx, &protocol.Message{Topic: topic, Body: []byte("o")}); err != nil {
			t.Fatalf("oneway: %v", err)
		}
		total += 1 + n + 2 + 1
	}
	got := 0
	testwait.For(t, testwait.Wall, 5*time.Second, "every message stored", func() bool {
		got = 0
		for _, b := range c.brokers {
			b.WaitDispatched()
			got += b.Total(topic)
		}
		return got == total
	})
	for i, b := range c.brokers {
		if b.Total(topic) < total/4 {
			t.Errorf("group %s stored %d of %d: the sends do not spread over the groups", groupName(i), b.Total(topic), total)
		}
	}
}

// TestRouteKeptWhileANameServerLacksTheTopic: the name server a producer
// asks first never got the registration of the group hosting the topic
// (it was partitioned from it). Its TOPIC_NOT_EXIST does not fail the send
// nor drop the route while the other server has it; with that server
// gone too, the route the producer has is kept (nobody who could know
// says it is gone); only when every name server answers TOPIC_NOT_EXIST
// is the topic gone.
func TestRouteKeptWhileANameServerLacksTheTopic(t *testing.T) {
	const topic = "orders"
	ns1, ns2 := brokertest.StartNameServer(t), brokertest.StartNameServer(t)
	b := brokertest.Start(t, brokertest.WithAutoCreate(false))
	b.CreateTopic(topic, 2)
	b.RegisterWith(ns2, "c1", "g1")
	p := newNSProducer(t, ns1.Addr()+";"+ns2.Addr())
	ctx := testCtx(t)
	send := func(what string) error {
		t.Helper()
		p.mu.Lock()
		p.table.Stale(topic) // the next send asks the name servers again
		p.mu.Unlock()
		_, err := p.Send(ctx, &protocol.Message{Topic: topic, Body: []byte(what)})
		return err
	}
	for i := range 3 {
		if err := send("x"); err != nil {
			t.Fatalf("send %d while the first name server lacks the topic: %v", i, err)
		}
		if got := routeBrokers(p, topic); !slices.Equal(got, []string{b.Addr()}) {
			t.Fatalf("route after send %d = %v, want [%s]", i, got, b.Addr())
		}
	}
	for range 3 {
		p.refreshAll() // what the refresher does every WithRouteRefresh
	}
	if got := routeBrokers(p, topic); !slices.Equal(got, []string{b.Addr()}) {
		t.Fatalf("route after refreshes = %v, want [%s]", got, b.Addr())
	}
	p.ns.mu.Lock()
	cur := p.ns.cur
	p.ns.mu.Unlock()
	if cur != 0 {
		t.Errorf("the producer moved to name server %d for its other topics; want it to stay on the first, which answers", cur)
	}

	ns2.Stop() // ns1 still says TOPIC_NOT_EXIST; ns2 cannot answer
	if err := send("y"); err != nil {
		t.Fatalf("send with one name server gone and the other lacking the topic: %v", err)
	}
	if got := routeBrokers(p, topic); !slices.Equal(got, []string{b.Addr()}) {
		t.Fatalf("route with one name server gone = %v, want [%s]", got, b.Addr())
	}

	// Every name server says TOPIC_NOT_EXIST: the topic is gone.
	q := newNSProducer(t, ns1.Addr())
	if _, err := q.Send(ctx, &protocol.Message{Topic: topic, Body: []byte("z")}); !errors.Is(err, ErrTopicNotExist) {
		t.Errorf("send when every name server lacks the topic: %v, want ErrTopicNotExist", err)
	}
	if got := storedKeys([]*brokertest.Broker{b}, topic); len(got) != 4 {
		t.Errorf("%d messages stored, want 4", len(got))
	}
}
