package importer

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

var (
	v4, v6 = corev1.IPv4Protocol, corev1.IPv6Protocol
	dual   = []corev1.IPFamily{v4, v6}
)

// chunk is a source slice's chunk with n endpoints from 10.0.<first>.x (or
// fd00::<first>:x).
func chunk(name, addressType string, first, n int) *registryv1.EndpointChunk {
	c := &registryv1.EndpointChunk{
		Key:         &registryv1.ChunkKey{Namespace: "ns", Name: "echo", ClusterId: "east", Chunk: name},
		AddressType: addressType,
		Ports:       []*registryv1.EndpointPort{{Name: "http", Protocol: "TCP", Port: 8080}},
	}
	for i := range n {
		addr := fmt.Sprintf("10.0.%d.%d", first, i+1)
		if addressType == "IPv6" {
			addr = fmt.Sprintf("fd00::%x:%x", first, i+1)
		}
		c.Endpoints = append(c.Endpoints, &registryv1.Endpoint{Addresses: []string{addr}, Conditions: &registryv1.EndpointConditions{Ready: true, Serving: true}})
	}
	return c
}

// cluster applies a plan: the slices that exist afterwards, by name, with
// resource versions that change on every write.
func applyPlan(existing map[string]*discoveryv1.EndpointSlice, p Plan) map[string]*discoveryv1.EndpointSlice {
	out := map[string]*discoveryv1.EndpointSlice{}
	for n, s := range existing {
		out[n] = s
	}
	for _, s := range p.Apply {
		rv := "1"
		if old := existing[s.Name]; old != nil {
			rv = old.ResourceVersion + "1"
		}
		out[s.Name] = &discoveryv1.EndpointSlice{AddressType: s.AddressType, Endpoints: s.Endpoints, Ports: s.Ports}
		out[s.Name].Name, out[s.Name].ResourceVersion = s.Name, rv
	}
	for _, n := range p.Delete {
		delete(out, n)
	}
	return out
}

func names(ss []Slice) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

// Every chunk becomes slices of its own, in its address type; nothing of
// the exporter's nodes or Pods comes along.
func TestPlanSlicesPerChunk(t *testing.T) {
	a := chunk("echo-abc", "IPv4", 1, 2)
	a.Endpoints[0].NodeName, a.Endpoints[0].PodName, a.Endpoints[0].Zone, a.Endpoints[0].Hostname = "node-1", "echo-0", "z1", "web-0"
	b := chunk("echo-def", "IPv6", 2, 1)
	b.Endpoints[0].Conditions = &registryv1.EndpointConditions{Ready: true, Serving: false, Terminating: true}
	p := PlanSlices("derived-x-east", map[string]*registryv1.EndpointChunk{"echo-abc": a, "echo-def": b}, dual, nil, 100, nil, nil)
	want := []string{SliceName("derived-x-east", "IPv4", "echo-abc", 0), SliceName("derived-x-east", "IPv6", "echo-def", 0)}
	if got := names(p.Apply); !slices.Equal(got, want) || len(p.Keep)+len(p.Delete) != 0 {
		t.Fatalf("apply %v keep %v delete %v, want apply %v", got, p.Keep, p.Delete, want)
	}
	if !strings.HasPrefix(want[0], "derived-x-east-v4-") || !strings.HasPrefix(want[1], "derived-x-east-v6-") {
		t.Errorf("names %v do not carry the family", want)
	}
	e := p.Apply[0].Endpoints[0]
	if e.NodeName != nil || e.TargetRef != nil || *e.Zone != "z1" || *e.Hostname != "web-0" || !*e.Conditions.Ready {
		t.Errorf("IPv4 endpoint = %+v", e)
	}
	c := p.Apply[1].Endpoints[0].Conditions
	if !*c.Ready || *c.Serving || !*c.Terminating {
		t.Errorf("conditions not carried: ready %v serving %v terminating %v", *c.Ready, *c.Serving, *c.Terminating)
	}
	if *p.Apply[0].Ports[0].Name != "http" || *p.Apply[0].Ports[0].Port != 8080 {
		t.Errorf("ports = %+v", p.Apply[0].Ports)
	}
}

