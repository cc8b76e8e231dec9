// Package writer is the CommitLog writer's core: the only code that
// appends sends to the log. It checks each send's topic (auto-creating it
// when the broker may), chooses its queue (round robin when the client
// lets the broker choose), diverts delayed messages to the schedule topic,
// converts the messages to the log's encoding, and appends a whole read
// burst as one batch. The CommitLog assigns queue offsets as it appends
// (it owns the topic-queue offset table), so a ConsumeQueue is a pure
// function of the log.
//
// Writer is plain: no goroutines, no clock (the store timestamp and "now"
// for delays are inputs), no actor. Its output is one Outcome per send: a
// refusal with its status, or where the send was stored and the typed
// answer it gets once the acknowledgement gate (package gate) lets it go.
// A batch is all or nothing.
package writer
