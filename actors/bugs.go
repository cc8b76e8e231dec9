package actors

// Bugs are test-only switches that plant known bugs, one per class of
// invariant the simulator checks, so that it can prove it catches them
// (`wharf sim --bug NAME`). Nothing sets them outside the simulator.
var Bugs struct {
	// AckBeforeFlush: under SYNC_FLUSH, answer OK before the flush.
	AckBeforeFlush bool
	// NoFlushTimeout: never answer FLUSH_DISK_TIMEOUT; waiters wait for the fsync.
	NoFlushTimeout bool
	// CommitOffsetBeforePersist: acknowledge an offset commit before it is on disk.
	CommitOffsetBeforePersist bool
	// AckBeforeReplica: under SYNC_MASTER, answer OK before a slave has the bytes.
	AckBeforeReplica bool
	// DoubleAssign: the coordinator hands a queue to its new owner without
	// waiting for the old owner to release it.
	DoubleAssign bool
	// AsyncNeverFlush: under ASYNC_FLUSH, never flush on the interval.
	AsyncNeverFlush bool
}
