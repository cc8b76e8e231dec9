package brokertest

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/wharfmq/wharf/protocol"
)

// proxy is the frame-aware TCP proxy in front of a broker: clients connect
// to it, it connects each of them to the broker and copies frames both
// ways, counting requests by code and applying the faults a test set
// (a status hook, stalled codes, a forced pull suggestion). It owns no
// timer: every goroutine is a connection's reader and ends with the
// connection, and close waits for them.
type proxy struct {
	lim    protocol.Limits
	target func() string // the broker's current address

	mu        sync.Mutex
	ln        net.Listener
	conns     map[*proxyConn]struct{}
	counts    map[protocol.Code]int
	pulls     map[protocol.QueueRef]int
	pending   map[protocol.Code]int     // forwarded, not yet answered
	held      map[protocol.QueueRef]int // pulls forwarded, not yet answered
	hook      func(code protocol.Code, n int) protocol.Status
	stall     map[protocol.Code]bool
	suggest   int64
	suggested bool
	sendBacks []protocol.ConsumerSendMsgBackRequest
	wg        sync.WaitGroup
}

// proxyConn is one client connection and its connection to the broker.
type proxyConn struct {
	client, broker net.Conn
	wmu            sync.Mutex // writes to client: forwarded answers and injected ones
	mu             sync.Mutex
	rewrite        map[uint32]protocol.Status   // opaque -> status the answer gets
	outstanding    map[uint32]protocol.Code     // forwarded requests not yet answered
	pulls          map[uint32]protocol.QueueRef // the queues of the outstanding pulls
	dead           bool                         // cut: nothing more is outstanding
	once           sync.Once
}

func (c *proxyConn) toClient(frame []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.client.Write(frame)
	return err
}

func newProxy(target func() string) *proxy {
	return &proxy{lim: protocol.DefaultLimits(), target: target, conns: map[*proxyConn]struct{}{},
		counts: map[protocol.Code]int{}, pulls: map[protocol.QueueRef]int{},
		pending: map[protocol.Code]int{}, held: map[protocol.QueueRef]int{}, stall: map[protocol.Code]bool{}}
}

// listen starts accepting on addr ("127.0.0.1:0" the first time, the
// same address again after a stop).
func (p *proxy) listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("brokertest: proxy listen on %s: %w", addr, err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go p.accept(ln)
	return nil
}

// close stops accepting, cuts every connection and waits for the
// connections' goroutines.
func (p *proxy) close() {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	p.mu.Unlock()
	p.dropConns()
	p.wg.Wait()
}

// dropConns cuts every connection; the listener stays.
func (p *proxy) dropConns() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[*proxyConn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		p.cut(c)
	}
}

// cut closes c; what it had outstanding will never be answered.
func (p *proxy) cut(c *proxyConn) {
	c.once.Do(func() {
		c.client.Close()
		c.broker.Close()
		c.mu.Lock()
		out, pulls := c.outstanding, c.pulls
		c.outstanding, c.pulls, c.dead = map[uint32]protocol.Code{}, map[uint32]protocol.QueueRef{}, true
		c.mu.Unlock()
		p.mu.Lock()
		for _, code := range out {
			p.pending[code]--
		}
		for _, q := range pulls {
			p.held[q]--
		}
		p.mu.Unlock()
	})
}

func (p *proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		bc, err := net.Dial("tcp", p.target())
		if err != nil {
			nc.Close()
			continue
		}
		c := &proxyConn{client: nc, broker: bc, rewrite: map[uint32]protocol.Status{}, outstanding: map[uint32]protocol.Code{},
			pulls: map[uint32]protocol.QueueRef{}}
		p.mu.Lock()
		if p.ln != ln { // closed meanwhile
			p.mu.Unlock()
			nc.Close()
			bc.Close()
			return
		}
		p.conns[c] = struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go p.run(c, p.fromClient)
		go p.run(c, p.fromBroker)
	}
}

// run runs one direction of c until it fails, then cuts c.
func (p *proxy) run(c *proxyConn, loop func(*proxyConn) error) {
	defer p.wg.Done()
	_ = loop(c)
	p.cut(c)
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// readFrame reads one whole frame, length prefix included.
func readFrame(r *bufio.Reader, lim protocol.Limits) ([]byte, error) {
	var prefix [protocol.PrefixSize]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, err
	}
	if _, err := protocol.Split(prefix[:], lim); err != nil {
		return nil, err
	}
	buf := make([]byte, 4+binary.BigEndian.Uint32(prefix[:]))
	copy(buf, prefix[:])
	if _, err := io.ReadFull(r, buf[protocol.PrefixSize:]); err != nil {
		return nil, err
	}
	return buf, nil
}

// fromClient forwards c's requests to the broker, or answers or swallows
// them as the test's faults say.
func (p *proxy) fromClient(c *proxyConn) error {
	r := bufio.NewReader(c.client)
	for {
		buf, err := readFrame(r, p.lim)
		if err != nil {
			return err
		}
		f, err := protocol.DecodeFrame(buf, p.lim)
		if err != nil {
			return err
		}
		if !f.IsResponse() {
			forward, answer := p.request(c, f)
			if answer != nil {
				if err := c.toClient(answer); err != nil {
					return err
				}
			}
			if !forward {
				continue
			}
		}
		if _, err := c.broker.Write(buf); err != nil {
			return err
		}
	}
}

