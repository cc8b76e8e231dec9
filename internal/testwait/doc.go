// Package testwait is the one way Wharf's tests wait for a condition: poll
// it on a clock until it holds or a bound passes. On the wall clock (tests
// that drive real sockets or real processes) the poll sleeps between
// tries; on a virtual clock (internal/vtime, the simulator) it advances
// virtual time instead, so the same helper serves both and a test never
// sleeps where it could step.
//
// Every wait is bounded: a condition that never holds fails the test (For)
// or reports false (Until) once the bound has passed on the clock polled.
//
// Imports: std only.
package testwait
