package charts

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/fleetnet/fleetnet/internal/controlplane"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/console/server"
	"github.com/fleetnet/fleetnet/internal/registry/registrytest"
	registryserver "github.com/fleetnet/fleetnet/internal/registry/server"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/internal/tokenfile"
	"github.com/fleetnet/fleetnet/test/fleet"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
)

// consoleRegistryAddress is the in-cluster registry the README's releases
// name; the proofs run fleetnet-console against the test registry instead.
const consoleRegistryAddress = "fleetnet-registry.fleetnet-system.svc:7443"

// TestConsoleChartRender renders the console chart with values each of
// which changes what fleetnet-console runs with, and checks the objects:
// plain HTTP on the Pod's loopback and no web Service by default, HTTPS on
// every address behind a Service with TLS, no Kubernetes identity without
// the hub, the user's tokens Secret or the chart's own with one random
// token the console accepts.
func TestConsoleChartRender(t *testing.T) {
	h := testkit.NewHelm(t)
	dir := chartDir(t, "fleetnet-console")
	render := func(t *testing.T, args ...string) []*unstructured.Unstructured {
		t.Helper()
		out := h.Must(t, append([]string{"template", "fleetnet-console", dir, "--namespace", systemNamespace, "--set", "registry.address=" + consoleRegistryAddress}, args...)...)
		return decodeManifest(t, out)
	}

	t.Run("defaults", func(t *testing.T) {
		objs := render(t)
		d := consoleDeployment(t, objs)
		args := d.Spec.Template.Spec.Containers[0].Args
		for _, want := range []string{"--listen=127.0.0.1:7490", "--registry=" + consoleRegistryAddress, "--registry-cert-file=/etc/fleetnet/registry/tls.crt",
			"--hub=true", "--tokens-file=/etc/fleetnet/tokens/tokens.csv", "--metrics-addr=:9090", "--health-addr=:9091"} {
			if !slices.Contains(args, want) {
				t.Errorf("the Deployment's arguments lack %s: %v", want, args)
			}
		}
		for _, arg := range args {
			if strings.HasPrefix(arg, "--tls-") || strings.HasPrefix(arg, "--client-ca-file") || strings.HasPrefix(arg, "--edge-metrics") {
				t.Errorf("the default Deployment has %s", arg)
			}
		}
		if n := ptr.Deref(d.Spec.Replicas, 1); n != 1 {
			t.Errorf("replicas %d, want 1: sessions live in one process", n)
		}
		if d.Spec.Template.Spec.AutomountServiceAccountToken != nil {
			t.Errorf("automountServiceAccountToken %v with the hub read", *d.Spec.Template.Spec.AutomountServiceAccountToken)
		}
		if s := findObject(objs, "Service", "fleetnet-console"); s != nil {
			t.Error("a web Service without TLS: the console listens on the Pod's loopback")
		}
		if findObject(objs, "Service", "fleetnet-console-metrics") == nil || findObject(objs, "ClusterRole", "fleetnet-console") == nil ||
			findObject(objs, "ClusterRoleBinding", "fleetnet-console") == nil {
			t.Error("no metrics Service, ClusterRole or ClusterRoleBinding by default")
		}
		// The chart's own tokens file: one random token the console reads.
		secret := findObject(objs, "Secret", "fleetnet-console-tokens")
		if secret == nil {
			t.Fatal("no Secret fleetnet-console-tokens")
		}
		entries := chartTokens(t, secret)
		if len(entries) != 1 || entries[0].Role != server.RoleRead {
			t.Errorf("the chart's tokens file holds %+v, want one read token", entries)
		}
		if other := chartTokens(t, findObject(render(t), "Secret", "fleetnet-console-tokens")); len(other) == 1 && len(entries) == 1 && other[0].Token == entries[0].Token {
			t.Error("two renders without a cluster made the same token: it is not random")
		}
	})

	t.Run("tls", func(t *testing.T) {
		objs := render(t, "-f", filepath.Join(dir, "examples", "tls.yaml"))
		args := consoleDeployment(t, objs).Spec.Template.Spec.Containers[0].Args
		for _, want := range []string{"--listen=:7490", "--tls-cert-file=/etc/fleetnet/tls/tls.crt", "--tls-key-file=/etc/fleetnet/tls/tls.key", "--client-ca-file=/etc/fleetnet/tls/ca.crt"} {
			if !slices.Contains(args, want) {
				t.Errorf("the Deployment's arguments lack %s: %v", want, args)
			}
		}
		s := findObject(objs, "Service", "fleetnet-console")
		if s == nil {
			t.Fatal("no web Service with service.enabled")
		}
		svc := &corev1.Service{}
		fromUnstructured(t, s, svc)
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort.String() != "https" {
			t.Errorf("the web Service's ports are %+v, want 443 to the container's https", svc.Spec.Ports)
		}
		if findObject(objs, "Certificate", "fleetnet-console") == nil || findObject(objs, "ServiceMonitor", "fleetnet-console") == nil {
			t.Error("examples/tls.yaml renders no Certificate or no ServiceMonitor")
		}
	})

	t.Run("edges and registry token", func(t *testing.T) {
		args := consoleDeployment(t, render(t, "-f", filepath.Join(dir, "examples", "edges.yaml"))).Spec.Template.Spec.Containers[0].Args
		for _, want := range []string{"--edge-metrics=http://edge-0.eu-west-1.fleet.example.com:9090/metrics", "--edge-metrics=http://edge-0.us-east-1.fleet.example.com:9090/metrics",
			"--edge-interval=1s", "--registry-token-file=/etc/fleetnet/registry/token"} {
			if !slices.Contains(args, want) {
				t.Errorf("the Deployment's arguments lack %s: %v", want, args)
			}
		}
		if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--registry-cert-file") }) {
			t.Errorf("registry.auth=token with a client certificate too: %v", args)
		}
	})

	t.Run("hub.enabled=false", func(t *testing.T) {
		objs := render(t, "--set", "hub.enabled=false")
		d := consoleDeployment(t, objs)
		if a := d.Spec.Template.Spec.AutomountServiceAccountToken; a == nil || *a {
			t.Errorf("automountServiceAccountToken %v without the hub, want false", a)
		}
		if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--hub=false") {
			t.Errorf("no --hub=false: %v", d.Spec.Template.Spec.Containers[0].Args)
		}
		if findObject(objs, "ClusterRole", "fleetnet-console") != nil {
			t.Error("a ClusterRole without the hub")
		}
	})

	t.Run("tokens.secretName", func(t *testing.T) {
		objs := render(t, "--set", "tokens.secretName=console-tokens")
		if findObject(objs, "Secret", "fleetnet-console-tokens") != nil {
			t.Error("the chart makes its tokens Secret besides the user's")
		}
		vols := consoleDeployment(t, objs).Spec.Template.Spec.Volumes
		if !slices.ContainsFunc(vols, func(v corev1.Volume) bool { return v.Secret != nil && v.Secret.SecretName == "console-tokens" }) {
			t.Errorf("no volume of the Secret console-tokens: %+v", vols)
		}
	})
}

