package model

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/api/keys"
)

func TestCompareEntries(t *testing.T) {
	old := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	young := old.Add(time.Hour)
	mk := func(name string, created time.Time, rule int, pathType, path, method string, headers, queries int) entry {
		r := edgev1.Route{RouteNamespace: "ns", RouteName: name, Rule: rule, Path: edgev1.PathMatch{Type: pathType, Value: path}, Method: method}
		for range headers {
			r.Headers = append(r.Headers, edgev1.ValueMatch{})
		}
		for range queries {
			r.QueryParams = append(r.QueryParams, edgev1.ValueMatch{})
		}
		return entry{route: r, created: created}
	}
	tests := []struct {
		name          string
		first, second entry
	}{
		{"exact before a longer prefix", mk("a", young, 0, edgev1.PathExact, "/a", "", 0, 0), mk("a", old, 0, edgev1.PathPrefix, "/a/very/long", "", 0, 0)},
		{"longest prefix first", mk("a", young, 0, edgev1.PathPrefix, "/abc", "", 0, 0), mk("a", old, 0, edgev1.PathPrefix, "/ab", "GET", 3, 3)},
		{"method before headers", mk("a", young, 0, edgev1.PathPrefix, "/", "GET", 0, 0), mk("a", old, 0, edgev1.PathPrefix, "/", "", 5, 5)},
		{"more headers first", mk("a", young, 0, edgev1.PathPrefix, "/", "", 2, 0), mk("a", old, 0, edgev1.PathPrefix, "/", "", 1, 9)},
		{"more query params first", mk("a", young, 0, edgev1.PathPrefix, "/", "", 1, 2), mk("a", old, 0, edgev1.PathPrefix, "/", "", 1, 1)},
		{"oldest route on a tie", mk("z", old, 5, edgev1.PathPrefix, "/", "", 0, 0), mk("a", young, 0, edgev1.PathPrefix, "/", "", 0, 0)},
		{"namespace/name on a tie", mk("a", old, 5, edgev1.PathPrefix, "/", "", 0, 0), mk("b", old, 0, edgev1.PathPrefix, "/", "", 0, 0)},
		{"rule order within a route", mk("a", old, 0, edgev1.PathPrefix, "/", "", 0, 0), mk("a", old, 1, edgev1.PathPrefix, "/", "", 0, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if c := compareEntries(tt.first, tt.second); c >= 0 {
				t.Errorf("compare = %d, want < 0", c)
			}
			if c := compareEntries(tt.second, tt.first); c <= 0 {
				t.Errorf("reverse compare = %d, want > 0", c)
			}
		})
	}
}

func TestIntersectHostnames(t *testing.T) {
	h := func(s string) *gwv1.Hostname { v := gwv1.Hostname(s); return &v }
	tests := []struct {
		listener *gwv1.Hostname
		route    []gwv1.Hostname
		want     []string
	}{
		{nil, nil, []string{"*"}},
		{h("a.example.com"), nil, []string{"a.example.com"}},
		{nil, []gwv1.Hostname{"b.example.com", "a.example.com"}, []string{"a.example.com", "b.example.com"}},
		{h("*.example.com"), []gwv1.Hostname{"a.example.com", "a.b.example.com", "example.com", "a.example.org"}, []string{"a.b.example.com", "a.example.com"}},
		{h("a.example.com"), []gwv1.Hostname{"*.example.com"}, []string{"a.example.com"}},
		{h("*.example.com"), []gwv1.Hostname{"*.a.example.com"}, []string{"*.a.example.com"}},
		{h("*.a.example.com"), []gwv1.Hostname{"*.example.com"}, []string{"*.a.example.com"}},
		{h("a.example.com"), []gwv1.Hostname{"b.example.com"}, nil},
	}
	for _, tt := range tests {
		if got := intersectHostnames(tt.listener, tt.route); !slices.Equal(got, tt.want) {
			t.Errorf("intersect(%v, %v) = %v, want %v", deref(tt.listener), tt.route, got, tt.want)
		}
	}
}

