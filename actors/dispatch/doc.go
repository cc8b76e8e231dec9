// Package dispatch holds the pull path of the broker as plain state
// machines: what the Reput actor, the DispatchActors and the IndexActor of
// package actors decide, without the actors.
//
//   - Reput: the reput position and how far the log is visible (under
//     SYNC_FLUSH only what is flushed; under controller mode only what is
//     below the limit: a master's confirm offset, a slave's log end), the
//     grouping of new records into
//     per-queue batches in (topic, queue) order, and the checkpoint barrier
//     over every queue owner and the index.
//   - Queue: one ConsumeQueue's pulls: which answer a pull gets, which pulls
//     are held as long polls, when they are answered or expire, and when the
//     next timer must fire.
//   - Topics: whether a read names a topic and queue the broker has, and may
//     be read (the answer to a wrong one comes at once, never after a
//     suspend).
//   - Index: how often the index is flushed, and what a query by key
//     answers.
//   - Flush: at most one owner flush at a time, with retention waiting for it.
//
// Invariants (internal/invariant, fatal when broken): the reput position
// never moves back nor past what is visible; a checkpoint barrier gets at
// most one answer per owner; a held pull always has a tick armed by its
// deadline, and leaves the held set once.
//
// Contract: no goroutines, no clock (time is an argument), no actor
// context, no I/O but reads of the store's plain data structures through
// the narrow interfaces Source, Log and QuerySource. Outputs are values
// (Ready, Batch, Checkpoint) the caller acts on; iteration that produces
// outputs is in a fixed order, so the simulator sees the same sends in the
// same order for the same seed.
package dispatch
