package charts

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/controlplane"
	"github.com/fleetnet/fleetnet/internal/registry/registrytest"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/test/fleet"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	"sigs.k8s.io/yaml"
)

// echoAddrs are the endpoint addresses of demo/echo, which the agent proof
// exports from each cluster and the later proofs find imported.
var echoAddrs = map[string]string{"hub": "10.244.0.10", "member": "10.244.1.10"}

// testAgentRBAC runs fleetnet-agent in hub and member, each as the agent
// chart's ServiceAccount (a TokenRequest token) and with the arguments of
// the chart's Deployment, and shows a full export → import round trip with
// no request forbidden; then it takes create on EndpointSlices out of the
// chart's ClusterRole in member and shows what the agent reports.
func testAgentRBAC(t *testing.T, h *testkit.Helm, binary string, reg *registrytest.Registry, hub, member *cluster) {
	agents := map[string]*agentProcess{}
	for _, c := range []*cluster{hub, member} {
		agents[c.Name] = startAgent(t, binary, c, reg.Addr)
	}
	const ns = "demo"
	for _, c := range []*cluster{hub, member} {
		c.restrictedNamespace(t, ns)
	}
	// Both clusters export demo/echo: each agent exports (finalizer,
	// status, registry) and imports (ServiceImport, derived Service,
	// EndpointSlices of both clusters).
	exported := time.Now()
	for _, c := range []*cluster{hub, member} {
		export(t, c, ns, "echo", echoAddrs[c.Name])
	}
	for _, c := range []*cluster{hub, member} {
		waitExportReady(t, c, ns, "echo")
		waitImported(t, c, ns, "echo", echoAddrs)
	}
	t.Logf("echo exported from hub and member and imported in both in %s", time.Since(exported).Round(time.Millisecond))
	for _, a := range agents {
		for _, line := range a.logLines(t, regexp.MustCompile(`(?i)forbidden`)) {
			t.Errorf("agent of %s logged a forbidden request with the chart's role:\n%s", a.cluster, line)
		}
	}
	// The chart's FlowSchema classified the agents' writes of imported
	// objects: they queue on its priority level, not on the level of the
	// cluster's own controllers.
	for _, c := range []*cluster{hub, member} {
		if n := flowSchemaDispatched(t, c, "fleetnet-agent"); n == 0 {
			t.Errorf("%s: no request dispatched by the FlowSchema fleetnet-agent (apiserver_flowcontrol_dispatched_requests_total)", c.Name)
		} else {
			t.Logf("%s: %g requests of the agent dispatched by the FlowSchema fleetnet-agent", c.Name, n)
		}
	}
	if t.Failed() {
		return
	}

	// One verb less: the chart's ClusterRole without create on
	// EndpointSlices, upgraded into member as a user's edited chart would
	// be.
	edited := copyChart(t, "fleetnet-agent")
	removeVerb(t, filepath.Join(edited, "files", "clusterrole.yaml"), "endpointslices", "create")
	h.Must(t, "upgrade", "fleetnet-agent", edited, "--namespace", systemNamespace, "--kubeconfig", member.KubeconfigPath, "--reuse-values")
	role, err := member.clientset.RbacV1().ClusterRoles().Get(context.Background(), "fleetnet-agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range role.Rules {
		if slices.Contains(r.Resources, "endpointslices") && slices.Contains(r.Verbs, "create") {
			t.Fatalf("the upgraded ClusterRole still grants create on endpointslices: %v", r)
		}
	}
	export(t, hub, ns, "echo2", "10.244.0.11")
	// The ServiceImport comes first and is allowed; its EndpointSlice is
	// not, and the agent says so on the ServiceImport, where users of the
	// import look.
	want := `cannot create resource "endpointslices" in API group "discovery.k8s.io"`
	cl := member.Client(t)
	var cond *metav1.Condition
	testkit.Eventually(t, 30*time.Second, "the Ready condition of ServiceImport echo2 naming the missing permission", func(ctx context.Context) error {
		si := &mcsv1beta1.ServiceImport{}
		if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: "echo2"}, si); err != nil {
			return err
		}
		cond = meta.FindStatusCondition(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady))
		if cond == nil || cond.Status != metav1.ConditionFalse || !strings.Contains(cond.Message, want) {
			return fmt.Errorf("ServiceImport echo2's Ready condition is %+v; want False naming the missing permission", cond)
		}
		return nil
	})
	t.Logf("member's ServiceImport demo/echo2: Ready=%s reason %s: %s", cond.Status, cond.Reason, cond.Message)
	if cond.Reason != keys.ReasonApplyFailed {
		t.Errorf("Ready's reason is %s; want %s", cond.Reason, keys.ReasonApplyFailed)
	}
	testkit.Eventually(t, 10*time.Second, "the Warning event on ServiceImport echo2", func(ctx context.Context) error {
		events, err := member.clientset.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Regarding.Kind == "ServiceImport" && e.Regarding.Name == "echo2" && e.Type == corev1.EventTypeWarning && strings.Contains(e.Note, want) {
				t.Logf("member's Warning event on ServiceImport demo/echo2: %s: %s", e.Reason, e.Note)
				return nil
			}
		}
		return fmt.Errorf("no Warning event on ServiceImport echo2 names the missing permission")
	})
	// The log says it too (not asserted beyond "forbidden": wording is the
	// agent's own business). Polled: controller-runtime logs a reconcile's
	// error after the reconcile returned, so after its condition and event.
	var lines []string
	testkit.Eventually(t, 10*time.Second, "member's agent logging the forbidden write", func(context.Context) error {
		if lines = agents["member"].logLines(t, regexp.MustCompile(`(?i)forbidden`)); len(lines) == 0 {
			return fmt.Errorf("member's agent logged nothing forbidden")
		}
		return nil
	})
	t.Logf("member's agent logged %d forbidden lines; the first:\n%s", len(lines), lines[0])
}

