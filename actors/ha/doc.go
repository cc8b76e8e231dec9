// Package ha is master/slave replication as two plain cores.
//
// Replicator is the master's side: one state per slave connection (what
// the slave acknowledged, what was sent to it). A slave's first report
// decides where streaming starts, after checking that its log is a prefix
// of the master's (same segment size, not longer, not before the master's
// earliest offset, the same bytes over its last 4 KiB); any disagreement
// refuses the slave with a reason the operator can act on. Reports still
// in flight on a connection it refused or closed are ignored until the
// shell reports the connection gone. The Replicator
// streams log records with at most Window bytes unacknowledged per slave,
// closes slaves silent for HousekeepingInterval, and reports every slave's
// acknowledged offset (Acked) to the acknowledgement gate.
//
// Follower is the slave's side: the link to its master (dial, backoff,
// heartbeats, housekeeping), appending what the master sends at the same
// offsets, and reporting its log end, which acknowledges it.
//
// Invariants (internal/invariant, fatal when broken): a slave's
// acknowledged offset never exceeds what was sent to it, and nothing is
// sent past the master's log end (sent only grows, by the bytes of each
// transfer); after an append a slave's log ends exactly where the
// master's bytes end, so its report acknowledges only what it holds.
//
// Both are plain: no goroutines, no clock (now is an input), no sockets.
// Peers are connection ids; what to send, close or dial comes out in a
// Ready value the shell carries out. They read and append the log through
// storage, which is plain data structures over the FS seam.
package ha
