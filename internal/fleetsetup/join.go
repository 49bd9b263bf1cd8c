package fleetsetup

import (
	"context"
	"fmt"
	"io"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/config/crd"
	"github.com/fleetnet/fleetnet/internal/controlplane"
	"github.com/fleetnet/fleetnet/internal/pki"
)

// MemberOptions configure a member.
type MemberOptions struct {
	// Namespace receives the releases (fleetnet-system).
	Namespace string
	// CertsDir holds the fleet CA, which issues the member's certificate.
	CertsDir string
	// ClusterID and Region are the member's identity.
	ClusterID, Region string
	// Fleet is what the hub says about the fleet (ReadFleetInfo).
	Fleet FleetInfo
	// DNSClusterIP is fleetnet-dns's ClusterIP; empty lets Kubernetes pick.
	DNSClusterIP string
	// Set holds the user's --set values per chart (agent, dns).
	Set Sets
}

// memberReleases are a member's releases, each named after its chart.
var memberReleases = []string{"fleetnet-agent", "fleetnet-dns"}

// Join installs a member: the MCS CRDs, the namespace, its client
// certificate issued by the fleet CA, the agent and fleetnet-dns. Run again,
// it upgrades the releases and keeps the certificate while it is good.
func Join(ctx context.Context, m *Cluster, o MemberOptions, out io.Writer) error {
	if joined, err := JoinedAs(m, o.Namespace); err != nil {
		return err
	} else if joined != "" && joined != o.ClusterID {
		return fmt.Errorf("%s has joined the fleet as %q; --cluster-id=%q would give it a second identity: run fleet leave first", m.Name, joined, o.ClusterID)
	}
	ca, err := pki.LoadCA(caFiles(o.CertsDir))
	if err != nil {
		return fmt.Errorf("the fleet CA in --certs-dir=%s, which issues the member's certificate (fleetnetctl fleet init makes it): %w", o.CertsDir, err)
	}
	crds, err := crd.All()
	if err != nil {
		return err
	}
	if err := controlplane.InstallCRDs(ctx, m.Config, crds); err != nil {
		return fmt.Errorf("%s: %w", m.Name, err)
	}
	fmt.Fprintf(out, "%s: %d CRDs applied (MCS API, ClusterProperty, BackendTrafficPolicy)\n", m.Name, len(crds))
	if err := m.ensureNamespace(ctx, o.Namespace, out); err != nil {
		return err
	}
	cert := keyPair{file: "tls", id: pki.Identity{CommonName: o.ClusterID, Organization: keys.OrganizationClusters},
		issue: func() (*pki.KeyPair, error) { return ca.ClusterCert(o.ClusterID) }}
	if err := m.ensureCertSecret(ctx, o.Namespace, "fleetnet-agent-registry", ca, []keyPair{cert}, out); err != nil {
		return err
	}
	values := map[string]map[string]any{}
	for _, rel := range memberReleases {
		values[rel] = map[string]any{"image": imageValues(o.Fleet.ImageRepository, o.Fleet.Version, rel)}
	}
	values["fleetnet-agent"]["identity"] = map[string]any{"clusterID": o.ClusterID, "clustersetID": o.Fleet.ClustersetID, "region": o.Region}
	values["fleetnet-agent"]["registry"] = map[string]any{"address": o.Fleet.RegistryAddress}
	if o.DNSClusterIP != "" {
		values["fleetnet-dns"]["service"] = map[string]any{"clusterIP": o.DNSClusterIP}
	}
	for _, rel := range memberReleases {
		vals, err := o.Set.values(rel, values[rel])
		if err != nil {
			return err
		}
		r, err := m.applyRelease(ctx, o.Namespace, rel, rel, vals)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: release %s/%s revision %d (chart %s)\n", m.Name, o.Namespace, rel, r.Version, r.Chart.Metadata.Version)
	}
	return nil
}

// WaitJoined waits until the member's workloads are ready, its agent is
// registered, and every import of the registry is in place in it, printing
// progress.
func WaitJoined(ctx context.Context, m *Cluster, o MemberOptions, out io.Writer) error {
	if err := m.waitWorkloads(ctx, o.Namespace, memberReleases, out); err != nil {
		return err
	}
	ca, err := pki.LoadCA(caFiles(o.CertsDir))
	if err != nil {
		return err
	}
	reg, conn, err := dialRegistry(o.CertsDir, ca, o.Fleet.RegistryAddress)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := waitRegistered(ctx, reg, o.Fleet.RegistryAddress, o.ClusterID, out); err != nil {
		return err
	}
	vals, err := m.releaseValues(o.Namespace, "fleetnet-agent")
	if err != nil {
		return err
	}
	createsNamespaces, _ := vals["createImportNamespaces"].(bool)
	var policy []string
	if list, ok := vals["importNamespaces"].([]any); ok {
		for _, ns := range list {
			if s, ok := ns.(string); ok {
				policy = append(policy, s)
			}
		}
	}
	return m.waitImports(ctx, reg, o.ClusterID, createsNamespaces, policy, out)
}

// JoinedAs is the cluster id of the agent release in namespace, "" when
// there is none.
func JoinedAs(c *Cluster, namespace string) (string, error) {
	vals, err := c.releaseValues(namespace, "fleetnet-agent")
	if err != nil {
		return "", err
	}
	return valueString(vals, "identity.clusterID"), nil
}
