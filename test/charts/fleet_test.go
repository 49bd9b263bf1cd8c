package charts

import (
	"bytes"
	"context"
	"fmt"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/ctl"
	"github.com/fleetnet/fleetnet/internal/registry/client"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/test/fleet"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// kubeadmCorefile is a kubeadm cluster's Corefile, which fleet join wires
// and fleet leave gives back.
const kubeadmCorefile = `.:53 {
    errors
    health
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
    }
    forward . /etc/resolv.conf
    cache 30
    loop
    reload
}
`

// TestFleetInitJoinLeave runs `fleetnetctl fleet init` on a hub, `fleet
// join` on a member (twice: a second join changes no certificate and waits
// until the member is registered and its import is in place), and `fleet
// leave`, on two kwok clusters. The registry and the agents run as local
// processes with the arguments and Secrets of the workloads the commands
// installed (kwok runs no container), so what the commands set up is what
// serves: the member registers with the certificate join issued, at the
// address init recorded, and imports the hub's export.
func TestFleetInitJoinLeave(t *testing.T) {
	agentBinary := buildBinary(t, "fleetnet-agent")
	registryBinary := buildBinary(t, "fleetnet-registry")
	consoleBinary := buildBinary(t, "fleetnet-console")
	h := testkit.NewHelm(t)
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{
		{Name: "hub", ControllerManager: true, Kwok: true},
		{Name: "member", ControllerManager: true, Kwok: true},
	}})
	hub, member := newCluster(t, f.Cluster(t, "hub")), newCluster(t, f.Cluster(t, "member"))
	hub.persistentVolume(t, "registry-data-0", "", "1Gi")
	kubeconfig := mergedKubeconfig(t, hub, member)
	certs := filepath.Join(t.TempDir(), "certs")
	registryAddr := fmt.Sprintf("127.0.0.1:%d", testkit.FreePort(t))
	ctx := context.Background()
	member.configMap(t, "kube-system", "coredns", map[string]string{"Corefile": kubeadmCorefile})

	// init, without waiting: nothing runs the workloads yet.
	out := fleetnetctl(t, "fleet", "init", "--kubeconfig", kubeconfig, "--context", "hub", "--clusterset-id", "fleet",
		"--region", "eu-west-1", "--registry-hosts", "127.0.0.1", "--registry-address", registryAddr,
		"--gateway-address", "edge.fleet.example.com", "--certs-dir", certs, "--wait=false")
	for _, want := range []string{"release fleetnet-system/fleetnet-registry revision 1", "release fleetnet-system/fleetnet-edge revision 1",
		"Secret fleetnet-system/fleetnet-edge-tls: ca.crt, fleetnet-edge-0.crt, fleetnet-edge-1.crt",
		"note: reading CoreDNS's ConfigMap kube-system/coredns",
		"release fleetnet-system/fleetnet-console revision 1", "Secret fleetnet-system/fleetnet-console-registry: ca.crt, tls.crt",
		"kubectl -n fleetnet-system port-forward deployment/fleetnet-console 7490"} {
		if !strings.Contains(out, want) {
			t.Errorf("fleet init printed no %q:\n%s", want, out)
		}
	}
	// Each CRD is applied once: the count init prints is the number of
	// CRDs the hub has (which the test fleet installed in part before).
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := hub.Client(t).List(ctx, &crds); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("hub: %d CRDs applied", len(crds.Items)); !strings.Contains(out, want) {
		t.Errorf("fleet init printed no %q (each CRD applied once):\n%s", want, out)
	}
	// The releases are Helm's own (the helm command reads them), their
	// objects pass the API server, and every file their Pods name is in a
	// Secret init made.
	for _, rel := range []string{"fleetnet-registry", "fleetnet-agent", "fleetnet-gateway", "fleetnet-edge", "fleetnet-discovery", "fleetnet-dns", "fleetnet-console"} {
		manifest := h.Must(t, "get", "manifest", rel, "--namespace", systemNamespace, "--kubeconfig", hub.KubeconfigPath)
		for _, p := range hub.waitForWorkloads(t, hub.checkManifest(t, manifest)) {
			hub.checkSecretFiles(t, p)
		}
	}
	if t.Failed() {
		return
	}

	// The registry and the hub's agent, as their workloads would run them.
	startRegistry(t, registryBinary(t), hub, registryAddr)
	startAgent(t, agentBinary(t), hub, registryAddr)
	// init again, waiting: the same certificates (no Secret written), the
	// releases upgraded, the hub registered.
	secretsBefore := secretVersions(t, hub)
	out = fleetnetctl(t, "fleet", "init", "--kubeconfig", kubeconfig, "--context", "hub", "--clusterset-id", "fleet",
		"--region", "eu-west-1", "--registry-hosts", "127.0.0.1", "--registry-address", registryAddr,
		"--gateway-address", "edge.fleet.example.com", "--certs-dir", certs, "--timeout", "2m")
	if !strings.Contains(out, "hub: registered in the registry at "+registryAddr) || !strings.Contains(out, "revision 2") {
		t.Errorf("fleet init, again, printed no registration or no second revision:\n%s", out)
	}
	if after := secretVersions(t, hub); fmt.Sprint(after) != fmt.Sprint(secretsBefore) {
		t.Errorf("fleet init, again, rewrote Secrets: %v, then %v", secretsBefore, after)
	}
	// Refused, changing nothing: init with a folder that lacks the fleet's
	// CA (it would re-issue every certificate), and the hub leaving.
	for _, args := range [][]string{
		{"fleet", "init", "--kubeconfig", kubeconfig, "--context", "hub", "--clusterset-id", "fleet", "--registry-address", registryAddr,
			"--certs-dir", filepath.Join(t.TempDir(), "other-certs"), "--wait=false"},
		{"fleet", "leave", "--kubeconfig", kubeconfig, "--context", "hub", "--certs-dir", certs},
	} {
		if out, err := runFleetnetctl(ctx, args...); err == nil || !strings.Contains(err.Error(), "fleet") {
			t.Errorf("fleetnetctl %s: %v, want a refusal\n%s", strings.Join(args[:2], " "), err, out)
		} else {
			t.Logf("fleetnetctl %s refused: %v", strings.Join(args[:2], " "), err)
		}
	}
	if after := secretVersions(t, hub); fmt.Sprint(after) != fmt.Sprint(secretsBefore) {
		t.Errorf("a refused fleetnetctl changed Secrets: %v, then %v", secretsBefore, after)
	}

	// The hub exports demo/echo; the member has the namespace.
	const ns = "demo"
	for _, c := range []*cluster{hub, member} {
		c.restrictedNamespace(t, ns)
	}
	export(t, hub, ns, "echo", echoAddrs["hub"])

	// join reads the fleet from the hub.
	join := []string{"fleet", "join", "--kubeconfig", kubeconfig, "--context", "member", "--hub-context", "hub",
		"--region", "us-east-1", "--certs-dir", certs, "--timeout", "2m"}
	out = fleetnetctl(t, append(join, "--wait=false")...)
	if !strings.Contains(out, "release fleetnet-system/fleetnet-agent revision 1") || !strings.Contains(out, "clusterset.local forwarded to fleetnet-dns") {
		t.Errorf("fleet join printed no agent release or no CoreDNS wiring:\n%s", out)
	}
	agentArgs := strings.Join(deploymentArgs(t, member, systemNamespace, "fleetnet-agent"), " ")
	for _, want := range []string{"--cluster-id=member", "--clusterset-id=fleet", "--registry=" + registryAddr, "--region=us-east-1"} {
		if !strings.Contains(agentArgs, want) {
			t.Errorf("the member's agent runs without %s: %s", want, agentArgs)
		}
	}
	memberAgent := startAgent(t, agentBinary(t), member, registryAddr)
	secretsBefore = secretVersions(t, member)
	out = fleetnetctl(t, join...)
	for _, want := range []string{"member: registered in the registry at " + registryAddr, "member: imports in place 1/1", "revision 2", "(unchanged)"} {
		if !strings.Contains(out, want) {
			t.Errorf("fleet join, again, printed no %q:\n%s", want, out)
		}
	}
	if after := secretVersions(t, member); fmt.Sprint(after) != fmt.Sprint(secretsBefore) {
		t.Errorf("fleet join, again, rewrote Secrets: %v, then %v", secretsBefore, after)
	}
	waitImported(t, member, ns, "echo", map[string]string{"hub": echoAddrs["hub"]})
	// The member exports too; the hub imports it from both.
	export(t, member, ns, "echo", echoAddrs["member"])
	waitExportReady(t, member, ns, "echo")
	waitImported(t, hub, ns, "echo", echoAddrs)
	if t.Failed() {
		return
	}

	// The console init installed reads the registry with the
	// administrator's certificate init issued: both clusters, live, and
	// the service they export. Its token is the one the chart made.
	_, consoleURL := startConsole(t, consoleBinary(t), hub, registryAddr)
	tokens := secretTokens(t, hub, systemNamespace, "fleetnet-console-tokens")
	if len(tokens) != 1 {
		t.Fatalf("the console's tokens Secret holds %d tokens, want the chart's one", len(tokens))
	}
	testkit.Eventually(t, 30*time.Second, "the console to show the fleet", func(ctx context.Context) error {
		var v struct {
			Services int
			Regions  []struct {
				Clusters []struct {
					ID   string
					Live bool
				}
			}
		}
		if code := consoleGet(t, consoleURL+"/api/fleet", tokens[0].Token, &v); code != http.StatusOK {
			return fmt.Errorf("GET /api/fleet: %d", code)
		}
		live := map[string]bool{}
		for _, r := range v.Regions {
			for _, c := range r.Clusters {
				live[c.ID] = c.Live
			}
		}
		if !live["hub"] || !live["member"] || v.Services != 1 {
			return fmt.Errorf("clusters live %v, %d services; want hub and member live, 1 service", live, v.Services)
		}
		return nil
	})

	// leave: the agent is stopped first (the test stops its process when
	// the Deployment is scaled to 0, as the kubelet would), then the
	// registry withdraws the member's export.
	// The agent's Pods are held by a finalizer until its process has
	// stopped, as a kubelet holds a terminating Pod until its containers
	// have exited: leave must not evict the cluster while it still runs.
	const hold = "fleetnet.dev/test-hold"
	agentPods := func() []corev1.Pod {
		pods, err := member.clientset.CoreV1().Pods(systemNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=fleetnet-agent"})
		if err != nil {
			t.Fatal(err)
		}
		return pods.Items
	}
	setHold := func(p corev1.Pod, on bool) {
		patch := `{"metadata":{"finalizers":["` + hold + `"]}}`
		if !on {
			patch = `{"metadata":{"finalizers":null}}`
		}
		if _, err := member.clientset.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	held := agentPods()
	if len(held) == 0 {
		t.Fatal("the member's agent has no Pods")
	}
	for _, p := range held {
		setHold(p, true)
	}
	var leaveOut string
	var leaveErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		leaveOut, leaveErr = runFleetnetctl(ctx, "fleet", "leave", "--kubeconfig", kubeconfig, "--context", "member", "--certs-dir", certs, "--timeout", "2m")
	})
	testkit.Eventually(t, time.Minute, "fleet leave to scale the member's agent to 0", func(ctx context.Context) error {
		d, err := member.clientset.AppsV1().Deployments(systemNamespace).Get(ctx, "fleetnet-agent", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 0 {
			return fmt.Errorf("replicas %v", d.Spec.Replicas)
		}
		return nil
	})
	memberAgent.Stop(10 * time.Second)
	for _, p := range held {
		setHold(p, false)
	}
	wg.Wait()
	if leaveErr != nil {
		t.Fatalf("fleet leave: %v\n%s", leaveErr, leaveOut)
	}
	t.Logf("fleet leave:\n%s", leaveOut)
	// The hub no longer imports the member's endpoints.
	waitImported(t, hub, ns, "echo", map[string]string{"hub": echoAddrs["hub"]})
	regClient := adminRegistryClient(t, certs, registryAddr)
	resp, err := regClient.ListClusters(ctx, &registryv1.ListClustersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range resp.GetClusters() {
		if c.GetId() == "member" {
			t.Errorf("the registry still holds the member after leave: %v", c)
		}
	}
	// Nothing of fleetnet's is left in the member but the user's
	// ServiceExport (without the agent's finalizer) and the CRDs.
	cl := member.Client(t)
	var imports mcsv1beta1.ServiceImportList
	var slices discoveryv1.EndpointSliceList
	var services corev1.ServiceList
	for _, list := range []ctrlclient.ObjectList{&imports, &services} {
		if err := cl.List(ctx, list, ctrlclient.MatchingLabels{keys.LabelManagedBy: keys.ManagedByAgent}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.List(ctx, &slices, ctrlclient.MatchingLabels{discoveryv1.LabelManagedBy: keys.EndpointSliceManagedBy}); err != nil {
		t.Fatal(err)
	}
	if n := len(imports.Items) + len(services.Items) + len(slices.Items); n > 0 {
		t.Errorf("after leave the member holds %d ServiceImports, %d derived Services, %d slices of the agent", len(imports.Items), len(services.Items), len(slices.Items))
	}
	se := &mcsv1beta1.ServiceExport{}
	if err := cl.Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: "echo"}, se); err != nil {
		t.Errorf("the user's ServiceExport is gone after leave: %v", err)
	} else if len(se.Finalizers) > 0 {
		t.Errorf("the user's ServiceExport keeps finalizers %v after leave", se.Finalizers)
	}
	if list := h.Must(t, "list", "--all-namespaces", "--short", "--kubeconfig", member.KubeconfigPath); strings.TrimSpace(list) != "" {
		t.Errorf("releases left in the member after leave: %s", list)
	}
	testkit.Eventually(t, time.Minute, "the namespace join made to be deleted", func(ctx context.Context) error {
		_, err := member.clientset.CoreV1().Namespaces().Get(ctx, systemNamespace, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("namespace %s: %v", systemNamespace, err)
	})
	cm, err := member.clientset.CoreV1().ConfigMaps("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["Corefile"] != kubeadmCorefile {
		t.Errorf("the Corefile after leave is not the one before join:\n%s", cm.Data["Corefile"])
	}
}

// fleetnetctl runs a fleetnetctl command in this process and returns what
// it printed; an error fails the test.
func fleetnetctl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := runFleetnetctl(context.Background(), args...)
	if err != nil {
		t.Fatalf("fleetnetctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("fleetnetctl %s:\n%s", strings.Join(args, " "), out)
	return out
}

func runFleetnetctl(ctx context.Context, args ...string) (string, error) {
	cmd := ctl.NewRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

// mergedKubeconfig writes one kubeconfig with a context per cluster, named
// after it, as an operator's kubeconfig of a fleet has.
func mergedKubeconfig(t *testing.T, clusters ...*cluster) string {
	t.Helper()
	merged := clientcmdapi.NewConfig()
	for _, c := range clusters {
		cfg, err := clientcmd.LoadFromFile(c.KubeconfigPath)
		if err != nil {
			t.Fatal(err)
		}
		cur := cfg.Contexts[cfg.CurrentContext]
		merged.Clusters[c.Name] = cfg.Clusters[cur.Cluster]
		merged.AuthInfos[c.Name] = cfg.AuthInfos[cur.AuthInfo]
		merged.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: c.Name}
	}
	merged.CurrentContext = clusters[0].Name
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*merged, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// startRegistry runs fleetnet-registry with the arguments of the chart's
// StatefulSet and the files of its Secret, listening at addr.
func startRegistry(t *testing.T, binary string, c *cluster, addr string) {
	t.Helper()
	sts, err := c.clientset.AppsV1().StatefulSets(systemNamespace).Get(context.Background(), "fleetnet-registry", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "registry")
	secretFiles(t, c, systemNamespace, "fleetnet-registry-tls", filepath.Join(dir, "tls"))
	metrics := fmt.Sprintf("127.0.0.1:%d", testkit.FreePort(t))
	args := mapArgs(sts.Spec.Template.Spec.Containers[0].Args, func(flag, value string) string {
		switch flag {
		case "--listen":
			return addr
		case "--metrics-listen":
			return metrics
		case "--data-dir":
			return filepath.Join(dir, "etcd")
		}
		value = strings.Replace(value, "/etc/fleetnet/tls", filepath.Join(dir, "tls"), 1)
		return strings.Replace(value, "/etc/fleetnet/client-ca", filepath.Join(dir, "tls"), 1)
	})
	startChartProcess(t, "fleetnet-registry", binary, args, dir, "http://"+metrics+"/readyz")
}

// secretVersions are the resourceVersions of the Secrets in the system
// namespace.
func secretVersions(t *testing.T, c *cluster) map[string]string {
	t.Helper()
	list, err := c.clientset.CoreV1().Secrets(systemNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: keys.LabelManagedBy + "=" + keys.ManagedByCtl})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range list.Items {
		out[s.Name] = s.ResourceVersion
	}
	return out
}

// adminRegistryClient reaches the registry with the administrator
// certificate fleetnetctl keeps in the certificates' folder.
func adminRegistryClient(t *testing.T, certs, addr string) registryv1.RegistryClient {
	t.Helper()
	if _, err := os.Stat(filepath.Join(certs, "fleetnetctl.crt")); err != nil {
		t.Fatalf("fleetnetctl kept no administrator certificate: %v", err)
	}
	c, conn, err := client.Dial(client.Options{Address: addr, CAFile: filepath.Join(certs, "ca.crt"),
		CertFile: filepath.Join(certs, "fleetnetctl.crt"), KeyFile: filepath.Join(certs, "fleetnetctl.key")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return c
}

// configMap creates a ConfigMap.
func (c *cluster) configMap(t *testing.T, namespace, name string, data map[string]string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: data}
	if _, err := c.clientset.CoreV1().ConfigMaps(namespace).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