// TestConsoleChartWrongValues renders the console chart with a wrong or
// missing value and expects the failure to name it.
func TestConsoleChartWrongValues(t *testing.T) {
	h := testkit.NewHelm(t)
	dir := chartDir(t, "fleetnet-console")
	address := "registry.address=" + consoleRegistryAddress
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{nil, "registry.address is required"},
		{[]string{"registry.address=registry.example.com"}, "at '/registry/address'"},
		{[]string{address, "registry.auth=password"}, "at '/registry/auth'"},
		{[]string{address, "registry.secretName=Console_Registry"}, "at '/registry/secretName'"},
		{[]string{address, "replicas=2"}, "additional properties 'replicas' not allowed"},
		{[]string{address, "hub.enabled=yes"}, "at '/hub/enabled'"},
		{[]string{address, "edgeMetrics={edge-0:9090}"}, "at '/edgeMetrics/0'"},
		{[]string{address, "intervals.exports=3"}, "at '/intervals/exports'"},
		{[]string{address, "sessionTTL=a day"}, "at '/sessionTTL'"},
		{[]string{address, "tokens.secret=mine"}, "additional properties 'secret' not allowed"},
		{[]string{address, "service.type=ExternalName"}, "at '/service/type'"},
		{[]string{address, "extraArgs={listen}"}, "at '/extraArgs/0'"},
		// Plain HTTP is served on the Pod's loopback only.
		{[]string{address, "service.enabled=true"}, "service.enabled needs tls.enabled"},
		{[]string{address, "extraArgs={--listen=0.0.0.0:7490}"}, "extraArgs sets --listen"},
		{[]string{address, "tls.clientCertificates=true"}, "tls.clientCertificates needs tls.enabled"},
		{[]string{address, "tokens.enabled=false"}, "no authentication: set tokens.enabled"},
		{[]string{address, "tls.enabled=true", "tls.clientCertificates=true", "tokens.enabled=false", "tokens.secretName=mine"}, "tokens.secretName=mine needs tokens.enabled"},
		{[]string{address, "tls.certManager.enabled=true"}, "tls.certManager.enabled needs tls.enabled"},
		{[]string{address, "tls.enabled=true", "tls.certManager.enabled=true"}, "tls.certManager.issuerRef.name is required"},
		{[]string{address, "serviceAccount.create=false"}, "serviceAccount.name is required"},
		// Every problem at once, each named.
		{[]string{"service.enabled=true", "tokens.enabled=false"}, "registry.address is required: host:port of fleetnet-registry as this cluster reaches it (fleetnet-console reads the registry as an administrator); service.enabled needs tls.enabled"},
	} {
		// The subtest's name leaves the usual address out.
		name := strings.Join(slices.DeleteFunc(slices.Clone(tc.set), func(s string) bool { return s == address }), ",")
		if name == "" {
			name = "defaults"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			args := []string{"template", "fleetnet-console", dir}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			out, err := h.Run(t, args...)
			if err == nil {
				t.Fatalf("rendered; want a failure naming %q", tc.want)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("the failure does not say %q:\n%s", tc.want, out)
			}
		})
	}
}

