package storage

// Bugs are test-only switches that plant known bugs in the store, so the
// simulator can prove it catches them (`wharf sim --bug NAME`). Nothing sets
// them outside the simulator.
var Bugs struct {
	// SkipCRCCheck: recovery accepts records without checking their CRCs.
	SkipCRCCheck bool
	// SkipQueueOffset: the writer skips a queue offset now and then.
	SkipQueueOffset bool
}
