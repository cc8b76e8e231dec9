// Package compat holds the tests that run RocketMQ's own Go client
// (github.com/apache/rocketmq-client-go/v2, unchanged) against a real
// Wharf: the wharf binary started with its remoting listeners on. It is a
// module of its own so that Wharf's module never depends on that client.
// Run it with `make test-compat` (or `cd compat && go test ./...`).
package compat
