// Package locality decides where the clients of one importing cluster send
// a ServiceImport's ClusterSetIP traffic under a BackendTrafficPolicy with
// locality LocalFirst, and says it in the only words every data plane
// already reads: EndpointSlice zone hints.
//
// kube-proxy (and the CNIs that replace it) keeps a node's traffic on the
// endpoints hinted for the node's topology.kubernetes.io/zone when every
// ready endpoint of the Service carries a zone hint and one names that zone
// (PreferSameZone); otherwise it uses every endpoint. So the endpoints of
// the clusters chosen to take the traffic are hinted for every zone of this
// cluster's nodes, the others for a zone no node has (ZoneElsewhere), and
// when no group of clusters has enough ready endpoints there are no hints
// at all: every cluster is used, as without a policy.
//
// The choice is level-based: it is made again from the ready counts of the
// import's endpoints whenever they change, so traffic fails over when the
// local cluster loses its endpoints and comes back when they return.
package locality

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/fleetnet/fleetnet/api/keys"
	networkingv1alpha1 "github.com/fleetnet/fleetnet/api/networking/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// MaxZones is the most zone hints an endpoint may carry (the API server's
// validation of EndpointSlices).
const MaxZones = 8

// Policy is what a LocalFirst BackendTrafficPolicy asks of an import.
type Policy struct {
	// Name is the policy's namespace/name, for messages.
	Name string
	// MinReady is how many ready endpoints a group of clusters needs to
	// take the traffic (at least 1).
	MinReady int
	// Order are the failover steps after this cluster and its region.
	Order []networkingv1alpha1.FailoverTarget
}

// FromSpec returns the policy of a BackendTrafficPolicy, or false when its
// locality is not LocalFirst (Weighted concerns only the edge).
func FromSpec(namespace, name string, spec networkingv1alpha1.BackendTrafficPolicySpec) (Policy, bool) {
	if spec.Locality != networkingv1alpha1.LocalityLocalFirst {
		return Policy{}, false
	}
	p := Policy{Name: namespace + "/" + name, MinReady: 1}
	if f := spec.Failover; f != nil {
		p.MinReady = max(int(f.MinReadyEndpoints), 1)
		p.Order = f.Order
	}
	return p, true
}

// Topology is the importing cluster: its id, region and the zones of its
// nodes.
type Topology struct {
	Cluster string
	Region  string
	// Zones are the distinct topology.kubernetes.io/zone labels of the
	// cluster's nodes, sorted.
	Zones []string
	// Unzoned counts the nodes without a zone label: kube-proxy there
	// ignores zone hints and uses every cluster.
	Unzoned int
}

// Source is one exporting cluster of the import.
type Source struct {
	Cluster string
	Region  string
	// Ready counts its ready endpoints (of one address family).
	Ready int
}

// Decision is where the traffic goes.
type Decision struct {
	// Hints holds, per source cluster, the zone hints of its endpoints;
	// nil: no hints on any slice (every cluster is used).
	Hints map[string][]discoveryv1.ForZone
	// Preferred are the clusters that take the traffic, sorted; nil when
	// every cluster does.
	Preferred []string
	// Applied: the hints express the policy (the condition's status).
	Applied bool
	// Reason and Message explain the decision (the ServiceImport's
	// Locality condition).
	Reason, Message string
}

// step is one group of clusters in the order traffic falls over to: a
// cluster or a region, as the steps of a failover order are.
type step struct {
	name   string
	target networkingv1alpha1.FailoverTarget
}

