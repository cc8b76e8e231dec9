// Package brokerconf is the configuration of `wharf broker`: RocketMQ's
// broker.conf keys with their defaults, a reader for the file's Java
// properties format, one command-line flag per key, validation, and the
// mapping into storage.Config.
//
// Precedence is defaults < file < flags given on the command line:
//
//	cfg := brokerconf.Default()
//	cfg.RegisterFlags(cmd.Flags())                   // --listenPort, --brokerRole, ...
//	cmd.Flags().StringVarP(&path, "config", "c", "", "broker.conf to read")
//	...
//	cfg, warnings, err := brokerconf.Resolve(cmd.Flags(), path)
//
// Unlike RocketMQ, which ignores keys it does not know, Wharf warns about
// them and suggests the key probably meant (including RocketMQ's renamed
// keys, such as mapedFileSizeCommitLog, now mappedFileSizeCommitLog). Keys
// that RocketMQ has but Wharf has no use for (thread pools, transient store
// pool, ...) are accepted with a warning saying so.
//
// The documentation of each key is the doc comment of its Config field;
// flag help, Properties (`wharf broker --print-config`) and MarkdownTable
// (docs/OPERATIONS.md) all print it.
package brokerconf
