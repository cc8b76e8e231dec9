package storage

// Faults are planted bugs in the store, so the simulator can prove it
// catches them (`wharf sim --bug NAME`). They reach a store through
// Config.Faults, never through package state; nothing in production sets
// them.
type Faults struct {
	// SkipCRCCheck: recovery accepts records without checking their CRCs.
	SkipCRCCheck bool
	// SkipQueueOffset: the writer skips a queue offset now and then.
	SkipQueueOffset bool
}
