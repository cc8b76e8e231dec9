// Package archtest holds DESIGN.md's rules as tests over the module's source
// tree. It has no code of its own: `go test ./internal/archtest/` parses every
// Go file of the module (bench/, testdata, hidden folders and nested modules
// excepted) with go/parser and fails with one "file:line: rule" line per
// violation of:
//
//   - the import allowlist of each top-level folder (DESIGN.md's layout table),
//     for non-test and test files, module-internal and third-party paths alike,
//     and that nothing outside cmd/ imports cmd/;
//   - the seams in actors/ and storage/ outside tests: no wall-clock time from
//     package time, no go statements, no os, net or syscall imports, no
//     RequestFuture;
//   - the function-length budget (80 lines) for non-test files.
//
// Each rule has an explicit, short exception list with the reason for each
// entry, and an exception that no longer excuses anything fails the test too,
// so the lists only shrink. A new dependency or a new top-level folder fails
// until its line is added to the allowlist on purpose. Every check is also run
// on testdata/bad, a small tree that breaks each rule, so that a check which
// stops catching anything fails.
package archtest
