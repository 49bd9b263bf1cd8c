package pick_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/fleetnet/fleetnet/internal/edge/pick"
)

// cluster and endpoint are a data plane's types as the tests need them.
type cluster struct {
	name   string
	weight int64
	bit    uint64
	rank   int // -1: none
	ready  []endpoint
}

type endpoint struct {
	name string
	down bool // ejected by a check
}

func (c *cluster) PickWeight() int64          { return c.weight }
func (c *cluster) TriedBit() uint64           { return c.bit }
func (c *cluster) ReadyEndpoints() []endpoint { return c.ready }

var _ pick.Cluster[endpoint] = (*cluster)(nil)

func healthy(e *endpoint) bool { return !e.down }

// spec is a cluster in a case: its weight, whether it is in the edge's
// region and its endpoints, "-" marking one that checks took out.
type spec struct {
	name      string
	weight    int64
	rank      int // 0: the edge's region, 1...: failover steps, -1: none
	endpoints []string
}

// build makes the clusters of specs, each with the next tried bit, and
// finds the endpoint named last.
func build(specs []spec, last string) ([]*cluster, *endpoint) {
	var out []*cluster
	for i, s := range specs {
		c := &cluster{name: s.name, weight: s.weight, rank: s.rank}
		if i < 64 {
			c.bit = 1 << i
		}
		for _, e := range s.endpoints {
			name, down := e, false
			if e[0] == '-' {
				name, down = e[1:], true
			}
			c.ready = append(c.ready, endpoint{name: name, down: down})
		}
		out = append(out, c)
	}
	var lastEp *endpoint
	for _, c := range out {
		for i := range c.ready {
			if c.ready[i].name == last {
				lastEp = &c.ready[i]
			}
		}
	}
	return out, lastEp
}

// bits are the tried bits of the clusters named.
func bits(clusters []*cluster, names ...string) uint64 {
	var b uint64
	for _, c := range clusters {
		if slices.Contains(names, c.name) {
			b |= c.bit
		}
	}
	return b
}

// outcomes picks once for every number the random draw can return and
// counts the picks by endpoint: the exact distribution of the pick. nil
// when nothing is picked.
func outcomes(t *testing.T, clusters []*cluster, tried uint64, last *endpoint, localFirst bool) map[string]int {
	t.Helper()
	rules := pick.Rules[*cluster, endpoint]{Healthy: healthy}
	if localFirst {
		rules.Rank, rules.Ranks = func(c *cluster) int { return c.rank }, 3
	}
	total := int64(0)
	rules.Int64N = func(n int64) int64 { total = n; return 0 }
	if c, e := pick.Endpoint(clusters, tried, last, rules); e == nil {
		if c != nil || total != 0 {
			t.Fatalf("no endpoint, but cluster %v and a draw in [0, %d)", c, total)
		}
		return nil
	}
	got := map[string]int{}
	for n := range total {
		rules.Int64N = func(int64) int64 { return n }
		c, e := pick.Endpoint(clusters, tried, last, rules)
		if e == nil || !holds(c, e) {
			t.Fatalf("draw %d: endpoint %v of cluster %v", n, e, c)
		}
		got[e.name]++
	}
	return got
}

// holds reports whether e is one of c's endpoints.
func holds(c *cluster, e *endpoint) bool {
	for i := range c.ready {
		if &c.ready[i] == e {
			return true
		}
	}
	return false
}

