package fleetsetup

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/config/crd"
	"github.com/fleetnet/fleetnet/internal/controlplane"
	"github.com/fleetnet/fleetnet/internal/pki"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RegistryPort is the port of the registry's Service (the charts').
const RegistryPort = 7443

// HubOptions configure the hub.
type HubOptions struct {
	// Namespace receives every release (fleetnet-system).
	Namespace string
	// CertsDir holds the fleet CA (created when absent) and fleetnetctl's
	// administrator certificate.
	CertsDir string
	// ClusterID, ClustersetID and Region are the hub's identity.
	ClusterID, ClustersetID, Region string
	// RegistryHosts are the names (or IPs) members dial the registry at,
	// put in its serving certificate beside the in-cluster names.
	RegistryHosts []string
	// RegistryAddress is host:port of the registry as members (and this
	// command, waiting) dial it; by default the first RegistryHosts entry
	// and RegistryPort.
	RegistryAddress string
	// RegistryServiceType is the registry Service's type (LoadBalancer, so
	// that members reach it).
	RegistryServiceType string
	// GatewayHosts and DiscoveryHosts are extra names of fleetnet-gateway's
	// (the edges' model stream) and fleetnet-discovery's certificates.
	GatewayHosts, DiscoveryHosts []string
	// GatewayAddresses are the edges' addresses, which Gateways report.
	GatewayAddresses []string
	// DNSClusterIP is fleetnet-dns's ClusterIP; empty lets Kubernetes pick.
	DNSClusterIP string
	// ImageRepository is the prefix of the images (<prefix>/fleetnet-agent),
	// Version their tag; empty keeps the charts' defaults.
	ImageRepository, Version string
	// CertManagerIssuer, when set, lets cert-manager issue the registry's,
	// gateway's, edges' and discovery's certificates from this issuer (of
	// CertManagerIssuerKind) instead of the CA files; agents' client
	// certificates still come from the CA in CertsDir.
	CertManagerIssuer, CertManagerIssuerKind string
	// Console installs fleetnet-console, reading the registry with an
	// administrator's certificate of the fleet CA.
	Console bool
	// Set holds the user's --set values per chart.
	Set Sets
}

// hubReleases are the hub's releases, each named after its chart, in the
// order they are installed; fleetnet-console comes last when installed.
var hubReleases = []string{"fleetnet-registry", "fleetnet-agent", "fleetnet-gateway", "fleetnet-edge", "fleetnet-discovery", "fleetnet-dns"}

// consoleRelease is fleetnet-console's release (and chart), and the common
// name of its administrator's certificate.
const consoleRelease = "fleetnet-console"

// releases are the hub's releases these options install.
func (o HubOptions) releases() []string {
	if o.Console {
		return append(slices.Clone(hubReleases), consoleRelease)
	}
	return hubReleases
}

