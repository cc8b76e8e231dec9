// Package invariant asserts what must hold in Wharf's core code, in the
// spirit of TigerBeetle's assertions: a failed check means the code is wrong,
// not that the world misbehaved, so it stops the actor at once instead of
// letting it write data that no longer means what it should.
//
// Contract:
//   - Assertions are always on: in tests, in CI, in the simulator and in
//     production. There is no build tag and no switch. A broken invariant
//     must stop the actor rather than corrupt the log or answer a client
//     with a promise that does not hold.
//   - A failed check panics with a *Violation. Supervisors (actors/supervise)
//     and the simulator recognise that type and treat it as a bug, never as
//     a transient failure worth a restart.
//   - The passing path allocates nothing and formats nothing. Go evaluates
//     arguments before a call, so the package cannot defer their evaluation;
//     it can defer their boxing and formatting. Check takes a constant
//     message; Check1, Check2 and Check3 are generic so that their arguments
//     travel by value and are boxed only on failure. Callers must not build
//     strings for a check (no concatenation, no fmt.Sprintf in the arguments):
//     that work would run on every pass.
//   - Operating errors (a full disk, a closed connection, bad input from a
//     client) are not invariants: they are returned as errors and handled.
//
// Imports: std only.
package invariant