// parentCondition finds a condition of route ns/name's parent number i.
func parentCondition(t *testing.T, r Result, ns, name string, i int, typ string) metav1.Condition {
	t.Helper()
	for _, s := range r.Status.HTTPRoutes {
		if s.Namespace == ns && s.Name == name {
			if i >= len(s.Parents) {
				t.Fatalf("route %s/%s has %d parents", ns, name, len(s.Parents))
			}
			for _, c := range s.Parents[i].Conditions {
				if c.Type == typ {
					return c
				}
			}
			t.Fatalf("route %s/%s parent %d has no %s", ns, name, i, typ)
		}
	}
	t.Fatalf("no status for route %s/%s", ns, name)
	return metav1.Condition{}
}

func listenerCondition(t *testing.T, r Result, ns, gw, listener, typ string) metav1.Condition {
	t.Helper()
	for _, g := range r.Status.Gateways {
		if g.Namespace != ns || g.Name != gw {
			continue
		}
		for _, l := range g.Listeners {
			if string(l.Name) != listener {
				continue
			}
			for _, c := range l.Conditions {
				if c.Type == typ {
					return c
				}
			}
		}
	}
	t.Fatalf("no %s condition for listener %s of %s/%s", typ, listener, ns, gw)
	return metav1.Condition{}
}

// TestStatusReasons names, for each reason, the case that must produce it;
// the golden files hold the whole status, this says what matters.
func TestStatusReasons(t *testing.T) {
	backends := Build(loadInput(t, "testdata/backends.yaml"))
	listeners := Build(loadInput(t, "testdata/listeners.yaml"))
	routes := []struct {
		name     string
		ns, rt   string
		parent   int
		typ      gwv1.RouteConditionType
		status   metav1.ConditionStatus
		reason   gwv1.RouteConditionReason
		generate int64
	}{
		{"missing ServiceImport and port", "team-a", "mixed", 0, gwv1.RouteConditionResolvedRefs, metav1.ConditionFalse, gwv1.RouteReasonBackendNotFound, 4},
		{"cross-namespace without grant", "team-a", "cross", 0, gwv1.RouteConditionResolvedRefs, metav1.ConditionFalse, gwv1.RouteReasonRefNotPermitted, 1},
		{"namespace not selected", "team-b", "outsider", 0, gwv1.RouteConditionAccepted, metav1.ConditionFalse, gwv1.RouteReasonNotAllowedByListeners, 1},
		{"hostname outside the listener's", "team-a", "strays", 0, gwv1.RouteConditionAccepted, metav1.ConditionFalse, gwv1.RouteReasonNoMatchingListenerHostname, 2},
		{"unknown sectionName", "team-a", "strays", 1, gwv1.RouteConditionAccepted, metav1.ConditionFalse, gwv1.RouteReasonNoMatchingParent, 2},
		{"unknown port", "team-a", "strays", 2, gwv1.RouteConditionAccepted, metav1.ConditionFalse, gwv1.RouteReasonNoMatchingParent, 2},
		{"unsupported filter in one rule", "infra", "partly", 0, gwv1.RouteConditionPartiallyInvalid, metav1.ConditionTrue, gwv1.RouteReasonUnsupportedValue, 1},
		{"every rule invalid", "infra", "broken", 0, gwv1.RouteConditionAccepted, metav1.ConditionFalse, gwv1.RouteReasonIncompatibleFilters, 1},
		{"accepted", "infra", "empty", 0, gwv1.RouteConditionAccepted, metav1.ConditionTrue, gwv1.RouteReasonAccepted, 1},
	}
	for _, tt := range routes {
		t.Run(tt.name, func(t *testing.T) {
			c := parentCondition(t, backends, tt.ns, tt.rt, tt.parent, string(tt.typ))
			if c.Status != tt.status || c.Reason != string(tt.reason) || c.ObservedGeneration != tt.generate {
				t.Errorf("got %s %s gen %d (%s), want %s %s gen %d", c.Status, c.Reason, c.ObservedGeneration, c.Message, tt.status, tt.reason, tt.generate)
			}
		})
	}
	// "strays" has five parentRefs; only three are Gateways of ours.
	for _, s := range backends.Status.HTTPRoutes {
		if s.Name == "strays" && len(s.Parents) != 3 {
			t.Errorf("strays has %d parents in status, want 3", len(s.Parents))
		}
	}

	ls := []struct {
		listener string
		typ      gwv1.ListenerConditionType
		status   metav1.ConditionStatus
		reason   gwv1.ListenerConditionReason
	}{
		{"https", gwv1.ListenerConditionResolvedRefs, metav1.ConditionTrue, gwv1.ListenerReasonResolvedRefs},
		{"https-shared", gwv1.ListenerConditionResolvedRefs, metav1.ConditionTrue, gwv1.ListenerReasonResolvedRefs},
		{"https-denied", gwv1.ListenerConditionResolvedRefs, metav1.ConditionFalse, gwv1.ListenerReasonRefNotPermitted},
		{"https-missing", gwv1.ListenerConditionResolvedRefs, metav1.ConditionFalse, gwv1.ListenerReasonInvalidCertificateRef},
		{"https-opaque", gwv1.ListenerConditionResolvedRefs, metav1.ConditionFalse, gwv1.ListenerReasonInvalidCertificateRef},
		{"https-broken", gwv1.ListenerConditionResolvedRefs, metav1.ConditionFalse, gwv1.ListenerReasonInvalidCertificateRef},
		{"https-configmap", gwv1.ListenerConditionResolvedRefs, metav1.ConditionFalse, gwv1.ListenerReasonInvalidCertificateRef},
		{"http", gwv1.ListenerConditionConflicted, metav1.ConditionTrue, gwv1.ListenerReasonHostnameConflict},
		{"mixed-https", gwv1.ListenerConditionConflicted, metav1.ConditionTrue, gwv1.ListenerReasonProtocolConflict},
		{"tcp", gwv1.ListenerConditionAccepted, metav1.ConditionFalse, gwv1.ListenerReasonUnsupportedProtocol},
		{"grpc-only", gwv1.ListenerConditionResolvedRefs, metav1.ConditionFalse, gwv1.ListenerReasonInvalidRouteKinds},
	}
	for _, tt := range ls {
		t.Run("listener "+tt.listener, func(t *testing.T) {
			c := listenerCondition(t, listeners, "infra", "edge", tt.listener, string(tt.typ))
			if c.Status != tt.status || c.Reason != string(tt.reason) || c.ObservedGeneration != 5 {
				t.Errorf("got %s %s gen %d (%s), want %s %s gen 5", c.Status, c.Reason, c.ObservedGeneration, c.Message, tt.status, tt.reason)
			}
		})
	}
	// Only the two resolved HTTPS listeners are served.
	var served []string
	for _, g := range listeners.Model.Gateways {
		for _, l := range g.Listeners {
			served = append(served, g.Name+"/"+l.Name)
		}
	}
	if want := []string{"edge/https", "edge/https-shared"}; !slices.Equal(served, want) {
		t.Errorf("served listeners %v, want %v", served, want)
	}
}

