// Package protocol is Wharf's wire: the frame codec, request and response
// codes, status codes, the msgpack message types and the message model.
//
// Contract: no I/O and no goroutines. Every decoder of untrusted bytes bounds
// its allocations by the size of the frame it was given.
//
// Imports: std and msgpack only.
package protocol