// Init installs the hub: the CRDs, the namespace, the certificates'
// Secrets, the charts, and the fleet ConfigMap that Join reads. Run again,
// it upgrades the releases to this binary's charts and the given values,
// and keeps every certificate that is still good.
func Init(ctx context.Context, hub *Cluster, o HubOptions, out io.Writer) error {
	if o.RegistryAddress == "" {
		if len(o.RegistryHosts) == 0 {
			return fmt.Errorf("--registry-address or --registry-hosts is needed: the address members dial the registry at")
		}
		o.RegistryAddress = net.JoinHostPort(o.RegistryHosts[0], strconv.Itoa(RegistryPort))
	}
	if _, _, err := net.SplitHostPort(o.RegistryAddress); err != nil {
		return fmt.Errorf("--registry-address=%q: want host:port: %w", o.RegistryAddress, err)
	}
	if err := checkFleetCA(ctx, hub, o.Namespace, o.CertsDir); err != nil {
		return err
	}
	ca, err := pki.LoadOrCreateCA(o.CertsDir, "fleetnet-ca")
	if err != nil {
		return fmt.Errorf("the fleet CA in %s: %w", o.CertsDir, err)
	}
	crds, err := crd.Hub()
	if err != nil {
		return err
	}
	if err := controlplane.InstallCRDs(ctx, hub.Config, crds); err != nil {
		return fmt.Errorf("%s: %w", hub.Name, err)
	}
	fmt.Fprintf(out, "%s: %d CRDs applied (MCS API, ClusterProperty, Gateway API standard channel, networking.fleetnet.dev)\n", hub.Name, len(crds))
	if err := hub.ensureNamespace(ctx, o.Namespace, out); err != nil {
		return err
	}

	ns := o.Namespace
	svc := func(name string) []string {
		return []string{name + "." + ns + ".svc", name + "." + ns + ".svc.cluster.local"}
	}
	registryHosts := append(append([]string{}, o.RegistryHosts...), svc("fleetnet-registry")...)
	if host, _, _ := net.SplitHostPort(o.RegistryAddress); !slices.Contains(registryHosts, host) {
		registryHosts = append(registryHosts, host) // members dial it there
	}
	gatewayHosts := append(append([]string{}, o.GatewayHosts...), svc("fleetnet-gateway")...)
	discoveryHosts := append(append([]string{}, o.DiscoveryHosts...), svc("fleetnet-discovery")...)
	releases := o.releases()
	values := map[string]map[string]any{}
	for _, rel := range releases {
		values[rel] = map[string]any{"image": imageValues(o.ImageRepository, o.Version, rel)}
	}
	inClusterRegistry := net.JoinHostPort("fleetnet-registry."+ns+".svc", strconv.Itoa(RegistryPort))
	values["fleetnet-registry"]["service"] = map[string]any{"type": o.RegistryServiceType}
	values["fleetnet-agent"]["identity"] = map[string]any{"clusterID": o.ClusterID, "clustersetID": o.ClustersetID, "region": o.Region}
	values["fleetnet-agent"]["registry"] = map[string]any{"address": inClusterRegistry}
	values["fleetnet-gateway"]["clusterID"] = o.ClusterID
	values["fleetnet-gateway"]["region"] = o.Region
	values["fleetnet-gateway"]["gatewayAddresses"] = toAny(o.GatewayAddresses)
	values["fleetnet-edge"]["region"] = o.Region
	values["fleetnet-discovery"]["kubernetes"] = map[string]any{"clusterName": o.ClusterID}
	if o.Console {
		// The chart's default Secret, with a certificate made below.
		values[consoleRelease]["registry"] = map[string]any{"address": inClusterRegistry, "auth": "certificate", "secretName": "fleetnet-console-registry"}
	}
	if o.DNSClusterIP != "" {
		values["fleetnet-dns"]["service"] = map[string]any{"clusterIP": o.DNSClusterIP}
	}
	if o.CertManagerIssuer != "" {
		issuer := map[string]any{"name": o.CertManagerIssuer, "kind": o.CertManagerIssuerKind, "group": "cert-manager.io"}
		for rel, extra := range map[string][]string{"fleetnet-registry": o.RegistryHosts, "fleetnet-gateway": o.GatewayHosts, "fleetnet-discovery": o.DiscoveryHosts, "fleetnet-edge": nil} {
			cm := map[string]any{"enabled": true, "issuerRef": issuer}
			if rel != "fleetnet-edge" {
				cm["dnsNames"] = toAny(extra)
			}
			values[rel]["tls"] = map[string]any{"certManager": cm}
		}
	}
	for _, rel := range releases {
		if values[rel], err = o.Set.values(rel, values[rel]); err != nil {
			return err
		}
	}

	// The certificates' Secrets, before the charts that mount them.
	agentCert := keyPair{file: "tls", id: pki.Identity{CommonName: o.ClusterID, Organization: keys.OrganizationClusters},
		issue: func() (*pki.KeyPair, error) { return ca.ClusterCert(o.ClusterID) }}
	if err := hub.ensureCertSecret(ctx, ns, "fleetnet-agent-registry", ca, []keyPair{agentCert}, out); err != nil {
		return err
	}
	if o.Console {
		// An administrator's: the console lists every cluster's exports.
		consoleCert := keyPair{file: "tls", id: pki.Identity{CommonName: consoleRelease, Organization: keys.OrganizationAdmins},
			issue: func() (*pki.KeyPair, error) { return ca.AdminCert(consoleRelease) }}
		if err := hub.ensureCertSecret(ctx, ns, "fleetnet-console-registry", ca, []keyPair{consoleCert}, out); err != nil {
			return err
		}
	}
	if o.CertManagerIssuer == "" {
		serving := func(name string, hosts []string) []keyPair {
			return []keyPair{{file: "tls", id: pki.Identity{CommonName: name, Hosts: hosts},
				issue: func() (*pki.KeyPair, error) { return ca.ServingCert(name, hosts) }}}
		}
		var edges []keyPair
		replicas, err := chartInt("fleetnet-edge", values["fleetnet-edge"], "replicas")
		if err != nil {
			return err
		}
		for i := range replicas {
			pod := fmt.Sprintf("fleetnet-edge-%d", i)
			edges = append(edges, keyPair{file: pod, id: pki.Identity{CommonName: pod, Organization: keys.OrganizationEdges},
				issue: func() (*pki.KeyPair, error) { return ca.EdgeCert(pod) }})
		}
		for _, s := range []struct {
			name  string
			pairs []keyPair
		}{
			{"fleetnet-registry-tls", serving("fleetnet-registry", registryHosts)},
			{"fleetnet-gateway-tls", serving("fleetnet-gateway", gatewayHosts)},
			{"fleetnet-discovery-tls", serving("fleetnet-discovery", discoveryHosts)},
			{"fleetnet-edge-tls", edges},
		} {
			if err := hub.ensureCertSecret(ctx, ns, s.name, ca, s.pairs, out); err != nil {
				return err
			}
		}
	}

	var consoleNotes string
	for _, rel := range releases {
		r, err := hub.applyRelease(ctx, ns, rel, rel, values[rel])
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: release %s/%s revision %d (chart %s)\n", hub.Name, ns, rel, r.Version, r.Chart.Metadata.Version)
		if rel == consoleRelease && r.Info != nil {
			consoleNotes = r.Info.Notes
		}
	}
	if err := hub.writeFleetInfo(ctx, ns, FleetInfo{
		ClustersetID: o.ClustersetID, RegistryAddress: o.RegistryAddress,
		ImageRepository: o.ImageRepository, Version: o.Version,
	}, out); err != nil {
		return err
	}
	if consoleNotes != "" {
		// How to open it, as the chart's values have it (helm prints
		// the same NOTES).
		fmt.Fprintf(out, "%s: fleetnet-console's notes:\n", hub.Name)
		for line := range strings.Lines(strings.TrimSpace(consoleNotes) + "\n") {
			if line == "\n" {
				fmt.Fprint(out, line)
			} else {
				fmt.Fprint(out, "  "+line)
			}
		}
	}
	return nil
}

