package charts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/controlplane"
	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/fleetnet/fleetnet/internal/registry/registrytest"
	"github.com/fleetnet/fleetnet/internal/registry/server"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/test/fleet"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// systemNamespace is where the README installs fleetnet.
const systemNamespace = "fleetnet-system"

// release is one `helm install` of the test.
type release struct {
	cluster   string // hub or member
	namespace string
	name      string
	chart     string
	files     []string // values files, relative to the chart
	set       []string
	// secrets is set for the releases that follow the README: the test
	// creates the Secrets it says to create, then checks that every file
	// the Pods' arguments name is a key of one of them.
	secrets bool
}

// TestChartsOnAFleet installs every chart, with the values the README uses
// and with each example, into a fleet of two kwok clusters (hub and
// member), checks that the API server accepts every object strictly and
// that the Pods run (kwok's), then proves the agent chart's RBAC sufficient
// and minimal with the agent binary authenticated as the chart's
// ServiceAccount, and the dns and discovery charts' RBAC sufficient with
// their binaries, each as its chart's ServiceAccount, serving what the
// agents imported.
func TestChartsOnAFleet(t *testing.T) {
	h := testkit.NewHelm(t)
	// The binaries of this checkout, built while the fleet starts.
	agentBinary := buildBinary(t, "fleetnet-agent")
	dnsBinary := buildBinary(t, "fleetnet-dns")
	discoveryBinary := buildBinary(t, "fleetnet-discovery")
	started := time.Now()
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{
		// With API Priority and Fairness: the agent chart's FlowSchema is
		// shown to classify the agent's writes.
		{Name: "hub", ControllerManager: true, Kwok: true, GatewayAPI: true, PriorityAndFairness: true},
		{Name: "member", ControllerManager: true, Kwok: true, PriorityAndFairness: true},
	}})
	hub, member := newCluster(t, f.Cluster(t, "hub")), newCluster(t, f.Cluster(t, "member"))
	clusters := map[string]*cluster{"hub": hub, "member": member}

	// What the charts use besides Kubernetes itself: cert-manager's and
	// prometheus-operator's CRDs (stand-ins), and volumes for the embedded
	// etcd (no provisioner runs: PersistentVolumes made by hand, as the
	// README's "-" storage class allows).
	installStandInCRDs(t, hub)
	hub.persistentVolume(t, "registry-data-0", "", "1Gi")
	hub.persistentVolume(t, "registry-data-1", "", "1Gi")
	hub.persistentVolume(t, "registry-data-fast", "fast-ssd", "5Gi")
	// The registry the agents of the RBAC proof use; its CA and the
	// clusters' client certificates go into the agents' Secrets.
	reg := registrytest.Start(t, server.Config{})

	releases := readmeReleases()
	for _, c := range charts {
		for _, ex := range examples(t, c) {
			name := strings.TrimSuffix(filepath.Base(ex), ".yaml")
			r := release{cluster: "hub", namespace: "ex-" + strings.TrimPrefix(c.name, "fleetnet-") + "-" + name, name: c.name + "-" + name, chart: c.name, files: []string{"examples/" + filepath.Base(ex)}}
			if c.name == "fleetnet-gateway" {
				// A GatewayClass is cluster-scoped; the README's release
				// holds "fleetnet".
				r.set = append(r.set, "gatewayClass.name="+r.name)
			}
			releases = append(releases, r)
		}
	}
	t.Logf("fleet and prerequisites ready in %s", time.Since(started).Round(time.Millisecond))

	installed := time.Now()
	t.Run("install", func(t *testing.T) {
		for _, r := range releases {
			t.Run(r.cluster+"/"+r.namespace+"/"+r.name, func(t *testing.T) {
				t.Parallel()
				c := clusters[r.cluster]
				c.restrictedNamespace(t, r.namespace)
				if r.secrets {
					readmeSecrets(t, c, r, reg)
				}
				args := []string{"install", r.name, chartDir(t, r.chart), "--namespace", r.namespace, "--kubeconfig", c.KubeconfigPath}
				for _, f := range r.files {
					args = append(args, "-f", filepath.Join(chartDir(t, r.chart), f))
				}
				for _, s := range r.set {
					args = append(args, "--set", s)
				}
				out := h.Must(t, args...)
				// Warnings the API server sent back: a Pod template that
				// restricted pod security would refuse, or a field it dropped.
				// and a NOTES.txt that printed a missing value.
				for _, bad := range []string{"would violate PodSecurity", "unknown field", "Warning", "<no value>"} {
					if strings.Contains(out, bad) {
						t.Errorf("helm install printed %q:\n%s", bad, out)
					}
				}
				if r.secrets {
					_, notes, _ := strings.Cut(out, "NOTES:")
					t.Logf("NOTES of %s:%s", r.name, notes)
				}
				manifest := h.Must(t, "get", "manifest", r.name, "--namespace", r.namespace, "--kubeconfig", c.KubeconfigPath)
				objs := c.checkManifest(t, manifest)
				pods := c.waitForWorkloads(t, objs)
				if r.secrets {
					for _, p := range pods {
						c.checkSecretFiles(t, p)
					}
				}
			})
		}
	})
	t.Logf("%d releases installed and checked in %s", len(releases), time.Since(installed).Round(time.Millisecond))
	if t.Failed() {
		return // the RBAC proof needs the agent releases
	}

	proved := time.Now()
	t.Run("agent RBAC", func(t *testing.T) {
		testAgentRBAC(t, h, agentBinary(t), reg, hub, member)
		if t.Failed() {
			return
		}
		// While the agents still hold their clusters' leases (they stop
		// with this subtest), the registry serves their imports.
		t.Run("discovery registry source", func(t *testing.T) {
			testDiscoveryRegistry(t, discoveryBinary(t), hub, reg)
		})
	})
	t.Logf("agent RBAC proved in %s", time.Since(proved).Round(time.Millisecond))
	if t.Failed() {
		return // the next proofs serve what the agents imported
	}

	proved = time.Now()
	t.Run("dns RBAC", func(t *testing.T) {
		testDNSRBAC(t, dnsBinary(t), member)
	})
	t.Run("discovery RBAC", func(t *testing.T) {
		testDiscoveryRBAC(t, discoveryBinary(t), hub)
	})
	t.Logf("dns and discovery RBAC proved in %s", time.Since(proved).Round(time.Millisecond))
}

