package gateway_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	networkingv1alpha1 "github.com/fleetnet/fleetnet/api/networking/v1alpha1"
	gatewayapp "github.com/fleetnet/fleetnet/internal/gateway/app"
	"github.com/fleetnet/fleetnet/internal/testkit"
	networkingac "github.com/fleetnet/fleetnet/pkg/generated/applyconfiguration/networking/v1alpha1"
	"github.com/fleetnet/fleetnet/pkg/generated/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// redirectRoute is an HTTPRoute on Gateway namespace/gateway that answers
// every request with a redirect to https://to/.
func redirectRoute(namespace, gateway, to string) *gwv1.HTTPRoute {
	return &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "redirect"}, Spec: gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: gwv1.ObjectName(gateway), SectionName: ptr.To(gwv1.SectionName("shop"))}}},
		Rules: []gwv1.HTTPRouteRule{{Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestRedirect,
			RequestRedirect: &gwv1.HTTPRequestRedirectFilter{Scheme: ptr.To("https"), Hostname: ptr.To(gwv1.PreciseHostname(to)), StatusCode: ptr.To(302)}}}}},
	}}
}

// redirectsTo is where the edge's listener on port sends a request for
// host.
func redirectsTo(port int32, host string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", port), nil)
	if err != nil {
		return "", err
	}
	req.Host = host
	c := &http.Client{Timeout: 3 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	return resp.Header.Get("Location"), nil
}

// listenerCondition waits until a listener of Gateway namespace/name has
// the condition with status, reason and a message holding msg.
func listenerCondition(t *testing.T, c client.Client, namespace, name, listener, typ string, status metav1.ConditionStatus, reason, msg string) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, fmt.Sprintf("%s/%s listener %s %s=%s %s", namespace, name, listener, typ, status, reason), func(ctx context.Context) error {
		gw := &gwv1.Gateway{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, gw); err != nil {
			return err
		}
		for _, l := range gw.Status.Listeners {
			if string(l.Name) != listener {
				continue
			}
			cd := meta.FindStatusCondition(l.Conditions, typ)
			if cd == nil || cd.Status != status || cd.Reason != reason || !strings.Contains(cd.Message, msg) || cd.ObservedGeneration != gw.Generation {
				return fmt.Errorf("%s = %+v", typ, cd)
			}
			return nil
		}
		return fmt.Errorf("no listener %s in %+v", listener, gw.Status.Listeners)
	})
}

