// Package netio owns every socket of the daemons: the gnet engines, framing
// glue, the connection registry and outbound links. It turns frames into actor
// messages and actor replies into frames, and enforces per-connection limits
// (gnet has no backpressure of its own).
//
// Imports: protocol, actors (message types), gnet.
package netio
