package client

import (
	"time"

	"github.com/wharfmq/wharf/client/sendpath"
	"github.com/wharfmq/wharf/protocol"
)

// RouteBook turns the routes a client reads from name servers into the
// send path's routes, by the rules the Producer follows: the writable
// queues of every group with a live master and write permission, keyed by
// the master's address, and a route's version compared only with the
// versions taken from the same name server (see routeBook). It is for a
// driver of client/sendpath that cannot run the Producer itself (the
// simulator, on virtual time). The zero value is ready; not safe for
// concurrent use.
type RouteBook struct{ b routeBook }

// Take decides whether rd, read from name server ns at fetched, is taken,
// and returns it as a sendpath.Route; false: rd is older than a route
// already taken from ns, and must be ignored.
func (b *RouteBook) Take(ns string, rd *protocol.RouteData, fetched time.Time) (sendpath.Route, bool) {
	return b.b.take(ns, rd, fetched)
}