// findBackend returns the backends of the first route of routeName.
func findBackends(t *testing.T, m edgev1.Model, routeName string, rule int) []edgev1.Backend {
	t.Helper()
	for _, g := range m.Gateways {
		for _, l := range g.Listeners {
			for _, vh := range l.VirtualHosts {
				for _, r := range vh.Routes {
					if r.RouteName == routeName && r.Rule == rule {
						return r.Backends
					}
				}
			}
		}
	}
	t.Fatalf("no route %s rule %d in the model", routeName, rule)
	return nil
}

// TestWeights checks the weight rule of Backend: cluster weight × ready
// endpoints, drained clusters at 0, and 500/503 shares flagged.
func TestWeights(t *testing.T) {
	m := Build(loadInput(t, "testdata/routing.yaml")).Model
	bs := findBackends(t, m, "shop", 0)
	type cw struct {
		cluster string
		weight  int32
		eff     int64
	}
	var got []cw
	for _, c := range bs[0].Clusters {
		got = append(got, cw{c.Cluster, c.Weight, c.EffectiveWeight})
	}
	want := []cw{{"east", 3, 6}, {"north", 0, 0}, {"west", 1, 1}}
	if !slices.Equal(got, want) {
		t.Errorf("frontend clusters %v, want %v (weight × ready endpoints)", got, want)
	}
	if c := bs[0].Clusters[0]; c.PrivateLinkService != "/subscriptions/s/resourceGroups/mc-east/providers/Microsoft.Network/privateLinkServices/pls-frontend" || !c.PrivateLinkAutoApproval {
		t.Errorf("east's Private Link Service %q (auto approval %v), want its slice's annotations", c.PrivateLinkService, c.PrivateLinkAutoApproval)
	}
	if c := bs[0].Clusters[2]; c.PrivateLinkService != "" || c.PrivateLinkAutoApproval {
		t.Errorf("west's Private Link Service %q (auto approval %v), want none", c.PrivateLinkService, c.PrivateLinkAutoApproval)
	}
	if bs[0].Weight != 90 || bs[1].Weight != 10 {
		t.Errorf("backend weights %d/%d, want 90/10", bs[0].Weight, bs[1].Weight)
	}
	if c := bs[1].Clusters; len(c) != 1 || c[0].Cluster != "hub" || c[0].Region != "eu-west" || c[0].EffectiveWeight != 2 {
		t.Errorf("Service backend clusters %+v, want the hub's, effective weight 2", c)
	}

	m = Build(loadInput(t, "testdata/backends.yaml")).Model
	bs = findBackends(t, m, "mixed", 0)
	want500 := map[string]string{"81": "BackendNotFound", "ghost": "BackendNotFound", "b": "InvalidKind"}
	for _, b := range bs {
		k := b.Name
		if b.Name == "api" && b.Port == 81 {
			k = "81"
		}
		reason := ""
		if b.Invalid != nil {
			reason = b.Invalid.Reason
		}
		if reason != want500[k] {
			t.Errorf("backend %s: invalid reason %q, want %q", k, reason, want500[k])
		}
		if (b.Name == "idle") != b.NoReadyEndpoints {
			t.Errorf("backend %s: noReadyEndpoints %v", k, b.NoReadyEndpoints)
		}
		if b.Name == "api" && b.Port == 0 && len(b.Clusters[0].Endpoints) != 6 {
			t.Errorf("ServiceImport without port: %d endpoints, want every port of 3 addresses", len(b.Clusters[0].Endpoints))
		}
	}
}

