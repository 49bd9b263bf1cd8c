// Package gateway_test runs fleetnet-gateway against a real API server and
// a real fleetnet-edge, with backends on loopback.
package gateway_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/config/rbac"
	edgeapp "github.com/fleetnet/fleetnet/internal/edge/app"
	gatewayapp "github.com/fleetnet/fleetnet/internal/gateway/app"

	"github.com/fleetnet/fleetnet/internal/gateway/provider"
	edgeprovider "github.com/fleetnet/fleetnet/internal/gateway/provider/edge"
	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/test/fleet"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

const ns = "demo"

// startHub starts the test's API server: one cluster, hub, with the
// Gateway API's CRDs.
func startHub(t testing.TB) *fleet.Cluster {
	t.Helper()
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "hub", GatewayAPI: true}}})
	return f.Cluster(t, "hub")
}

// create creates objs in order.
func create(t testing.TB, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(t.Context(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// quiet is the log of a gateway whose output the test does not read.
var quiet = slog.New(slog.DiscardHandler)

// backendAddress is where the test's backends listen. EndpointSlices may
// not hold loopback addresses (the API server refuses them), so the test
// puts this address on a bridge of its own (no port attached): local to the machine,
// like the dev fleet's pod addresses, and never routed off it.
const backendAddress = "10.255.253.1"

// localAddress adds backendAddress on a bridge of its own until the test ends.
func localAddress(t testing.TB) {
	t.Helper()
	const link = "fleetnet-gwtest"
	ip := func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatal("this test needs iproute2's ip (apt-get install iproute2) and root, to put a backend address on a bridge of its own")
	}
	_ = ip("link", "del", link) // left over from a killed run
	for _, args := range [][]string{{"link", "add", link, "type", "bridge"}, {"addr", "add", backendAddress + "/32", "dev", link}, {"link", "set", link, "up"}} {
		if err := ip(args...); err != nil {
			t.Fatalf("%v (the test needs root)", err)
		}
	}
	t.Cleanup(func() { _ = ip("link", "del", link) })
}

// backend answers with its name, on backendAddress.
func backend(t testing.TB, name string) (string, int32) {
	t.Helper()
	l, err := net.Listen("tcp", backendAddress+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, name) })}}
	srv.Start()
	t.Cleanup(srv.Close)
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	return host, int32(p)
}

// run starts fn in the background and waits for it when the test ends.
func run(t testing.TB, name string, fn func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s stopped with %v", name, err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("%s did not stop", name)
		}
	})
}

