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
// acknowledged offset (Acked) and flushed offset (Slaves) to the
// acknowledgement gate; every transfer carries the master's confirm
// offset (SetConfirmOffset).
//
// Follower is the slave's side: the link to its master (dial, backoff,
// heartbeats, housekeeping), appending what the master sends at the same
// offsets, and reporting its log end, which acknowledges it, and how far
// the log is fsynced (again after each flush: Flushed), which a SYNC_FLUSH
// master in controller mode waits for. It keeps the master's confirm
// offset as the transfers carry it (ConfirmOffset).
//
// Epochs (controller mode; storage's epoch file): a slave whose log has
// epoch entries sends them on its link's first report; the master answers
// HA_EPOCHS with its own and its log end instead of streaming. The slave
// computes the last point both logs share (storage.CommonPoint) and, if
// its log goes on past it, asks its shell to cut it there (Truncate, then
// Truncated) before it reports again and copies anything; no common point
// stops replication (never an overwrite). Every transfer holds the bytes
// of one epoch and names it with its start: the slave records an epoch
// entry before the first bytes of a new epoch, and refuses a transfer of
// an older epoch than its newest, or one that places the current epoch
// elsewhere. The master refuses a slave that knows a newer epoch than its
// own (it is the stale one). Classic mode has no epochs: epoch 0
// everywhere, no handshake, and the prefix checks above decide alone; a
// slave with epochs refuses a classic master's transfers.
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
