package main

import "github.com/spf13/cobra"

// addClientCommands registers the client-side commands: produce, consume,
// query, topic.
func addClientCommands(root *cobra.Command) {}