func TestGatewayProgramsTheEdge(t *testing.T) {
	hub := startHub(t)
	c := hub.Client(t)
	ctx := t.Context()

	listen := startGatewayAndEdge(t, hub)
	// An imported service with endpoints in two clusters (as the agent
	// would write them), and a route to it.
	localAddress(t)
	eastHost, eastPort := backend(t, "east")
	westHost, westPort := backend(t, "west")
	create(t, c, echoGateway(listen, importedSlice("echo-east", "east", eastHost, eastPort), importedSlice("echo-west", "west", westHost, westPort))...)
	create(t, c, echoRoute())

	testkit.Eventually(t, 30*time.Second, "the GatewayClass accepted, the Gateway programmed and the route attached", func(ctx context.Context) error {
		gc := &gwv1.GatewayClass{}
		if err := c.Get(ctx, types.NamespacedName{Name: "fleetnet"}, gc); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(gc.Status.Conditions, string(gwv1.GatewayClassConditionStatusAccepted)) {
			return fmt.Errorf("GatewayClass conditions %+v", gc.Status.Conditions)
		}
		// The edge's features, sorted as the API requires (and the API
		// server's validation of the list passed).
		var names []string
		for _, f := range gc.Status.SupportedFeatures {
			names = append(names, string(f.Name))
		}
		if len(names) != len(edgeprovider.Features) || !slices.IsSorted(names) || !slices.Contains(names, "HTTPRoute") {
			return fmt.Errorf("GatewayClass supportedFeatures %v, want the edge's %d features sorted", names, len(edgeprovider.Features))
		}
		gw := &gwv1.Gateway{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "edge"}, gw); err != nil {
			return err
		}
		prog := meta.FindStatusCondition(gw.Status.Conditions, string(gwv1.GatewayConditionProgrammed))
		if prog == nil || prog.Status != metav1.ConditionTrue || prog.ObservedGeneration != gw.Generation {
			return fmt.Errorf("Gateway Programmed = %+v", prog)
		}
		if len(gw.Status.Addresses) != 1 || gw.Status.Addresses[0].Value != "127.0.0.1" || len(gw.Status.Listeners) != 1 || gw.Status.Listeners[0].AttachedRoutes != 1 {
			return fmt.Errorf("Gateway status %+v", gw.Status)
		}
		route := &gwv1.HTTPRoute{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "echo"}, route); err != nil {
			return err
		}
		if len(route.Status.Parents) != 1 || !meta.IsStatusConditionTrue(route.Status.Parents[0].Conditions, string(gwv1.RouteConditionAccepted)) ||
			!meta.IsStatusConditionTrue(route.Status.Parents[0].Conditions, string(gwv1.RouteConditionResolvedRefs)) {
			return fmt.Errorf("HTTPRoute status %+v", route.Status)
		}
		return nil
	})

	// Both clusters answer through the edge.
	seen := map[string]int{}
	for range 100 {
		body, code, err := get(listen)
		if err != nil || code != 200 {
			t.Fatalf("GET through the edge: %d %v", code, err)
		}
		seen[body]++
	}
	if seen["east"] < 20 || seen["west"] < 20 {
		t.Errorf("answers by cluster %v, want both about half", seen)
	}
	t.Logf("100 requests through the edge: %v", seen)

	// The ServiceImport goes: ResolvedRefs=False BackendNotFound, and the
	// edge answers 500 for its share.
	if err := c.Delete(ctx, &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "ResolvedRefs=False BackendNotFound and 500 from the edge", func(ctx context.Context) error {
		route := &gwv1.HTTPRoute{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "echo"}, route); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(route.Status.Parents[0].Conditions, string(gwv1.RouteConditionResolvedRefs))
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != string(gwv1.RouteReasonBackendNotFound) {
			return fmt.Errorf("ResolvedRefs = %+v", cond)
		}
		if _, code, err := get(listen); err != nil || code != 500 {
			return fmt.Errorf("GET: %d %v, want 500", code, err)
		}
		return nil
	})

	// Only a deleted Gateway withdraws what is served: its port closes.
	if err := c.Delete(ctx, &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"}}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "the deleted Gateway's port to close", func(context.Context) error {
		if _, code, err := get(listen); err == nil {
			return fmt.Errorf("the edge still answers %d on the deleted Gateway's port", code)
		}
		return nil
	})
}

// startGateway runs fleetnet-gateway against cfg until the test ends: o
// as the caller sets it, with cluster ID hub, the edge stream on a free
// loopback port with a fresh fleet CA's serving certificate, and no
// metrics or health listener. It returns the certificates' folder (ca,
// gateway, and edge for an edge "edge-eu") and the stream's address.
func startGateway(t testing.TB, cfg *rest.Config, o gatewayapp.Options, log *slog.Logger) (certs, stream string) {
	t.Helper()
	o, dir := gatewayOptions(t, o)
	run(t, "gateway", func(ctx context.Context) error { return gatewayapp.Run(ctx, cfg, o, log) })
	return dir, o.EdgeListen
}

// gatewayOptions are o as startGateway completes them, and the
// certificates' folder.
func gatewayOptions(t testing.TB, o gatewayapp.Options) (gatewayapp.Options, string) {
	t.Helper()
	dir := t.TempDir()
	ca, _ := pki.NewCA("fleet")
	serving, _ := ca.ServingCert("gateway", []string{"127.0.0.1"})
	edge, _ := ca.EdgeCert("edge-eu")
	for name, kp := range map[string]*pki.KeyPair{"ca": ca, "gateway": serving, "edge": edge} {
		if err := kp.Write(dir, name); err != nil {
			t.Fatal(err)
		}
	}
	o.ClusterID, o.EdgeListen = "hub", testkit.FreeAddr(t)
	o.TLSCertFile, o.TLSKeyFile, o.ClientCAFile = filepath.Join(dir, "gateway.crt"), filepath.Join(dir, "gateway.key"), filepath.Join(dir, "ca.crt")
	o.MetricsAddr, o.HealthAddr = "0", "0"
	return o, dir
}

