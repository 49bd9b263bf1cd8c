package ctl

import (
	"fmt"
	"path/filepath"

	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/spf13/cobra"
)

func newCertsCommand() *cobra.Command {
	var dir, registryHosts, gatewayHosts, discoveryHosts, eastWestModelHosts string
	var clusters, admins, edges, eastWest []string
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Create the fleet CA and the certificates of the registry, gateway, edges, discovery, clusters and administrators",
		Long: `Creates, in --dir:
  ca.crt, ca.key                the fleet CA (kept when it exists)
  registry.crt, registry.key    the registry's serving certificate for --registry-hosts
  gateway.crt, gateway.key      fleetnet-gateway's serving certificate (the edges' model stream) for --gateway-hosts
  discovery.crt, discovery.key  fleetnet-discovery's serving certificate for --discovery-hosts
  <cluster>.crt, .key           a client certificate per --cluster (identity: the cluster id)
  <edge>.crt, .key              a client certificate per --edge (organization fleetnet:edges; the
                                edge chart's Secret wants one per Pod: fleetnet-edge-0, fleetnet-edge-1, ...)
  <admin>.crt, .key             a client certificate per --admin
  <cluster>-eastwest.crt, .key  a cluster's east-west gateway certificate per --eastwest (its identity,
                                server and client usage: the edge chart's eastWest.secretName)
  eastwest-model.crt, .key      the agent's east-west model stream's serving certificate for
                                --eastwest-model-hosts (the agent chart's eastWest.secretName)

"fleetnetctl fleet init" and "fleet join" make all of these themselves.`,
		Example: `  fleetnetctl certs --dir certs --registry-hosts registry.example.com,127.0.0.1 --cluster east --cluster west --admin ops
  fleetnetctl certs --dir certs --gateway-hosts fleetnet-gateway.fleetnet-system.svc --edge fleetnet-edge-0 --edge fleetnet-edge-1
  fleetnetctl certs --dir certs --eastwest east --eastwest-model-hosts fleetnet-agent-eastwest.fleetnet-system.svc`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ca, err := pki.LoadOrCreateCA(dir, "fleetnet-ca")
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			write := func(kp *pki.KeyPair, err error, name, what string) error {
				if err != nil {
					return err
				}
				if err := kp.Write(dir, name); err != nil {
					return err
				}
				fmt.Fprintf(out, "wrote %s (%s)\n", filepath.Join(dir, name+".crt"), what)
				return nil
			}
			for _, s := range []struct{ name, hosts string }{
				{"registry", registryHosts}, {"gateway", gatewayHosts}, {"discovery", discoveryHosts}, {"eastwest-model", eastWestModelHosts},
			} {
				if s.hosts == "" {
					continue
				}
				kp, err := ca.ServingCert("fleetnet-"+s.name, splitList(s.hosts))
				if err := write(kp, err, s.name, "serving, "+s.hosts); err != nil {
					return err
				}
			}
			for _, id := range clusters {
				kp, err := ca.ClusterCert(id)
				if err := write(kp, err, id, "cluster "+id); err != nil {
					return err
				}
			}
			for _, name := range edges {
				kp, err := ca.EdgeCert(name)
				if err := write(kp, err, name, "edge "+name); err != nil {
					return err
				}
			}
			for _, id := range eastWest {
				kp, err := ca.EastWestCert(id)
				if err := write(kp, err, id+"-eastwest", "east-west gateway of cluster "+id); err != nil {
					return err
				}
			}
			for _, name := range admins {
				kp, err := ca.AdminCert(name)
				if err := write(kp, err, name, "admin "+name); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "certs", "directory for the certificates")
	cmd.Flags().StringVar(&registryHosts, "registry-hosts", "", "comma-separated DNS names and IPs of the registry's serving certificate")
	cmd.Flags().StringVar(&gatewayHosts, "gateway-hosts", "", "comma-separated DNS names and IPs of fleetnet-gateway's serving certificate")
	cmd.Flags().StringVar(&discoveryHosts, "discovery-hosts", "", "comma-separated DNS names and IPs of fleetnet-discovery's serving certificate")
	cmd.Flags().StringArrayVar(&clusters, "cluster", nil, "cluster id to create a client certificate for (repeatable)")
	cmd.Flags().StringArrayVar(&edges, "edge", nil, "edge (its Pod's name) to create a client certificate for (repeatable)")
	cmd.Flags().StringArrayVar(&admins, "admin", nil, "administrator to create a client certificate for (repeatable)")
	cmd.Flags().StringArrayVar(&eastWest, "eastwest", nil, "cluster id to create an east-west gateway certificate for (repeatable)")
	cmd.Flags().StringVar(&eastWestModelHosts, "eastwest-model-hosts", "", "comma-separated DNS names and IPs of the agent's east-west model stream's serving certificate")
	return cmd
}
