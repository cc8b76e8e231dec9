package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wharfmq/wharf/client/sendpath"
	"github.com/wharfmq/wharf/protocol"
)

// recheckAfterDown is when a producer asks for its routes a second time
// after a broker's connection broke: the name server may learn of the
// broker's death (its own connection to the broker closing) a moment after
// the producer did.
const recheckAfterDown = 250 * time.Millisecond

// startNameServers sets a producer up on name-server routes: it reaches
// one name server and starts the route refresher.
func (p *Producer) startNameServers(addr string) error {
	switch {
	case addr != "":
		return fmt.Errorf("%w: a broker address (%s) and WithNameServer: give one of them", ErrInvalidParameter, addr)
	case p.o.nameServers == "":
		return fmt.Errorf("%w: no broker address and no WithNameServer", ErrInvalidParameter)
	}
	addrs, err := parseNameServers(p.o.nameServers)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidParameter, err)
	}
	p.ns = newNameServers(addrs, &p.o)
	p.brokers = map[string]*conn{}
	p.kick = make(chan struct{}, 1)
	ctx, cancel := context.WithTimeout(context.Background(), p.o.dialTimeout)
	defer cancel()
	if err := p.ns.connect(ctx); err != nil {
		p.ns.close()
		return err
	}
	p.wg.Add(1)
	go p.refreshLoop()
	return nil
}

// connFor is the connection of the broker to names: the producer's only
// one for NewProducer(addr), else the broker's own, made on first use. On
// name-server routes a queue without a broker means the route has no
// writable queue (no group with a live master): a retryable failure, and
// the route is stale already (fetchNSRoute), so the retry asks again.
func (p *Producer) connFor(to sendpath.QueueRef) (*conn, error) {
	if p.ns == nil {
		return p.c, nil
	}
	if to.Broker == "" && to.QueueID >= 0 {
		return nil, fmt.Errorf("%w: ToQueue and WithQueue name a queue of one broker: not on name-server routes", ErrInvalidParameter)
	}
	if to.Broker == "" {
		return nil, fmt.Errorf("%w: no broker group with a live master takes writes for this topic", ErrBrokerUnavailable)
	}
	p.bmu.Lock()
	defer p.bmu.Unlock()
	if p.brokers == nil {
		return nil, ErrClosed
	}
	c := p.brokers[to.Broker]
	if c == nil {
		c = newConn(to.Broker, &p.o, func() protocol.Request {
			return &protocol.HeartbeatRequest{ClientID: p.o.clientID, ProducerGroups: []string{p.o.producerGroup}}
		})
		broker := to.Broker
		c.onDown = func() { p.brokerDown(broker) }
		p.brokers[to.Broker] = c
	}
	return c, nil
}

// closeConns closes every connection of the producer.
func (p *Producer) closeConns() {
	if p.c != nil {
		p.c.close()
	}
	if p.ns == nil {
		return
	}
	p.ns.close()
	p.bmu.Lock()
	conns := p.brokers
	p.brokers = nil // connFor fails from now on
	p.bmu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// brokerDown: the connection to broker broke. It is latched at once (its
// queues are skipped while another broker has some) and every route is
// fetched again now and a moment later, so a broker that died is out of
// the routes as soon as the name server knows.
func (p *Producer) brokerDown(broker string) {
	p.mu.Lock()
	p.table.Blame(broker, time.Now())
	for _, t := range p.table.Topics() {
		p.table.Stale(t)
	}
	p.mu.Unlock()
	p.refreshSoon()
	time.AfterFunc(recheckAfterDown, p.refreshSoon)
}

// refreshSoon asks the refresher for a refresh of every route now.
func (p *Producer) refreshSoon() {
	select {
	case p.kick <- struct{}{}:
	default: // one is due already
	}
}

// refreshLoop fetches the routes of the topics the producer knows every
// WithRouteRefresh and when kicked, until Close.
func (p *Producer) refreshLoop() {
	defer p.wg.Done()
	t := time.NewTicker(p.o.routeRefresh)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
		case <-p.kick:
		}
		p.refreshAll()
	}
}

// refreshAll fetches every known topic's route again and installs what
// the route book takes. A failure leaves the route as it was: sends go on
// with it, and fetch it themselves once it is past WithRouteTTL.
func (p *Producer) refreshAll() {
	p.mu.Lock()
	topics := p.table.Topics()
	p.mu.Unlock()
	for _, topic := range topics {
		ctx, cancel := context.WithTimeout(context.Background(), p.o.timeout)
		r, err := p.fetchNSRoute(ctx, topic)
		cancel()
		if err != nil {
			p.o.logger.Debug("wharf client: route refresh failed", "topic", topic, "err", err)
			continue
		}
		p.mu.Lock()
		p.table.Update(r)
		p.mu.Unlock()
	}
}

