// Package pick is fleetnet-edge's endpoint pick, one for both data planes
// (the HTTP proxy's backends, the L4 load balancers' ports): which ready
// endpoint of which cluster an attempt goes to, and where the next one
// goes when it failed. As internal/edge/health is their one checker, this
// is their one set of rules; a data plane says what it adds in Rules.
//
// The first rule that finds an endpoint decides:
//
//  1. with Rules.Rank (HTTP backends with LocalFirst), for each rank in
//     turn, a healthy endpoint not tried yet of a cluster of that rank: the
//     clusters of the edge's region, then those of each step of the
//     policy's failover order;
//  2. a healthy endpoint of a cluster not tried yet;
//  3. for another attempt, any healthy endpoint but the last one;
//  4. any ready endpoint but the last one: when checks have taken out
//     every endpoint, a check failing everywhere more likely says
//     something about the edge than about every backend.
//
// A cluster whose PickWeight is not positive (weight 0; an L4 cluster
// that drains) takes no pick under any rule. Within a rule, a cluster is
// chosen in proportion to its weight times the endpoints the rule admits
// (the model's EffectiveWeight, recomputed with the endpoints the edge
// still trusts), then one of those uniformly.
//
// A pick reads health through Rules.Healthy, so a check may change an
// endpoint between the count and the choice; the choice tolerates it. It
// holds no lock and, for up to 8 clusters, allocates nothing.
package pick

import "math/rand/v2"

// Cluster is a cluster as a pick reads it; E is the data plane's endpoint
// type, of which the cluster holds a slice.
type Cluster[E any] interface {
	// PickWeight is the cluster's weight for new picks; at 0 or below it
	// takes none (weight 0, or an L4 cluster that drains).
	PickWeight() int64
	// TriedBit marks the cluster in a set of tried clusters. Clusters past
	// the 64th have 0: another attempt may go back to one of them.
	TriedBit() uint64
	// ReadyEndpoints are the endpoints the pick chooses from.
	ReadyEndpoints() []E
}

// Rules are what a data plane adds to the common rules of its picks.
type Rules[C Cluster[E], E any] struct {
	// Healthy reports whether the checks (active and passive) leave e in
	// picks. Required.
	Healthy func(e *E) bool
	// Rank, when set, makes the first rules: for each rank from 0 to
	// Ranks-1 in turn, the clusters of that rank not tried yet (an HTTP
	// backend's LocalFirst: 0 the edge's region, then the steps of its
	// failover order). A cluster of no rank returns -1. nil: none.
	Rank  func(c C) int
	Ranks int
	// Int64N returns a random number in [0, n) for n > 0; nil is
	// math/rand/v2's Int64N. Tests set it to make a pick deterministic.
	Int64N func(n int64) int64
}

// Endpoint chooses an endpoint of clusters for an attempt by the
// package's rules. For the first attempt tried is 0 and last nil; for
// another, tried holds the TriedBit of every cluster tried and last is the
// endpoint that failed. It returns a nil endpoint (and a zero C) when no
// endpoint is left.
func Endpoint[C Cluster[E], E any](clusters []C, tried uint64, last *E, r Rules[C, E]) (C, *E) {
	for rank := 0; r.Rank != nil && rank < r.Ranks; rank++ {
		if c, e := among(clusters, filter[C, E]{rank: r.Rank, want: rank, tried: tried}, &r); e != nil {
			return c, e
		}
	}
	if c, e := among(clusters, filter[C, E]{tried: tried}, &r); e != nil {
		return c, e
	}
	if last != nil {
		if c, e := among(clusters, filter[C, E]{exclude: last}, &r); e != nil {
			return c, e
		}
	}
	return among(clusters, filter[C, E]{exclude: last, anyReady: true}, &r)
}

// HasHealthy reports whether a first attempt would find a healthy
// endpoint (rule 2 with nothing tried).
func HasHealthy[C Cluster[E], E any](clusters []C, healthy func(e *E) bool) bool {
	for _, c := range clusters {
		if c.PickWeight() <= 0 {
			continue
		}
		ready := c.ReadyEndpoints()
		for i := range ready {
			if healthy(&ready[i]) {
				return true
			}
		}
	}
	return false
}

// filter says which clusters and endpoints a rule considers.
type filter[C Cluster[E], E any] struct {
	// rank, when set, admits only the clusters of rank want.
	rank    func(C) int
	want    int
	tried   uint64
	exclude *E
	// anyReady admits endpoints that checks took out.
	anyReady bool
}

func (f *filter[C, E]) admitsCluster(c C) bool {
	return c.PickWeight() > 0 && c.TriedBit()&f.tried == 0 && (f.rank == nil || f.rank(c) == f.want)
}

func (f *filter[C, E]) admits(e *E, r *Rules[C, E]) bool {
	return e != f.exclude && (f.anyReady || r.Healthy(e))
}

// among picks by weight among the clusters and endpoints f admits.
func among[C Cluster[E], E any](clusters []C, f filter[C, E], r *Rules[C, E]) (C, *E) {
	var none C
	// Counted once per cluster: a check may change an endpoint's health
	// between the count and the choice, which the choice tolerates.
	var stack [8]int64
	weights := stack[:0]
	var total int64
	for _, c := range clusters {
		var w int64
		if f.admitsCluster(c) {
			n := 0
			ready := c.ReadyEndpoints()
			for i := range ready {
				if f.admits(&ready[i], r) {
					n++
				}
			}
			w = c.PickWeight() * int64(n)
		}
		weights = append(weights, w)
		total += w
	}
	if total == 0 {
		return none, nil
	}
	int64N := r.Int64N
	if int64N == nil {
		int64N = rand.Int64N
	}
	n := int64N(total)
	for i, c := range clusters {
		if n >= weights[i] {
			n -= weights[i]
			continue
		}
		k := n / c.PickWeight()
		var found *E
		ready := c.ReadyEndpoints()
		for j := range ready {
			if e := &ready[j]; f.admits(e, r) {
				found = e
				if k == 0 {
					break
				}
				k--
			}
		}
		if found == nil {
			return none, nil
		}
		return c, found
	}
	return none, nil
}