// WaitHub waits until the hub's workloads are ready and its agent is
// registered in the registry.
func WaitHub(ctx context.Context, hub *Cluster, o HubOptions, out io.Writer) error {
	if err := hub.waitWorkloads(ctx, o.Namespace, o.releases(), out); err != nil {
		return err
	}
	info, err := ReadFleetInfo(ctx, hub, o.Namespace)
	if err != nil {
		return err
	}
	ca, err := pki.LoadCA(caFiles(o.CertsDir))
	if err != nil {
		return err
	}
	reg, conn, err := dialRegistry(o.CertsDir, ca, info.RegistryAddress)
	if err != nil {
		return err
	}
	defer conn.Close()
	return waitRegistered(ctx, reg, info.RegistryAddress, o.ClusterID, out)
}

// checkFleetCA refuses to go on when the hub already trusts a fleet CA
// that the certificates' folder does not hold: a new CA would re-issue
// every certificate of the hub, and no member would trust it any more.
func checkFleetCA(ctx context.Context, hub *Cluster, namespace, dir string) error {
	s, err := hub.Kube.CoreV1().Secrets(namespace).Get(ctx, "fleetnet-agent-registry", metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && len(s.Data["ca.crt"]) == 0) {
		return nil // a new hub
	}
	if err != nil {
		return fmt.Errorf("%s: reading Secret %s/fleetnet-agent-registry: %w", hub.Name, namespace, err)
	}
	certPath, _ := caFiles(dir)
	local, err := os.ReadFile(certPath)
	if err != nil {
		return fmt.Errorf("%s already has a fleet CA (Secret %s/fleetnet-agent-registry) and %s has none: give --certs-dir the folder that holds the fleet's ca.crt and ca.key", hub.Name, namespace, dir)
	}
	if string(local) != string(s.Data["ca.crt"]) {
		return fmt.Errorf("%s trusts another fleet CA than %s (Secret %s/fleetnet-agent-registry): give --certs-dir the folder of the fleet's CA", hub.Name, certPath, namespace)
	}
	return nil
}

