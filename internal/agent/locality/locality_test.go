package locality

import (
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	networkingv1alpha1 "github.com/fleetnet/fleetnet/api/networking/v1alpha1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestDecide(t *testing.T) {
	here := Topology{Cluster: "hub", Region: "eu", Zones: []string{"eu-a", "eu-b"}}
	zones := []discoveryv1.ForZone{{Name: "eu-a"}, {Name: "eu-b"}}
	away := []discoveryv1.ForZone{{Name: keys.ZoneHintElsewhere}}
	sources := func(hub, east, west int) []Source {
		return []Source{{Cluster: "hub", Region: "eu", Ready: hub}, {Cluster: "east", Region: "eu", Ready: east}, {Cluster: "west", Region: "us", Ready: west}}
	}
	cases := []struct {
		name      string
		policy    Policy
		topo      Topology
		sources   []Source
		reason    string
		preferred []string
		hints     map[string][]discoveryv1.ForZone
		message   string
	}{
		{name: "local endpoints take the traffic", policy: Policy{Name: "ns/p", MinReady: 1}, topo: here, sources: sources(2, 2, 2),
			reason: keys.ReasonLocalCluster, preferred: []string{"hub"},
			hints:   map[string][]discoveryv1.ForZone{"hub": zones, "east": away, "west": away},
			message: "zone hints written for traffic that stays in this cluster (at least 1 ready endpoints)"},
		{name: "too few local: the region", policy: Policy{Name: "ns/p", MinReady: 3}, topo: here, sources: sources(2, 2, 5),
			reason: keys.ReasonFailedOver, preferred: []string{"east", "hub"},
			hints:   map[string][]discoveryv1.ForZone{"hub": zones, "east": zones, "west": away},
			message: "zone hints written for traffic that fails over to region eu (clusters east, hub); this cluster (hub): fewer than 3 ready endpoints"},
		{name: "the failover order after the region", policy: Policy{Name: "ns/p", MinReady: 1, Order: []networkingv1alpha1.FailoverTarget{{Cluster: "west"}}},
			topo: here, sources: append(sources(0, 0, 0)[:2], Source{Cluster: "west", Region: "us", Ready: 1}, Source{Cluster: "south", Region: "ap", Ready: 9}),
			reason: keys.ReasonFailedOver, preferred: []string{"east", "hub", "west"},
			hints:   map[string][]discoveryv1.ForZone{"hub": zones, "east": zones, "west": zones, "south": away},
			message: "zone hints written for traffic that fails over to cluster west (clusters east, hub, west); this cluster (hub) and region eu: fewer than 1 ready endpoints"},
		{name: "nobody has enough: every cluster, no hints", policy: Policy{Name: "ns/p", MinReady: 10}, topo: here, sources: sources(1, 1, 1),
			reason: keys.ReasonAllClusters, message: "traffic goes to every cluster; this cluster (hub) and region eu: fewer than 10 ready endpoints"},
		{name: "the only exporter is this cluster: no hints needed", policy: Policy{Name: "ns/p", MinReady: 1}, topo: here,
			sources: []Source{{Cluster: "hub", Region: "eu", Ready: 1}}, reason: keys.ReasonLocalCluster, preferred: []string{"hub"}},
		{name: "this cluster exports nothing: the nearest exporters", policy: Policy{Name: "ns/p", MinReady: 1}, topo: here,
			sources: []Source{{Cluster: "east", Region: "eu", Ready: 1}, {Cluster: "west", Region: "us", Ready: 1}},
			reason:  keys.ReasonNearest, preferred: []string{"east"}, hints: map[string][]discoveryv1.ForZone{"east": zones, "west": away},
			message: "zone hints written for traffic that goes to region eu (clusters east): no closer cluster exports the service"},
		{name: "the order's cluster, named once", policy: Policy{Name: "ns/p", MinReady: 1, Order: []networkingv1alpha1.FailoverTarget{{Cluster: "east"}}}, topo: here,
			sources: []Source{{Cluster: "east", Region: "ap", Ready: 1}, {Cluster: "west", Region: "us", Ready: 1}},
			reason:  keys.ReasonNearest, preferred: []string{"east"}, hints: map[string][]discoveryv1.ForZone{"east": zones, "west": away},
			message: "policy ns/p: zone hints written for traffic that goes to cluster east: no closer cluster exports the service"},
		{name: "a closer exporter without ready endpoints: failed over", policy: Policy{Name: "ns/p", MinReady: 1, Order: []networkingv1alpha1.FailoverTarget{{Region: "us"}}}, topo: here,
			sources: []Source{{Cluster: "east", Region: "eu", Ready: 0}, {Cluster: "west", Region: "us", Ready: 1}, {Cluster: "south", Region: "ap", Ready: 1}},
			reason:  keys.ReasonFailedOver, preferred: []string{"east", "west"}, hints: map[string][]discoveryv1.ForZone{"east": zones, "west": zones, "south": away},
			message: "zone hints written for traffic that fails over to region us (clusters east, west); this cluster (hub) and region eu: fewer than 1 ready endpoints"},
		{name: "nodes without zones", policy: Policy{Name: "ns/p", MinReady: 1}, topo: Topology{Cluster: "hub", Unzoned: 3}, sources: sources(1, 1, 1),
			reason: keys.ReasonNoZones, message: "no node of this cluster has a topology.kubernetes.io/zone label"},
		{name: "more zones than hints may name", policy: Policy{Name: "ns/p", MinReady: 1},
			topo: Topology{Cluster: "hub", Zones: strings.Split("a b c d e f g h i", " ")}, sources: sources(1, 1, 1),
			reason: keys.ReasonTooManyZones, message: "9 zones, more than the 8"},
		{name: "some nodes without a zone are named", policy: Policy{Name: "ns/p", MinReady: 1},
			topo: Topology{Cluster: "hub", Region: "eu", Zones: []string{"eu-a", "eu-b"}, Unzoned: 2}, sources: sources(1, 0, 0),
			reason: keys.ReasonLocalCluster, preferred: []string{"hub"}, hints: map[string][]discoveryv1.ForZone{"hub": zones, "east": away, "west": away},
			message: "2 nodes without a topology.kubernetes.io/zone label use every cluster"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.policy, tc.topo, tc.sources)
			if d.Reason != tc.reason {
				t.Errorf("reason %s, want %s (%s)", d.Reason, tc.reason, d.Message)
			}
			if strings.Join(d.Preferred, ",") != strings.Join(tc.preferred, ",") {
				t.Errorf("preferred %v, want %v", d.Preferred, tc.preferred)
			}
			if len(d.Hints) != len(tc.hints) {
				t.Errorf("hints %v, want %v", d.Hints, tc.hints)
			}
			for c, want := range tc.hints {
				if !SameHints(&discoveryv1.EndpointHints{ForZones: d.Hints[c]}, want) {
					t.Errorf("hints of %s: %v, want %v", c, d.Hints[c], want)
				}
			}
			if !strings.Contains(d.Message, tc.message) {
				t.Errorf("message %q, want it to hold %q", d.Message, tc.message)
			}
			wantApplied := tc.reason != keys.ReasonNoZones && tc.reason != keys.ReasonTooManyZones
			if d.Applied != wantApplied {
				t.Errorf("applied %v, want %v", d.Applied, wantApplied)
			}
		})
	}
}