// fetchNSRoute asks a name server for topic's route and passes it through
// the route book. A route the book does not take (older than one taken
// from the same server) comes back with version 0, which the Table
// ignores. A route without writable queues is stale at once: every
// attempt asks again until a group has a master.
//
// A topic is taken as gone only when no name server has it (see
// nameServers.routeData); while some server cannot be reached and the
// others say TOPIC_NOT_EXIST, a route the producer has is kept.
//
// A topic no group hosts (TOPIC_NOT_EXIST) is created on first send on
// every master that registers the AutoCreateTopic route (brokers with
// autoCreateTopicEnable do): the producer asks each to create it, with as
// many queues as that route gives, and sends meanwhile to that route's
// queues. Creating it on every such master, not only on the one the first
// message reaches (RocketMQ's TBW102 behaviour), spreads a new topic over
// the whole cluster, so losing one group does not make it unwritable. The
// route is stale at once, so the next attempt asks for the topic's own.
func (p *Producer) fetchNSRoute(ctx context.Context, topic string) (sendpath.Route, error) {
	ns, rd, err := p.ns.routeData(ctx, topic)
	if errors.Is(err, errNotEveryNameServer) && p.knows(topic) {
		// The servers that answered do not know the topic, but the ones
		// that did not may: keep the route (a version-0 route changes
		// nothing) rather than drop one that may be right.
		p.o.logger.Debug("wharf client: route kept: not every name server says the topic is gone", "topic", topic, "err", err)
		return sendpath.Route{Topic: topic}, nil
	}
	if errors.Is(err, ErrTopicNotExist) && topic != protocol.AutoCreateTopic {
		auto, aerr := p.fetchNSRoute(ctx, protocol.AutoCreateTopic)
		if aerr != nil || len(auto.Queues) == 0 {
			return sendpath.Route{Topic: topic}, err // nobody creates it: the topic's own error
		}
		p.createEverywhere(ctx, topic, auto.Queues)
		auto.Topic, auto.Fetched = topic, time.Time{}
		return auto, nil
	}
	if err != nil {
		return sendpath.Route{Topic: topic}, err
	}
	now := time.Now()
	p.mu.Lock()
	r, ok := p.book.take(ns, rd, now)
	p.mu.Unlock()
	if !ok {
		p.o.logger.Debug("wharf client: older route ignored", "topic", topic, "nameServer", ns, "version", rd.Version)
		return sendpath.Route{Topic: topic}, nil
	}
	if len(r.Queues) == 0 {
		r.Fetched = time.Time{}
	}
	return r, nil
}

// knows reports whether the producer has a route with queues for topic.
func (p *Producer) knows(topic string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.table.Route(topic)
	return ok && len(r.Queues) > 0
}

// observe reports the latency of an answer f (nil: none came; the failure
// is the fault latch's business) to the fault avoidance. Fast answers,
// the common case, take no lock.
func (p *Producer) observe(to sendpath.QueueRef, start time.Time, f *protocol.Frame) {
	if f == nil {
		return
	}
	p.observeAt(to, start, time.Now(), f)
}

// observeAt is observe of an answer taken from the connection at now (the
// reader reads the clock once per read, not per answer).
func (p *Producer) observeAt(to sendpath.QueueRef, start, now time.Time, f *protocol.Frame) {
	lat := now.Sub(start)
	if p.policy.AvoidForLatency(lat) <= 0 {
		return
	}
	p.mu.Lock()
	p.table.Observe(to.Broker, lat, now)
	p.mu.Unlock()
}

// createEverywhere asks every broker of queues to create topic with as
// many queues as it has in queues. A broker that refuses or cannot be
// reached is skipped: sends to its queues fail and go elsewhere, and it is
// asked again the next time the topic has no route.
func (p *Producer) createEverywhere(ctx context.Context, topic string, queues []sendpath.QueueRef) {
	n := map[string]int32{}
	var order []string
	for _, q := range queues {
		if _, ok := n[q.Broker]; !ok {
			order = append(order, q.Broker)
		}
		n[q.Broker] = max(n[q.Broker], q.QueueID+1)
	}
	for _, b := range order {
		c, err := p.connFor(sendpath.QueueRef{Broker: b, QueueID: 0})
		if err == nil {
			tc := protocol.TopicConfig{Topic: topic, ReadQueueNums: n[b], WriteQueueNums: n[b], Perm: protocol.PermRead | protocol.PermWrite}
			_, err = c.do(ctx, &protocol.CreateTopicRequest{TopicConfig: tc}, nil, p.o.timeout)
		}
		if err != nil {
			p.o.logger.Debug("wharf client: auto-create of topic failed", "topic", topic, "broker", b, "err", err)
		}
	}
}
