package diagnose

import (
	"fmt"
	"strings"

	"github.com/fleetnet/fleetnet/api/keys"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// throughGateway reports whether the import goes through the importing
// cluster's east-west gateway: its derived Service records the gateway
// ports.
func throughGateway(c *ClusterFacts) bool {
	if c.DerivedService == nil {
		return false
	}
	_, ok := c.DerivedService.Annotations[keys.AnnotationEastWestPorts]
	return ok
}

// networkOf is a cluster's network as it registered it ("" for the fleet's
// one network).
func networkOf(f *Facts, cluster string) string {
	if r := f.Registry; r != nil {
		for _, c := range r.Clusters {
			if c.GetId() == cluster {
				return c.GetProperties()[keys.PropertyNetwork]
			}
		}
	}
	return ""
}

// otherNetworks are the import's clusters on another network than the
// importing cluster's: their pods never appear in its slices.
func otherNetworks(f *Facts) map[string]bool {
	out := map[string]bool{}
	if r := f.Registry; r != nil && r.Err == nil && r.Import != nil {
		here := networkOf(f, f.Target.Cluster)
		for _, ic := range r.Import.GetClusters() {
			if ic.GetNetwork() != here {
				out[ic.GetClusterId()] = true
			}
		}
	}
	return out
}

// networkName says which network n is.
func networkName(n string) string {
	if n == "" {
		return "the default network"
	}
	return "network " + n
}

// networkPath shows the path through both east-west gateways when some
// exporting cluster is on another network than the importing one: the
// clusters dialled directly, those reached through their gateway (at the
// address they published), and those left out, from the registry's import
// and the ServiceImport's Networks condition. No step when every exporter
// is on the importing cluster's network.
func networkPath(f *Facts, c *ClusterFacts) []Step {
	t := f.Target
	r := f.Registry
	cond := meta.FindStatusCondition(c.Import.Status.Conditions, keys.ConditionNetworks)
	if (r == nil || r.Err != nil || r.Import == nil) && cond == nil {
		return nil
	}
	here := networkOf(f, t.Cluster)
	var direct, via []string
	crosses := cond != nil
	if r != nil && r.Err == nil && r.Import != nil {
		for _, ic := range r.Import.GetClusters() {
			switch {
			case ic.GetNetwork() == here:
				direct = append(direct, ic.GetClusterId())
			case ic.GetEastwestGateway() != "" && !throughGateway(c):
				crosses = true
				via = append(via, fmt.Sprintf("%s (%s) not reached from here: no path through %s's gateway", ic.GetClusterId(), networkName(ic.GetNetwork()), t.Cluster))
			case ic.GetEastwestGateway() != "":
				crosses = true
				via = append(via, fmt.Sprintf("%s (%s) through %s's gateway to %s's at %s", ic.GetClusterId(), networkName(ic.GetNetwork()), t.Cluster, ic.GetClusterId(), ic.GetEastwestGateway()))
			default:
				crosses = true
				via = append(via, fmt.Sprintf("%s (%s, no gateway address published)", ic.GetClusterId(), networkName(ic.GetNetwork())))
			}
		}
	}
	if !crosses {
		return nil
	}
	s := Step{Name: "networks from " + t.Cluster}
	var parts []string
	if len(direct) > 0 {
		how := "directly"
		if throughGateway(c) {
			how = "by " + t.Cluster + "'s gateway, directly"
		}
		parts = append(parts, fmt.Sprintf("%s (%s, %s's) %s", strings.Join(direct, ", "), networkName(here), t.Cluster, how))
	}
	parts = append(parts, via...)
	s.Detail = strings.Join(parts, "; ")
	switch {
	case cond == nil:
		s.Status, s.Fix = Warn, fmt.Sprintf("the ServiceImport in %s has no %s condition yet: its agent has not applied the import since the networks changed", t.Cluster, keys.ConditionNetworks)
	case cond.Status == metav1.ConditionFalse:
		s.Status, s.Detail = Fail, s.Detail+"; "+condText(cond)
		s.Fix = "run an east-west gateway in each cluster whose network others import from and give its agent --eastwest-gateway-service and --eastwest-gateway-address (charts: the edge's and the agent's eastWest values); headless and UDP-only imports do not cross networks"
	default:
		s.Status = OK
	}
	return []Step{s}
}
