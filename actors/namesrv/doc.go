// Package namesrv is the name server's route table: a plain core, with no
// goroutines, no clock (time is an input) and no I/O.
//
// # Contract
//
// The Table holds clusters, broker groups (brokerName -> brokerId ->
// address, HA address, role), each group's topic configurations (from its
// master) and every broker's lease. Its inputs are Register, Heartbeat,
// Unregister, ConnClosed, Expire (the lease scan) and DeleteTopic; its
// outputs are the answers, Deadline (when Expire must next run) and the
// views Route, Cluster and Topics.
//
// Rules:
//   - A broker is alive from a registration until its lease (its own
//     heartbeatTimeoutMillis, or Config.Lease) passes without a
//     registration or heartbeat, or the connection it last registered on
//     closes. An expired broker stays listed, dead, until it registers
//     again, unregisters, or its slot (group, brokerId) is taken by a
//     broker at another address.
//   - Registrations carry a data version; one older than the version held
//     for that broker is ignored entirely (a delayed message of an older
//     run). Topics are taken from a group's master only, and only when its
//     data version grew or it was not alive before; they replace the
//     group's set.
//   - A group's master is its alive broker with brokerId 0 that is not a
//     SLAVE. A group without one keeps its queues readable in routes
//     (consumers read its slaves) with writeQueueNums 0 and no write
//     permission, so producers skip it. A group with no alive broker is left
//     out of routes.
//   - Version grows at every change that alters a route or the cluster view,
//     and never goes back: it is max(version+1, now in µs), so a restarted
//     name server continues above the versions it handed out before.
//
// Imports: std and protocol only.
package namesrv