// agentProcess is fleetnet-agent running as a local process.
type agentProcess struct {
	cluster string
	*controlplane.Process
}

// startAgent runs the agent binary against c as the chart's ServiceAccount,
// with the arguments of the chart's Deployment, its files and addresses
// mapped onto this machine.
func startAgent(t *testing.T, binary string, c *cluster, registryAddr string) *agentProcess {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), c.Name)
	tr, err := c.clientset.CoreV1().ServiceAccounts(systemNamespace).CreateToken(ctx, "fleetnet-agent",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("%s: requesting a token for the chart's ServiceAccount: %v", c.Name, err)
	}
	kubeconfig := writeKubeconfig(t, dir, c, tr.Status.Token)

	// The files of the chart's Secret, where the Deployment mounts them.
	secret, err := c.clientset.CoreV1().Secrets(systemNamespace).Get(ctx, "fleetnet-agent-registry", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	files := filepath.Join(dir, "registry")
	if err := os.MkdirAll(files, 0o700); err != nil {
		t.Fatal(err)
	}
	for k, v := range secret.Data {
		if err := os.WriteFile(filepath.Join(files, k), v, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	deploy, err := c.clientset.AppsV1().Deployments(systemNamespace).Get(ctx, "fleetnet-agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	healthPort := testkit.FreePort(t)
	args := []string{"--kubeconfig=" + kubeconfig}
	for _, arg := range deploy.Spec.Template.Spec.Containers[0].Args {
		name, value, _ := strings.Cut(arg, "=")
		switch name {
		case "--registry":
			value = registryAddr // the chart's points at the in-cluster registry
		case "--metrics-bind-address":
			value = "0" // none: two agents share this machine
		case "--health-probe-bind-address":
			value = fmt.Sprintf("127.0.0.1:%d", healthPort)
		default:
			value = strings.Replace(value, "/etc/fleetnet/registry", files, 1)
		}
		args = append(args, name+"="+value)
	}
	p, err := controlplane.Start("fleetnet-agent "+c.Name, binary, args, filepath.Join(dir, "agent.log"), controlplane.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := &agentProcess{cluster: c.Name, Process: p}
	t.Cleanup(func() {
		p.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("last lines of %s's agent:\n%s", c.Name, controlplane.Tail(p.LogPath, 30))
		}
	})
	t.Logf("%s: fleetnet-agent %s", c.Name, strings.Join(args, " "))
	// Ready as the kubelet would see it: the chart's readiness probe.
	testkit.Eventually(t, 30*time.Second, fmt.Sprintf("%s's agent to be ready", c.Name), func(ctx context.Context) error {
		if exited, err := p.Exited(); exited {
			t.Fatalf("%s's agent exited: %v\n%s", c.Name, err, controlplane.Tail(p.LogPath, 20))
		}
		return controlplane.HTTPOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", healthPort))
	})
	return a
}

// logLines returns the lines of the agent's log that match re.
func (a *agentProcess) logLines(t testing.TB, re *regexp.Regexp) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(string(read(t, a.LogPath)), "\n") {
		if re.MatchString(line) {
			out = append(out, line)
		}
	}
	return out
}

// writeKubeconfig writes a kubeconfig for c that authenticates with token
// alone.
func writeKubeconfig(t testing.TB, dir string, c *cluster, token string) string {
	t.Helper()
	ca := c.Config.TLSClientConfig.CAData
	if len(ca) == 0 && c.Config.TLSClientConfig.CAFile != "" {
		ca = read(t, c.Config.TLSClientConfig.CAFile)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[c.Name] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: ca}
	cfg.AuthInfos["service-account"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: "service-account"}
	cfg.CurrentContext = c.Name
	path := filepath.Join(dir, "kubeconfig")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// export creates a Service without selector, an EndpointSlice with one
// endpoint at addr, and a ServiceExport, as a user of the cluster would.
func export(t testing.TB, c *cluster, ns, name, addr string) {
	t.Helper()
	cl := c.Client(t)
	for _, obj := range []client.Object{
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
		},
		&discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-1", Labels: map[string]string{
				discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "charts-test.fleetnet.dev",
			}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
		},
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
	} {
		if err := cl.Create(context.Background(), obj); err != nil {
			t.Fatalf("%s: creating %T %s/%s: %v", c.Name, obj, ns, name, err)
		}
	}
}

