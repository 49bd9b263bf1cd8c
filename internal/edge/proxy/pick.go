package proxy

import (
	"math/rand/v2"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/edge/pick"
)

// pick chooses a backend in proportion to its weight; nil when no backend
// has a weight.
func (rt *route) pick() *backend {
	if rt.total == 0 {
		return nil
	}
	n := rand.Int64N(rt.total)
	for _, b := range rt.backends {
		if n < b.cumWeight {
			return b
		}
	}
	return nil
}

// pick chooses an endpoint for an attempt by the edge's pick rules
// (internal/edge/pick): for the first, tried is 0 and last nil; for a
// retry, tried holds the bits of the clusters tried and last is the
// endpoint of the attempt before. With the policy's LocalFirst, the
// clusters of the edge's region come first, then those of each step of
// its failover order. It returns nil when no endpoint is left.
func (b *backend) pick(tried uint64, last *endpoint) (*cluster, *endpoint) {
	rules := weighted
	if b.policy.localFirst {
		rules = pick.Rules[*cluster, endpoint]{Healthy: (*endpoint).healthy, Rank: (*cluster).rankOf, Ranks: 1 + len(b.policy.failover)}
	}
	return pick.Endpoint(b.clusters, tried, last, rules)
}

// weighted are the pick rules of a backend whose policy is Weighted.
var weighted = pick.Rules[*cluster, endpoint]{Healthy: (*endpoint).healthy}

func (e *endpoint) healthy() bool { return e.health.Healthy() }

func (c *cluster) rankOf() int { return c.rank }

// rank is a cluster's place in a LocalFirst backend's order: 0 in the
// edge's region, i+1 for the first failover step that names it or its
// region, -1 for none.
func rank(c edgev1.ClusterEndpoints, edgeRegion string, failover []edgev1.FailoverStep) int {
	if edgeRegion != "" && c.Region == edgeRegion {
		return 0
	}
	for i, s := range failover {
		if s.Matches(c.Cluster, c.Region) {
			return i + 1
		}
	}
	return -1
}

var _ pick.Cluster[endpoint] = (*cluster)(nil)

// PickWeight is the cluster's weight (not its EffectiveWeight: the pick
// counts the endpoints the edge trusts).
func (c *cluster) PickWeight() int64 { return int64(c.Weight) }

func (c *cluster) TriedBit() uint64 { return c.bit }

func (c *cluster) ReadyEndpoints() []endpoint { return c.ready }
