package sim

import (
	"strings"
	"time"

	"github.com/wharfmq/wharf/client/sendpath"
	"github.com/wharfmq/wharf/protocol"
)

// A simulated producer reads its routes from the name servers as
// client.Producer does (producer_ns.go): GET_ROUTEINFO_BY_TOPIC to one
// name server, kept while it answers; the answer converted and ordered by
// the client's own rules (client.RouteBook); a refresh every
// Config.RouteRefresh; and, when a broker's connection breaks, the broker
// latched, the route marked stale and fetched at once and a moment later.

// recheckAfterDown is the client's second look after a broken connection
// (client/producer_ns.go): the name server may learn of the broker's death
// a moment after the producer.
const recheckAfterDown = 250 * time.Millisecond

// fetchRoute asks the current name server for the topic's route, unless
// a fetch is on its way.
func (c *Client) fetchRoute() {
	if c.fetching || len(c.s.names) == 0 {
		return
	}
	ns := c.s.names[c.nsCur]
	if conn := c.nsConns[c.nsCur]; conn == nil || conn.dead() {
		c.s.conns++
		c.nsConns[c.nsCur] = &Conn{s: c.s, id: c.s.conns, node: ns, epoch: ns.epoch, client: c, arrived: map[uint32]time.Time{}}
	}
	c.fetching = true
	c.requestOn(c.nsConns[c.nsCur], &protocol.GetRouteInfoRequest{Topic: simTopic}, &pending{})
}

// refreshLoop fetches the route every RouteRefresh, as the client's
// refresher does, for as long as the run lasts.
func (c *Client) refreshLoop() {
	if !c.s.planted.StaleRoutes {
		c.fetchRoute()
	}
	c.s.w.at(c.s.w.Now().Add(c.s.cfg.RouteRefresh), c.own(), c.refreshLoop)
}

// brokerDown: the connection to broker broke or was refused.
func (c *Client) brokerDown(broker string) {
	if c.table == nil || c.s.planted.StaleRoutes {
		return
	}
	now := c.s.w.Now()
	c.table.Blame(broker, now)
	c.table.Stale(simTopic)
	c.fetchRoute()
	c.s.w.at(now.Add(recheckAfterDown), c.own(), c.fetchRoute)
}

// onRoute takes a name server's answer (nil: none came) and lets the
// sends that waited for a route go on.
func (c *Client) onRoute(conn *Conn, f *protocol.Frame) {
	c.fetching = false
	now := c.s.w.Now()
	r, ok := sendpath.Route{Topic: simTopic}, false
	// The client keeps its route when the name server no longer has the
	// topic at all (no group of it is registered): a failed refresh leaves
	// the route as it was (client/producer_ns.go). checkRouteUse excuses
	// that case; it is recorded here.
	c.topicGone = f != nil && f.Status == protocol.StatusTopicNotExist
	if f != nil && f.Status == protocol.StatusOK {
		var rd protocol.RouteData
		if err := protocol.DecodeResponse(f, protocol.DefaultLimits(), &rd); err != nil {
			c.s.w.Violationf("client %d: bad route from %s: %v", c.id, conn.node.name, err)
		} else {
			if rd.Topic == "" {
				rd.Topic = simTopic
			}
			if taken, fresh := c.book.Take(conn.node.addr.String(), &rd, now); fresh {
				r, ok = taken, true
			}
		}
	}
	if f == nil { // unreachable or silent: the next fetch asks the next one
		c.nsCur = (c.nsCur + 1) % len(c.s.names)
	}
	if ok && len(r.Queues) == 0 {
		r.Fetched = time.Time{} // nothing writable: every attempt asks again
	}
	if ok {
		c.table.Update(r)
		c.traceRoute(conn.node, r)
	}
	waiting := c.waiting
	c.waiting = nil
	for _, o := range waiting {
		if !ok {
			// A failed fetch is the attempt's failure (the client's target).
			c.decide(o, sendpath.QueueRef{QueueID: -1}, sendpath.Outcome{Failure: sendpath.Broken})
			continue
		}
		o.send.Routed(r)
		c.sendTo(o, o.send.Next(now))
	}
}

// observe reports an answer's latency to the fault avoidance, as the
// client does for every answer: a slow broker is skipped for a while.
func (c *Client) observe(p *pending) {
	now := c.s.w.Now()
	if lat := now.Sub(p.sentAt); sendPolicy.AvoidForLatency(lat) > 0 {
		c.table.Observe(p.to.Broker, lat, now)
	}
}

// traceRoute records a route that writes to other groups than the
// client's last one: where the producers move, in the trace.
func (c *Client) traceRoute(ns *Node, r sendpath.Route) {
	var b strings.Builder
	for i, q := range r.Queues {
		if i == 0 || q.Broker != r.Queues[i-1].Broker {
			if g := c.s.byAddr[q.Broker]; g != nil {
				b.WriteString(" " + g.spec.Name)
			}
		}
	}
	if b.String() != c.routeGroups {
		c.routeGroups = b.String()
		c.s.w.Tracef("client %d: route from %s writes to [%s]", c.id, ns.name, strings.TrimSpace(c.routeGroups))
	}
}
