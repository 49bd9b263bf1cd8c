// Package ctl implements fleetnetctl, the operator's command line: fleet
// certificates, registry administration and the local development fleet.
package ctl

import (
	"github.com/spf13/cobra"
)

// NewRootCommand returns the fleetnetctl command tree.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "fleetnetctl",
		Short:         "Operate a fleetnet fleet",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newCertsCommand(), newRegistryCommand(), newDevCommand(), newDiscoveryCommand())
	return root
}