// readmeReleases are the releases of README's "Install on a real fleet":
// registry, agent, gateway, edge, fleetnet-dns and fleetnet-discovery in the
// hub, an agent and fleetnet-dns in the member, and fleetnet-discovery with
// the registry pool source in the hub. The fleetnet-dns Services
// take a fixed address of each cluster's service range (test/fleet's
// 10.96.0.0/16 and 10.97.0.0/16).
func readmeReleases() []release {
	return []release{
		{cluster: "hub", namespace: systemNamespace, name: "fleetnet-registry", chart: "fleetnet-registry", secrets: true,
			set: []string{"service.type=LoadBalancer", "tls.certManager.dnsNames={registry.fleet.example.com}"}},
		{cluster: "hub", namespace: systemNamespace, name: "fleetnet-agent", chart: "fleetnet-agent", secrets: true,
			set: []string{"identity.clusterID=hub", "identity.clustersetID=fleet", "identity.region=eu-west-1", "registry.address=fleetnet-registry.fleetnet-system.svc:7443"}},
		{cluster: "hub", namespace: systemNamespace, name: "fleetnet-gateway", chart: "fleetnet-gateway", secrets: true,
			set: []string{"clusterID=hub", "region=eu-west-1", "gatewayAddresses={edge.fleet.example.com}"}},
		{cluster: "hub", namespace: systemNamespace, name: "fleetnet-edge", chart: "fleetnet-edge", secrets: true,
			set: []string{"region=eu-west-1"}},
		{cluster: "hub", namespace: systemNamespace, name: "fleetnet-dns", chart: "fleetnet-dns", secrets: true,
			set: []string{"service.clusterIP=10.96.0.53"}},
		{cluster: "hub", namespace: systemNamespace, name: "fleetnet-discovery", chart: "fleetnet-discovery", secrets: true,
			set: []string{"kubernetes.clusterName=hub"}},
		{cluster: "member", namespace: systemNamespace, name: "fleetnet-agent", chart: "fleetnet-agent", secrets: true,
			set: []string{"identity.clusterID=member", "identity.clustersetID=fleet", "identity.region=us-east-1", "registry.address=registry.fleet.example.com:7443"}},
		{cluster: "member", namespace: systemNamespace, name: "fleetnet-dns", chart: "fleetnet-dns", secrets: true,
			set: []string{"service.clusterIP=10.97.0.53"}},
		// The README's other pool source: the registry's imports.
		{cluster: "hub", namespace: registryDiscoveryNamespace, name: "fleetnet-discovery", chart: "fleetnet-discovery", secrets: true,
			set: []string{"poolSource=registry", "registry.address=fleetnet-registry.fleetnet-system.svc:7443"}},
	}
}

