package proxy

import (
	"math/rand/v2"

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
// clusters of the edge's region come first. It returns nil when no
// endpoint is left.
func (b *backend) pick(tried uint64, last *endpoint) (*cluster, *endpoint) {
	rules := weighted
	if b.policy.localFirst {
		rules = localFirst
	}
	return pick.Endpoint(b.clusters, tried, last, rules)
}

// The pick rules of a backend by its policy's Locality.
var (
	weighted   = pick.Rules[*cluster, endpoint]{Healthy: (*endpoint).healthy}
	localFirst = pick.Rules[*cluster, endpoint]{Healthy: (*endpoint).healthy, Local: (*cluster).isLocal}
)

func (e *endpoint) healthy() bool { return e.health.Healthy() }

func (c *cluster) isLocal() bool { return c.local }

var _ pick.Cluster[endpoint] = (*cluster)(nil)

// PickWeight is the cluster's weight (not its EffectiveWeight: the pick
// counts the endpoints the edge trusts).
func (c *cluster) PickWeight() int64 { return int64(c.Weight) }

func (c *cluster) TriedBit() uint64 { return c.bit }

func (c *cluster) ReadyEndpoints() []endpoint { return c.ready }