// warningReasons are the reasons of the Warning events about an object.
func warningReasons(ctx context.Context, c client.Client, namespace, name string) ([]string, error) {
	evs := &eventsv1.EventList{}
	if err := c.List(ctx, evs, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	var out []string
	for _, e := range evs.Items {
		if e.Regarding.Name == name && e.Type == corev1.EventTypeWarning {
			out = append(out, e.Reason)
		}
	}
	return out, nil
}

// Issue 44, item 5, on a real edge sharing its sockets between Gateways:
// a Gateway created later with the same hostname on the same port does
// not take it (its listener says who holds it, with an event); a listener
// the edge cannot bind (a port another process holds) is not served and
// says why, and one on the edge's own metrics port is refused before any
// edge sees it; neither stops a later change of the other Gateway from
// being served.
func TestOneGatewayCannotTakeOverOrFreezeAnother(t *testing.T) {
	hub := startHub(t)
	c := hub.Client(t)
	ctx := t.Context()
	port, edgeMetrics := startGatewayAndEdgeReserving(t, hub)
	busy, err := net.Listen("tcp", "127.0.0.1:0") // another process's port on the edge
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = busy.Close() })
	busyPort := busy.Addr().(*net.TCPAddr).Port

	shop := gwv1.Hostname("shop.example")
	listener := func(name string, port int) gwv1.Listener {
		return gwv1.Listener{Name: gwv1.SectionName(name), Port: gwv1.PortNumber(port), Protocol: gwv1.HTTPProtocolType, Hostname: &shop,
			AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr.To(gwv1.NamespacesFromSame)}}}
	}
	web := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: gwv1.GatewaySpec{
		GatewayClassName: "fleetnet",
		Listeners:        []gwv1.Listener{listener("shop", int(port)), listener("busy", busyPort), listener("metrics", int(edgeMetrics))},
	}}
	create(t, c,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "aaa"}},
		&gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "fleetnet"}, Spec: gwv1.GatewayClassSpec{ControllerName: keys.GatewayControllerName}},
		web, redirectRoute(ns, "web", "web.example"),
	)
	listenerCondition(t, c, ns, "web", "shop", string(gwv1.ListenerConditionProgrammed), metav1.ConditionTrue, string(gwv1.ListenerReasonProgrammed), "")
	listenerCondition(t, c, ns, "web", "busy", string(gwv1.ListenerConditionProgrammed), metav1.ConditionFalse, string(gwv1.ListenerReasonPortUnavailable),
		fmt.Sprintf("port %d cannot be bound: edge-eu:", busyPort))
	listenerCondition(t, c, ns, "web", "busy", string(gwv1.ListenerConditionProgrammed), metav1.ConditionFalse, string(gwv1.ListenerReasonPortUnavailable),
		"address already in use")
	listenerCondition(t, c, ns, "web", "metrics", string(gwv1.ListenerConditionAccepted), metav1.ConditionFalse, string(gwv1.ListenerReasonPortUnavailable),
		fmt.Sprintf("port %d is reserved on the edges", edgeMetrics))
	testkit.Eventually(t, 30*time.Second, "demo/web's redirect served", func(context.Context) error {
		if to, err := redirectsTo(port, "shop.example"); err != nil || to != "https://web.example/" {
			return fmt.Errorf("Location %q, %v", to, err)
		}
		return nil
	})

	// Creation times have whole seconds: the takeover is created in a
	// later one.
	if err := c.Get(ctx, client.ObjectKeyFromObject(web), web); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(web.CreationTimestamp.Add(1100 * time.Millisecond)))
	create(t, c,
		&gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "aaa", Name: "takeover"}, Spec: gwv1.GatewaySpec{
			GatewayClassName: "fleetnet", Listeners: []gwv1.Listener{listener("shop", int(port))},
		}},
		redirectRoute("aaa", "takeover", "aaa.example"),
	)
	listenerCondition(t, c, "aaa", "takeover", "shop", string(gwv1.ListenerConditionConflicted), metav1.ConditionTrue, string(gwv1.ListenerReasonHostnameConflict),
		"is served by Gateway demo/web, which was created first")
	listenerCondition(t, c, "aaa", "takeover", "shop", string(gwv1.ListenerConditionProgrammed), metav1.ConditionFalse, string(gwv1.ListenerReasonInvalid),
		"demo/web")
	testkit.Eventually(t, 30*time.Second, "a HostnameConflict Warning on aaa/takeover", func(ctx context.Context) error {
		got, err := warningReasons(ctx, c, "aaa", "takeover")
		if err != nil || !slices.Contains(got, string(gwv1.ListenerReasonHostnameConflict)) {
			return fmt.Errorf("Warning events: %v (%v)", got, err)
		}
		return nil
	})
	testkit.Eventually(t, 30*time.Second, "a PortUnavailable Warning on demo/web", func(ctx context.Context) error {
		got, err := warningReasons(ctx, c, ns, "web")
		if err != nil || !slices.Contains(got, string(gwv1.ListenerReasonPortUnavailable)) {
			return fmt.Errorf("Warning events: %v (%v)", got, err)
		}
		return nil
	})

	// demo/web's next change is served: nothing froze the edge.
	route := &gwv1.HTTPRoute{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "redirect"}, route); err != nil {
		t.Fatal(err)
	}
	route.Spec.Rules[0].Filters[0].RequestRedirect.Hostname = ptr.To(gwv1.PreciseHostname("web2.example"))
	if err := c.Update(ctx, route); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "demo/web's changed redirect served, not aaa/takeover's", func(context.Context) error {
		if to, err := redirectsTo(port, "shop.example"); err != nil || to != "https://web2.example/" {
			return fmt.Errorf("Location %q, %v", to, err)
		}
		return nil
	})
	// The edge serves a version before the gateway writes the status its
	// acknowledgement brings: polled.
	testkit.Eventually(t, 30*time.Second, "demo/web Programmed", func(ctx context.Context) error {
		gw := &gwv1.Gateway{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(web), gw); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(gw.Status.Conditions, string(gwv1.GatewayConditionProgrammed)) {
			return fmt.Errorf("Programmed %+v", meta.FindStatusCondition(gw.Status.Conditions, string(gwv1.GatewayConditionProgrammed)))
		}
		return nil
	})
}

