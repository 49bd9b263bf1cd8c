// Package eastwest is the agent's side of east-west gateways: which
// imports cross networks and how (Decide), the gateway ports that carry
// them (Allocator), and the model the cluster's east-west gateway serves
// (its imports to other networks' gateways, and this cluster's exports to
// theirs), published over the edge model stream (Publisher).
//
// An import some of whose exporting clusters are on another network goes
// through the local gateway whole: its derived Service's slices name the
// gateway's pods on the ports allocated to it, and the gateway's L4 proxy
// spreads connections over every exporting cluster, this network's by
// their pod addresses and the others' through their gateways, each
// weighted by its ready endpoints. Mixing gateway and pod addresses in
// one slice would give a remote cluster the share of the gateway's pod
// count, not of its endpoints (kube-proxy spreads evenly).
package eastwest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Local is what the decision needs of this cluster.
type Local struct {
	// Network is this cluster's keys.PropertyNetwork ("" for the fleet's
	// one network).
	Network string
	// Gateway says this cluster runs an east-west gateway.
	Gateway bool
}

// Unreachable is an exporting cluster of another network that this
// cluster cannot reach, and why.
type Unreachable struct {
	Cluster, Network, Cause string
}

// Decision is how one import is served here.
type Decision struct {
	// Through: the import's traffic goes through this cluster's gateway
	// (its slices name the gateway), which dials Direct clusters' pods and
	// reaches Via clusters through their gateways. Otherwise the slices
	// hold the Direct clusters' endpoints, as in a flat fleet.
	Through bool
	// Direct are the exporting clusters on this cluster's network.
	Direct []string
	// Via are the clusters of other networks reached through their
	// gateways (Through only).
	Via []string
	// Unreachable are the clusters of other networks left out.
	Unreachable []Unreachable
	// Carried are the TCP service ports the gateway carries (Through only);
	// Uncarried names the others ("53/UDP"), which have no endpoints while
	// the import goes through the gateway.
	Carried   []int32
	Uncarried []string
}

// CrossesNetworks says some exporting cluster is on another network.
func (d Decision) CrossesNetworks() bool { return len(d.Via) > 0 || len(d.Unreachable) > 0 }

// Decide says how imp is served in a cluster described by local. Pod
// addresses of another network never reach the slices: at best they
// are unreachable, at worst (overlapping pod ranges) they name a pod of
// this network.
func Decide(imp *registryv1.Import, local Local) Decision {
	var d Decision
	var remote []*registryv1.ImportCluster
	for _, c := range imp.GetClusters() {
		if c.GetNetwork() == local.Network {
			d.Direct = append(d.Direct, c.GetClusterId())
		} else {
			remote = append(remote, c)
		}
	}
	if len(remote) == 0 {
		return d
	}
	for _, p := range imp.GetPorts() {
		if proto := p.GetProtocol(); proto == "" || proto == string(corev1.ProtocolTCP) {
			d.Carried = append(d.Carried, p.GetPort())
		} else {
			d.Uncarried = append(d.Uncarried, strconv.Itoa(int(p.GetPort()))+"/"+proto)
		}
	}
	cause := ""
	switch {
	case imp.GetType() == string(mcsv1beta1.Headless):
		cause = "a headless import's clients dial pod addresses, which do not cross networks"
	case len(d.Carried) == 0:
		cause = fmt.Sprintf("the import has no TCP port (ports %s), and east-west gateways carry TCP only", strings.Join(d.Uncarried, ", "))
	case !local.Gateway:
		cause = "this cluster runs no east-west gateway (fleetnet-agent --eastwest-gateway-service)"
	}
	for _, c := range remote {
		why := cause
		if why == "" && c.GetEastwestGateway() == "" {
			why = "it publishes no east-west gateway address (fleetnet-agent --eastwest-gateway-address)"
		}
		if why != "" {
			d.Unreachable = append(d.Unreachable, Unreachable{Cluster: c.GetClusterId(), Network: c.GetNetwork(), Cause: why})
			continue
		}
		d.Via = append(d.Via, c.GetClusterId())
	}
	d.Through = len(d.Via) > 0
	if !d.Through {
		d.Carried, d.Uncarried = nil, nil
	}
	return d
}

// Condition is the ServiceImport's keys.ConditionNetworks for d; nil
// when every exporting cluster is on this cluster's network (the
// condition is then removed). ports are the gateway ports by service
// port (Through only).
func (d Decision) Condition(ports map[int32]int32, generation int64) *metav1.Condition {
	if !d.CrossesNetworks() {
		return nil
	}
	c := &metav1.Condition{Type: keys.ConditionNetworks, Status: metav1.ConditionTrue, Reason: keys.ReasonThroughEastWestGateway, ObservedGeneration: generation}
	var parts []string
	if d.Through {
		var carried []string
		for _, p := range d.Carried {
			carried = append(carried, fmt.Sprintf("%d→%d", p, ports[p]))
		}
		parts = append(parts, fmt.Sprintf("through this cluster's east-west gateway (service port→gateway port: %s) to clusters %s through theirs", strings.Join(carried, ", "), strings.Join(d.Via, ", ")))
		if len(d.Direct) > 0 {
			parts = append(parts, "and to this network's clusters "+strings.Join(d.Direct, ", ")+" directly")
		}
		if len(d.Uncarried) > 0 {
			parts = append(parts, fmt.Sprintf("; ports %s have no endpoints here: east-west gateways carry TCP only", strings.Join(d.Uncarried, ", ")))
		}
	}
	if len(d.Unreachable) > 0 {
		c.Status, c.Reason = metav1.ConditionFalse, keys.ReasonClustersUnreachable
		var left []string
		for _, u := range d.Unreachable {
			left = append(left, fmt.Sprintf("%s (network %q): %s", u.Cluster, u.Network, u.Cause))
		}
		if len(parts) > 0 {
			parts = append(parts, ";")
		}
		parts = append(parts, "clusters of other networks left out: "+strings.Join(left, "; "))
		if !d.Through {
			parts = append(parts, fmt.Sprintf("; served by %s", orNone(d.Direct)))
		}
	}
	c.Message = strings.ReplaceAll(strings.Join(parts, " "), " ;", ";")
	return c
}

func orNone(clusters []string) string {
	if len(clusters) == 0 {
		return "no cluster"
	}
	return "clusters " + strings.Join(slices.Clone(clusters), ", ")
}