// TestConsoleChartOnAHub installs the console chart into a kwok hub with
// the Gateway API's and fleetnet's CRDs, as the README would and with each
// example, checks that the API server accepts every object strictly and
// that the Pod runs, and that an upgrade keeps the chart's token. Then it
// runs fleetnet-console with the arguments of the chart's Deployment, the
// files of its Secrets (the registry's an administrator's certificate of
// the test registry) and as the chart's ServiceAccount: it gets ready, its
// hub feed syncs with every kind and no error, the Gateway, HTTPRoute,
// MultiClusterLoadBalancer and BackendTrafficPolicy created after that are
// served at /api/entrypoints (listed and watched with the chart's role),
// and the chart's token logs a browser in.
//
// A forbidden list leaves the hub feed unsynced, which is what fails here:
// fleetnet-console does not log its informers' errors (controller-runtime's
// logger is never set), so its log would not say "forbidden". The check of
// its log stays for when it does.
func TestConsoleChartOnAHub(t *testing.T) {
	h := testkit.NewHelm(t)
	binary := buildBinary(t, "fleetnet-console")
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{
		{Name: "hub", ControllerManager: true, Kwok: true, GatewayAPI: true},
	}})
	hub := newCluster(t, f.Cluster(t, "hub"))
	installStandInCRDs(t, hub) // the tls example's Certificate and ServiceMonitor
	reg := registrytest.Start(t, registryserver.Config{})
	admin := reg.ClientOptions("console", true)

	type consoleRelease struct {
		namespace, name string
		args            []string
	}
	releases := []consoleRelease{
		{systemNamespace, "fleetnet-console", []string{"--set", "registry.address=" + consoleRegistryAddress}},
		{"console-without-hub", "fleetnet-console", []string{"--set", "registry.address=" + consoleRegistryAddress, "--set", "hub.enabled=false"}},
	}
	for _, ex := range examples(t, chart{name: "fleetnet-console"}) {
		name := strings.TrimSuffix(filepath.Base(ex), ".yaml")
		releases = append(releases, consoleRelease{"ex-console-" + name, "fleetnet-console-" + name, []string{"-f", ex}})
	}
	install := func(t *testing.T, verb string, r consoleRelease) string {
		t.Helper()
		out := h.Must(t, append([]string{verb, r.name, chartDir(t, "fleetnet-console"), "--namespace", r.namespace, "--kubeconfig", hub.KubeconfigPath}, r.args...)...)
		for _, bad := range []string{"would violate PodSecurity", "unknown field", "Warning", "<no value>"} {
			if strings.Contains(out, bad) {
				t.Errorf("helm %s printed %q:\n%s", verb, bad, out)
			}
		}
		_, notes, _ := strings.Cut(out, "NOTES:")
		t.Logf("NOTES of %s/%s:%s", r.namespace, r.name, notes)
		return notes
	}
	t.Run("install", func(t *testing.T) {
		for _, r := range releases {
			t.Run(r.namespace+"/"+r.name, func(t *testing.T) {
				t.Parallel()
				hub.restrictedNamespace(t, r.namespace)
				// The README's Secret: the registry's CA and an
				// administrator's certificate (the token example's key
				// too, so that every release's files exist).
				hub.secret(t, r.namespace, "fleetnet-console-registry", map[string][]byte{
					"ca.crt": read(t, admin.CAFile), "tls.crt": read(t, admin.CertFile), "tls.key": read(t, admin.KeyFile), "token": []byte("unused-admin-token-0123456789"),
				})
				notes := install(t, "install", r)
				if !strings.Contains(notes, "TOKEN=$(kubectl") || !strings.Contains(notes, "?token=$TOKEN") {
					t.Errorf("NOTES say neither how to read the token nor the login URL:\n%s", notes)
				}
				manifest := h.Must(t, "get", "manifest", r.name, "--namespace", r.namespace, "--kubeconfig", hub.KubeconfigPath)
				objs := hub.checkManifest(t, manifest)
				for _, p := range hub.waitForWorkloads(t, objs) {
					if findObject(objs, "Certificate", r.name) == nil { // cert-manager would make the TLS Secret
						hub.checkSecretFiles(t, p)
					}
				}
			})
		}
	})
	if t.Failed() {
		return
	}

	// An upgrade keeps the token the install made.
	before := secretTokens(t, hub, systemNamespace, "fleetnet-console-tokens")
	install(t, "upgrade", releases[0])
	if after := secretTokens(t, hub, systemNamespace, "fleetnet-console-tokens"); len(before) != 1 || len(after) != 1 || before[0].Token != after[0].Token {
		t.Fatalf("helm upgrade changed the chart's tokens: %d tokens, then %d (or another token)", len(before), len(after))
	}
	token := before[0].Token

	// fleetnet-console as the chart's Pod would run it.
	p, base := startConsole(t, binary(t), hub, reg.Addr)

	// The hub feed synced with every kind, then one object of each kind
	// created: the watches deliver them.
	waitEntryPoints(t, base, token, nil)
	createObjects(t, hub, consoleHubObjects)
	waitEntryPoints(t, base, token, map[string]string{"gateways": "demo/edge", "routes": "demo/echo", "loadBalancers": "demo/db", "policies": "demo/echo"})
	for _, line := range forbiddenLines(t, p) {
		t.Errorf("fleetnet-console logged a forbidden request with the chart's role:\n%s", line)
	}

	// No token, no answer; the chart's token in the login URL gives a
	// session cookie.
	if code := consoleGet(t, base+"/api/entrypoints", "", nil); code != http.StatusUnauthorized {
		t.Errorf("GET /api/entrypoints without a token: %d, want 401", code)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(base + "/?token=" + token)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !slices.ContainsFunc(resp.Cookies(), func(c *http.Cookie) bool { return c.Name == server.SessionCookie }) {
		t.Errorf("logging in with the chart's token: %s, cookies %v; want 303 and a session cookie", resp.Status, resp.Cookies())
	}
}