func TestSelect(t *testing.T) {
	old, young := metav1.NewTime(time.Unix(100, 0)), metav1.NewTime(time.Unix(200, 0))
	policy := func(name string, created metav1.Time, locality networkingv1alpha1.LocalityMode, targets ...gwv1.LocalPolicyTargetReference) networkingv1alpha1.BackendTrafficPolicy {
		return networkingv1alpha1.BackendTrafficPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: created},
			Spec:       networkingv1alpha1.BackendTrafficPolicySpec{TargetRefs: targets, Locality: locality},
		}
	}
	imp := func(name string) gwv1.LocalPolicyTargetReference {
		return gwv1.LocalPolicyTargetReference{Group: "multicluster.x-k8s.io", Kind: "ServiceImport", Name: gwv1.ObjectName(name)}
	}
	svc := gwv1.LocalPolicyTargetReference{Group: "", Kind: "Service", Name: "echo"}
	cases := []struct {
		name     string
		policies []networkingv1alpha1.BackendTrafficPolicy
		want     string // policy name, "" for none
	}{
		{name: "none"},
		{name: "a Service of the same name is not the import", policies: []networkingv1alpha1.BackendTrafficPolicy{policy("p", old, networkingv1alpha1.LocalityLocalFirst, svc)}},
		{name: "the oldest targeting policy", policies: []networkingv1alpha1.BackendTrafficPolicy{
			policy("b", young, networkingv1alpha1.LocalityLocalFirst, imp("echo")), policy("a", old, networkingv1alpha1.LocalityLocalFirst, imp("other"), imp("echo"))}, want: "ns/a"},
		{name: "ties go to the first name", policies: []networkingv1alpha1.BackendTrafficPolicy{
			policy("b", old, networkingv1alpha1.LocalityLocalFirst, imp("echo")), policy("a", old, networkingv1alpha1.LocalityLocalFirst, imp("echo"))}, want: "ns/a"},
		{name: "the oldest is Weighted: no locality", policies: []networkingv1alpha1.BackendTrafficPolicy{
			policy("b", young, networkingv1alpha1.LocalityLocalFirst, imp("echo")), policy("a", old, networkingv1alpha1.LocalityWeighted, imp("echo"))}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := Select(tc.policies, "echo")
			if got := map[bool]string{true: p.Name}[ok]; got != tc.want {
				t.Errorf("selected %q, want %q", got, tc.want)
			}
		})
	}
}
