package charts

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	"github.com/fleetnet/fleetnet/internal/controlplane"
	"github.com/fleetnet/fleetnet/internal/discovery/client"
	"github.com/fleetnet/fleetnet/internal/discovery/discoverytest"
	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/fleetnet/fleetnet/internal/registry/registrytest"
	"github.com/fleetnet/fleetnet/internal/testkit"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testDiscoveryRBAC runs fleetnet-discovery in c as the discovery chart's
// ServiceAccount (bound to nothing but the chart's ClusterRole) with the
// arguments of the chart's Deployment, its files from the README's Secret
// and its addresses mapped onto loopback. It gets ready, which needs its
// EndpointSlice informers synced, and serves the pool demo/echo with the
// endpoints of both clusters to a router with a client certificate of the
// fleet CA, with no request forbidden. Then each verb of the chart's role
// is shown needed (testEveryVerbNeeded).
func testDiscoveryRBAC(t *testing.T, binary string, c *cluster) {
	dir := filepath.Join(t.TempDir(), c.Name)
	kubeconfig := serviceAccountKubeconfig(t, c, systemNamespace, "fleetnet-discovery", dir)
	secretFiles(t, c, systemNamespace, "fleetnet-discovery-tls", filepath.Join(dir, "tls"))
	listen, health := testkit.FreeAddr(t), testkit.FreeAddr(t)
	p := startChartProcess(t, "fleetnet-discovery-"+c.Name, binary, discoveryArgs(t, c, systemNamespace, "fleetnet-discovery", kubeconfig, dir, listen, health), dir, "http://"+health+"/readyz")

	waitEchoPool(t, c, "https://"+listen)
	for _, line := range forbiddenLines(t, p) {
		t.Errorf("fleetnet-discovery of %s logged a forbidden request with the chart's role:\n%s", c.Name, line)
	}
	if t.Failed() {
		return
	}
	testEveryVerbNeeded(t, c, "fleetnet-discovery", func(t *testing.T, name, kubeconfig, pdir string) *controlplane.Process {
		listen, health := testkit.FreeAddr(t), testkit.FreeAddr(t)
		return startChartProcess(t, name, binary, discoveryArgs(t, c, systemNamespace, "fleetnet-discovery", kubeconfig, dir, listen, health), pdir, "")
	})

	// examples/routers.yaml has kubernetes.poolLabels=none, and its
	// ClusterRole no ServiceImports: that release's process, as its own
	// ServiceAccount, gets ready with nothing forbidden.
	t.Run("poolLabels=none", func(t *testing.T) {
		const ns, name = "ex-discovery-routers", "fleetnet-discovery-routers"
		role, err := c.clientset.RbacV1().ClusterRoles().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range role.Rules {
			if slices.Contains(r.Resources, "serviceimports") {
				t.Errorf("ClusterRole %s grants %v on serviceimports with kubernetes.poolLabels=none", name, r.Verbs)
			}
		}
		pdir := filepath.Join(t.TempDir(), c.Name)
		kubeconfig := serviceAccountKubeconfig(t, c, ns, name, pdir)
		listen, health := testkit.FreeAddr(t), testkit.FreeAddr(t)
		// The serving certificate of the README's release: the example's
		// Secret was never created.
		p := startChartProcess(t, name, binary, discoveryArgs(t, c, ns, name, kubeconfig, dir, listen, health), pdir, "http://"+health+"/readyz")
		for _, line := range forbiddenLines(t, p) {
			t.Errorf("%s logged a forbidden request with its chart's role:\n%s", name, line)
		}
	})
}

// discoveryArgs returns the arguments of the fleetnet-discovery Deployment
// namespace/name in c with kubeconfig, the files of its TLS Secret under
// dir/tls and its addresses on loopback (listen and health; metrics on a
// free port).
func discoveryArgs(t *testing.T, c *cluster, namespace, name, kubeconfig, dir, listen, health string) []string {
	t.Helper()
	args := mapArgs(deploymentArgs(t, c, namespace, name), func(flag, value string) string {
		switch flag {
		case "--listen":
			return listen
		case "--health-addr":
			return health
		case "--metrics-addr":
			return testkit.FreeAddr(t)
		}
		return strings.Replace(value, "/etc/fleetnet/tls", filepath.Join(dir, "tls"), 1)
	})
	return append([]string{"--kubeconfig=" + kubeconfig}, args...)
}

// testDiscoveryRegistry runs fleetnet-discovery as the release with the
// registry pool source has it run: the arguments of its Deployment, the
// files of its Secrets, the test registry (which the agents of the agent
// proof use) in place of the in-cluster one. It serves pool demo/echo with
// the endpoints both clusters exported, read from the registry alone.
func testDiscoveryRegistry(t *testing.T, binary string, c *cluster, reg *registrytest.Registry) {
	_, listen := startDeployment(t, c, registryDiscoveryNamespace, "fleetnet-discovery", "fleetnet-discovery-registry", binary, reg.Addr,
		map[string]string{"/etc/fleetnet/tls": "fleetnet-discovery-tls", "/etc/fleetnet/registry": "fleetnet-discovery-registry"})
	waitEchoPool(t, c, "https://"+listen)
}

// waitEchoPool waits until the fleetnet-discovery at baseURL serves the
// pool demo/echo with the endpoint of each cluster of echoAddrs, to a
// router with a client certificate of the fleet CA (organization
// fleetnet:discovery-read: a reader of every pool, which a member
// cluster's certificate is not).
func waitEchoPool(t *testing.T, c *cluster, baseURL string) {
	t.Helper()
	ca := keyPair(t)(fleetCA())
	router, err := discoverytest.ClientCert(t, ca, "router", discoveryv1.OrganizationRead).TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	tlsConfig, err := pki.ClientTLS(ca.CertPEM, &router)
	if err != nil {
		t.Fatal(err)
	}
	// The name the serving certificate holds, dialled on loopback.
	tlsConfig.ServerName = "fleetnet-discovery.fleetnet-system.svc"
	cl, err := client.New(client.Options{BaseURL: baseURL, HTTPClient: &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}}})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "the pool demo/echo with every cluster's address", func(ctx context.Context) error {
		pool, err := cl.GetPool(ctx, "demo", "echo")
		if err != nil {
			return err
		}
		for cluster, addr := range echoAddrs {
			i := slices.IndexFunc(pool.Clusters, func(pc discoveryv1.PoolCluster) bool { return pc.Cluster == cluster })
			if i < 0 || !slices.ContainsFunc(pool.Clusters[i].Endpoints, func(e discoveryv1.Endpoint) bool { return slices.Contains(e.Addresses, addr) }) {
				return fmt.Errorf("pool demo/echo has no endpoint %s of cluster %s: %+v", addr, cluster, pool.Clusters)
			}
		}
		t.Logf("%s: pool demo/echo at revision %d: %+v", c.Name, pool.Revision, pool.Clusters)
		return nil
	})
}