// consoleHubObjects are one object of each kind the console reads.
const consoleHubObjects = `
apiVersion: v1
kind: Namespace
metadata: {name: demo}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: demo}
spec:
  gatewayClassName: fleetnet
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: echo, namespace: demo}
spec:
  parentRefs: [{name: edge}]
  rules: [{backendRefs: [{group: multicluster.x-k8s.io, kind: ServiceImport, name: echo, port: 80}]}]
---
apiVersion: networking.fleetnet.dev/v1alpha1
kind: MultiClusterLoadBalancer
metadata: {name: db, namespace: demo}
spec:
  serviceImportName: db
  ports: [{port: 5432, protocol: TCP}]
---
apiVersion: networking.fleetnet.dev/v1alpha1
kind: BackendTrafficPolicy
metadata: {name: echo, namespace: demo}
spec:
  targetRefs: [{group: multicluster.x-k8s.io, kind: ServiceImport, name: echo}]
`

// waitEntryPoints waits until the console at base serves /api/entrypoints
// (with token as a bearer token) with the hub feed synced and no error,
// holding want: list name -> namespace/name.
func waitEntryPoints(t *testing.T, base, token string, want map[string]string) {
	t.Helper()
	type named struct{ Namespace, Name string }
	testkit.Eventually(t, 30*time.Second, "the hub's entry points", func(ctx context.Context) error {
		var v struct {
			Feeds map[string]struct {
				Synced bool
				Error  string
			}
			Gateways, Routes, LoadBalancers, Policies []named
		}
		if code := consoleGet(t, base+"/api/entrypoints", token, &v); code != http.StatusOK {
			return fmt.Errorf("GET /api/entrypoints: %d", code)
		}
		if hub := v.Feeds["hub"]; !hub.Synced || hub.Error != "" {
			return fmt.Errorf("the hub feed: synced %v, error %q (a forbidden list or watch leaves it unsynced)", hub.Synced, hub.Error)
		}
		lists := map[string][]named{"gateways": v.Gateways, "routes": v.Routes, "loadBalancers": v.LoadBalancers, "policies": v.Policies}
		for list, nn := range want {
			ns, name, _ := strings.Cut(nn, "/")
			if !slices.Contains(lists[list], named{ns, name}) {
				return fmt.Errorf("%s holds no %s: %v", list, nn, lists[list])
			}
		}
		return nil
	})
}

