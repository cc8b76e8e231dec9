package sim

import (
	"fmt"
	"time"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/client/sendpath"
	"github.com/wharfmq/wharf/protocol"
)

// The simulated producers run the client's own send path: client/sendpath
// decides where each attempt goes (round robin over every group's queues,
// skipping a broker that just failed), what an answer means (stored, stored
// but unconfirmed, retryable, failed) and whether and when to retry, under
// the policy a client.Producer with default options has. The simulator only
// carries the attempts over its network and arms the timers the plan asks
// for.

// sendPolicy is the default Producer's send policy.
var sendPolicy = func() sendpath.Config {
	cfg, err := client.SendPolicy()
	if err != nil {
		panic(fmt.Sprintf("the client's default send policy: %v", err))
	}
	return cfg
}()

// outgoing is one message, or one batch, being sent: its send plan and
// what each attempt carries (the same bodies and keys every time).
type outgoing struct {
	send  *sendpath.Send
	keys  []string
	msgs  []protocol.Message
	batch bool
}

// produce starts the next message (or batch) on its way.
func (c *Client) produce() {
	c.produced++
	c.inflight++
	o := &outgoing{send: c.table.Begin(simTopic, sendpath.AnyQueue, time.Time{}), batch: c.kind == BatchProducer}
	n := 1
	if o.batch {
		n = 2 + c.s.w.rng.Intn(6)
	}
	for range n {
		key := c.nextKey()
		m := protocol.Message{Body: c.body(key)}
		m.SetKeys(key)
		o.msgs = append(o.msgs, m)
		o.keys = append(o.keys, key)
		c.s.sent[key] = &sentMsg{key: key, body: m.Body, producer: c.id}
	}
	c.attempt(o)
}

// attempt sends o where its plan says, once the plan has a route: a send
// that needs one waits for the name server's answer.
func (c *Client) attempt(o *outgoing) {
	st := o.send.Next(c.s.w.Now())
	if st.Fetch {
		c.waiting = append(c.waiting, o)
		c.fetchRoute()
		return
	}
	c.sendTo(o, st)
}

// sendTo carries an attempt to its queue. No broker: the route has no
// group with a live master (the client's connFor fails it as
// unavailable); a master that is down refuses the connection. Both are
// failed attempts like a broken connection.
func (c *Client) sendTo(o *outgoing, st sendpath.Step) {
	if st.Fetch || (st.To.Broker != "" && st.To.QueueID < 0) {
		c.s.w.Violationf("client %d: the send path chose %v, not a queue of the route", c.id, st)
		return
	}
	if st.To.Broker == "" {
		c.decide(o, st.To, sendpath.Outcome{Failure: sendpath.Broken})
		return
	}
	g := c.s.byAddr[st.To.Broker]
	if g == nil {
		c.s.w.Violationf("client %d: the route names %s, not a master", c.id, st.To.Broker)
		return
	}
	to := g.master
	if c.s.cfg.Ctl != nil {
		to = c.s.nodeAt[st.To.Broker] // any broker of the group may be its master
	}
	c.s.checkRouteUse(c, to)
	q := st.To.QueueID
	if !c.connTo(g, to) {
		c.brokerDown(st.To.Broker)
		c.decide(o, st.To, sendpath.Outcome{Failure: sendpath.Broken})
		return
	}
	for _, k := range o.keys {
		c.s.sent[k].sentTo(g, q)
	}
	p := &pending{keys: o.keys, queue: q, out: o, to: st.To}
	born := c.s.w.Now().UnixMilli()
	if o.batch {
		c.request(g, &protocol.SendBatchRequest{Topic: simTopic, QueueID: q, BornTimestamp: born, Messages: o.msgs}, p)
		return
	}
	m := &o.msgs[0]
	c.request(g, &protocol.SendRequest{Topic: simTopic, QueueID: q, BornTimestamp: born, Body: m.Body, Properties: m.Properties}, p)
}

// decide feeds an attempt's outcome to o's plan and does what it says:
// retry at its time, or end the send (acknowledged or failed for good).
func (c *Client) decide(o *outgoing, to sendpath.QueueRef, out sendpath.Outcome) {
	d := o.send.Outcome(c.s.w.Now(), to, out)
	if d.Verdict == sendpath.Retry {
		c.s.w.Tracef("client %d: attempt on %v: %v %v, retry in %v", c.id, to, out.Failure, out.Status, d.At.Sub(c.s.w.Now()))
		c.s.w.at(d.At, c.own(), func() { c.attempt(o) })
		return
	}
	c.inflight--
	if c.kind == AsyncProducer {
		return // it runs on its own timer
	}
	think := time.Duration(500+c.s.w.rng.Intn(4000)) * time.Microsecond
	if c.s.sc.NoThink {
		think = 0
	}
	c.s.w.at(c.s.w.Now().Add(think), c.own(), c.kick)
}
