package l4

import "github.com/fleetnet/fleetnet/internal/edge/pick"

// pick chooses an endpoint for a new connection or flow by the edge's
// pick rules (internal/edge/pick): for the first attempt tried is 0 and
// last nil; for another, tried holds the bits of the clusters tried and
// last is the endpoint that failed. Draining clusters take no new
// connection under any rule; a load balancer has no locality. now is the
// proxy's clock, for the passive ejections of UDP endpoints. It returns
// nil when no endpoint is left.
func (s *service) pick(tried uint64, last *endpoint, now int64) (*cluster, *endpoint) {
	return pick.Endpoint(s.clusters, tried, last, pick.Rules[*cluster, endpoint]{
		Healthy: func(e *endpoint) bool { return e.healthy(now) },
	})
}

// hasHealthy reports whether a new flow would find a healthy endpoint.
func (s *service) hasHealthy(now int64) bool {
	return pick.HasHealthy(s.clusters, func(e *endpoint) bool { return e.healthy(now) })
}

var _ pick.Cluster[endpoint] = (*cluster)(nil)

// PickWeight is the cluster's weight for new connections: 0 while it
// drains.
func (c *cluster) PickWeight() int64 {
	if c.draining {
		return 0
	}
	return c.weight
}

func (c *cluster) TriedBit() uint64 { return c.bit }

func (c *cluster) ReadyEndpoints() []endpoint { return c.ready }