// Decide chooses the clusters that take the traffic: the first of this
// cluster, this cluster's region, then each failover step, whose clusters
// together (with those of the steps before) have MinReady ready
// endpoints.
func Decide(p Policy, t Topology, sources []Source) Decision {
	switch {
	case len(t.Zones) == 0:
		return Decision{Reason: keys.ReasonNoZones, Message: fmt.Sprintf("policy %s: no node of this cluster has a %s label, which kube-proxy needs to prefer endpoints; traffic goes to every cluster", p.Name, zoneLabel)}
	case len(t.Zones) > MaxZones:
		return Decision{Reason: keys.ReasonTooManyZones, Message: fmt.Sprintf("policy %s: this cluster's nodes are in %d zones, more than the %d zone hints an endpoint may carry; traffic goes to every cluster", p.Name, len(t.Zones), MaxZones)}
	}
	steps := []step{{name: "this cluster (" + t.Cluster + ")", target: networkingv1alpha1.FailoverTarget{Cluster: t.Cluster}}}
	if t.Region != "" {
		steps = append(steps, step{name: "region " + t.Region, target: networkingv1alpha1.FailoverTarget{Region: t.Region}})
	}
	for _, o := range p.Order {
		name := "region " + o.Region
		if o.Cluster != "" {
			name = "cluster " + o.Cluster
		}
		steps = append(steps, step{name: name, target: o})
	}
	chosen := map[string]bool{}
	ready := 0
	exportsCloser := false // a step before the chosen one holds an exporting cluster
	for i, st := range steps {
		matched := false
		for _, s := range sources {
			if !chosen[s.Cluster] && st.target.Matches(s.Cluster, s.Region) {
				chosen[s.Cluster] = true
				ready += s.Ready
				matched = true
			}
		}
		if ready < p.MinReady {
			exportsCloser = exportsCloser || matched
			continue
		}
		d := Decision{Applied: true, Hints: map[string][]discoveryv1.ForZone{}}
		here := make([]discoveryv1.ForZone, len(t.Zones))
		for j, z := range t.Zones {
			here[j] = discoveryv1.ForZone{Name: z}
		}
		for _, s := range sources {
			if chosen[s.Cluster] {
				d.Hints[s.Cluster] = here
				d.Preferred = append(d.Preferred, s.Cluster)
			} else {
				d.Hints[s.Cluster] = []discoveryv1.ForZone{{Name: keys.ZoneHintElsewhere}}
			}
		}
		sort.Strings(d.Preferred)
		// Messages name clusters, not counts: a count would rewrite the
		// status on every endpoint's readiness change.
		to := st.name
		if clusters := strings.Join(d.Preferred, ", "); to != "cluster "+clusters {
			to += " (clusters " + clusters + ")"
		}
		// what completes "traffic ...".
		var what string
		switch {
		case i == 0:
			d.Reason = keys.ReasonLocalCluster
			what = fmt.Sprintf("stays in this cluster (at least %d ready endpoints)", p.MinReady)
		case exportsCloser:
			d.Reason = keys.ReasonFailedOver
			what = fmt.Sprintf("fails over to %s; %s", to, shortOf(steps[:i], p.MinReady))
		default:
			d.Reason = keys.ReasonNearest
			what = fmt.Sprintf("goes to %s: no closer cluster exports the service", to)
		}
		d.Message = fmt.Sprintf("policy %s: traffic %s", p.Name, what)
		if len(d.Preferred) == len(sources) {
			d.Hints = nil // every cluster takes traffic: hints would change nothing
		} else {
			// The agent writes hints; whether the data plane follows them
			// (kube-proxy, once it has synced them, on nodes with a zone
			// label) is not something it can see, so it says what it did.
			d.Message = fmt.Sprintf("policy %s: zone hints written for traffic that %s", p.Name, what)
		}
		if t.Unzoned > 0 {
			d.Message += fmt.Sprintf("; %d nodes without a %s label use every cluster", t.Unzoned, zoneLabel)
		}
		return d
	}
	return Decision{Reason: keys.ReasonAllClusters, Applied: true,
		Message: fmt.Sprintf("policy %s: traffic goes to every cluster; %s", p.Name, shortOf(steps, p.MinReady))}
}

// shortOf says that the given steps, together, had too few ready
// endpoints.
func shortOf(steps []step, minReady int) string {
	names := make([]string, len(steps))
	for i, st := range steps {
		names[i] = st.name
	}
	return fmt.Sprintf("%s: fewer than %d ready endpoints", strings.Join(names, " and "), minReady)
}

const zoneLabel = corev1.LabelTopologyZone

// HintsKey is a comparable form of a cluster's hints, for records of what
// a slice was verified against.
func HintsKey(h []discoveryv1.ForZone) string {
	if h == nil {
		return ""
	}
	names := make([]string, len(h))
	for i, z := range h {
		names[i] = z.Name
	}
	return strings.Join(names, ",")
}

// SameHints reports whether an endpoint's hints are the wanted zones
// (none when want is nil).
func SameHints(have *discoveryv1.EndpointHints, want []discoveryv1.ForZone) bool {
	if want == nil {
		return have == nil
	}
	return have != nil && len(have.ForNodes) == 0 && slices.Equal(have.ForZones, want)
}

// Select returns the policy that applies to the ServiceImport name among
// the BackendTrafficPolicies of its namespace: of those targeting it, the
// first by networkingv1alpha1.ComparePrecedence (the gateway's rule for
// conflicting policies), when its locality is LocalFirst.
func Select(policies []networkingv1alpha1.BackendTrafficPolicy, name string) (Policy, bool) {
	var best *networkingv1alpha1.BackendTrafficPolicy
	for i := range policies {
		p := &policies[i]
		if !p.DeletionTimestamp.IsZero() || !targets(p, name) {
			continue
		}
		if best == nil || networkingv1alpha1.ComparePrecedence(p, best) < 0 {
			best = p
		}
	}
	if best == nil {
		return Policy{}, false
	}
	return FromSpec(best.Namespace, best.Name, best.Spec)
}

// Targets returns the ServiceImports a policy targets.
func Targets(p *networkingv1alpha1.BackendTrafficPolicy) []string {
	var out []string
	for _, r := range p.Spec.TargetRefs {
		if string(r.Group) == mcsGroup && r.Kind == "ServiceImport" {
			out = append(out, string(r.Name))
		}
	}
	return out
}

func targets(p *networkingv1alpha1.BackendTrafficPolicy, name string) bool {
	return slices.Contains(Targets(p), name)
}

const mcsGroup = "multicluster.x-k8s.io"
