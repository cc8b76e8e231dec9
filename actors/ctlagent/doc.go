// Package ctlagent is a broker's side of controller mode: a plain core, with
// no goroutines, no clock (time is an input) and no I/O, that decides what a
// broker asks its controllers, which role it takes, when it may accept
// writes, and whose acknowledgements a SYNC send waits for.
//
// # Contract
//
// An Agent's inputs are Start, Tick (at Ready.Deadline), Answer and Failed
// (the outcome of a request it asked to send), Notified (a role change the
// controller pushed), Slaves (the master's view of its slaves' progress)
// and RoleApplied (the broker carried out a role change). Its output, taken
// with Ready, lists the requests to send (each to one controller address,
// with an id to match its outcome), the role to take, whether writes are
// allowed, and the set of broker ids a SYNC send must be acknowledged by.
//
// Rules:
//   - The broker registers first (REGISTER: the controller assigns its
//     broker id), then heartbeats every HeartbeatInterval with its epoch,
//     max offset and confirm offset, and asks for the group's replica
//     info (master, master epoch, SyncStateSet and its epoch) on the same
//     cadence and at once after a notification. At most one request of
//     each kind is in flight; one unanswered within RequestTimeout failed.
//   - Requests go to the controller believed to lead; an answer NotLeader
//     naming the leader moves there, a failure moves to the next address.
//   - Role: replica info naming this broker master at a master epoch newer
//     than the one applied makes it master at that epoch (the shell starts
//     the epoch in the store, fsynced, before the first write of it);
//     naming another broker makes it a slave of that broker at that epoch.
//     Info older (by master epoch) than what is known is ignored.
//   - The master lease: a master accepts writes only while the send time
//     of its last heartbeat the leader answered is less than Lease ago.
//     The controller answers a heartbeat only after a ReadIndex confirmed
//     its leadership, and elects another master only after it has heard no
//     heartbeat for its heartbeat timeout (and, as a new leader, only once
//     that long has passed since it took over). With Lease below that
//     timeout (minus the clock-rate error), the old master has stopped
//     writing before a new one can exist: the answer that renewed the lease
//     was confirmed by a quorum at a time >= its send time, so any later
//     leader waits a full timeout after that instant.
//   - SyncStateSet (master only): a slave whose acknowledged offset reached
//     the confirm offset and the current epoch's start is proposed into the
//     set; a member disconnected, or behind for SlaveNotCatchup, is
//     proposed out. One change is in flight at a time, fenced by the master
//     epoch and the set epoch. While it is in flight, AckSet is the union of
//     the current and the proposed set (RocketMQ #5663: acking against the
//     old set while the controller already applied the new one loses
//     messages when the master dies then).
//
// Imports: std only.
package ctlagent
