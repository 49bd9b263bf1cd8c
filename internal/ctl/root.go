// Package ctl implements fleetnetctl, the operator's command line: fleet
// certificates, registry administration, the local development fleet and the
// diagnosis of a service's path (diagnose).
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
	root.AddCommand(newCertsCommand(), newRegistryCommand(), newDevCommand(), newDiscoveryCommand(), newDiagnoseCommand())
	return root
}
