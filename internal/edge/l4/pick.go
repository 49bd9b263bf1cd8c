package l4

import "math/rand/v2"

// pick chooses an endpoint for a new connection or flow. For the first
// attempt tried is 0 and last nil; for another, tried holds the bits of
// the clusters tried and last is the endpoint that failed. The first rule
// that finds an endpoint decides:
//
//  1. a healthy endpoint of a cluster not tried yet;
//  2. for another attempt, any healthy endpoint but last;
//  3. any ready endpoint but last: when checks have taken out every
//     endpoint, a check failing everywhere more likely says something
//     about the edge than about every backend.
//
// Draining clusters and clusters of weight 0 take no new connection under
// any rule. Within a rule, a cluster is chosen in proportion to its weight
// times the endpoints the rule admits (as for an HTTP backend: the
// model's EffectiveWeight, recomputed with the endpoints the edge still
// trusts), then one of those uniformly. now is the proxy's clock, for the
// passive ejections of UDP endpoints. It returns nil when no endpoint is
// left.
func (s *service) pick(tried uint64, last *endpoint, now int64) (*cluster, *endpoint) {
	if c, e := s.pickAmong(filter{tried: tried, now: now}); c != nil {
		return c, e
	}
	if last != nil {
		if c, e := s.pickAmong(filter{exclude: last, now: now}); c != nil {
			return c, e
		}
	}
	return s.pickAmong(filter{exclude: last, anyReady: true, now: now})
}

// filter says which clusters and endpoints a pick considers.
type filter struct {
	tried   uint64
	exclude *endpoint
	// anyReady admits endpoints that checks took out.
	anyReady bool
	now      int64
}

func (f *filter) admits(e *endpoint) bool {
	return e != f.exclude && (f.anyReady || e.healthy(f.now))
}

func (s *service) pickAmong(f filter) (*cluster, *endpoint) {
	// Counted once per cluster: a check may change an endpoint's health
	// between the count and the choice, which the choice tolerates.
	var stack [8]int64
	weights := stack[:0]
	var total int64
	for _, c := range s.clusters {
		var w int64
		if c.weight > 0 && !c.draining && c.bit&f.tried == 0 {
			n := 0
			for i := range c.ready {
				if f.admits(&c.ready[i]) {
					n++
				}
			}
			w = c.weight * int64(n)
		}
		weights = append(weights, w)
		total += w
	}
	if total == 0 {
		return nil, nil
	}
	n := rand.Int64N(total)
	for i, c := range s.clusters {
		if n >= weights[i] {
			n -= weights[i]
			continue
		}
		k := n / c.weight
		var found *endpoint
		for j := range c.ready {
			if e := &c.ready[j]; f.admits(e) {
				found = e
				if k == 0 {
					break
				}
				k--
			}
		}
		if found == nil {
			return nil, nil
		}
		return c, found
	}
	return nil, nil
}

// hasHealthy reports whether a new flow would find a healthy endpoint.
func (s *service) hasHealthy(now int64) bool {
	f := filter{now: now}
	for _, c := range s.clusters {
		if c.weight <= 0 || c.draining {
			continue
		}
		for i := range c.ready {
			if f.admits(&c.ready[i]) {
				return true
			}
		}
	}
	return false
}
