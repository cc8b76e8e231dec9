package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/wharfmq/wharf/client/sendpath"
	"github.com/wharfmq/wharf/protocol"
)

// parseNameServers splits a WithNameServer list ("a:9876;b:9876"; commas
// and spaces are accepted too) into addresses, without duplicates.
func parseNameServers(list string) ([]string, error) {
	var addrs []string
	seen := map[string]bool{}
	for _, a := range strings.FieldsFunc(list, func(r rune) bool { return r == ';' || r == ',' || r == ' ' }) {
		if !seen[a] {
			seen[a] = true
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("wharf client: name server list %q has no address", list)
	}
	return addrs, nil
}

// nameServers asks the name servers of WithNameServer. It sticks to one
// while it answers and moves to the next when it cannot be reached, so the
// routes a client acts on come from one server's table as long as that
// server lives (see routeBook for why that matters).
type nameServers struct {
	o     *options
	conns []*conn

	mu  sync.Mutex
	cur int // the server asked first
}

func newNameServers(addrs []string, o *options) *nameServers {
	n := &nameServers{o: o}
	for _, a := range addrs {
		n.conns = append(n.conns, newConn(a, o, nil))
	}
	return n
}

// connect reaches one name server, for constructors that fail early.
func (n *nameServers) connect(ctx context.Context) error {
	var errs []error
	for i, c := range n.conns {
		err := c.connect(ctx)
		if err == nil {
			n.mu.Lock()
			n.cur = i
			n.mu.Unlock()
			return nil
		}
		errs = append(errs, err)
	}
	return fmt.Errorf("no name server reachable: %w", errors.Join(errs...))
}

// do sends req to the current name server, or to the next ones in turn
// while a server cannot be reached or does not answer in time. It returns
// the address of the server that answered (whatever its status) and the
// answer as conn.do does.
func (n *nameServers) do(ctx context.Context, req protocol.Request, into protocol.Fields) (string, error) {
	n.mu.Lock()
	first := n.cur
	n.mu.Unlock()
	var err error
	for i := range n.conns {
		k := (first + i) % len(n.conns)
		c := n.conns[k]
		_, err = c.do(ctx, req, into, n.o.timeout)
		if !errors.Is(err, ErrBrokerUnavailable) && !errors.Is(err, ErrTimeout) {
			if i > 0 {
				n.mu.Lock()
				n.cur = k
				n.mu.Unlock()
			}
			return c.addr, err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return "", fmt.Errorf("name servers: %w", err)
}

// errNotEveryNameServer marks a TOPIC_NOT_EXIST that not every name
// server confirmed: some could not be reached or did not answer in time.
var errNotEveryNameServer = errors.New("not every name server answered")

// routeData asks for topic's route; the address is the server that gave
// it. It starts with the current server and moves on while a server
// cannot be reached, as do does, and also while a server answers
// TOPIC_NOT_EXIST: a server that missed the registrations of the groups
// hosting a topic (partitioned from them, or restarted and not yet heard
// from them) does not know it, and a client must not drop a route for
// that while another server has it. A route from another server does not
// make it the current one: the client's other topics stay on the
// current server's table. The error wraps ErrTopicNotExist only if no
// server had the topic, and also errNotEveryNameServer if some server
// gave no answer.
func (n *nameServers) routeData(ctx context.Context, topic string) (string, *protocol.RouteData, error) {
	n.mu.Lock()
	first := n.cur
	n.mu.Unlock()
	var notExist, lastErr error
	silent := 0
	for i := range n.conns {
		k := (first + i) % len(n.conns)
		c := n.conns[k]
		var rd protocol.RouteData
		_, err := c.do(ctx, &protocol.GetRouteInfoRequest{Topic: topic}, &rd, n.o.timeout)
		switch {
		case err == nil:
			if i > 0 && notExist == nil { // the ones before could not be reached
				n.setCurrent(k)
			}
			if rd.Topic == "" {
				rd.Topic = topic
			}
			return c.addr, &rd, nil
		case errors.Is(err, ErrTopicNotExist):
			if notExist == nil {
				notExist = err
				n.setCurrent(k)
			}
		case errors.Is(err, ErrBrokerUnavailable) || errors.Is(err, ErrTimeout):
			silent++
			lastErr = err
		default:
			return c.addr, nil, fmt.Errorf("route of topic %s: %w", topic, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	switch {
	case notExist == nil:
		return "", nil, fmt.Errorf("route of topic %s: name servers: %w", topic, lastErr)
	case silent > 0:
		return "", nil, fmt.Errorf("route of topic %s: %w (%w: %d of %d)", topic, notExist, errNotEveryNameServer, silent, len(n.conns))
	}
	return "", nil, fmt.Errorf("route of topic %s: %w (every name server says so)", topic, notExist)
}

// setCurrent makes server k the one asked first: the first server that
// answered a call, whatever its answer.
func (n *nameServers) setCurrent(k int) {
	n.mu.Lock()
	n.cur = k
	n.mu.Unlock()
}

// clusterInfo lists the brokers the current name server knows.
func (n *nameServers) clusterInfo(ctx context.Context) (*protocol.ClusterInfo, error) {
	var ci protocol.ClusterInfo
	if _, err := n.do(ctx, &protocol.GetBrokerClusterInfoRequest{}, &ci); err != nil {
		return nil, fmt.Errorf("cluster info: %w", err)
	}
	return &ci, nil
}

func (n *nameServers) close() {
	for _, c := range n.conns {
		c.close()
	}
}

// writeQueues are the queues of rd a producer may send to: for every group
// whose master is alive and whose permission allows writes, its write
// queues, keyed by the master's address; groups in rd's order. A group
// without a live master (its queues readable from its slaves only, with
// writeQueueNums 0 and no write permission from the name server) gives
// none, whatever its queue data says: a send to a slave is refused.
func writeQueues(rd *protocol.RouteData) []sendpath.QueueRef {
	var qs []sendpath.QueueRef
	for _, qd := range rd.QueueDatas {
		if qd.Perm&protocol.PermWrite == 0 || qd.WriteQueueNums <= 0 {
			continue
		}
		if addr := masterAddr(rd.Brokers, qd.BrokerName); addr != "" {
			qs = append(qs, sendpath.Queues(addr, qd.WriteQueueNums)...)
		}
	}
	return qs
}

// masterAddr is the address of group's live master among brokers ("" if
// none): brokerId 0, alive, not a SLAVE.
func masterAddr(brokers []protocol.BrokerRef, group string) string {
	for _, b := range brokers {
		if b.BrokerName == group && b.BrokerID == protocol.MasterID && b.Alive && b.BrokerRole != RoleSlave && b.BrokerAddr != "" {
			return b.BrokerAddr
		}
	}
	return ""
}

// routeBook orders the routes a client takes from name servers.
//
// The rule: a route's version is compared only with versions from the
// same name server. Each name server numbers its own table's changes
// (RouteData.Version grows and never goes back, across its restarts too),
// but two servers' numbers say nothing about each other: one that missed
// a registration may have a larger version and an older view. So the book
// keeps, per name server and topic, the largest version taken, and a route
// below it is ignored: a delayed answer, or a server that restarted with
// an empty table and has not heard from every broker yet cannot take a
// client back. A route from a server the book has not heard from for that
// topic is taken: it happens when the client moves to another server
// because its own became unreachable, and since the client sticks to one
// server while it answers (nameServers), two servers' views never
// alternate.
//
// The routes taken get local versions, counting up, which are the ones
// the sendpath.Table orders by: whatever was taken last is the newest.
// Not safe for concurrent use: the Producer holds its lock.
type routeBook struct {
	seen map[bookKey]int64
	seq  int64
}

type bookKey struct{ ns, topic string }

// take decides whether rd, fetched from name server ns at fetched, is taken,
// and returns it as the producer's route.
func (b *routeBook) take(ns string, rd *protocol.RouteData, fetched time.Time) (sendpath.Route, bool) {
	k := bookKey{ns, rd.Topic}
	if v, ok := b.seen[k]; ok && rd.Version < v {
		return sendpath.Route{}, false
	}
	if b.seen == nil {
		b.seen = map[bookKey]int64{}
	}
	b.seen[k] = rd.Version
	b.seq++
	return sendpath.Route{Topic: rd.Topic, Version: b.seq, Queues: writeQueues(rd), Fetched: fetched}, true
}
