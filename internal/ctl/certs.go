package ctl

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/spf13/cobra"
)

func newCertsCommand() *cobra.Command {
	var dir, registryHosts string
	var clusters, admins []string
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Create the fleet CA, the registry's serving certificate and client certificates",
		Long: `Creates, in --dir:
  ca.crt, ca.key              the fleet CA (kept when it exists)
  registry.crt, registry.key  the registry's serving certificate for --registry-hosts
  <cluster>.crt, .key         a client certificate per --cluster (identity: the cluster id)
  <admin>.crt, .key           a client certificate per --admin`,
		Example: `  fleetnetctl certs --dir certs --registry-hosts registry.example.com,127.0.0.1 --cluster east --cluster west --admin ops`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ca, err := loadOrCreateCA(dir)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if registryHosts != "" {
				kp, err := ca.ServingCert("fleetnet-registry", splitList(registryHosts))
				if err != nil {
					return err
				}
				if err := kp.Write(dir, "registry"); err != nil {
					return err
				}
				fmt.Fprintf(out, "wrote %s\n", filepath.Join(dir, "registry.crt"))
			}
			for _, id := range clusters {
				kp, err := ca.ClusterCert(id)
				if err != nil {
					return err
				}
				if err := kp.Write(dir, id); err != nil {
					return err
				}
				fmt.Fprintf(out, "wrote %s (cluster %s)\n", filepath.Join(dir, id+".crt"), id)
			}
			for _, name := range admins {
				kp, err := ca.AdminCert(name)
				if err != nil {
					return err
				}
				if err := kp.Write(dir, name); err != nil {
					return err
				}
				fmt.Fprintf(out, "wrote %s (admin %s)\n", filepath.Join(dir, name+".crt"), name)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "certs", "directory for the certificates")
	cmd.Flags().StringVar(&registryHosts, "registry-hosts", "", "comma-separated DNS names and IPs of the registry's serving certificate")
	cmd.Flags().StringArrayVar(&clusters, "cluster", nil, "cluster id to create a client certificate for (repeatable)")
	cmd.Flags().StringArrayVar(&admins, "admin", nil, "administrator to create a client certificate for (repeatable)")
	return cmd
}

func loadOrCreateCA(dir string) (*pki.KeyPair, error) {
	certPath, keyPath := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if _, err := os.Stat(certPath); err == nil {
		return pki.LoadCA(certPath, keyPath)
	}
	ca, err := pki.NewCA("fleetnet-ca")
	if err != nil {
		return nil, err
	}
	return ca, ca.Write(dir, "ca")
}
