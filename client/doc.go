// Package client is the Go client library for Wharf: Producer, PullConsumer,
// PushConsumer and Admin. It speaks the protocol package's wire format over
// plain net.Conn so it runs on every OS.
//
// Imports: protocol only (plus std).
package client
