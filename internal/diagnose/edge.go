package diagnose

// The edge's part of the path: a service published to the outside world
// through the hub's HTTPRoutes (ServiceImport backends, GEP-1748) or
// MultiClusterLoadBalancers, served by fleetnet-edge. Its facts, how they
// are read and the steps that judge them.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/api/keys"
	networkingv1alpha1 "github.com/fleetnet/fleetnet/api/networking/v1alpha1"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	prommodel "github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// The edge's metrics the diagnosis reads (docs/metrics.md).
const (
	metricBackendEndpoints = "fleetnet_edge_backend_endpoints"
	metricL4Endpoints      = "fleetnet_edge_l4_endpoints"
)

// EdgeFacts is what the hub and the edges say of the routes that publish
// the target's ServiceImport.
type EdgeFacts struct {
	// Hub is the id of the cluster whose Gateways, HTTPRoutes and
	// MultiClusterLoadBalancers fleetnet-gateway serves.
	Hub string
	// Err is set when the hub could not be read; Routes, Gateways and
	// LoadBalancers are then empty.
	Err error
	// Routes are the hub's HTTPRoutes with a backendRef to the target's
	// ServiceImport, sorted by namespace and name.
	Routes []gwv1.HTTPRoute
	// Gateways are the Gateways the routes' parentRefs name, by
	// "namespace/name"; a Gateway that does not exist has no entry.
	Gateways map[string]*gwv1.Gateway
	// LoadBalancers are the hub's MultiClusterLoadBalancers of the
	// target's ServiceImport, sorted by name.
	LoadBalancers []networkingv1alpha1.MultiClusterLoadBalancer
	// Edges are the edges' metrics, one per URL given.
	Edges []EdgeMetrics
}

// EdgeMetrics is one edge's health of the target's endpoints, from its
// /metrics.
type EdgeMetrics struct {
	// URL is the metrics URL read.
	URL string
	// Err is set when it could not be read.
	Err error
	// Backend is the health of the ServiceImport backend's endpoints per
	// cluster (fleetnet_edge_backend_endpoints); nil when the edge serves
	// no such backend.
	Backend map[string]EndpointHealth
	// LoadBalancers is the health of each load balancer's endpoints
	// ("namespace/name") per port ("5432/TCP") and cluster
	// (fleetnet_edge_l4_endpoints): each port is judged on its own, as one
	// can be dark while another serves.
	LoadBalancers map[string]map[string]map[string]EndpointHealth
}

// EndpointHealth counts a cluster's endpoints by the edge's health checks.
type EndpointHealth struct {
	Healthy, Ejected int
}

// backendLabel is the edge's name of the target's ServiceImport backend
// (the backend label of its metrics).
func backendLabel(t Target) string {
	return edgev1.KindServiceImport + "/" + t.Namespace + "/" + t.Name
}

// gatherEdge reads the hub's routes, their Gateways and load balancers of
// the target, and each edge's metrics.
func gatherEdge(ctx context.Context, t Target, hub string, reader func(string) (client.Reader, error), urls []string, httpClient *http.Client) *EdgeFacts {
	e := &EdgeFacts{Hub: hub, Gateways: map[string]*gwv1.Gateway{}}
	if hub != "" {
		e.Err = readHub(ctx, t, e, reader)
	}
	for _, u := range urls {
		e.Edges = append(e.Edges, readEdgeMetrics(ctx, t, u, httpClient))
	}
	return e
}

func readHub(ctx context.Context, t Target, e *EdgeFacts, reader func(string) (client.Reader, error)) error {
	if reader == nil {
		return errors.New("no kube context given")
	}
	c, err := reader(e.Hub)
	if err != nil {
		return err
	}
	routes := &gwv1.HTTPRouteList{}
	if err := c.List(ctx, routes); err != nil {
		return fmt.Errorf("listing HTTPRoutes: %w", err)
	}
	for _, r := range routes.Items {
		if routesTo(&r, t) {
			e.Routes = append(e.Routes, r)
		}
	}
	sort.Slice(e.Routes, func(i, j int) bool {
		return e.Routes[i].Namespace+"/"+e.Routes[i].Name < e.Routes[j].Namespace+"/"+e.Routes[j].Name
	})
	for _, r := range e.Routes {
		for _, ref := range gatewayRefs(&r) {
			if _, read := e.Gateways[ref.String()]; read {
				continue
			}
			gw := &gwv1.Gateway{}
			found, err := get(ctx, c, ref, gw)
			if err != nil {
				return fmt.Errorf("reading Gateway %s: %w", ref, err)
			}
			if found {
				e.Gateways[ref.String()] = gw
			}
		}
	}
	lbs := &networkingv1alpha1.MultiClusterLoadBalancerList{}
	if err := c.List(ctx, lbs, client.InNamespace(t.Namespace)); err != nil {
		return fmt.Errorf("listing MultiClusterLoadBalancers: %w", err)
	}
	for _, lb := range lbs.Items {
		if lb.Spec.ServiceImportName == t.Name {
			e.LoadBalancers = append(e.LoadBalancers, lb)
		}
	}
	sort.Slice(e.LoadBalancers, func(i, j int) bool { return e.LoadBalancers[i].Name < e.LoadBalancers[j].Name })
	return nil
}

