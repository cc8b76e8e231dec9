// Package supervise is the broker's protoactor supervisor strategy: it
// restarts a panicking actor a bounded number of times within a window
// measured on the Clock seam, and escalates an actor that keeps panicking,
// or that broke an invariant, to a fatal hook instead of stopping it
// silently.
//
// Contract:
//   - Time is read only from the Clock given to New (the broker passes its
//     Env.Clock, the simulator its virtual clock), never from the wall
//     clock, so a seed replays the same supervision decisions. protoactor's
//     RestartStatistics reads time.Now, so the strategy ignores it and keeps
//     its own failure history per child, bounded in children and in
//     failures per child.
//   - A child that panics is restarted (protoactor's Restart: a fresh actor
//     from its producer, the mailbox kept) while it has failed at most
//     MaxRestarts times within the last Window, this failure included.
//   - The failure beyond that budget calls Fatal(child, reason) and then
//     stops the child. Production's Fatal logs a clear fatal error and exits
//     the process with a non-zero status; the simulator's records a failure
//     of the run. Nothing is ever stopped without Fatal being called first.
//   - A panic whose reason is an *invariant.Violation (or an error wrapping
//     one) goes to Fatal at once, whatever the budget: a broken invariant
//     means the code's model of its state is wrong, which a restart does not
//     repair, and going on risks writing damage to disk or promising clients
//     what does not hold.
//   - HandleFailure may run on several goroutines at once (a guardian
//     handles a failure on the failing actor's goroutine), so the history
//     is guarded by a mutex; Fatal is called outside it and may be called
//     concurrently for different children.
//
// Imports: std, protoactor, internal/invariant.
package supervise
