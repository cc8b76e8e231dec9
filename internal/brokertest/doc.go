// Package brokertest runs a real Wharf broker in-process for tests: the
// actors (actors.New) over a store with small segments (storage.Open),
// behind a netio listener and a replication listener on loopback, as
// cmd/wharf wires them. There is no model of the broker here: what a test
// observes is what the broker does.
//
// The store is on real files (a memory-backed directory where the machine
// has one), not vfs.Mem: the broker syncs mapped pages on I/O goroutines
// while its actors write other bytes of the same pages, which real
// mappings allow and vfs.Mem, built for the simulator's single goroutine,
// reports as a data race.
//
// Contract:
//   - Start(t, opts...) starts one; t.Cleanup stops it. Options set its
//     configuration (auto-creation, heartbeat interval, flush type, role,
//     delay levels, any actors.Config field) and SlaveOf makes it a slave
//     replicating from a master over the real HA protocol; SetReplicating
//     cuts and restores the slave's link.
//   - Clients dial Addr, a frame-aware TCP proxy in front of the broker.
//     The proxy counts requests by code and injects the faults a test
//     sets: a status hook, stalled request codes (never answered), a
//     forced pull suggestion, cut connections. Its goroutines are the
//     connections' readers; they end with their connections and Stop
//     waits for them.
//   - The broker runs on a Clock of its own: the wall clock plus a skew a
//     test may Advance, firing the broker's timers that fall due, instead
//     of sleeping through a broker-side timeout. Start advances it past
//     the consumer-group coordinator's restart grace (a new store has no
//     members to wait for); Restart does not.
//   - The proxy also reports what the broker holds: Pending requests of a
//     code and the queues with a pull Held (long polling), so a test
//     waits for "every consumer is at the end" instead of sleeping.
//   - Helpers (CreateTopic, CommittedOffset, Messages, Total, QueueCount,
//     GroupMembers, WaitDispatched) ask the broker over the wire on connections of their
//     own, bypassing the proxy; a failed helper call fails the test.
//   - Stop stops it cleanly (data kept); Restart starts it again on the
//     same store at the same addresses.
//   - StartNameServer starts a real name server (actors.NameServer behind
//     a netio listener, on a Clock of its own). Brokers do not register
//     by themselves yet: RegisterWith registers one (cluster, group, its
//     brokerId, role and current topics, a newer data version per call,
//     a lease long enough to need no heartbeats) on a connection that
//     stays open until Stop, so a stopped broker leaves the routes at
//     once, as a dead broker process does.
//
// Imports: std, protocol, storage, actors, netio, internal/testwait. It
// must not import the client: the client's in-package tests use it.
package brokertest