// routesTo says whether one of r's rules has a backendRef to t's
// ServiceImport.
func routesTo(r *gwv1.HTTPRoute, t Target) bool {
	for _, rule := range r.Spec.Rules {
		for _, b := range rule.BackendRefs {
			ns := r.Namespace
			if b.Namespace != nil {
				ns = string(*b.Namespace)
			}
			if b.Group != nil && string(*b.Group) == mcsv1beta1.GroupName && b.Kind != nil && string(*b.Kind) == "ServiceImport" &&
				ns == t.Namespace && string(b.Name) == t.Name {
				return true
			}
		}
	}
	return false
}

// gatewayRefs are the Gateways r's parentRefs name.
func gatewayRefs(r *gwv1.HTTPRoute) []types.NamespacedName {
	var out []types.NamespacedName
	for _, p := range r.Spec.ParentRefs {
		if (p.Group != nil && string(*p.Group) != gwv1.GroupName) || (p.Kind != nil && string(*p.Kind) != "Gateway") {
			continue
		}
		ns := r.Namespace
		if p.Namespace != nil {
			ns = string(*p.Namespace)
		}
		ref := types.NamespacedName{Namespace: ns, Name: string(p.Name)}
		if !slices.Contains(out, ref) {
			out = append(out, ref)
		}
	}
	return out
}

