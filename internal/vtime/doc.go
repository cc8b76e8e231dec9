// Package vtime is a virtual-time runtime for running the broker's actors
// deterministically on one goroutine: a virtual clock, a run queue drained
// on the caller's goroutine, timers on virtual time, a protoactor
// Dispatcher that puts mailbox runs on the queue, and RunIO that runs a
// blocking job at a virtual time.
//
// Contract: every method of a Loop, and everything the Loop runs, is called
// on one goroutine (the one stepping the Loop). Nothing reads the wall
// clock. The order of work is fixed by the Loop: ready work first, in FIFO
// order or in the order a Pick function chooses (the simulator's seed),
// then the earliest timer (ties in the order they were armed), which moves
// the clock. Work is tagged with an owner of type O; work whose owner is no
// longer alive (Options.Alive) is dropped, so a crashed incarnation's
// scheduled work never runs.
//
// The simulator (sim/) and the actors' tests use it; it imports only the
// standard library and protoactor.
package vtime
