// Package importer holds the import side of the agent. This file is its
// EndpointSlice planner: given the endpoints one source cluster serves for
// one import and address family, and the slices that exist, it decides
// which slices to write and which to delete. Endpoints stay in the slice
// they are in while others come and go, so adding or removing one endpoint
// rewrites exactly one slice. It is pure: plain inputs, plain outputs.
package importer

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// Slice is a planned or existing EndpointSlice of one group (import, source
// cluster, address family): its name, endpoints and ports.
type Slice struct {
	Name      string
	Endpoints []discoveryv1.Endpoint
	Ports     []discoveryv1.EndpointPort
}

// Plan is what to do to reach the desired endpoints.
type Plan struct {
	// Apply holds every slice whose content must be written, sorted by name.
	Apply []Slice
	// Delete names the slices to remove.
	Delete []string
	// Keep names the slices that are already right.
	Keep []string
}

// FamilySuffix is the part of a slice's name that carries its address type,
// so that a slice never changes its immutable addressType.
func FamilySuffix(t discoveryv1.AddressType) string {
	switch t {
	case discoveryv1.AddressTypeIPv6:
		return "v6"
	case discoveryv1.AddressTypeFQDN:
		return "fqdn"
	}
	return "v4"
}

// SliceName is the name of the index-th slice of a group whose names start
// with prefix: <prefix>-<family>-<index>.
func SliceName(prefix string, t discoveryv1.AddressType, index int) string {
	return fmt.Sprintf("%s-%s-%d", prefix, FamilySuffix(t), index)
}

func key(e discoveryv1.Endpoint) string {
	if len(e.Addresses) == 0 {
		return ""
	}
	return e.Addresses[0]
}

// PlanSlices places want (endpoints keyed by their first address) into at
// most maxPerSlice per slice, keeping each endpoint in the existing slice
// that holds it, filling existing slices before making new ones, and naming
// new slices with the smallest free index.
func PlanSlices(prefix string, t discoveryv1.AddressType, ports []discoveryv1.EndpointPort, want []discoveryv1.Endpoint, existing []Slice, maxPerSlice int) Plan {
	wanted := make(map[string]discoveryv1.Endpoint, len(want))
	for _, e := range want {
		wanted[key(e)] = e
	}
	existing = slices.Clone(existing)
	sort.Slice(existing, func(i, j int) bool { return existing[i].Name < existing[j].Name })

	placed := map[string]bool{}
	next := make([]Slice, 0, len(existing))
	for _, s := range existing {
		n := Slice{Name: s.Name, Ports: ports}
		for _, e := range s.Endpoints {
			k := key(e)
			if w, ok := wanted[k]; ok && !placed[k] && len(n.Endpoints) < maxPerSlice {
				n.Endpoints = append(n.Endpoints, w)
				placed[k] = true
			}
		}
		next = append(next, n)
	}
	var fresh []string
	for _, k := range slices.Sorted(maps.Keys(wanted)) {
		if !placed[k] {
			fresh = append(fresh, k)
		}
	}
	// Fill slices with room, in name order, then open new ones.
	for i := range next {
		for len(fresh) > 0 && len(next[i].Endpoints) < maxPerSlice && len(next[i].Endpoints) > 0 {
			next[i].Endpoints = append(next[i].Endpoints, wanted[fresh[0]])
			fresh = fresh[1:]
		}
	}
	used := map[string]bool{}
	for _, s := range existing {
		used[s.Name] = true
	}
	index := 0
	for len(fresh) > 0 {
		// Reuse an emptied slice before making a new one.
		var target *Slice
		for i := range next {
			if len(next[i].Endpoints) == 0 {
				target = &next[i]
				break
			}
		}
		if target == nil {
			for used[SliceName(prefix, t, index)] {
				index++
			}
			name := SliceName(prefix, t, index)
			used[name] = true
			next = append(next, Slice{Name: name, Ports: ports})
			target = &next[len(next)-1]
		}
		for len(fresh) > 0 && len(target.Endpoints) < maxPerSlice {
			target.Endpoints = append(target.Endpoints, wanted[fresh[0]])
			fresh = fresh[1:]
		}
	}

	old := map[string]Slice{}
	for _, s := range existing {
		old[s.Name] = s
	}
	var plan Plan
	for _, s := range next {
		prev, existed := old[s.Name]
		switch {
		case len(s.Endpoints) == 0 && existed:
			plan.Delete = append(plan.Delete, s.Name)
		case len(s.Endpoints) == 0:
		case existed && equality.Semantic.DeepEqual(prev.Endpoints, s.Endpoints) && equality.Semantic.DeepEqual(prev.Ports, s.Ports):
			plan.Keep = append(plan.Keep, s.Name)
		default:
			plan.Apply = append(plan.Apply, s)
		}
	}
	sort.Slice(plan.Apply, func(i, j int) bool { return plan.Apply[i].Name < plan.Apply[j].Name })
	sort.Strings(plan.Delete)
	sort.Strings(plan.Keep)
	return plan
}
