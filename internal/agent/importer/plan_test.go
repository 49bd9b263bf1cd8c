package importer

import (
	"fmt"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

var ports = []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}}

func endpoints(family string, from, to int) []discoveryv1.Endpoint {
	var out []discoveryv1.Endpoint
	for i := from; i < to; i++ {
		addr := fmt.Sprintf("10.244.%d.%d", i/250, 1+i%250)
		if family == "v6" {
			addr = fmt.Sprintf("fd00:10:244::%x", i+1)
		}
		out = append(out, discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return out
}

// apply turns a plan into the slices that exist afterwards.
func applyPlan(existing []Slice, p Plan) []Slice {
	byName := map[string]Slice{}
	for _, s := range existing {
		byName[s.Name] = s
	}
	for _, s := range p.Apply {
		byName[s.Name] = s
	}
	for _, n := range p.Delete {
		delete(byName, n)
	}
	var out []Slice
	for _, s := range byName {
		out = append(out, s)
	}
	return out
}

func count(ss []Slice) int {
	n := 0
	for _, s := range ss {
		n += len(s.Endpoints)
	}
	return n
}

func TestPlanSlices(t *testing.T) {
	type step struct {
		name       string
		want       []discoveryv1.Endpoint
		ports      []discoveryv1.EndpointPort
		wantWrites int // applied + deleted slices
		wantSlices int
	}
	base := endpoints("v4", 0, 100)
	steps := []step{
		{"100 endpoints fill one slice", base, ports, 1, 1},
		{"unchanged: no writes", base, ports, 0, 1},
		{"a 101st opens a second slice, the first is untouched", endpoints("v4", 0, 101), ports, 1, 2},
		{"back to 100: the second slice goes", base, ports, 1, 1},
		{"one removed from the middle: one slice rewritten", append(endpoints("v4", 0, 50), endpoints("v4", 51, 100)...), ports, 1, 1},
		{"one removed, one added at once: one slice rewritten", append(endpoints("v4", 0, 50), endpoints("v4", 51, 101)...), ports, 1, 1},
		{"ports change: every slice rewritten", append(endpoints("v4", 0, 50), endpoints("v4", 51, 101)...), []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](9090)}}, 1, 1},
		{"all gone: slices deleted", nil, ports, 1, 0},
	}
	var have []Slice
	for _, st := range steps {
		p := PlanSlices("derived-abc-east", discoveryv1.AddressTypeIPv4, st.ports, st.want, have, 100)
		have = applyPlan(have, p)
		if got := len(p.Apply) + len(p.Delete); got != st.wantWrites {
			t.Errorf("%s: %d writes (apply %d, delete %v), want %d", st.name, got, len(p.Apply), p.Delete, st.wantWrites)
		}
		if len(have) != st.wantSlices {
			t.Errorf("%s: %d slices, want %d", st.name, len(have), st.wantSlices)
		}
		if count(have) != len(st.want) {
			t.Errorf("%s: %d endpoints placed, want %d", st.name, count(have), len(st.want))
		}
		for _, s := range have {
			if len(s.Endpoints) > 100 {
				t.Errorf("%s: slice %s holds %d endpoints", st.name, s.Name, len(s.Endpoints))
			}
		}
	}
}

func TestPlanRepairsDriftAndKeepsNames(t *testing.T) {
	want := endpoints("v6", 0, 3)
	p := PlanSlices("derived-abc-east", discoveryv1.AddressTypeIPv6, ports, want, nil, 100)
	if len(p.Apply) != 1 || p.Apply[0].Name != "derived-abc-east-v6-0" {
		t.Fatalf("first plan = %+v, want one slice derived-abc-east-v6-0", p)
	}
	// Someone edits the slice: an address changes and a stranger is added.
	edited := p.Apply[0]
	edited.Endpoints = append([]discoveryv1.Endpoint(nil), edited.Endpoints...)
	edited.Endpoints[0] = discoveryv1.Endpoint{Addresses: []string{"fd00::bad"}}
	p = PlanSlices("derived-abc-east", discoveryv1.AddressTypeIPv6, ports, want, []Slice{edited}, 100)
	if len(p.Apply) != 1 || p.Apply[0].Name != edited.Name || count(p.Apply) != 3 {
		t.Fatalf("repair plan = %+v, want the same slice rewritten with the 3 wanted endpoints", p)
	}
	for _, e := range p.Apply[0].Endpoints {
		if e.Addresses[0] == "fd00::bad" {
			t.Fatal("foreign endpoint kept")
		}
	}
	// An unchanged group is kept.
	p2 := PlanSlices("derived-abc-east", discoveryv1.AddressTypeIPv6, ports, want, p.Apply, 100)
	if len(p2.Apply) != 0 || len(p2.Keep) != 1 {
		t.Fatalf("converged plan = %+v, want one kept slice", p2)
	}
}

func TestSmallSlices(t *testing.T) {
	// 10 endpoints, 3 per slice: 4 slices; removing one from the first
	// slice and adding one fills the hole in place.
	p := PlanSlices("p", discoveryv1.AddressTypeIPv4, ports, endpoints("v4", 0, 10), nil, 3)
	if len(p.Apply) != 4 {
		t.Fatalf("%d slices, want 4", len(p.Apply))
	}
	have := applyPlan(nil, p)
	next := append(endpoints("v4", 1, 10), endpoints("v4", 10, 11)...)
	p = PlanSlices("p", discoveryv1.AddressTypeIPv4, ports, next, have, 3)
	if len(p.Apply) != 1 || len(p.Delete) != 0 {
		t.Fatalf("swap of one endpoint: %+v, want one slice rewritten", p)
	}
}