func TestPlanSlicesKeepsTheServiceFamiliesAndFQDN(t *testing.T) {
	chunks := map[string]*registryv1.EndpointChunk{
		"a": chunk("a", "IPv4", 1, 1), "b": chunk("b", "IPv6", 1, 1),
		"c": {AddressType: "FQDN", Endpoints: []*registryv1.Endpoint{{Addresses: []string{"db.example.com"}}}},
	}
	tests := []struct {
		families []corev1.IPFamily
		want     []discoveryv1.AddressType
	}{
		{[]corev1.IPFamily{v4}, []discoveryv1.AddressType{"IPv4", "FQDN"}},
		{[]corev1.IPFamily{v6}, []discoveryv1.AddressType{"IPv6", "FQDN"}},
		{[]corev1.IPFamily{v6, v4}, []discoveryv1.AddressType{"IPv4", "IPv6", "FQDN"}},
		{nil, []discoveryv1.AddressType{"FQDN"}},
	}
	for _, tt := range tests {
		var got []discoveryv1.AddressType
		for _, s := range PlanSlices("p", chunks, tt.families, nil, 100, nil, nil).Apply {
			got = append(got, s.AddressType)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("families %v: slices of %v, want %v", tt.families, got, tt.want)
		}
	}
}

// Changes touch the changed chunk's slices only; what exists and is right
// is kept; drift is repaired; chunks that left are deleted.
func TestPlanSlicesFollowsChanges(t *testing.T) {
	chunks := map[string]*registryv1.EndpointChunk{}
	for i := range 5 {
		n := fmt.Sprintf("echo-%d", i)
		chunks[n] = chunk(n, "IPv4", i, 100)
	}
	slice := func(chunk string, part int) string { return SliceName("p", "IPv4", chunk, part) }
	steps := []struct {
		name       string
		change     func(existing map[string]*discoveryv1.EndpointSlice)
		wantApply  []string
		wantDelete []string
	}{
		{"first", func(map[string]*discoveryv1.EndpointSlice) {}, nil, nil}, // every slice, checked below
		{"nothing changed", func(map[string]*discoveryv1.EndpointSlice) {}, nil, nil},
		{"one endpoint of one chunk", func(map[string]*discoveryv1.EndpointSlice) {
			c := chunk("echo-3", "IPv4", 3, 100)
			c.Endpoints[42].Conditions.Ready = false
			chunks["echo-3"] = c
		}, []string{slice("echo-3", 0)}, nil},
		{"a slice edited by hand", func(e map[string]*discoveryv1.EndpointSlice) {
			s := *e[slice("echo-1", 0)]
			s.Endpoints = slices.Clone(s.Endpoints)
			s.Endpoints[0].TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: "elsewhere"}
			s.ResourceVersion += "x"
			e[s.Name] = &s
		}, []string{slice("echo-1", 0)}, nil},
		{"a chunk grows past the slice size", func(map[string]*discoveryv1.EndpointSlice) {
			chunks["echo-0"] = chunk("echo-0", "IPv4", 0, 150)
		}, []string{slice("echo-0", 1)}, nil}, // the first 100 stay where they are
		{"a chunk leaves, another empties", func(map[string]*discoveryv1.EndpointSlice) {
			delete(chunks, "echo-2")
			chunks["echo-4"] = chunk("echo-4", "IPv4", 4, 0)
		}, nil, []string{slice("echo-2", 0), slice("echo-4", 0)}},
	}
	existing := map[string]*discoveryv1.EndpointSlice{}
	memo := &importMemo{entries: map[string]memoEntry{}}
	for i, st := range steps {
		st.change(existing)
		p := PlanSlices("p", chunks, dual, existing, 100, nil, memo.check)
		if i == 0 {
			if len(p.Apply) != 5 {
				t.Fatalf("%s: %d slices to apply, want 5", st.name, len(p.Apply))
			}
		} else if got := names(p.Apply); !slices.Equal(got, st.wantApply) || !slices.Equal(p.Delete, st.wantDelete) {
			t.Errorf("%s: apply %v delete %v, want apply %v delete %v", st.name, got, p.Delete, st.wantApply, st.wantDelete)
		}
		existing = applyPlan(existing, p)
		for _, s := range p.Apply {
			memo.set(existing[s.Name], s.Chunk, s.Part, s.Hints)
		}
		for _, s := range p.Keep {
			memo.set(existing[s.Name], s.Chunk, s.Part, s.Hints)
		}
		total := 0
		for _, s := range existing {
			if len(s.Endpoints) > 100 {
				t.Errorf("%s: slice %s holds %d endpoints", st.name, s.Name, len(s.Endpoints))
			}
			total += len(s.Endpoints)
		}
		want := 0
		for _, c := range chunks {
			want += len(c.Endpoints)
		}
		if total != want {
			t.Errorf("%s: slices hold %d endpoints, want %d", st.name, total, want)
		}
	}
}

