// Package metrics is the daemons' Prometheus side of the actors' Metrics
// seam (actors.Metrics).
//
// Contract: NewRegistry gives each daemon its own prometheus.Registry with
// the Go runtime and process collectors on it; the global registry is never
// touched, so brokers in one process (tests, the simulator) stay apart.
// NewBroker registers the broker's instruments on a registry and implements
// actors.Metrics; it is safe for concurrent use. Names carry the wharf_
// prefix and base units (seconds, bytes), counters end in _total, and the
// only labels are topic, request code and status: an unknown request code
// or status is counted as "other", so a client cannot grow the series.
// Handler serves /metrics and /healthz (200 "ready" once ready says so,
// 503 before).
package metrics
