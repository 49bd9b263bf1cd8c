// Package ctl implements fleetnetctl, the operator's command line: a fleet
// set up (fleet init, join, leave), its certificates, registry administration, the local development fleet, the
// diagnosis of a service's path (diagnose) and a cluster's CoreDNS wired to
// fleetnet-dns (dns).
package ctl

import (
	"github.com/fleetnet/fleetnet/internal/version"
	"github.com/spf13/cobra"
)

// NewRootCommand returns the fleetnetctl command tree.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "fleetnetctl",
		Short:         "Operate a fleetnet fleet",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.Get().String(),
	}
	root.AddCommand(newVersionCommand(), newCertsCommand(), newRegistryCommand(), newDevCommand(), newDiscoveryCommand(), newDiagnoseCommand(), newDNSCommand(), newFleetCommand())
	return root
}
