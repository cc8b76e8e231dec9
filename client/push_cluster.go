package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// clusterConsumer is a PushConsumer on name-server routes: one member of
// the consumer group per broker group hosting a subscribed topic (a part,
// itself a PushConsumer on that group's master and its slaves). Each
// broker's coordinator assigns its own queues, so the consumer's share is
// the union of its parts' assignments; a part whose master is gone reads
// its group's queues from a slave, with the offsets kept there (see
// WithSlaveAddrs). Broker groups that appear in the routes later get a
// part at the next refresh, and a group whose master moved to another
// address (a failover: the controllers made a slave master, or the master
// came back elsewhere) gets a new part on the new master, the old one
// closed first (its offsets committed): a part keeps the addresses it
// was built on, and the old master may now be a lagging slave.
type clusterConsumer struct {
	pc   *PushConsumer // the consumer the user holds
	ns   *nameServers
	opts []Option // the user's, for the parts

	mu     sync.Mutex
	subs   []*subscription
	parts  map[string]*clusterPart // broker group -> its member
	closed bool
	done   chan struct{}
	wg     sync.WaitGroup
}

// clusterPart is the member on one broker group, and the master address it
// was built on.
type clusterPart struct {
	pc   *PushConsumer
	addr string
}

// groupBrokers is what a part needs of one broker group in the routes.
type groupBrokers struct {
	addr   string   // the master's (alive or not), else the first slave's
	master bool     // addr is the master's
	slaves []string // the alive slaves (but addr)
	topics []string // subscribed topics the group hosts, readable
}

func newClusterConsumer(pc *PushConsumer, addr string, opts []Option) (*clusterConsumer, error) {
	if addr != "" {
		return nil, fmt.Errorf("%w: a broker address (%s) and WithNameServer: give one of them", ErrInvalidParameter, addr)
	}
	addrs, err := parseNameServers(pc.o.nameServers)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidParameter, err)
	}
	cl := &clusterConsumer{pc: pc, ns: newNameServers(addrs, &pc.o), opts: slices.Clone(opts),
		parts: map[string]*clusterPart{}, done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), pc.o.dialTimeout)
	defer cancel()
	if err := cl.ns.connect(ctx); err != nil {
		cl.ns.close()
		return nil, err
	}
	return cl, nil
}

// groupsOf reads the routes of subs' topics and lists the broker groups
// hosting them. It fails with ErrTopicNotExist if a topic has no route.
func (cl *clusterConsumer) groupsOf(ctx context.Context, subs []*subscription) (map[string]*groupBrokers, error) {
	groups := map[string]*groupBrokers{}
	for _, s := range subs {
		_, rd, err := cl.ns.routeData(ctx, s.topic)
		if err != nil {
			return nil, err
		}
		for _, qd := range rd.QueueDatas {
			if qd.Perm&protocol.PermRead == 0 || qd.ReadQueueNums <= 0 {
				continue
			}
			g := groups[qd.BrokerName]
			if g == nil {
				g = brokersOf(rd.Brokers, qd.BrokerName)
				if g.addr == "" {
					continue // no broker of the group listed: nothing to read from
				}
				groups[qd.BrokerName] = g
			}
			g.topics = append(g.topics, s.topic)
		}
	}
	return groups, nil
}

// brokersOf picks a group's brokers out of a route: its master (dead or
// alive: a part tries it again and again) or else a slave as the address
// the part is built on, and its alive slaves.
func brokersOf(brokers []protocol.BrokerRef, group string) *groupBrokers {
	g := &groupBrokers{}
	for _, b := range brokers {
		if b.BrokerName == group && b.BrokerID == protocol.MasterID && b.BrokerRole != RoleSlave {
			g.addr, g.master = b.BrokerAddr, true
		}
	}
	for _, b := range brokers {
		if b.BrokerName == group && b.BrokerID != protocol.MasterID && b.Alive && b.BrokerAddr != g.addr {
			g.slaves = append(g.slaves, b.BrokerAddr)
		}
	}
	if g.addr == "" && len(g.slaves) > 0 {
		g.addr, g.slaves = g.slaves[0], g.slaves[1:]
	}
	return g
}

// start starts a part per broker group hosting the subscribed topics,
// and the loop that adds the parts of groups that appear later.
func (cl *clusterConsumer) start(ctx context.Context, subs []*subscription) error {
	cl.mu.Lock()
	cl.subs = subs
	cl.mu.Unlock()
	groups, err := cl.groupsOf(ctx, subs)
	if err != nil {
		return fmt.Errorf("wharf client: consumer %s: %w", cl.pc.group, err)
	}
	if err := cl.startParts(ctx, groups); err != nil {
		cl.close()
		return err
	}
	cl.wg.Add(1)
	go cl.refreshLoop()
	return nil
}