// A Gateway and a MultiClusterLoadBalancer whose edits are refused keep
// serving their last accepted generations after fleetnet-gateway
// restarts, as they do while it runs: the new process rebuilds them from
// the specs it kept in its namespace (not held, which an edge would
// withdraw).
func TestRefusedObjectsKeepServingAcrossRestarts(t *testing.T) {
	hub := startHub(t)
	c := hub.Client(t)
	ctx := t.Context()
	cs, err := versioned.NewForConfig(hub.Config)
	if err != nil {
		t.Fatal(err)
	}
	create(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleetnet-system"}})
	create(t, c, dbObjects()...)
	create(t, c,
		&gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "fleetnet"}, Spec: gwv1.GatewayClassSpec{ControllerName: keys.GatewayControllerName}},
		&gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: gwv1.GatewaySpec{
			GatewayClassName: "fleetnet",
			Listeners:        []gwv1.Listener{{Name: "http", Port: 8080, Protocol: gwv1.HTTPProtocolType}},
		}},
	)
	applyLB := func(name string, port int32) {
		t.Helper()
		lb := networkingac.MultiClusterLoadBalancer(name, ns).WithSpec(networkingac.MultiClusterLoadBalancerSpec().WithServiceImportName("db").
			WithPorts(networkingac.LoadBalancerPort().WithPort(port).WithProtocol(networkingv1alpha1.ProtocolTCP).WithTargetPort(5432)))
		if _, err := cs.NetworkingV1alpha1().MultiClusterLoadBalancers(ns).Apply(ctx, lb, metav1.ApplyOptions{FieldManager: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	applyLB("other", 6000)
	time.Sleep(1100 * time.Millisecond) // creation times have whole seconds: other is older
	applyLB("db", 5432)

	// runGateway runs a gateway process with its own provider until stop.
	runGateway := func(prov *servingProvider) (stop func()) {
		o, _ := gatewayOptions(t, gatewayapp.Options{Provider: prov, StateNamespace: "fleetnet-system"})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- gatewayapp.Run(ctx, hub.Config, o, quiet) }()
		stopped := false
		stop = func() {
			if stopped {
				return
			}
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("gateway stopped with %v", err)
			}
		}
		t.Cleanup(stop)
		return stop
	}
	gatewayProgrammed := func(status metav1.ConditionStatus, msg string) {
		t.Helper()
		testkit.Eventually(t, 30*time.Second, "demo/web Programmed="+string(status), func(ctx context.Context) error {
			gw := &gwv1.Gateway{}
			if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, gw); err != nil {
				return err
			}
			p := meta.FindStatusCondition(gw.Status.Conditions, string(gwv1.GatewayConditionProgrammed))
			if p == nil || p.Status != status || p.ObservedGeneration != gw.Generation || !strings.Contains(p.Message, msg) {
				return fmt.Errorf("Programmed = %+v", p)
			}
			return nil
		})
	}
	// served checks what a provider serves: demo/web at generation 1 on
	// port 8080, demo/db on port 5432, refused or not.
	served := func(prov *servingProvider, refused bool) {
		t.Helper()
		testkit.Eventually(t, 30*time.Second, "the provider serves the last accepted generations", func(context.Context) error {
			prov.mu.Lock()
			defer prov.mu.Unlock()
			if prov.last == nil {
				return fmt.Errorf("nothing deployed")
			}
			var msgs []string
			for _, g := range prov.last.Gateways {
				if g.Namespace == ns && g.Name == "web" && (g.Hold || g.Generation != 1 || len(g.Listeners) != 1 || g.Listeners[0].Port != 8080 || (g.Refused != "") != refused) {
					msgs = append(msgs, fmt.Sprintf("Gateway %+v", g))
				}
			}
			for _, lb := range prov.last.LoadBalancers {
				if lb.Name == "db" && (lb.Hold || len(lb.Ports) != 1 || lb.Ports[0].Port != 5432 || (lb.Refused != "") != refused) {
					msgs = append(msgs, fmt.Sprintf("load balancer %+v", lb))
				}
			}
			if len(prov.last.Gateways) != 1 || len(prov.last.LoadBalancers) != 2 {
				msgs = append(msgs, fmt.Sprintf("%d Gateways and %d load balancers", len(prov.last.Gateways), len(prov.last.LoadBalancers)))
			}
			if len(msgs) > 0 {
				return fmt.Errorf("%s", strings.Join(msgs, "; "))
			}
			return nil
		})
	}

	first := &servingProvider{}
	stop := runGateway(first)
	gatewayProgrammed(metav1.ConditionTrue, "")
	lbCondition(t, cs, "db", networkingv1alpha1.LoadBalancerConditionProgrammed, metav1.ConditionTrue, networkingv1alpha1.LoadBalancerReasonProgrammed, nil)
	served(first, false)

	// Edits the controller refuses: spec.addresses, and a port an older
	// load balancer holds.
	gw := &gwv1.Gateway{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, gw); err != nil {
		t.Fatal(err)
	}
	gw.Spec.Addresses = []gwv1.GatewaySpecAddress{{Value: "192.0.2.99"}}
	gw.Spec.Listeners[0].Port = 8081
	if err := c.Update(ctx, gw); err != nil {
		t.Fatal(err)
	}
	applyLB("db", 6000)
	gatewayProgrammed(metav1.ConditionFalse, "the last accepted configuration (generation 1) still serves")
	lbCondition(t, cs, "db", networkingv1alpha1.LoadBalancerConditionAccepted, metav1.ConditionFalse, networkingv1alpha1.LoadBalancerReasonPortConflict, nil)
	served(first, true)

	// A new process, as after a restart or a change of leader.
	stop()
	second := &servingProvider{}
	runGateway(second)
	served(second, true)
	gatewayProgrammed(metav1.ConditionFalse, "the last accepted configuration (generation 1) still serves")

	// Deleted: withdrawn, and its kept spec forgotten.
	if err := c.Delete(ctx, gw); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "the deleted Gateway's kept spec forgotten", func(ctx context.Context) error {
		var secrets corev1.SecretList
		if err := c.List(ctx, &secrets, client.InNamespace("fleetnet-system"), client.MatchingLabels{keys.LabelLastAccepted: "true"}); err != nil {
			return err
		}
		var objects []string
		for _, s := range secrets.Items {
			objects = append(objects, s.Annotations[keys.AnnotationLastAcceptedObject])
		}
		slices.Sort(objects)
		if want := []string{"MultiClusterLoadBalancer/demo/db", "MultiClusterLoadBalancer/demo/other"}; !slices.Equal(objects, want) {
			return fmt.Errorf("kept %v, want %v", objects, want)
		}
		return nil
	})
}
