package benchrun

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/wharfmq/wharf/client"
)

// clusterName is the brokerClusterName of the bench's cluster brokers.
const clusterName = "BenchCluster"

// cluster is a name server and groups masters (no slaves) registered with
// it, all children of the bench.
type cluster struct {
	ns      *broker
	brokers []*broker // brokers[i] is group bench-<i>
}

// startCluster starts a name server child and groups brokers registered
// with it, and waits until the name server lists every one as a live
// master.
func startCluster(ctx context.Context, o *Options, groups int, stderr io.Writer) (*cluster, error) {
	ns, err := startNamesrv(ctx, o, stderr)
	if err != nil {
		return nil, err
	}
	c := &cluster{ns: ns}
	for i := range groups {
		ha, err := freePort()
		if err != nil {
			c.stop()
			return nil, err
		}
		b, err := startBroker(ctx, o, "ASYNC_FLUSH", stderr, "--namesrvAddr", ns.addr,
			"--brokerClusterName", clusterName, "--brokerName", fmt.Sprintf("bench-%d", i),
			"--haListenPort", strconv.Itoa(ha))
		if err != nil {
			c.stop()
			return nil, fmt.Errorf("broker group %d: %w", i, err)
		}
		c.brokers = append(c.brokers, b)
	}
	if err := c.waitMasters(ctx, 20*time.Second, o.Timeout); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// stop ends the brokers, then the name server.
func (c *cluster) stop() {
	for _, b := range c.brokers {
		b.stop()
	}
	c.ns.stop()
}

// admin is an Admin on the cluster's name server.
func (c *cluster) admin(timeout time.Duration) (*client.Admin, error) {
	return client.NewAdmin("", client.WithNameServer(c.ns.addr), client.WithTimeout(timeout))
}

// waitMasters waits until the name server lists a live master for every
// broker of c.
func (c *cluster) waitMasters(ctx context.Context, within, timeout time.Duration) error {
	a, err := c.admin(timeout)
	if err != nil {
		return err
	}
	defer a.Close()
	deadline := time.Now().Add(within)
	live := 0
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if ci, err := a.ClusterInfo(ctx); err == nil {
			live = 0
			for _, b := range ci.Brokers {
				if b.ClusterName == clusterName && b.Alive && b.BrokerID == 0 {
					live++
				}
			}
			if live >= len(c.brokers) {
				return nil
			}
		}
		sleepCtx(ctx, 20*time.Millisecond)
	}
	return fmt.Errorf("the name server lists %d of %d live masters after %v", live, len(c.brokers), within)
}

// waitRoute waits until the name server's route of topic has groups
// groups with writable queues.
func (c *cluster) waitRoute(ctx context.Context, topic string, groups int, timeout time.Duration) error {
	a, err := c.admin(timeout)
	if err != nil {
		return err
	}
	defer a.Close()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		rd, err := a.TopicRoute(ctx, topic)
		n := 0
		for _, q := range rd.QueueDatas {
			if q.WriteQueueNums > 0 {
				n++
			}
		}
		if err == nil && n >= groups {
			return nil
		}
		sleepCtx(ctx, 20*time.Millisecond)
	}
	return fmt.Errorf("topic %s is not routed to %d groups after 20s", topic, groups)
}

// members is a pseudo-broker for timed: its address is bs[0]'s and its
// CPU is the sum of bs's (the name server too when it is one of them).
func members(bs ...*broker) *broker {
	return &broker{addr: bs[0].addr, flushMode: bs[0].flushMode, members: bs}
}

// settleAll lets every broker of bs idle before a measured window.
func settleAll(ctx context.Context, max time.Duration, stderr io.Writer, bs ...*broker) {
	for _, b := range bs {
		b.settle(ctx, max, stderr)
	}
}

// startNamesrv starts `<BrokerBin> namesrv` on a free loopback port.
func startNamesrv(ctx context.Context, o *Options, stderr io.Writer) (*broker, error) {
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		ns := &broker{
			addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			done: make(chan struct{}),
			log:  &tail{w: stderr},
		}
		ns.cmd = exec.Command(o.BrokerBin, "namesrv", "--bindAddress", "127.0.0.1",
			"--listenPort", strconv.Itoa(port), "--log-level", o.BrokerLogLevel)
		ns.cmd.Stdout, ns.cmd.Stderr = ns.log, ns.log
		ns.cmd.Env = append(os.Environ(), ChildEnv+"=1")
		if err := ns.cmd.Start(); err != nil {
			return nil, fmt.Errorf("start name server %s: %w", o.BrokerBin, err)
		}
		go func() {
			ns.waitErr = ns.cmd.Wait()
			close(ns.done)
		}()
		if last = ns.waitReady(ctx, 20*time.Second); last == nil {
			return ns, nil
		}
		ns.stop()
	}
	return nil, fmt.Errorf("name server: %w", last)
}