// A slice verified against the chunk object it still has is not compared
// again; without the record (an agent restart) the comparison finds it
// right all the same.
func TestPlanSlicesTrustsOnlyWhatWasVerified(t *testing.T) {
	c := chunk("echo", "IPv4", 1, 3)
	chunks := map[string]*registryv1.EndpointChunk{"echo": c}
	first := PlanSlices("p", chunks, dual, nil, 100, nil, nil)
	existing := applyPlan(nil, first)
	if p := PlanSlices("p", chunks, dual, existing, 100, nil, nil); len(p.Apply) != 0 || len(p.Keep) != 1 {
		t.Errorf("unverified but equal: apply %v keep %v, want one kept", names(p.Apply), names(p.Keep))
	}
	memo := &importMemo{entries: map[string]memoEntry{}}
	name := first.Apply[0].Name
	memo.set(existing[name], c, 0, "")
	calls := 0
	counting := func(s *discoveryv1.EndpointSlice, ch *registryv1.EndpointChunk, part int, hints string) bool {
		calls++
		return memo.check(s, ch, part, hints)
	}
	if p := PlanSlices("p", chunks, dual, existing, 100, nil, counting); len(p.Keep) != 1 || calls != 1 {
		t.Errorf("verified: keep %v after %d checks", names(p.Keep), calls)
	}
	// The record is trusted, not the content: a slice that differs under
	// the very resourceVersion verified is not compared (the API server
	// never serves two contents under one resourceVersion).
	same := *existing[name]
	same.Endpoints = nil
	if p := PlanSlices("p", chunks, dual, map[string]*discoveryv1.EndpointSlice{name: &same}, 100, nil, memo.check); len(p.Keep) != 1 {
		t.Errorf("verified slice compared anyway: apply %v", names(p.Apply))
	}
	// The same content in a new chunk object is compared, and kept.
	chunks["echo"] = chunk("echo", "IPv4", 1, 3)
	if memo.check(existing[name], chunks["echo"], 0, "") {
		t.Error("a new chunk object counts as verified")
	}
	if p := PlanSlices("p", chunks, dual, existing, 100, nil, memo.check); len(p.Keep) != 1 {
		t.Errorf("same content, new chunk: apply %v keep %v", names(p.Apply), names(p.Keep))
	}
	// An edited slice (new resourceVersion) is compared: the edit shows.
	edited := *existing[name]
	edited.Endpoints = slices.Clone(edited.Endpoints)
	edited.Endpoints[0].Conditions.Ready = ptr.To(false)
	edited.ResourceVersion = "2"
	existing[name] = &edited
	if p := PlanSlices("p", map[string]*registryv1.EndpointChunk{"echo": c}, dual, existing, 100, nil, memo.check); len(p.Apply) != 1 {
		t.Errorf("edited slice: apply %v, want it repaired", names(p.Apply))
	}
}

// Zone hints are part of a slice's content: every endpoint carries them,
// a change of hints rewrites slices that were verified without them, and
// hints no longer wanted are taken off.
func TestPlanSlicesHints(t *testing.T) {
	chunks := map[string]*registryv1.EndpointChunk{"echo": chunk("echo", "IPv4", 1, 3)}
	here := []discoveryv1.ForZone{{Name: "eu-a"}}
	away := []discoveryv1.ForZone{{Name: "fleetnet.dev-other-clusters"}}
	memo := &importMemo{entries: map[string]memoEntry{}}
	var existing map[string]*discoveryv1.EndpointSlice
	for _, step := range []struct {
		name  string
		hints []discoveryv1.ForZone
		apply int
	}{
		{"no hints", nil, 1},
		{"hinted for this cluster's zones", here, 1},
		{"unchanged", here, 0},
		{"hinted away", away, 1},
		{"hints taken off", nil, 1},
	} {
		p := PlanSlices("p", chunks, dual, existing, 100, step.hints, memo.check)
		if len(p.Apply) != step.apply {
			t.Fatalf("%s: %d slices to apply, want %d", step.name, len(p.Apply), step.apply)
		}
		for _, s := range p.Apply {
			for _, e := range s.Endpoints {
				if got := zonesOf(e.Hints); !slices.Equal(got, step.hints) {
					t.Errorf("%s: endpoint %v hinted for %v, want %v", step.name, e.Addresses, got, step.hints)
				}
			}
		}
		existing = applyPlan(existing, p)
		for _, s := range slices.Concat(p.Apply, p.Keep) {
			memo.set(existing[s.Name], s.Chunk, s.Part, s.Hints)
		}
		// Without the record (an agent restart) the comparison decides.
		if again := PlanSlices("p", chunks, dual, existing, 100, step.hints, nil); len(again.Apply) != 0 {
			t.Errorf("%s: the slices just planned compare unequal to their plan", step.name)
		}
	}
}