// The rules, in order, on three clusters of weight 1 with one endpoint
// each; eu1 and eu2 are in the edge's region.
func TestEndpointRules(t *testing.T) {
	tests := []struct {
		name       string
		localFirst bool
		down       []string // clusters whose endpoint checks took out
		zero       []string // clusters of weight 0 (an L4 cluster that drains)
		tried      []string
		last       string // the cluster of the attempt before
		want       []string
	}{
		{name: "weighted over every cluster", want: []string{"eu1", "eu2", "us"}},
		{name: "healthy ones only", down: []string{"eu1"}, want: []string{"eu2", "us"}},
		{name: "weight 0 takes nothing", zero: []string{"eu1", "eu2"}, want: []string{"us"}},
		{name: "another attempt avoids tried clusters", tried: []string{"eu1", "us"}, last: "us", want: []string{"eu2"}},
		{name: "every cluster tried: another healthy endpoint", tried: []string{"eu1", "eu2", "us"}, last: "us", want: []string{"eu1", "eu2"}},
		{name: "every endpoint out: any ready one", down: []string{"eu1", "eu2", "us"}, want: []string{"eu1", "eu2", "us"}},
		{name: "every endpoint out, another attempt: any ready one but the last", down: []string{"eu1", "eu2", "us"}, tried: []string{"us"}, last: "us", want: []string{"eu1", "eu2"}},
		{name: "every endpoint out: still not weight 0", down: []string{"eu1", "eu2", "us"}, zero: []string{"us"}, want: []string{"eu1", "eu2"}},
		{name: "every weight 0: nothing", zero: []string{"eu1", "eu2", "us"}},
		{name: "the only endpoint failed: nothing", zero: []string{"eu1", "eu2"}, tried: []string{"us"}, last: "us"},

		{name: "local first: the region's clusters", localFirst: true, want: []string{"eu1", "eu2"}},
		{name: "local first: the others when the region's are out", localFirst: true, down: []string{"eu1", "eu2"}, want: []string{"us"}},
		{name: "local first: the others when the region's weigh 0", localFirst: true, zero: []string{"eu1", "eu2"}, want: []string{"us"}},
		{name: "local first: another attempt goes to a local cluster not tried", localFirst: true, tried: []string{"eu1"}, last: "eu1", want: []string{"eu2"}},
		{name: "local first: then to the others", localFirst: true, tried: []string{"eu1", "eu2"}, last: "eu2", want: []string{"us"}},
		{name: "local first, every cluster tried: any healthy one but the last", localFirst: true, tried: []string{"eu1", "eu2", "us"}, last: "eu1", want: []string{"eu2", "us"}},
		{name: "local first, every endpoint out: any ready one", localFirst: true, down: []string{"eu1", "eu2", "us"}, want: []string{"eu1", "eu2", "us"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var specs []spec
			for _, name := range []string{"eu1", "eu2", "us"} {
				s := spec{name: name, weight: 1, endpoints: []string{name}}
				if name == "us" {
					s.rank = -1
				}
				if slices.Contains(tt.zero, name) {
					s.weight = 0
				}
				if slices.Contains(tt.down, name) {
					s.endpoints = []string{"-" + name}
				}
				specs = append(specs, s)
			}
			clusters, last := build(specs, tt.last)
			got := slices.Sorted(maps.Keys(outcomes(t, clusters, bits(clusters, tt.tried...), last, tt.localFirst)))
			if !slices.Equal(got, tt.want) {
				t.Errorf("picked %v, want %v", got, tt.want)
			}
		})
	}
}

// Within a rule, a cluster takes its weight times the endpoints the rule
// admits, each of those alike.
func TestEndpointWeights(t *testing.T) {
	many := func() []spec {
		var out []spec
		for i := range 10 { // more than the pick counts on its stack
			out = append(out, spec{name: fmt.Sprint("c", i), weight: int64(i), endpoints: []string{fmt.Sprint("e", i)}})
		}
		return out
	}
	tests := []struct {
		name     string
		clusters []spec
		tried    []string
		last     string
		want     map[string]int
	}{
		{"weight times healthy endpoints", []spec{
			{name: "a", weight: 2, endpoints: []string{"a0", "-a1", "a2"}},
			{name: "b", weight: 3, endpoints: []string{"b0"}},
		}, nil, "", map[string]int{"a0": 2, "a2": 2, "b0": 3}},
		{"every endpoint out: weight times ready endpoints", []spec{
			{name: "a", weight: 2, endpoints: []string{"-a0", "-a1"}},
			{name: "b", weight: 3, endpoints: []string{"-b0"}},
		}, nil, "", map[string]int{"a0": 2, "a1": 2, "b0": 3}},
		{"a negative weight takes nothing", []spec{
			{name: "a", weight: -1, endpoints: []string{"a0"}},
			{name: "b", weight: 1, endpoints: []string{"b0"}},
		}, nil, "", map[string]int{"b0": 1}},
		{"a cluster with no ready endpoint takes nothing", []spec{
			{name: "a", weight: 5},
			{name: "b", weight: 1, endpoints: []string{"b0", "b1"}},
		}, nil, "", map[string]int{"b0": 1, "b1": 1}},
		{"another healthy endpoint: the last one's cluster too", []spec{
			{name: "a", weight: 2, endpoints: []string{"a0", "a1"}},
			{name: "b", weight: 1, endpoints: []string{"b0"}},
		}, []string{"a", "b"}, "a0", map[string]int{"a1": 2, "b0": 1}},
		{"more clusters than the stack holds", many(), nil, "",
			map[string]int{"e1": 1, "e2": 2, "e3": 3, "e4": 4, "e5": 5, "e6": 6, "e7": 7, "e8": 8, "e9": 9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clusters, last := build(tt.clusters, tt.last)
			if got := outcomes(t, clusters, bits(clusters, tt.tried...), last, false); !maps.Equal(got, tt.want) {
				t.Errorf("picks by endpoint %v, want %v", got, tt.want)
			}
		})
	}
}