// startGatewayAndEdge runs fleetnet-gateway against hub as a ServiceAccount
// bound to nothing but its generated ClusterRole (config/rbac/gateway), with
// leader election on, so a permission missing from the markers fails here;
// and one fleetnet-edge. It returns a free port for a Gateway listener.
func startGatewayAndEdge(t testing.TB, hub *fleet.Cluster) int32 {
	t.Helper()
	listen, _ := startGatewayAndEdgeReserving(t, hub)
	return listen
}

// startGatewayAndEdgeReserving is startGatewayAndEdge, and it returns the
// edge's metrics port too, which the gateway reserves
// (--edge-reserved-ports) with the edge's health port.
func startGatewayAndEdgeReserving(t testing.TB, hub *fleet.Cluster) (listen, edgeMetrics int32) {
	t.Helper()
	role, err := rbac.GatewayClusterRole()
	if err != nil {
		t.Fatal(err)
	}
	asGateway := hub.AsServiceAccount(t, "fleetnet-system", "fleetnet-gateway", role)
	// The Role the chart gives it in its own namespace (last accepted specs).
	create(t, hub.Client(t),
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "fleetnet-system", Name: "fleetnet-gateway"}, Rules: rbac.GatewayStateRules()},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "fleetnet-system", Name: "fleetnet-gateway"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "fleetnet-gateway"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "fleetnet-system", Name: "fleetnet-gateway"}}})
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	metrics, health := testkit.FreeAddr(t), testkit.FreeAddr(t)
	_, metricsPort, _ := net.SplitHostPort(metrics)
	_, healthPort, _ := net.SplitHostPort(health)
	dir, stream := startGateway(t, asGateway, gatewayapp.Options{
		Region: "eu", Addresses: "127.0.0.1", LeaderElect: true, LeaderElectionNS: "fleetnet-system",
		StateNamespace: "fleetnet-system", EdgeReservedPorts: metricsPort + "," + healthPort,
	}, log)
	run(t, "edge", func(ctx context.Context) error {
		return edgeapp.Run(ctx, edgeapp.Options{
			Gateway: stream, CAFile: filepath.Join(dir, "ca.crt"), CertFile: filepath.Join(dir, "edge.crt"), KeyFile: filepath.Join(dir, "edge.key"),
			Region: "eu", StateDir: filepath.Join(dir, "edge-state"), ListenHost: "127.0.0.1",
			MetricsAddr: metrics, HealthAddr: health,
		}, log)
	})
	m, _ := strconv.Atoi(metricsPort)
	return int32(testkit.FreePort(t)), int32(m)
}

// echoGateway is Gateway demo/edge of class fleetnet with an HTTP listener
// on port, and ServiceImport demo/echo with slices (as the agent would
// write them).
func echoGateway(port int32, slices ...*discoveryv1.EndpointSlice) []client.Object {
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "fleetnet"}, Spec: gwv1.GatewayClassSpec{ControllerName: keys.GatewayControllerName}},
		&gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"}, Spec: gwv1.GatewaySpec{
			GatewayClassName: "fleetnet",
			Listeners:        []gwv1.Listener{{Name: "http", Port: gwv1.PortNumber(port), Protocol: gwv1.HTTPProtocolType}},
		}},
		&mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}, Spec: mcsv1beta1.ServiceImportSpec{
			Type: mcsv1beta1.ClusterSetIP, Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
		}},
	}
	for _, s := range slices {
		objs = append(objs, s)
	}
	return objs
}

// echoRoute is HTTPRoute demo/echo: every request on Gateway edge to
// ServiceImport echo.
func echoRoute() *gwv1.HTTPRoute {
	return &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}, Spec: gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "edge"}}},
		Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
			Group: ptr.To(gwv1.Group(mcsv1beta1.GroupName)), Kind: ptr.To(gwv1.Kind("ServiceImport")), Name: "echo",
		}}}}}},
	}}
}

func importedSlice(name, cluster, host string, port int32) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			mcsv1beta1.LabelServiceName: "echo", mcsv1beta1.LabelSourceCluster: cluster, discoveryv1.LabelManagedBy: keys.EndpointSliceManagedBy,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{host}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}
}

func get(port int32) (string, int, error) {
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body), resp.StatusCode, nil
}