// FleetInfo is what a member needs to join, kept in the hub.
type FleetInfo struct {
	ClustersetID, RegistryAddress, ImageRepository, Version string
}

func (c *Cluster) writeFleetInfo(ctx context.Context, namespace string, info FleetInfo, out io.Writer) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: keys.FleetConfigMap, Labels: map[string]string{keys.LabelManagedBy: keys.ManagedByCtl}},
		Data: map[string]string{
			keys.FleetKeyClustersetID:    info.ClustersetID,
			keys.FleetKeyRegistryAddress: info.RegistryAddress,
			keys.FleetKeyImageRepository: info.ImageRepository,
			keys.FleetKeyVersion:         info.Version,
		},
	}
	api := c.Kube.CoreV1().ConfigMaps(namespace)
	old, err := api.Get(ctx, cm.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = api.Create(ctx, cm, metav1.CreateOptions{FieldManager: keys.FieldManagerCtl})
	case err == nil:
		old.Data = cm.Data
		_, err = api.Update(ctx, old, metav1.UpdateOptions{FieldManager: keys.FieldManagerCtl})
	}
	if err != nil {
		return fmt.Errorf("%s: writing ConfigMap %s/%s: %w", c.Name, namespace, cm.Name, err)
	}
	fmt.Fprintf(out, "%s: members join with: fleetnetctl fleet join --hub-context %s --context <member>\n", c.Name, c.Name)
	return nil
}

// ReadFleetInfo reads what Init wrote in the hub.
func ReadFleetInfo(ctx context.Context, hub *Cluster, namespace string) (FleetInfo, error) {
	cm, err := hub.Kube.CoreV1().ConfigMaps(namespace).Get(ctx, keys.FleetConfigMap, metav1.GetOptions{})
	if err != nil {
		return FleetInfo{}, fmt.Errorf("%s: reading ConfigMap %s/%s, which fleetnetctl fleet init writes: %w", hub.Name, namespace, keys.FleetConfigMap, err)
	}
	info := FleetInfo{
		ClustersetID:    cm.Data[keys.FleetKeyClustersetID],
		RegistryAddress: cm.Data[keys.FleetKeyRegistryAddress],
		ImageRepository: cm.Data[keys.FleetKeyImageRepository],
		Version:         cm.Data[keys.FleetKeyVersion],
	}
	if info.ClustersetID == "" || info.RegistryAddress == "" {
		return FleetInfo{}, fmt.Errorf("%s: ConfigMap %s/%s has no %s or %s", hub.Name, namespace, keys.FleetConfigMap, keys.FleetKeyClustersetID, keys.FleetKeyRegistryAddress)
	}
	return info, nil
}

func caFiles(dir string) (string, string) {
	return filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// chartInt reads an integer value: the given values' or the chart's
// default.
func chartInt(chart string, values map[string]any, key string) (int, error) {
	v, ok := values[key]
	if !ok {
		ch, err := loadChart(chart)
		if err != nil {
			return 0, err
		}
		v = ch.Values[key]
	}
	switch n := v.(type) {
	case int:
		return n, nil
	case int64:
		return int(n), nil
	case float64:
		return int(n), nil
	}
	return 0, fmt.Errorf("%s: %s=%v is not a number", chart, key, v)
}
