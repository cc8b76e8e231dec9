package brokertest

import (
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"testing"
)

// FreePorts are n distinct loopback ports free now, drawn from
// 20000-31999: below Linux's ephemeral range (32768 up), so that no
// outgoing connection of another test takes one as its local port between
// the probe and the bind of the daemon the caller starts on it (a Jepsen
// rig's broker once lost its port that way). A daemon started on one may
// still lose a race with another test's probe: callers that start real
// processes retry a start that could not bind.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	for attempt := 0; len(ports) < n; attempt++ {
		if attempt > 1000 {
			t.Fatal("brokertest: no free loopback port below the ephemeral range")
		}
		p := 20000 + rand.IntN(12000)
		if slices.Contains(ports, p) {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // taken
		}
		l.Close()
		ports = append(ports, p)
	}
	return ports
}