// readEdgeMetrics reads one edge's /metrics and keeps the health of the
// target's endpoints.
func readEdgeMetrics(ctx context.Context, t Target, metricsURL string, hc *http.Client) EdgeMetrics {
	m := EdgeMetrics{URL: metricsURL}
	if hc == nil {
		hc = &http.Client{Timeout: 5 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	if err != nil {
		m.Err = fmt.Errorf("edge metrics URL %q: %w", metricsURL, err)
		return m
	}
	resp, err := hc.Do(req)
	if err != nil {
		m.Err = fmt.Errorf("reading %s: %w", metricsURL, err)
		return m
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		m.Err = fmt.Errorf("reading %s: %s", metricsURL, resp.Status)
		return m
	}
	parser := expfmt.NewTextParser(prommodel.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		m.Err = fmt.Errorf("parsing %s: %w", metricsURL, err)
		return m
	}
	backend := backendLabel(t)
	for _, s := range families[metricBackendEndpoints].GetMetric() {
		l := metricLabels(s)
		if l["backend"] != backend {
			continue
		}
		if m.Backend == nil {
			m.Backend = map[string]EndpointHealth{}
		}
		m.Backend[l["cluster"]] = addHealth(m.Backend[l["cluster"]], l["health"], s)
	}
	for _, s := range families[metricL4Endpoints].GetMetric() {
		l := metricLabels(s)
		lb := l["load_balancer"]
		if ns, _, _ := strings.Cut(lb, "/"); ns != t.Namespace {
			continue
		}
		if m.LoadBalancers == nil {
			m.LoadBalancers = map[string]map[string]map[string]EndpointHealth{}
		}
		if m.LoadBalancers[lb] == nil {
			m.LoadBalancers[lb] = map[string]map[string]EndpointHealth{}
		}
		port := l["port"]
		if m.LoadBalancers[lb][port] == nil {
			m.LoadBalancers[lb][port] = map[string]EndpointHealth{}
		}
		m.LoadBalancers[lb][port][l["cluster"]] = addHealth(m.LoadBalancers[lb][port][l["cluster"]], l["health"], s)
	}
	return m
}

func addHealth(h EndpointHealth, health string, s *dto.Metric) EndpointHealth {
	// A gauge, as the edge declares it; untyped when a page omits the
	// TYPE line (a proxy's rewrite, a hand-made page).
	n := int(s.GetGauge().GetValue() + s.GetUntyped().GetValue())
	switch health {
	case "healthy":
		h.Healthy += n
	case "ejected":
		h.Ejected += n
	}
	return h
}

func metricLabels(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// edgeSteps judges the edge's part: each route's acceptance and
// references, its Gateways' programming, each load balancer's conditions,
// and each edge's health of the endpoints.
func edgeSteps(f *Facts) []Step {
	e := f.Edge
	if e == nil {
		return []Step{{Name: "edge", Status: Skip, Detail: "not asked",
			Fix: "give --hub CLUSTER (where the Gateways and HTTPRoutes are) and --edge-metrics URL of each edge to check a route through the edge"}}
	}
	var steps []Step
	switch {
	case e.Hub != "" && e.Err != nil:
		// The edges' own view is judged all the same.
		steps = append(steps, Step{Name: "hub " + e.Hub, Status: Fail, Detail: e.Err.Error(),
			Fix: fmt.Sprintf("give a kube context that reaches %s (--context %s=CONTEXT, --kubeconfig)", e.Hub, e.Hub)})
	case e.Hub != "":
		if len(e.Routes) == 0 && len(e.LoadBalancers) == 0 {
			steps = append(steps, Step{Name: "routes in " + e.Hub, Status: Skip,
				Detail: fmt.Sprintf("no HTTPRoute or MultiClusterLoadBalancer has ServiceImport %s/%s as a backend", f.Target.Namespace, f.Target.Name)})
		}
		seen := map[string]bool{}
		for i := range e.Routes {
			r := &e.Routes[i]
			steps = append(steps, httpRoute(r))
			for _, ref := range gatewayRefs(r) {
				if !seen[ref.String()] {
					seen[ref.String()] = true
					steps = append(steps, gateway(ref, e.Gateways[ref.String()]))
				}
			}
		}
		for i := range e.LoadBalancers {
			steps = append(steps, loadBalancer(&e.LoadBalancers[i]))
		}
	}
	for _, m := range e.Edges {
		steps = append(steps, edgeHealth(f, m)...)
	}
	return steps
}

// routeParents are the route's statuses from fleetnet-gateway, one per
// parent.
func routeParents(r *gwv1.HTTPRoute) []gwv1.RouteParentStatus {
	var out []gwv1.RouteParentStatus
	for _, p := range r.Status.Parents {
		if string(p.ControllerName) == keys.GatewayControllerName {
			out = append(out, p)
		}
	}
	return out
}

func httpRoute(r *gwv1.HTTPRoute) Step {
	s := Step{Name: fmt.Sprintf("HTTPRoute %s/%s", r.Namespace, r.Name)}
	parents := routeParents(r)
	if len(parents) == 0 {
		s.Status, s.Detail = Fail, "no status from fleetnet-gateway: no Gateway of a fleetnet GatewayClass has taken it"
		s.Fix = "check that its parentRefs name a Gateway whose GatewayClass is fleetnet's (controllerName " + keys.GatewayControllerName + ") and that fleetnet-gateway runs (its log)"
		return s
	}
	for _, p := range parents {
		gw := parentName(r, p.ParentRef)
		if c := meta.FindStatusCondition(p.Conditions, string(gwv1.RouteConditionAccepted)); c == nil || c.Status != metav1.ConditionTrue {
			s.Status, s.Detail = Fail, "not accepted by Gateway "+gw+": "+condOrNone(c, string(gwv1.RouteConditionAccepted))
			s.Fix = routeNotAcceptedFix(c, gw)
			return s
		}
		if c := meta.FindStatusCondition(p.Conditions, string(gwv1.RouteConditionResolvedRefs)); c == nil || c.Status != metav1.ConditionTrue {
			s.Status, s.Detail = Fail, "references not resolved: "+condOrNone(c, string(gwv1.RouteConditionResolvedRefs))
			s.Fix = unresolvedRefsFix(c, r)
			return s
		}
	}
	var gws []string
	for _, p := range parents {
		gws = append(gws, parentName(r, p.ParentRef))
	}
	s.Status, s.Detail = OK, "Accepted by "+strings.Join(gws, ", ")+", ResolvedRefs"
	return s
}

func parentName(r *gwv1.HTTPRoute, p gwv1.ParentReference) string {
	ns := r.Namespace
	if p.Namespace != nil {
		ns = string(*p.Namespace)
	}
	return ns + "/" + string(p.Name)
}

func routeNotAcceptedFix(c *metav1.Condition, gw string) string {
	if c == nil {
		return "fleetnet-gateway has not judged it yet: wait a moment; if it stays, read its log"
	}
	switch gwv1.RouteConditionReason(c.Reason) {
	case gwv1.RouteReasonNotAllowedByListeners:
		return "a listener of Gateway " + gw + " must allow routes from the route's namespace (allowedRoutes) and of kind HTTPRoute"
	case gwv1.RouteReasonNoMatchingListenerHostname:
		return "make the route's hostnames match a listener's hostname of Gateway " + gw
	case gwv1.RouteReasonNoMatchingParent:
		return "the parentRef's sectionName or port names no listener of Gateway " + gw
	}
	return "read the message; see Gateway " + gw + "'s listeners and conditions"
}

func unresolvedRefsFix(c *metav1.Condition, r *gwv1.HTTPRoute) string {
	if c == nil {
		return "fleetnet-gateway has not judged it yet: wait a moment; if it stays, read its log"
	}
	switch gwv1.RouteConditionReason(c.Reason) {
	case gwv1.RouteReasonRefNotPermitted:
		return "a backend is in another namespace than the route's (" + r.Namespace + "): create a ReferenceGrant there that allows HTTPRoutes of " + r.Namespace + " to reference ServiceImports"
	case gwv1.RouteReasonBackendNotFound:
		return "the ServiceImport does not exist in the hub: see the steps above for the import in the hub"
	case gwv1.RouteReasonInvalidKind:
		return "a backendRef names a kind fleetnet does not serve: use group " + mcsv1beta1.GroupName + ", kind ServiceImport (or a Service)"
	}
	return "read the message: it names the backendRef that does not resolve"
}

func gateway(ref types.NamespacedName, gw *gwv1.Gateway) Step {
	s := Step{Name: "Gateway " + ref.String()}
	if gw == nil {
		s.Status, s.Detail = Fail, "does not exist"
		s.Fix = "create Gateway " + ref.String() + " of the fleetnet GatewayClass, or correct the route's parentRef"
		return s
	}
	c := meta.FindStatusCondition(gw.Status.Conditions, string(gwv1.GatewayConditionProgrammed))
	if c == nil || c.Status != metav1.ConditionTrue {
		s.Status, s.Detail = Fail, "not programmed: "+condOrNone(c, string(gwv1.GatewayConditionProgrammed))
		s.Fix = "the provider has not served it: read the message, fleetnet-gateway's log and the edges' (are they connected to fleetnet-gateway?)"
		if c == nil {
			s.Fix = "fleetnet-gateway has not handled it: check that its GatewayClass is fleetnet's and that fleetnet-gateway runs"
		}
		return s
	}
	var addrs []string
	for _, a := range gw.Status.Addresses {
		addrs = append(addrs, a.Value)
	}
	s.Status, s.Detail = OK, "Programmed"
	if len(addrs) > 0 {
		s.Detail += ", addresses " + strings.Join(addrs, ",")
	}
	return s
}

func loadBalancer(lb *networkingv1alpha1.MultiClusterLoadBalancer) Step {
	s := Step{Name: fmt.Sprintf("MultiClusterLoadBalancer %s/%s", lb.Namespace, lb.Name)}
	for _, typ := range []string{"Accepted", "ResolvedRefs", "Programmed"} {
		c := meta.FindStatusCondition(lb.Status.Conditions, typ)
		if c != nil && c.Status == metav1.ConditionTrue {
			continue
		}
		s.Status, s.Detail = Fail, condOrNone(c, typ)
		switch {
		case c == nil:
			s.Fix = "fleetnet-gateway has not handled it: check that it runs and serves class " + string(lb.Spec.Class) + " (its log)"
		case typ == "ResolvedRefs":
			s.Fix = "ServiceImport " + lb.Spec.ServiceImportName + " is missing in the hub or lacks a port the load balancer maps: see the import steps above"
		case typ == "Programmed":
			s.Fix = "the provider has not served it: read the message and the provider's log (the edges', for class edge)"
		default:
			s.Fix = "read the message and correct the load balancer's spec"
		}
		return s
	}
	s.Status, s.Detail = OK, "Accepted, ResolvedRefs, Programmed"
	if len(lb.Status.Addresses) > 0 {
		s.Detail += ", addresses " + strings.Join(lb.Status.Addresses, ",")
	}
	return s
}

// edgeHealth judges one edge's endpoints of the target: for the
// ServiceImport backend when a route has it, for each load balancer of it.
func edgeHealth(f *Facts, m EdgeMetrics) []Step {
	name := "edge " + m.URL
	if u, err := url.Parse(m.URL); err == nil && u.Host != "" {
		name = "edge " + u.Host
	}
	if m.Err != nil {
		return []Step{{Name: name, Status: Fail, Detail: m.Err.Error(),
			Fix: "check that the edge runs and that --edge-metrics is its metrics URL (its --metrics-address, path /metrics)"}}
	}
	e := f.Edge
	// Without the hub's view (not asked, or unreadable) the edge's own
	// view of the backend is judged as it is.
	checkRoutes := e.Hub == "" || e.Err != nil || len(e.Routes) > 0
	var steps []Step
	if checkRoutes {
		s := healthStep(name+", backend", m.Backend)
		if m.Backend == nil {
			s.Status, s.Detail = Fail, "the edge serves no endpoint of "+backendLabel(f.Target)
			s.Fix = "the edge has no model with this backend: see the route and Gateway steps, and whether the edge is connected to fleetnet-gateway (fleetnet_edge_model_version)"
			if e.Hub == "" {
				s.Status = Warn
				s.Fix = "if a route should send traffic here, give --hub to check the route and its Gateway; else there is nothing for the edge to serve"
			}
		}
		steps = append(steps, s)
	}
	if e.Err != nil {
		// The load balancers are unknown: those the edge serves in the
		// target's namespace.
		for _, key := range slices.Sorted(maps.Keys(m.LoadBalancers)) {
			steps = append(steps, portSteps(name+", load balancer "+key, m.LoadBalancers[key])...)
		}
	}
	for _, lb := range e.LoadBalancers {
		key := lb.Namespace + "/" + lb.Name
		ports := m.LoadBalancers[key]
		switch byEdge := lb.Spec.Class == "" || lb.Spec.Class == networkingv1alpha1.LoadBalancerClassEdge; {
		case ports == nil && byEdge:
			steps = append(steps, Step{Name: name + ", load balancer " + key, Status: Fail,
				Detail: "the edge serves no endpoint of load balancer " + key,
				Fix:    "see the load balancer's step, and whether the edge is connected to fleetnet-gateway"})
		case ports != nil:
			steps = append(steps, portSteps(name+", load balancer "+key, ports)...)
		}
		// else another provider serves it
	}
	return steps
}

// portSteps judges a load balancer's ports one by one: one port whose
// endpoints are all ejected breaks it even while another serves.
func portSteps(name string, ports map[string]map[string]EndpointHealth) []Step {
	var steps []Step
	for _, port := range slices.Sorted(maps.Keys(ports)) {
		steps = append(steps, healthStep(name+" port "+port, ports[port]))
	}
	return steps
}

// healthStep judges endpoints per cluster by the edge's health checks:
// none healthy breaks the path, a cluster without a healthy one is
// failed over from.
func healthStep(name string, byCluster map[string]EndpointHealth) Step {
	s := Step{Name: name}
	var parts, dark []string
	healthy, ejected := 0, 0
	for _, c := range slices.Sorted(maps.Keys(byCluster)) {
		h := byCluster[c]
		healthy += h.Healthy
		ejected += h.Ejected
		part := fmt.Sprintf("%s %d healthy", c, h.Healthy)
		if h.Ejected > 0 {
			part += fmt.Sprintf(", %d ejected", h.Ejected)
		}
		parts = append(parts, part)
		if h.Healthy == 0 {
			dark = append(dark, c)
		}
	}
	s.Detail = strings.Join(parts, "; ")
	switch {
	case healthy == 0 && ejected == 0:
		s.Status = Fail
		if s.Detail == "" {
			s.Detail = "no endpoint"
		}
		s.Fix = "the edge has no endpoint of this backend: check the ready endpoints of the import's EndpointSlices in the hub (the steps above) and that fleetnet-gateway's model reaches the edge"
	case healthy == 0:
		s.Status = Fail
		s.Fix = "the edge's health checks eject every endpoint: check the BackendTrafficPolicy's health check (path, port, expected status) and that the endpoints answer from the edge's network"
	case len(dark) > 0:
		s.Status = Warn
		s.Fix = "no healthy endpoint in " + strings.Join(dark, ", ") + ": the edge sends their share to the other clusters; check the Pods there and the health check"
	default:
		s.Status = OK
	}
	return s
}

func condOrNone(c *metav1.Condition, typ string) string {
	if c == nil {
		return "no " + typ + " condition"
	}
	return condText(c)
}