// routeCondition waits until the route's condition for its first parent has
// the status and reason.
func routeCondition(t *testing.T, c client.Client, namespace, name, typ string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, fmt.Sprintf("route %s %s=%s %s", name, typ, status, reason), func(ctx context.Context) error {
		route := &gwv1.HTTPRoute{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, route); err != nil {
			return err
		}
		if len(route.Status.Parents) == 0 {
			return fmt.Errorf("no parent status yet")
		}
		cond := meta.FindStatusCondition(route.Status.Parents[0].Conditions, typ)
		if cond == nil || cond.Status != status || cond.Reason != reason || cond.ObservedGeneration != route.Generation {
			return fmt.Errorf("%s %s = %+v, want %s/%s at generation %d", name, typ, cond, status, reason, route.Generation)
		}
		return nil
	})
}

// Every status reason the controller writes, as the API server stores it:
// cross-namespace backends without and with a ReferenceGrant, a backend of
// an unsupported kind, a parentRef to a listener that does not exist, an
// HTTPS listener whose Secret is missing, and a port two protocols claim.
func TestStatusReasons(t *testing.T) {
	hub := startHub(t)
	c := hub.Client(t)
	ctx := t.Context()
	listen := startGatewayAndEdge(t, hub)
	importRef := func(namespace string) gwv1.HTTPBackendRef {
		ref := gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
			Group: ptr.To(gwv1.Group(mcsv1beta1.GroupName)), Kind: ptr.To(gwv1.Kind("ServiceImport")), Name: "echo",
		}}}
		if namespace != "" {
			ref.Namespace = ptr.To(gwv1.Namespace(namespace))
		}
		return ref
	}
	route := func(namespace, name string, parent gwv1.ParentReference, backends ...gwv1.HTTPBackendRef) *gwv1.HTTPRoute {
		return &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{parent}},
			Rules:           []gwv1.HTTPRouteRule{{BackendRefs: backends}},
		}}
	}
	edge := gwv1.ParentReference{Namespace: ptr.To(gwv1.Namespace(ns)), Name: "edge"}
	tlsPort := gwv1.PortNumber(testkit.FreePort(t))
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}},
		&gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "fleetnet"}, Spec: gwv1.GatewayClassSpec{ControllerName: keys.GatewayControllerName}},
		&gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"}, Spec: gwv1.GatewaySpec{
			GatewayClassName: "fleetnet",
			Listeners: []gwv1.Listener{
				{Name: "http", Port: gwv1.PortNumber(listen), Protocol: gwv1.HTTPProtocolType,
					AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr.To(gwv1.NamespacesFromAll)}}},
				{Name: "https", Port: tlsPort, Protocol: gwv1.HTTPSProtocolType, Hostname: ptr.To(gwv1.Hostname("shop.example.com")),
					TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "missing"}}}},
				{Name: "clash", Port: gwv1.PortNumber(listen), Protocol: gwv1.HTTPSProtocolType, Hostname: ptr.To(gwv1.Hostname("other.example.com")),
					TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "missing"}}}},
			},
		}},
		&mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}, Spec: mcsv1beta1.ServiceImportSpec{
			Type: mcsv1beta1.ClusterSetIP, Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
		}},
		route("apps", "cross", edge, importRef(ns)),
		route(ns, "kind", edge, gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
			Kind: ptr.To(gwv1.Kind("ConfigMap")), Name: "echo",
		}}}),
		route(ns, "section", gwv1.ParentReference{Name: "edge", SectionName: ptr.To(gwv1.SectionName("nope"))}, importRef("")),
		route(ns, "port", edge, gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
			Group: ptr.To(gwv1.Group(mcsv1beta1.GroupName)), Kind: ptr.To(gwv1.Kind("ServiceImport")), Name: "echo", Port: ptr.To(gwv1.PortNumber(81)),
		}}}),
	}
	create(t, c, objs...)
	routeCondition(t, c, "apps", "cross", string(gwv1.RouteConditionResolvedRefs), metav1.ConditionFalse, string(gwv1.RouteReasonRefNotPermitted))
	routeCondition(t, c, ns, "kind", string(gwv1.RouteConditionResolvedRefs), metav1.ConditionFalse, string(gwv1.RouteReasonInvalidKind))
	routeCondition(t, c, ns, "section", string(gwv1.RouteConditionAccepted), metav1.ConditionFalse, string(gwv1.RouteReasonNoMatchingParent))
	routeCondition(t, c, ns, "port", string(gwv1.RouteConditionResolvedRefs), metav1.ConditionFalse, string(gwv1.RouteReasonBackendNotFound))

	// A ReferenceGrant in the backend's namespace lets the route in.
	grant := &gwv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "apps-to-imports"}, Spec: gwv1.ReferenceGrantSpec{
		From: []gwv1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: "apps"}},
		To:   []gwv1.ReferenceGrantTo{{Group: mcsv1beta1.GroupName, Kind: "ServiceImport"}},
	}}
	if err := c.Create(ctx, grant); err != nil {
		t.Fatal(err)
	}
	routeCondition(t, c, "apps", "cross", string(gwv1.RouteConditionResolvedRefs), metav1.ConditionTrue, string(gwv1.RouteReasonResolvedRefs))

	// Listeners: the HTTPS one's Secret is missing; two protocols claim
	// the first port. The rest of the Gateway is still served.
	testkit.Eventually(t, 30*time.Second, "the listeners' conditions", func(ctx context.Context) error {
		gw := &gwv1.Gateway{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "edge"}, gw); err != nil {
			return err
		}
		want := map[string]struct{ typ, reason string }{
			"https": {string(gwv1.ListenerConditionResolvedRefs), string(gwv1.ListenerReasonInvalidCertificateRef)},
			"clash": {string(gwv1.ListenerConditionConflicted), string(gwv1.ListenerReasonProtocolConflict)},
			"http":  {string(gwv1.ListenerConditionConflicted), string(gwv1.ListenerReasonProtocolConflict)},
		}
		for _, ls := range gw.Status.Listeners {
			w, ok := want[string(ls.Name)]
			if !ok {
				continue
			}
			cond := meta.FindStatusCondition(ls.Conditions, w.typ)
			if cond == nil || cond.Reason != w.reason {
				return fmt.Errorf("listener %s %s = %+v, want reason %s", ls.Name, w.typ, cond, w.reason)
			}
			delete(want, string(ls.Name))
		}
		if len(want) > 0 {
			return fmt.Errorf("no status for listeners %v: %+v", want, gw.Status.Listeners)
		}
		return nil
	})
}

