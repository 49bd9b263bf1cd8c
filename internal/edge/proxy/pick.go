package proxy

import "math/rand/v2"

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

// pick chooses an endpoint for an attempt: for the first, tried is 0 and
// last nil; for a retry, tried holds the bits of the clusters tried and
// last is the endpoint of the attempt before. The first rule that finds a
// healthy ready endpoint decides:
//
//  1. with LocalFirst, the clusters of the edge's region not tried yet;
//  2. every cluster not tried yet;
//  3. for a retry, any healthy endpoint but last;
//  4. when checks have taken out every endpoint, any ready one but last:
//     a check that fails everywhere more likely says something about the
//     edge than about every backend.
//
// Within a rule, a cluster is chosen in proportion to its weight times
// the endpoints the rule admits, then one of those uniformly. It returns
// nil when no endpoint is left.
func (b *backend) pick(tried uint64, last *endpoint) (*cluster, *endpoint) {
	if b.policy.localFirst {
		if c, e := b.pickAmong(filter{localOnly: true, tried: tried}); c != nil {
			return c, e
		}
	}
	if c, e := b.pickAmong(filter{tried: tried}); c != nil {
		return c, e
	}
	if last != nil {
		if c, e := b.pickAmong(filter{exclude: last}); c != nil {
			return c, e
		}
	}
	return b.pickAmong(filter{exclude: last, anyReady: true})
}

// filter says which clusters and endpoints a pick considers.
type filter struct {
	localOnly bool
	tried     uint64
	exclude   *endpoint
	// anyReady admits endpoints that checks took out.
	anyReady bool
}

func (f filter) admits(e *endpoint) bool {
	return e != f.exclude && (f.anyReady || e.health.Healthy())
}

func (b *backend) pickAmong(f filter) (*cluster, *endpoint) {
	// Counted once per cluster: a check may change an endpoint's health
	// between the count and the choice, which the choice tolerates.
	var stack [8]int64
	weights := stack[:0]
	var total int64
	for _, c := range b.clusters {
		var w int64
		if c.Weight > 0 && c.bit&f.tried == 0 && (!f.localOnly || c.local) {
			n := 0
			for i := range c.ready {
				if f.admits(&c.ready[i]) {
					n++
				}
			}
			w = int64(c.Weight) * int64(n)
		}
		weights = append(weights, w)
		total += w
	}
	if total == 0 {
		return nil, nil
	}
	n := rand.Int64N(total)
	for i, c := range b.clusters {
		if n >= weights[i] {
			n -= weights[i]
			continue
		}
		k := n / int64(c.Weight)
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