// waitExportReady waits for the export's Valid and Ready conditions and the
// agent's finalizer: the export side's writes went through.
func waitExportReady(t testing.TB, c *cluster, ns, name string) {
	t.Helper()
	cl := c.Client(t)
	testkit.Eventually(t, 30*time.Second, fmt.Sprintf("ServiceExport %s/%s in %s to be Valid and Ready", ns, name, c.Name), func(ctx context.Context) error {
		se := &mcsv1beta1.ServiceExport{}
		if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, se); err != nil {
			return err
		}
		for _, ct := range []mcsv1beta1.ServiceExportConditionType{mcsv1beta1.ServiceExportConditionValid, mcsv1beta1.ServiceExportConditionReady} {
			if !meta.IsStatusConditionTrue(se.Status.Conditions, string(ct)) {
				return fmt.Errorf("%s: ServiceExport %s/%s is not %s: %+v", c.Name, ns, name, ct, se.Status.Conditions)
			}
		}
		if !slices.Contains(se.Finalizers, keys.FinalizerServiceExport) {
			return fmt.Errorf("%s: ServiceExport %s/%s has no finalizer %s", c.Name, ns, name, keys.FinalizerServiceExport)
		}
		return nil
	})
}

// waitImported waits until c holds the import of ns/name with a Ready
// ServiceImport, its derived Service and an EndpointSlice per exporting
// cluster with that cluster's address.
func waitImported(t testing.TB, c *cluster, ns, name string, addrs map[string]string) {
	t.Helper()
	cl := c.Client(t)
	testkit.Eventually(t, 30*time.Second, fmt.Sprintf("the import %s/%s in %s", ns, name, c.Name), func(ctx context.Context) error {
		si := &mcsv1beta1.ServiceImport{}
		if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, si); err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
		if !meta.IsStatusConditionTrue(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady)) {
			return fmt.Errorf("%s: ServiceImport %s/%s is not Ready: %+v", c.Name, ns, name, si.Status.Conditions)
		}
		services := &corev1.ServiceList{}
		if err := cl.List(ctx, services, client.InNamespace(ns), client.MatchingLabels{keys.LabelManagedBy: keys.ManagedByAgent}); err != nil {
			return err
		}
		if len(services.Items) == 0 {
			return fmt.Errorf("%s: no derived Service in %s", c.Name, ns)
		}
		imported := &discoveryv1.EndpointSliceList{}
		if err := cl.List(ctx, imported, client.InNamespace(ns), client.MatchingLabels{mcsv1beta1.LabelServiceName: name}); err != nil {
			return err
		}
		for cluster, addr := range addrs {
			found := false
			for _, s := range imported.Items {
				if s.Labels[mcsv1beta1.LabelSourceCluster] != cluster {
					continue
				}
				for _, e := range s.Endpoints {
					found = found || slices.Contains(e.Addresses, addr)
				}
			}
			if !found {
				return fmt.Errorf("%s: no imported EndpointSlice of %s/%s from cluster %s holds %s", c.Name, ns, name, cluster, addr)
			}
		}
		return nil
	})
}

// copyChart copies a chart into a temporary folder, to edit it.
func copyChart(t testing.TB, name string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dst, os.DirFS(chartDir(t, name))); err != nil {
		t.Fatal(err)
	}
	return dst
}

// removeVerb takes verb out of every rule of the ClusterRole file that
// names resource.
func removeVerb(t testing.TB, path, resource, verb string) {
	t.Helper()
	role := map[string]any{}
	if err := yaml.Unmarshal(read(t, path), &role); err != nil {
		t.Fatal(err)
	}
	removed := false
	rules, _ := role["rules"].([]any)
	for _, r := range rules {
		rule := r.(map[string]any)
		if !containsAny(rule["resources"], resource) {
			continue
		}
		verbs := rule["verbs"].([]any)
		rule["verbs"] = slices.DeleteFunc(verbs, func(v any) bool { return v == verb })
		removed = removed || len(rule["verbs"].([]any)) < len(verbs)
	}
	if !removed {
		t.Fatalf("%s grants no %s on %s", path, verb, resource)
	}
	out, err := yaml.Marshal(role)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

func containsAny(list any, s string) bool {
	l, _ := list.([]any)
	return slices.Contains(l, any(s))
}

// flowSchemaDispatched returns how many requests the API server of c
// dispatched as matched by the FlowSchema schema.
func flowSchemaDispatched(t *testing.T, c *cluster, schema string) float64 {
	t.Helper()
	families := fleet.APIServerMetrics(t, c.Name, c.Config)
	return fleet.MetricSum(families["apiserver_flowcontrol_dispatched_requests_total"], map[string]string{"flow_schema": schema})
}
