// Package register decides how a broker keeps itself registered with its
// name servers: a plain core, with no goroutines, no clock (time is an
// input) and no I/O.
//
// # Contract
//
// A Registrar holds, for each name server independently, the state of the
// link to it (down, dialling, up), the requests in flight on it and when
// its next registration, heartbeat, dial or timeout is due. Its inputs are
// Start, Dialed, Closed, Answer, Topics, Role, Tick (at Deadline) and
// Stop; its outputs, taken with Ready, are the links to dial, the requests
// to send on them (each with an opaque to match its answer) and the links
// to close.
//
// Rules:
//   - REGISTER_BROKER goes out when a link comes up, at once after every
//     change of the topics (the data version's Counter grows) or of the
//     broker's role or id, every RegisterPeriod as a full re-registration,
//     and again at once when a heartbeat is answered Unknown (the name
//     server restarted, expired the lease or missed a change).
//   - BROKER_HEARTBEAT goes out every HeartbeatInterval on a registered
//     link, carrying the current data version. At most one heartbeat is in
//     flight per link.
//   - A registration answered Stale at the current data version means the
//     name server holds a newer one (an older process's entry, alive until
//     its lease ends): the broker registers again on its next heartbeat
//     time. A Stale answer to an older version is ignored (a newer
//     registration followed it).
//   - A request unanswered within RequestTimeout closes its link: the name
//     server is unreachable, however the socket looks.
//   - A link that fails to come up, or goes down, is dialled again after a
//     backoff that doubles from BackoffMin to BackoffMax, per name server:
//     a dead name server never delays the others. The backoff resets when
//     the name server answers.
//   - Stop sends UNREGISTER_BROKER on every link that is up and reports
//     Done once each is answered or StopTimeout passed: best effort, in
//     bounded time.
//
// Imports: std and protocol only.
package register
