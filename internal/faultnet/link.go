package faultnet

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Link is the proxy of one directed link: connections made to Addr are
// forwarded to the target.
type Link struct {
	name   string
	target string
	ln     net.Listener

	mu          sync.Mutex
	partitioned bool
	latency     time.Duration
	conns       map[*pair]struct{}
	closed      bool
	accepted    int
	dropped     int64 // bytes dropped by partitions
	wg          sync.WaitGroup
}

// pair is one proxied connection: the dialler's side and the target's
// (nil while partitioned from the start).
type pair struct {
	in      net.Conn
	tainted bool // lived through a partition: closed on Heal (under Link.mu)

	mu     sync.Mutex
	out    net.Conn
	closed bool
	done   chan struct{} // closed by close: ends a latency wait
}

// setOut attaches the target's side; false (and out closed) if the pair
// was closed meanwhile.
func (p *pair) setOut(out net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		out.Close()
		return false
	}
	p.out = out
	return true
}

func (p *pair) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	close(p.done)
	p.in.Close()
	if p.out != nil {
		p.out.Close()
	}
}

// NewLink listens on 127.0.0.1 on a free port and forwards to target, a
// loopback host:port; name appears in errors only.
func NewLink(name, target string) (*Link, error) { return NewLinkOn(name, "127.0.0.1:0", target) }

// NewLinkOn is NewLink listening on listen, a loopback host:port (port 0:
// a free one): for a target that announces one address and listens on
// another (a broker's brokerIP2 with its haListenPort, say 127.0.0.2:P,
// and 127.0.0.1:P where it listens).
func NewLinkOn(name, listen, target string) (*Link, error) {
	for _, a := range []string{target, listen} {
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			return nil, fmt.Errorf("faultnet: link %s: address %q: %w", name, a, err)
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return nil, fmt.Errorf("faultnet: link %s: %q is not a loopback address", name, a)
		}
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("faultnet: link %s: listen: %w", name, err)
	}
	l := &Link{name: name, target: target, ln: ln, conns: map[*pair]struct{}{}}
	l.wg.Add(1)
	go l.accept()
	return l, nil
}

// Addr is the address diallers use instead of the target's.
func (l *Link) Addr() string { return l.ln.Addr().String() }

// Name is the link's name.
func (l *Link) Name() string { return l.name }

func (l *Link) accept() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return // closed
		}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			c.Close()
			return
		}
		l.accepted++
		p := &pair{in: c, tainted: l.partitioned, done: make(chan struct{})}
		l.conns[p] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		go l.serve(p)
	}
}

// serve dials the target (unless partitioned: then it only swallows what
// the dialler sends) and pumps both ways until either side ends.
func (l *Link) serve(p *pair) {
	defer l.wg.Done()
	defer l.forget(p)
	if l.isTainted(p) {
		n, _ := io.Copy(io.Discard, p.in)
		l.countDropped(n)
		return
	}
	out, err := net.DialTimeout("tcp", l.target, 2*time.Second)
	if err != nil {
		return
	}
	if !p.setOut(out) {
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); l.pump(p, p.in, out); p.close() }()
	go func() { defer wg.Done(); l.pump(p, out, p.in); p.close() }()
	wg.Wait()
}

func (l *Link) forget(p *pair) {
	p.close()
	l.mu.Lock()
	delete(l.conns, p)
	l.mu.Unlock()
}

func (l *Link) isTainted(p *pair) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return p.tainted
}

func (l *Link) countDropped(n int64) {
	l.mu.Lock()
	l.dropped += n
	l.mu.Unlock()
}

// chunk is bytes read at a time, to be written once the latency passed.
type chunk struct {
	b   []byte
	due time.Time
}

// pump copies src to dst through a bounded queue, so that latency delays
// each chunk without adding up: the reader stamps chunks, the writer waits
// for each one's due time. Bytes read while the link is partitioned (or
// on a connection that lived through a partition) are dropped.
func (l *Link) pump(p *pair, src, dst net.Conn) {
	q := make(chan chunk, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range q {
			if !p.wait(time.Until(c.due)) {
				break
			}
			if _, err := dst.Write(c.b); err != nil {
				p.close() // unblocks the reader below
				break
			}
		}
		for range q { // the pair is closed: drop the rest
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			l.mu.Lock()
			drop, lat := l.partitioned || p.tainted, l.latency
			if drop {
				l.dropped += int64(n)
			}
			l.mu.Unlock()
			if !drop {
				q <- chunk{b: append([]byte(nil), buf[:n]...), due: time.Now().Add(lat)}
			}
		}
		if err != nil {
			break
		}
	}
	close(q)
	<-done
}

// wait waits d, or less if the pair closes first: false then.
func (p *pair) wait(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.done:
		return false
	}
}

// Partition drops every byte of the link from now on, on live
// connections and on new ones, until Heal.
func (l *Link) Partition() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partitioned = true
	for p := range l.conns {
		p.tainted = true
	}
}

// Heal ends a partition: new connections forward again, and the
// connections that lived through it are closed.
func (l *Link) Heal() {
	l.mu.Lock()
	l.partitioned = false
	var cut []*pair
	for p := range l.conns {
		if p.tainted {
			cut = append(cut, p)
		}
	}
	l.mu.Unlock()
	for _, p := range cut {
		p.close()
	}
}

// SetLatency delays every chunk from now on by d in each direction (0 for
// none).
func (l *Link) SetLatency(d time.Duration) {
	l.mu.Lock()
	l.latency = d
	l.mu.Unlock()
}

// Cut closes the live connections; new ones are accepted as before.
func (l *Link) Cut() {
	l.mu.Lock()
	var cut []*pair
	for p := range l.conns {
		cut = append(cut, p)
	}
	l.mu.Unlock()
	for _, p := range cut {
		p.close()
	}
}

// Stats reports the connections accepted so far and the bytes partitions
// dropped.
func (l *Link) Stats() (accepted int, dropped int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.accepted, l.dropped
}

// Close stops the listener and every connection and waits for their
// goroutines.
func (l *Link) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	err := l.ln.Close()
	l.Cut()
	l.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
