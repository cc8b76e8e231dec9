// Package faultnet is a fault-injecting TCP proxy for tests that run real
// processes on loopback: one Link per directed connection between two
// nodes (node A dialling node B's port), so that a test can cut a node off
// from some peers and not from others, by pointing A's configuration at
// the link's address instead of B's.
//
// A Link forwards bytes both ways and can, at any moment: partition (every
// byte of its connections, live and new, is dropped silently, as a network
// that loses packets would; the dialler's own timeouts notice), heal (new
// connections forward again; those that lived through the partition are
// closed, since bytes went missing from their streams), add latency to
// every chunk in each direction, and cut its live connections (both ends
// see a reset or EOF).
//
// Bounded: every goroutine belongs to the listener or to one connection,
// and Close (or Net.Close, which a test registers with t.Cleanup) stops
// them all and waits for them. Only loopback targets are accepted, and the
// listeners bind 127.0.0.1 (NewLinkOn: another loopback address, for a
// target that announces an address other than the one it listens on).
//
// Imports: std only.
package faultnet
