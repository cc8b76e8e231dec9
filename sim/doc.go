// Package sim is Wharf's deterministic simulator: a virtual clock, a
// deterministic protoactor dispatcher, a simulated disk and network with
// faults, a cluster harness, workloads, invariants and scenarios. The same seed
// produces the same trace.
//
// Imports: everything but cmd.
package sim