// Clusters past the 64th have no tried bit: another attempt may go back
// to them, though it avoids the tried ones that have.
func TestEndpointPast64Clusters(t *testing.T) {
	var specs []spec
	for i := range 65 {
		specs = append(specs, spec{name: fmt.Sprint("c", i), weight: 1, endpoints: []string{fmt.Sprint("e", i)}})
	}
	clusters, last := build(specs, "e64")
	got := outcomes(t, clusters, ^uint64(0), last, false)
	if want := map[string]int{"e64": 1}; !maps.Equal(got, want) {
		t.Errorf("every bit tried: picks %v, want %v", got, want)
	}
}

// A check that takes an endpoint out between the count and the choice
// leaves the choice with the cluster's last admitted endpoint, or, when it
// took out every one, to the next rule.
func TestEndpointHealthChangesDuringPick(t *testing.T) {
	clusters, _ := build([]spec{{name: "a", weight: 1, endpoints: []string{"a0", "a1"}}}, "")
	for _, tt := range []struct {
		name  string
		eject []string // taken out after the count
		want  string
	}{
		{"the drawn one", []string{"a1"}, "a0"},
		{"every one: any ready one", []string{"a0", "a1"}, "a1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for i := range clusters[0].ready {
				clusters[0].ready[i].down = false
			}
			rules := pick.Rules[*cluster, endpoint]{Healthy: healthy, Int64N: func(n int64) int64 {
				for i := range clusters[0].ready {
					if slices.Contains(tt.eject, clusters[0].ready[i].name) {
						clusters[0].ready[i].down = true
					}
				}
				return n - 1 // a1
			}}
			got := ""
			if _, e := pick.Endpoint(clusters, 0, nil, rules); e != nil {
				got = e.name
			}
			if got != tt.want {
				t.Errorf("picked %q, want %q", got, tt.want)
			}
		})
	}
}

func TestHasHealthy(t *testing.T) {
	tests := []struct {
		name     string
		clusters []spec
		want     bool
	}{
		{"a healthy endpoint", []spec{{name: "a", weight: 1, endpoints: []string{"-a0", "a1"}}}, true},
		{"every endpoint out", []spec{{name: "a", weight: 1, endpoints: []string{"-a0"}}, {name: "b", weight: 1, endpoints: []string{"-b0"}}}, false},
		{"healthy only at weight 0", []spec{{name: "a", weight: 0, endpoints: []string{"a0"}}, {name: "b", weight: 1, endpoints: []string{"-b0"}}}, false},
		{"no cluster", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clusters, _ := build(tt.clusters, "")
			if got := pick.HasHealthy(clusters, healthy); got != tt.want {
				t.Errorf("HasHealthy = %v, want %v", got, tt.want)
			}
		})
	}
}

// A pick is on every request, connection and flow: it allocates nothing,
// with a Healthy that closes over the caller's clock as L4's does.
func TestEndpointAllocatesNothing(t *testing.T) {
	clusters, _ := build([]spec{
		{name: "a", weight: 2, rank: -1, endpoints: []string{"a0", "-a1"}},
		{name: "b", weight: 1, rank: 0, endpoints: []string{"-b0"}},
	}, "")
	now := int64(0)
	allocs := testing.AllocsPerRun(100, func() {
		now++
		rules := pick.Rules[*cluster, endpoint]{
			Healthy: func(e *endpoint) bool { return now > 0 && !e.down },
			Rank:    func(c *cluster) int { return c.rank },
			Ranks:   2,
		}
		if _, e := pick.Endpoint(clusters, 0, nil, rules); e == nil {
			t.Fatal("nothing picked")
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per pick, want 0", allocs)
	}
}

// With a failover order, the ranks are tried in turn before every other
// cluster: the edge's region (eu), then the order's first step (us), then
// its second (ap); af has no rank.
func TestEndpointFailoverRanks(t *testing.T) {
	tests := []struct {
		name  string
		down  []string
		tried []string
		last  string
		want  []string
	}{
		{name: "the region first", want: []string{"eu"}},
		{name: "the first step when the region is out", down: []string{"eu"}, want: []string{"us"}},
		{name: "the second step after it", down: []string{"eu", "us"}, want: []string{"ap"}},
		{name: "the clusters of no rank last", down: []string{"eu", "us", "ap"}, want: []string{"af"}},
		{name: "another attempt goes down the order", tried: []string{"eu"}, last: "eu", want: []string{"us"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var specs []spec
			rank := map[string]int{"eu": 0, "us": 1, "ap": 2, "af": -1}
			for _, name := range []string{"af", "ap", "us", "eu"} {
				s := spec{name: name, weight: 1, rank: rank[name], endpoints: []string{name}}
				if slices.Contains(tt.down, name) {
					s.endpoints = []string{"-" + name}
				}
				specs = append(specs, s)
			}
			clusters, last := build(specs, tt.last)
			got := slices.Sorted(maps.Keys(outcomes(t, clusters, bits(clusters, tt.tried...), last, true)))
			if !slices.Equal(got, tt.want) {
				t.Errorf("picked %v, want %v", got, tt.want)
			}
		})
	}
}
