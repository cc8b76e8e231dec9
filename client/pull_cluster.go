package client

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// MessageQueue names one queue of a cluster: a topic's queue ids repeat in
// every broker group hosting the topic, so the group is part of the name.
type MessageQueue struct {
	// BrokerName is the broker group (brokerName) hosting the queue. On
	// a PullConsumer of one broker group (NewPullConsumer(addr)) it is
	// "" and ignored. On name-server routes "" means the one group
	// hosting the topic, and is an error if several do.
	BrokerName string
	Topic      string
	QueueID    int32
}

func (q MessageQueue) String() string {
	return fmt.Sprintf("%s/%s/%d", q.BrokerName, q.Topic, q.QueueID)
}

// pullGroups is a PullConsumer's view of a cluster on name-server routes:
// per broker group, its master and slaves as the routes name them (a
// replicas, so a group whose master is gone is read from a slave, and its
// offsets commit to the master again once it answers), and per topic the
// readable queues of the groups hosting it. Routes are read again when
// older than WithRouteRefresh, and at once after a group could not be
// reached; a group whose brokers changed gets the replicas of its new
// brokers.
type pullGroups struct {
	o     *options
	ns    *nameServers
	hello func() protocol.Request

	mu     sync.Mutex
	groups map[string]*pullGroup   // broker group -> its brokers now
	known  map[string]*pullGroup   // every group's brokers ever installed, closed with the consumer
	topics map[string]*routeQueues // (calls may still be using a replaced one)
	closed bool
}

// pullGroup is one broker group's brokers and the replicas reading them.
type pullGroup struct {
	o      options // the consumer's, with the group's slaves
	r      *replicas
	addr   string
	slaves []string
}

// routeQueues is a topic's readable queues as last read from the routes.
type routeQueues struct {
	queues  []MessageQueue // by group, then queue id
	groups  []string       // the groups among queues, sorted
	fetched time.Time
}

func newPullGroups(o *options, hello func() protocol.Request) (*pullGroups, error) {
	addrs, err := parseNameServers(o.nameServers)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidParameter, err)
	}
	g := &pullGroups{o: o, ns: newNameServers(addrs, o), hello: hello,
		groups: map[string]*pullGroup{}, known: map[string]*pullGroup{}, topics: map[string]*routeQueues{}}
	ctx, cancel := context.WithTimeout(context.Background(), o.dialTimeout)
	defer cancel()
	if err := g.ns.connect(ctx); err != nil {
		g.ns.close()
		return nil, err
	}
	return g, nil
}

// refresh reads topic's route and installs its queues and groups.
func (g *pullGroups) refresh(ctx context.Context, topic string) (*routeQueues, error) {
	_, rd, err := g.ns.routeData(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("wharf client: %w", err)
	}
	tq := &routeQueues{fetched: time.Now()}
	found := map[string]*groupBrokers{}
	for _, qd := range rd.QueueDatas {
		if qd.Perm&protocol.PermRead == 0 || qd.ReadQueueNums <= 0 {
			continue
		}
		b := brokersOf(rd.Brokers, qd.BrokerName)
		if b.addr == "" {
			continue // no broker of the group listed: nothing to read from
		}
		found[qd.BrokerName] = b
		tq.groups = append(tq.groups, qd.BrokerName)
		for id := range qd.ReadQueueNums {
			tq.queues = append(tq.queues, MessageQueue{BrokerName: qd.BrokerName, Topic: topic, QueueID: id})
		}
	}
	slices.Sort(tq.groups)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, ErrClosed
	}
	for name, b := range found {
		g.install(name, b, masterAlive(rd.Brokers, name, b.addr))
	}
	g.topics[topic] = tq
	return tq, nil
}

// masterAlive reports whether addr is group's master and alive in brokers.
func masterAlive(brokers []protocol.BrokerRef, group, addr string) bool {
	return masterAddr(brokers, group) == addr
}

// install makes b group name's brokers, unless they are already. A group
// whose brokers were b before gets its replicas back (a master that
// leaves the routes and comes back does not leave a replicas per
// departure); a new replicas whose master the route says is dead starts
// on its slaves. g.mu is held.
func (g *pullGroups) install(name string, b *groupBrokers, alive bool) {
	if pg := g.groups[name]; pg != nil && pg.addr == b.addr && slices.Equal(pg.slaves, b.slaves) {
		return
	}
	key := fmt.Sprint(name, b.addr, b.slaves)
	pg := g.known[key]
	if pg == nil {
		pg = &pullGroup{o: *g.o, addr: b.addr, slaves: b.slaves}
		pg.o.nameServers, pg.o.slaveAddrs = "", b.slaves
		pg.r = newReplicas(b.addr, &pg.o, g.hello)
		g.known[key] = pg
	}
	if !alive && len(b.slaves) > 0 {
		pg.r.masterDown(fmt.Errorf("the routes say master %s of broker group %s is not alive", b.addr, name))
	}
	g.groups[name] = pg
	g.o.logger.Debug("wharf client: pull consumer on a broker group", "brokerGroup", name, "master", b.addr, "slaves", b.slaves)
}

// queues returns topic's queues, read again if older than WithRouteRefresh
// or if fresh; a failed refresh keeps the queues read before, if any.
func (g *pullGroups) queues(ctx context.Context, topic string, fresh bool) (*routeQueues, error) {
	g.mu.Lock()
	tq := g.topics[topic]
	young := tq != nil && time.Since(tq.fetched) < g.o.routeRefresh
	g.mu.Unlock()
	if young && !fresh {
		return tq, nil
	}
	ntq, err := g.refresh(ctx, topic)
	if err != nil && tq != nil && !fresh {
		g.o.logger.Debug("wharf client: route refresh failed; pulling on the route read before", "topic", topic, "err", err)
		return tq, nil
	}
	return ntq, err
}

// resolve is the replicas of mq's broker group.
func (g *pullGroups) resolve(ctx context.Context, mq MessageQueue) (*replicas, error) {
	tq, err := g.queues(ctx, mq.Topic, false)
	if err != nil {
		return nil, err
	}
	name := mq.BrokerName
	if name == "" {
		if len(tq.groups) != 1 {
			return nil, fmt.Errorf("%w: topic %s is hosted by broker groups %v: name the queue's group (MessageQueue.BrokerName)",
				ErrInvalidParameter, mq.Topic, tq.groups)
		}
		name = tq.groups[0]
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, ErrClosed
	}
	pg := g.groups[name]
	if pg == nil {
		return nil, fmt.Errorf("%w: no broker group %s hosts topic %s (groups %v)", ErrTopicNotExist, name, mq.Topic, tq.groups)
	}
	return pg.r, nil
}

// stale makes the next call on topic read its route again.
func (g *pullGroups) stale(topic string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if tq := g.topics[topic]; tq != nil {
		tq.fetched = time.Time{}
	}
}

// close runs leave on every group's replicas ever installed, then closes
// them and the name-server connections.
func (g *pullGroups) close(leave func(*replicas)) {
	g.mu.Lock()
	g.closed = true
	known := g.known
	g.mu.Unlock()
	for _, pg := range known {
		leave(pg.r)
		pg.r.close()
	}
	g.ns.close()
}