// failingProvider refuses every model, as a cloud API out of quota would.
type failingProvider struct{}

func (failingProvider) Deploy(context.Context, *edgev1.Model) error {
	return fmt.Errorf("quota exceeded for front door profiles")
}

func (failingProvider) Progress() provider.Progress {
	return provider.Progress{Message: "nothing deployed"}
}

// A provider that fails leaves the Gateway Programmed=False with the cause
// (reason DeployFailed), and one Warning event tells it; nothing is
// withdrawn.
func TestProviderFailureIsReported(t *testing.T) {
	hub := startHub(t)
	c := hub.Client(t)
	startGateway(t, hub.Config, gatewayapp.Options{Provider: failingProvider{}}, quiet)
	create(t, c,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "fleetnet"}, Spec: gwv1.GatewayClassSpec{ControllerName: keys.GatewayControllerName}},
		&gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"}, Spec: gwv1.GatewaySpec{
			GatewayClassName: "fleetnet",
			Listeners:        []gwv1.Listener{{Name: "http", Port: 8080, Protocol: gwv1.HTTPProtocolType}},
		}},
	)
	testkit.Eventually(t, 30*time.Second, "Programmed=False with the cause and a DeployFailed event", func(ctx context.Context) error {
		gw := &gwv1.Gateway{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "edge"}, gw); err != nil {
			return err
		}
		prog := meta.FindStatusCondition(gw.Status.Conditions, string(gwv1.GatewayConditionProgrammed))
		if prog == nil || prog.Status != metav1.ConditionFalse || prog.Reason != keys.ReasonDeployFailed ||
			!strings.Contains(prog.Message, "deploying failed, the previous configuration stays: quota exceeded for front door profiles") {
			return fmt.Errorf("Programmed = %+v", prog)
		}
		if !meta.IsStatusConditionTrue(gw.Status.Conditions, string(gwv1.GatewayConditionAccepted)) {
			return fmt.Errorf("not Accepted: %+v", gw.Status.Conditions)
		}
		evs := &eventsv1.EventList{}
		if err := c.List(ctx, evs, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == "edge" && e.Type == corev1.EventTypeWarning && e.Reason == keys.ReasonDeployFailed {
				return nil
			}
		}
		return fmt.Errorf("no DeployFailed event among %d", len(evs.Items))
	})
}
