package main

import "github.com/spf13/cobra"

// addBrokerCommand registers `wharf broker`.
func addBrokerCommand(root *cobra.Command) {}