// registryDiscoveryNamespace holds the fleetnet-discovery release with the
// registry pool source.
const registryDiscoveryNamespace = "discovery-registry"

// readmeSecrets creates the Secrets the README says to create for r. The
// agents' credentials are the test registry's, so that the RBAC proof runs
// the agent with exactly the files of its Secret.
func readmeSecrets(t *testing.T, c *cluster, r release, reg *registrytest.Registry) {
	t.Helper()
	ca := keyPair(t)(fleetCA())
	tlsSecret := func(name string, kp *pki.KeyPair) {
		c.secret(t, r.namespace, name, map[string][]byte{"ca.crt": ca.CertPEM, "tls.crt": kp.CertPEM, "tls.key": kp.KeyPEM})
	}
	switch r.chart {
	case "fleetnet-registry":
		tlsSecret("fleetnet-registry-tls", keyPair(t)(ca.ServingCert("fleetnet-registry", []string{"registry.fleet.example.com", "fleetnet-registry.fleetnet-system.svc"})))
	case "fleetnet-agent":
		o := reg.ClientOptions(r.cluster, false)
		c.secret(t, r.namespace, "fleetnet-agent-registry", map[string][]byte{"ca.crt": read(t, o.CAFile), "tls.crt": read(t, o.CertFile), "tls.key": read(t, o.KeyFile)})
	case "fleetnet-gateway":
		tlsSecret("fleetnet-gateway-tls", keyPair(t)(ca.ServingCert("fleetnet-gateway", []string{"fleetnet-gateway.fleetnet-system.svc"})))
	case "fleetnet-edge":
		data := map[string][]byte{"ca.crt": ca.CertPEM}
		for _, pod := range []string{"fleetnet-edge-0", "fleetnet-edge-1"} {
			kp := keyPair(t)(ca.EdgeCert(pod))
			data[pod+".crt"], data[pod+".key"] = kp.CertPEM, kp.KeyPEM
		}
		c.secret(t, r.namespace, "fleetnet-edge-tls", data)
	case "fleetnet-dns":
		// None: fleetnet-dns reads only the Kubernetes API.
	case "fleetnet-discovery":
		tlsSecret("fleetnet-discovery-tls", keyPair(t)(ca.ServingCert("fleetnet-discovery", []string{"discovery.fleet.example.com", "fleetnet-discovery.fleetnet-system.svc"})))
		if slices.Contains(r.set, "poolSource=registry") {
			// The test registry's CA and an administrator's client
			// certificate: the registry source reads every export's
			// status.
			o := reg.ClientOptions("discovery", true)
			c.secret(t, r.namespace, "fleetnet-discovery-registry", map[string][]byte{"ca.crt": read(t, o.CAFile), "tls.crt": read(t, o.CertFile), "tls.key": read(t, o.KeyFile)})
		}
	default:
		t.Fatalf("no README Secrets for chart %s", r.chart)
	}
}

// fleetCA is one CA for the whole test.
var fleetCA = sync.OnceValues(func() (*pki.KeyPair, error) { return pki.NewCA("charts-test-ca") })

// keyPair fails the test on an error making a certificate.
func keyPair(t testing.TB) func(*pki.KeyPair, error) *pki.KeyPair {
	return func(kp *pki.KeyPair, err error) *pki.KeyPair {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return kp
	}
}

func read(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// installStandInCRDs installs testdata/standin-crds.yaml into c.
func installStandInCRDs(t *testing.T, c *cluster) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "standin-crds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var crds []*apiextensionsv1.CustomResourceDefinition
	for {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := dec.Decode(crd); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("testdata/standin-crds.yaml: %v", err)
		}
		crds = append(crds, crd)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := controlplane.InstallCRDs(ctx, c.Config, crds); err != nil {
		t.Fatal(err)
	}
	c.resetMapper()
}

// persistentVolume makes a volume for a claim of the given class and size
// to bind: nothing provisions volumes in the test fleet, and kwok mounts
// nothing, so its source is never used.
func (c *cluster) persistentVolume(t *testing.T, name, class, size string) {
	t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName:              class,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/charts-test/" + name}},
		},
	}
	if _, err := c.clientset.CoreV1().PersistentVolumes().Create(context.Background(), pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(fmt.Errorf("creating PersistentVolume %s: %w", name, err))
	}
}
