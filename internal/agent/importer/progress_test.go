package importer

import (
	"slices"
	"testing"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestSmallestFirst(t *testing.T) {
	withEndpoints := func(n ...int) *Desired {
		d := &Desired{Chunks: map[string]map[string]*registryv1.EndpointChunk{}}
		for i, e := range n {
			c := &registryv1.EndpointChunk{Endpoints: make([]*registryv1.Endpoint, e)}
			d.Chunks[string(rune('a'+i))] = map[string]*registryv1.EndpointChunk{"0": c}
		}
		return d
	}
	key := func(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }
	imports := map[types.NamespacedName]*Desired{
		key("a", "big"):    withEndpoints(50, 50),
		key("a", "small"):  withEndpoints(1),
		key("b", "small"):  withEndpoints(1),
		key("a", "medium"): withEndpoints(10, 5),
	}
	keys := []types.NamespacedName{key("a", "big"), key("a", "medium"), key("b", "small"), key("z", "removed"), key("a", "small")}
	smallestFirst(keys, imports)
	want := []types.NamespacedName{key("z", "removed"), key("a", "small"), key("b", "small"), key("a", "medium"), key("a", "big")}
	if !slices.Equal(keys, want) {
		t.Errorf("order = %v, want %v", keys, want)
	}
}

func TestProgressCounts(t *testing.T) {
	p := NewProgress(nil, &Stream{}, nil)
	a, b := types.NamespacedName{Namespace: "n", Name: "a"}, types.NamespacedName{Namespace: "n", Name: "b"}
	steps := []struct {
		key  types.NamespacedName
		in   bool
		want int
	}{
		{a, true, 1},
		{a, true, 1}, // again: still one
		{b, true, 2},
		{a, false, 1}, // a failed
		{a, false, 1},
		{b, false, 0},
	}
	for i, s := range steps {
		p.Set(s.key, s.in)
		if got := p.count(); got != s.want {
			t.Fatalf("step %d: %d in place, want %d", i, got, s.want)
		}
	}
	var nilProgress *Progress
	nilProgress.Set(a, true) // a Reconciler without Progress
}