// startConsole runs fleetnet-console as the Pod of the release
// fleetnet-console in c's system namespace would, with its ServiceAccount
// and Secrets, reading the registry at registryAddr (the chart names the
// in-cluster registry); it returns the process and the web UI's base URL.
func startConsole(t *testing.T, binary string, c *cluster, registryAddr string) (*controlplane.Process, string) {
	t.Helper()
	kubeconfig := serviceAccountKubeconfig(t, c, systemNamespace, "fleetnet-console", filepath.Join(t.TempDir(), c.Name))
	p, listen := startDeployment(t, c, systemNamespace, "fleetnet-console", "fleetnet-console", binary, registryAddr,
		map[string]string{"/etc/fleetnet/registry": "fleetnet-console-registry", "/etc/fleetnet/tokens": "fleetnet-console-tokens"},
		"--kubeconfig="+kubeconfig)
	return p, "http://" + listen
}

// consoleGet GETs url with token as a bearer token (none when empty),
// decodes a 200's JSON body into out (when not nil) and returns the status.
func consoleGet(t *testing.T, url, token string, out any) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK && out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
	}
	return resp.StatusCode
}

// createObjects creates the objects of a YAML stream in c.
func createObjects(t *testing.T, c *cluster, manifest string) {
	t.Helper()
	ctx := context.Background()
	for _, obj := range decodeManifest(t, manifest) {
		m, err := c.mapping(obj.GroupVersionKind())
		if err != nil {
			t.Fatalf("%s: %v", obj.GetKind(), err)
		}
		api := c.dynamic.Resource(m.Resource)
		var create func() error
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			create = func() error {
				_, err := api.Namespace(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{})
				return err
			}
		} else {
			create = func() error { _, err := api.Create(ctx, obj, metav1.CreateOptions{}); return err }
		}
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating %s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
	}
}

// decodeManifest decodes a YAML stream of objects, as helm prints them.
func decodeManifest(t testing.TB, manifest string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatalf("decoding the manifest: %v\n%s", err, manifest)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

// findObject returns the object of kind and name, or nil. Names are the
// release's; "fleetnet-console" stands for the release's fullname.
func findObject(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func consoleDeployment(t *testing.T, objs []*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	o := findObject(objs, "Deployment", "fleetnet-console")
	if o == nil {
		t.Fatal("no Deployment fleetnet-console")
	}
	d := &appsv1.Deployment{}
	fromUnstructured(t, o, d)
	return d
}

// chartTokens parses the tokens.csv of a rendered Secret as the console
// reads it.
func chartTokens(t *testing.T, secret *unstructured.Unstructured) []tokenfile.Entry {
	t.Helper()
	if secret == nil {
		t.Fatal("no tokens Secret")
	}
	b64, _, _ := unstructured.NestedString(secret.Object, "data", "tokens.csv")
	csv, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := tokenfile.Parse(strings.NewReader(string(csv)), server.RoleRead)
	if err != nil {
		t.Fatalf("the chart's tokens.csv: %v", err)
	}
	return entries
}

// secretTokens parses the tokens.csv of a Secret in c.
func secretTokens(t *testing.T, c *cluster, namespace, name string) []tokenfile.Entry {
	t.Helper()
	s, err := c.clientset.CoreV1().Secrets(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	entries, err := tokenfile.Parse(strings.NewReader(string(s.Data["tokens.csv"])), server.RoleRead)
	if err != nil {
		t.Fatalf("Secret %s/%s: %v", namespace, name, err)
	}
	return entries
}