// TestDirectResponses: rules that cannot forward answer 500 themselves.
func TestDirectResponses(t *testing.T) {
	m := Build(loadInput(t, "testdata/backends.yaml")).Model
	want := map[string]string{
		"zero/0":   "every backendRef has weight 0",
		"empty/0":  "rule has no backendRefs",
		"partly/0": "filter ExtensionRef is not supported",
		"partly/3": "",
		"empty/1":  "",
		"partly/2": "",
		"mixed/0":  "",
		"cross/0":  "",
		"cross/1":  "",
	}
	got := map[string]string{}
	for _, g := range m.Gateways {
		for _, l := range g.Listeners {
			for _, vh := range l.VirtualHosts {
				for _, r := range vh.Routes {
					k := r.RouteName + "/" + strconv.Itoa(r.Rule)
					got[k] = ""
					if r.DirectResponse != nil {
						if r.DirectResponse.Status != 500 {
							t.Errorf("%s: status %d", k, r.DirectResponse.Status)
						}
						got[k] = r.DirectResponse.Reason
					}
				}
			}
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("direct responses (-want +got):\n%s", d)
	}
}

// TestVersion: the version follows what is served, keys stay out of JSON.
func TestVersion(t *testing.T) {
	in := loadInput(t, "testdata/listeners.yaml")
	base := Build(in).Model
	data, _ := json.Marshal(base)
	if bytes.Contains(data, []byte("PRIVATE KEY")) {
		t.Fatal("private key in the model's JSON")
	}
	var c edgev1.ListenerCertificate
	for _, l := range base.Gateways[0].Listeners {
		c = l.Certificates[0]
	}
	if len(c.KeyPEM) == 0 || len(c.CertPEM) == 0 {
		t.Fatal("certificate material missing from the model")
	}

	again := Build(in).Model
	if again.Version != base.Version {
		t.Errorf("same input, versions %s and %s", base.Version, again.Version)
	}
	// Another endpoint behind the only route changes the version.
	in2 := loadInput(t, "testdata/routing.yaml")
	v1 := Build(in2).Model.Version
	ready := false
	in2.EndpointSlices[0].Endpoints[0].Conditions.Ready = &ready
	if v2 := Build(in2).Model.Version; v2 == v1 {
		t.Error("an endpoint turning unready left the version unchanged")
	}
}

func TestProviderAnnotations(t *testing.T) {
	got := providerAnnotations(map[string]string{keys.AnnotationAzureSKU: "Premium", "a": "b", keys.AnnotationAzureOperations: "{}"})
	if len(got) != 1 || got[keys.AnnotationAzureSKU] != "Premium" {
		t.Errorf("providerAnnotations: %v", got)
	}
	if providerAnnotations(map[string]string{"a": "b"}) != nil {
		t.Error("providerAnnotations of no provider annotation is not nil")
	}
}