// startParts starts the parts of the groups that have none yet, and
// replaces the part of a group whose master is now at another address.
func (cl *clusterConsumer) startParts(ctx context.Context, groups map[string]*groupBrokers) error {
	for _, name := range slices.Sorted(maps.Keys(groups)) {
		g := groups[name]
		cl.mu.Lock()
		old, closed := cl.parts[name], cl.closed
		cl.mu.Unlock()
		if closed {
			return ErrClosed
		}
		if old != nil && (old.addr == g.addr || !g.master) {
			continue // the same master, or none named: the part reads the slaves
		}
		if old != nil {
			cl.pc.o.logger.Info("wharf client: a broker group's master moved; joining it there", "group", cl.pc.group,
				"brokerGroup", name, "from", old.addr, "to", g.addr)
			if err := old.pc.Close(); err != nil {
				cl.pc.o.logger.Warn("wharf client: closing the member on the old master", "brokerGroup", name, "err", err)
			}
			cl.mu.Lock()
			delete(cl.parts, name)
			cl.mu.Unlock()
		}
		part, err := cl.startPart(ctx, g)
		if err != nil {
			return fmt.Errorf("wharf client: consumer %s on broker group %s: %w", cl.pc.group, name, err)
		}
		cl.mu.Lock()
		if cl.closed {
			cl.mu.Unlock()
			part.Close()
			return ErrClosed
		}
		cl.parts[name] = &clusterPart{pc: part, addr: g.addr}
		cl.mu.Unlock()
		cl.pc.o.logger.Debug("wharf client: consuming a broker group", "group", cl.pc.group, "brokerGroup", name, "addr", groups[name].addr)
	}
	return nil
}

// startPart builds and starts the member on one broker group.
func (cl *clusterConsumer) startPart(ctx context.Context, g *groupBrokers) (*PushConsumer, error) {
	opts := append(slices.Clone(cl.opts), WithNameServer(""), WithClientID(cl.pc.o.clientID), WithSlaveAddrs(g.slaves...))
	part, err := NewPushConsumer(g.addr, cl.pc.group, opts...)
	if err != nil {
		return nil, err
	}
	cl.mu.Lock()
	subs := cl.subs
	cl.mu.Unlock()
	for _, s := range subs {
		if slices.Contains(g.topics, s.topic) {
			if err := part.Subscribe(s.topic, s.expr, s.handler); err != nil {
				part.Close()
				return nil, err
			}
		}
	}
	if err := part.Start(ctx); err != nil {
		part.Close()
		return nil, err
	}
	return part, nil
}

// refreshLoop adds the parts of broker groups new in the routes, every
// WithRouteRefresh, until close.
func (cl *clusterConsumer) refreshLoop() {
	defer cl.wg.Done()
	t := time.NewTicker(cl.pc.o.routeRefresh)
	defer t.Stop()
	for {
		select {
		case <-cl.done:
			return
		case <-t.C:
		}
		cl.mu.Lock()
		subs := cl.subs
		cl.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), cl.pc.o.timeout)
		groups, err := cl.groupsOf(ctx, subs)
		if err == nil {
			err = cl.startParts(ctx, groups)
		}
		cancel()
		if err != nil && !errors.Is(err, ErrClosed) {
			cl.pc.o.logger.Debug("wharf client: route refresh failed", "group", cl.pc.group, "err", err)
		}
	}
}

// close closes every part (each commits its offsets) and the name-server
// connections, and returns the parts' errors.
func (cl *clusterConsumer) close() error {
	cl.mu.Lock()
	if cl.closed {
		cl.mu.Unlock()
		return nil
	}
	cl.closed = true
	close(cl.done)
	parts := cl.parts
	cl.mu.Unlock()
	cl.wg.Wait()
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(parts)) {
		if err := parts[name].pc.Close(); err != nil {
			errs = append(errs, fmt.Errorf("broker group %s: %w", name, err))
		}
	}
	cl.ns.close()
	return errors.Join(errs...)
}

// byGroup is the parts, by broker group.
func (cl *clusterConsumer) byGroup() map[string]*PushConsumer {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	out := make(map[string]*PushConsumer, len(cl.parts))
	for name, p := range cl.parts {
		out[name] = p.pc
	}
	return out
}