// request counts f and decides its fate: forwarded (maybe with its
// answer's status to rewrite), answered here, or swallowed.
func (p *proxy) request(c *proxyConn, f *protocol.Frame) (forward bool, answer []byte) {
	p.mu.Lock()
	p.counts[f.Code]++
	n := p.counts[f.Code]
	stalled, hook := p.stall[f.Code], p.hook
	q := p.note(f)
	p.mu.Unlock()
	if stalled {
		return false, nil
	}
	var st protocol.Status
	if hook != nil {
		st = hook(f.Code, n)
	}
	isSend := f.Code == protocol.CodeSendMessage || f.Code == protocol.CodeSendBatchMessage
	switch {
	case st == 0:
		p.outstand(c, f, q)
		return true, nil
	case st.Stored() && isSend:
		// Stored, but answered with st (a flush or replication timeout).
		c.mu.Lock()
		c.rewrite[f.Opaque] = st
		c.mu.Unlock()
		p.outstand(c, f, q)
		return true, nil
	case f.IsOneway():
		return false, nil
	}
	return false, protocol.AppendErrorResponse(nil, f.Code, f.Opaque, st, "injected by brokertest")
}

// outstand notes a forwarded request that waits for an answer (q: the
// queue of a pull).
func (p *proxy) outstand(c *proxyConn, f *protocol.Frame, q *protocol.QueueRef) {
	if f.IsOneway() {
		return
	}
	c.mu.Lock()
	_, dup := c.outstanding[f.Opaque]
	dead := c.dead
	if !dead && !dup {
		c.outstanding[f.Opaque] = f.Code
		if q != nil {
			c.pulls[f.Opaque] = *q
		}
	}
	c.mu.Unlock()
	if dup || dead {
		return
	}
	p.mu.Lock()
	p.pending[f.Code]++
	if q != nil {
		p.held[*q]++
	}
	p.mu.Unlock()
}

// note records what the counters keep of a request beyond its code: the
// queue of a pull (returned), the fields of a send-back. p.mu is held.
func (p *proxy) note(f *protocol.Frame) *protocol.QueueRef {
	if f.Code != protocol.CodePullMessage && f.Code != protocol.CodeConsumerSendMsgBack {
		return nil
	}
	req, err := protocol.DecodeRequest(f, p.lim)
	if err != nil {
		return nil // the broker answers it with the error
	}
	switch r := req.(type) {
	case *protocol.PullRequest:
		q := protocol.QueueRef{Topic: r.Topic, QueueID: r.QueueID}
		p.pulls[q]++
		return &q
	case *protocol.ConsumerSendMsgBackRequest:
		p.sendBacks = append(p.sendBacks, *r)
	}
	return nil
}

// fromBroker forwards the broker's frames to the client, rewriting the
// answers the test's faults name.
func (p *proxy) fromBroker(c *proxyConn) error {
	r := bufio.NewReader(c.broker)
	for {
		buf, err := readFrame(r, p.lim)
		if err != nil {
			return err
		}
		if buf, err = p.answer(c, buf); err != nil {
			return err
		}
		if err := c.toClient(buf); err != nil {
			return err
		}
	}
}

// answer is buf as the client gets it: with a rewritten status, or a
// pull answer's suggested broker forced.
func (p *proxy) answer(c *proxyConn, buf []byte) ([]byte, error) {
	f, err := protocol.DecodeFrame(buf, p.lim)
	if err != nil {
		return nil, err
	}
	if !f.IsResponse() {
		return buf, nil
	}
	c.mu.Lock()
	st, rewrite := c.rewrite[f.Opaque]
	delete(c.rewrite, f.Opaque)
	code, answered := c.outstanding[f.Opaque]
	q, pull := c.pulls[f.Opaque]
	delete(c.outstanding, f.Opaque)
	delete(c.pulls, f.Opaque)
	c.mu.Unlock()
	if answered {
		p.mu.Lock()
		p.pending[code]--
		if pull {
			p.held[q]--
		}
		p.mu.Unlock()
	}
	if rewrite && f.Status == protocol.StatusOK {
		f.Status = st
		return protocol.AppendFrame(nil, f), nil
	}
	p.mu.Lock()
	suggest, forced := p.suggest, p.suggested
	p.mu.Unlock()
	if !forced || f.Code != protocol.CodePullMessage {
		return buf, nil
	}
	var pr protocol.PullResponse
	if err := protocol.DecodeResponse(f, p.lim, &pr); err != nil {
		return nil, fmt.Errorf("brokertest: proxy: %w", err)
	}
	pr.SuggestWhichBrokerID = suggest
	return protocol.AppendResponse(nil, f.Code, f.Opaque, f.Status, f.Remark, &pr)
}
