package main

import "github.com/spf13/cobra"

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "wharf",
		Short:         "Wharf: a persistent, replicated message broker",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	addBrokerCommand(root)
	addClientCommands(root)
	addNamesrvCommand(root)
	addControllerCommand(root)
	addClusterCommands(root)
	addDevCommand(root)
	addDashboardCommand(root)
	addSimCommand(root)
	addBenchCommand(root)
	return root
}
