package faultnet

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/wharfmq/wharf/internal/testwait"
)

// echo starts a loopback server that writes back every line it reads.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func newLink(t *testing.T, target string) *Link {
	t.Helper()
	l, err := NewLink("a->b", target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// client is one connection through a link.
type client struct {
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{c: c, r: bufio.NewReader(c)}
}

// roundTrip writes a line and reads the answer within d: the answer, or
// the error.
func (c *client) roundTrip(line string, d time.Duration) (string, error) {
	c.c.SetDeadline(time.Now().Add(d))
	if _, err := c.c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	s, err := c.r.ReadString('\n')
	return strings.TrimSuffix(s, "\n"), err
}

func TestLinkForwardsAndDelays(t *testing.T) {
	l := newLink(t, echo(t))
	c := dial(t, l.Addr())
	if got, err := c.roundTrip("hello", time.Second); err != nil || got != "hello" {
		t.Fatalf("round trip: %q %v", got, err)
	}
	l.SetLatency(100 * time.Millisecond)
	start := time.Now()
	if got, err := c.roundTrip("slow", 2*time.Second); err != nil || got != "slow" {
		t.Fatalf("round trip with latency: %q %v", got, err)
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("round trip took %v with 100 ms each way", took)
	}
	l.SetLatency(0)
	start = time.Now()
	if _, err := c.roundTrip("fast", time.Second); err != nil || time.Since(start) > 150*time.Millisecond {
		t.Errorf("round trip after latency 0: %v in %v", err, time.Since(start))
	}
}

func TestLinkPartitionDropsThenHealCuts(t *testing.T) {
	l := newLink(t, echo(t))
	old := dial(t, l.Addr())
	if _, err := old.roundTrip("before", time.Second); err != nil {
		t.Fatal(err)
	}
	l.Partition()
	if got, err := old.roundTrip("during", 200*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("live connection during the partition: %q %v, want a timeout", got, err)
	}
	fresh := dial(t, l.Addr()) // accepted, then swallowed
	if got, err := fresh.roundTrip("during", 200*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("new connection during the partition: %q %v, want a timeout", got, err)
	}
	if _, dropped := l.Stats(); dropped == 0 {
		t.Errorf("no bytes counted as dropped")
	}
	l.Heal()
	for name, c := range map[string]*client{"live": old, "partitioned-from-the-start": fresh} {
		if _, err := c.roundTrip("after", time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("%s connection after the heal: %v, want it closed", name, err)
		}
	}
	if got, err := dial(t, l.Addr()).roundTrip("after", time.Second); err != nil || got != "after" {
		t.Errorf("new connection after the heal: %q %v", got, err)
	}
}

func TestLinkCut(t *testing.T) {
	l := newLink(t, echo(t))
	c := dial(t, l.Addr())
	if _, err := c.roundTrip("x", time.Second); err != nil {
		t.Fatal(err)
	}
	l.Cut()
	if _, err := c.roundTrip("y", time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("after Cut: %v, want the connection closed", err)
	}
	if got, err := dial(t, l.Addr()).roundTrip("z", time.Second); err != nil || got != "z" {
		t.Errorf("new connection after Cut: %q %v", got, err)
	}
	if accepted, _ := l.Stats(); accepted != 2 {
		t.Errorf("accepted %d, want 2", accepted)
	}
}

func TestLinkLoopbackOnly(t *testing.T) {
	for _, target := range []string{"10.0.0.1:80", "example.com:80", "nonsense"} {
		if l, err := NewLink("x", target); err == nil {
			l.Close()
			t.Errorf("NewLink(%q) accepted", target)
		}
	}
}

// TestLinkOn: a link listens on the loopback address it is given, on the
// port of the target's (another loopback IP, the same port), and only on
// loopback.
func TestLinkOn(t *testing.T) {
	target := echo(t)
	_, port, _ := net.SplitHostPort(target)
	l, err := NewLinkOn("a->b", net.JoinHostPort("127.0.0.2", port), target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if want := "127.0.0.2:" + port; l.Addr() != want {
		t.Fatalf("listens on %s, want %s", l.Addr(), want)
	}
	if got, err := dial(t, l.Addr()).roundTrip("hello", time.Second); err != nil || got != "hello" {
		t.Fatalf("round trip: %q %v", got, err)
	}
	if l, err := NewLinkOn("x", "10.0.0.1:0", target); err == nil {
		l.Close()
		t.Errorf("NewLinkOn on 10.0.0.1 accepted")
	}
}

// TestNetCloseStopsEverything: links with live, partitioned and delayed
// connections all end with Close, goroutines included.
func TestNetCloseStopsEverything(t *testing.T) {
	target := echo(t)
	before := runtime.NumGoroutine()
	n := NewNet()
	ab, err := n.Link("a", "b", target)
	if err != nil {
		t.Fatal(err)
	}
	ba, _ := n.Link("b", "a", target)
	ac, _ := n.Link("a", "c", target)
	if again, err := n.Link("a", "b", target); err != nil || again != ab {
		t.Errorf("second Link(a, b): %v %v", again, err)
	}
	if _, err := n.Link("a", "b", "127.0.0.1:1"); err == nil {
		t.Errorf("Link(a, b) to another target accepted")
	}
	var cs []*client
	for _, l := range []*Link{ab, ba, ac} {
		c := dial(t, l.Addr())
		if _, err := c.roundTrip("x", time.Second); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	if got := n.Partition("b", "a"); got != 2 {
		t.Errorf("Partition(b, a) covered %d links, want 2", got)
	}
	if _, err := cs[2].roundTrip("a->c still up", time.Second); err != nil {
		t.Errorf("a->c during the a|b partition: %v", err)
	}
	dial(t, ab.Addr())
	ac.SetLatency(5 * time.Second)
	cs[2].c.Write([]byte("queued\n"))
	time.Sleep(50 * time.Millisecond) // let the proxy read it: a chunk waits out its latency
	closing := time.Now()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(closing); took > time.Second {
		t.Errorf("Close took %v: it waited out the latency of a queued chunk", took)
	}
	// The echo server's own goroutines end when the proxy closes its side.
	testwait.For(t, testwait.Wall, 3*time.Second, "goroutines back to the count before the links", func() bool {
		return runtime.NumGoroutine() <= before
	})
}
