// Package importer holds the import side of the agent. This file is its
// EndpointSlice planner: given the endpoint chunks one source cluster
// serves for one import and the slices that exist, it decides which slices
// to write and which to delete. It is pure: plain inputs, plain outputs.
//
// Each chunk (one EndpointSlice of the exporting cluster) becomes imported
// slices of its own, named after it, so that a change to one chunk rewrites
// only its slices and the work per change is proportional to the change,
// not to the Service: a Service of 50,000 endpoints is 500 chunks, and one
// endpoint changing touches one. A slice is compared with its chunk only
// when either changed since they were last found equal (see Verified); the
// comparison itself is typed, not reflective.
package importer

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/agent/locality"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// Slice is a planned EndpointSlice: its name, address type, endpoints and
// ports, and the chunk it comes from.
type Slice struct {
	Name        string
	AddressType discoveryv1.AddressType
	Endpoints   []discoveryv1.Endpoint
	Ports       []discoveryv1.EndpointPort
	// Chunk is the source chunk; Part is which of its slices this is.
	Chunk *registryv1.EndpointChunk
	Part  int
	// Hints is the key of the zone hints its endpoints carry
	// (locality.HintsKey).
	Hints string
}

// Plan is what to do to reach the desired slices.
type Plan struct {
	// Apply holds every slice whose content must be written, sorted by name.
	Apply []Slice
	// Delete names the slices to remove, sorted.
	Delete []string
	// Keep holds the slices that are already right (their content is not
	// filled in: nothing needs it).
	Keep []Slice
}

// Verified reports whether an existing slice was found equal to (or
// written from) part of chunk with the given zone hints (a
// locality.HintsKey), and neither changed since: the slice's
// resourceVersion and the chunk object are the ones compared then. A false
// answer only costs a comparison.
type Verified func(existing *discoveryv1.EndpointSlice, chunk *registryv1.EndpointChunk, part int, hints string) bool

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

// chunkID names a chunk in slice names: source slice names are up to 253
// characters, imported slice names carry the derived Service's and the
// cluster's names too.
func chunkID(chunk string, length int) string {
	sum := sha256.Sum256([]byte(chunk))
	return hex.EncodeToString(sum[:])[:length]
}

// SliceName is the name of the part-th slice of a chunk:
// <prefix>-<family>-<chunk id>-<part>, prefix being <derived>-<cluster>.
func SliceName(prefix string, t discoveryv1.AddressType, chunk string, part int) string {
	return sliceName(prefix, t, chunkID(chunk, 10), part)
}

func sliceName(prefix string, t discoveryv1.AddressType, id string, part int) string {
	return fmt.Sprintf("%s-%s-%s-%d", prefix, FamilySuffix(t), id, part)
}

// Wanted reports whether a chunk's address type is served: like the
// EndpointSlice controller, only the derived Service's IP families and FQDN
// (an IPv6 slice under an IPv4-only Service reaches no one, and DNS would
// hand out its addresses).
func Wanted(chunk *registryv1.EndpointChunk, families []corev1.IPFamily) bool {
	t := discoveryv1.AddressType(chunk.GetAddressType())
	return t == discoveryv1.AddressTypeFQDN || slices.Contains(families, corev1.IPFamily(t))
}

// PlanSlices plans the slices of one source cluster's chunks (by name),
// at most maxPerSlice endpoints each, against existing, the cluster's
// imported slices by name. Every endpoint carries hints as its zone hints
// (none when nil; see package locality).
func PlanSlices(prefix string, chunks map[string]*registryv1.EndpointChunk, families []corev1.IPFamily, existing map[string]*discoveryv1.EndpointSlice, maxPerSlice int, hints []discoveryv1.ForZone, verified Verified) Plan {
	var plan Plan
	hk := locality.HintsKey(hints)
	names := make([]string, 0, len(chunks))
	for n, c := range chunks {
		if Wanted(c, families) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	desired := map[string]bool{}
	ids := map[string]string{} // chunk id -> chunk name, to see collisions
	for _, n := range names {
		c := chunks[n]
		t := discoveryv1.AddressType(c.GetAddressType())
		id := chunkID(n, 10)
		// Two chunk names sharing a 40-bit hash prefix: the later one (by
		// name) takes the whole hash.
		if other, ok := ids[string(t)+id]; ok && other != n {
			id = chunkID(n, 64)
		}
		ids[string(t)+id] = n
		// A chunk without endpoints needs no slice.
		parts := (len(c.GetEndpoints()) + maxPerSlice - 1) / maxPerSlice
		for part := range parts {
			name := sliceName(prefix, t, id, part)
			desired[name] = true
			have := existing[name]
			if have != nil && have.AddressType == t && verified != nil && verified(have, c, part, hk) {
				plan.Keep = append(plan.Keep, Slice{Name: name, AddressType: t, Chunk: c, Part: part, Hints: hk})
				continue
			}
			s := buildSlice(name, t, c, part, maxPerSlice, hints)
			if have != nil && have.AddressType == t && endpointsEqual(have.Endpoints, s.Endpoints) && portsEqual(have.Ports, s.Ports) {
				plan.Keep = append(plan.Keep, Slice{Name: name, AddressType: t, Chunk: c, Part: part, Hints: hk})
				continue
			}
			plan.Apply = append(plan.Apply, s)
		}
	}
	for name := range existing {
		if !desired[name] {
			plan.Delete = append(plan.Delete, name)
		}
	}
	sort.Strings(plan.Delete)
	return plan
}

// buildSlice converts part of a chunk. Endpoints carry no targetRef or
// nodeName: those Pods and nodes are not in this cluster.
func buildSlice(name string, t discoveryv1.AddressType, c *registryv1.EndpointChunk, part, maxPerSlice int, hints []discoveryv1.ForZone) Slice {
	s := Slice{Name: name, AddressType: t, Chunk: c, Part: part, Hints: locality.HintsKey(hints)}
	for _, p := range c.GetPorts() {
		ep := discoveryv1.EndpointPort{Name: ptr.To(p.GetName()), Protocol: ptr.To(corev1.Protocol(p.GetProtocol())), Port: ptr.To(p.GetPort())}
		if p.GetAppProtocol() != "" {
			ep.AppProtocol = ptr.To(p.GetAppProtocol())
		}
		s.Ports = append(s.Ports, ep)
	}
	all := c.GetEndpoints()
	from, to := min(part*maxPerSlice, len(all)), min((part+1)*maxPerSlice, len(all))
	s.Endpoints = make([]discoveryv1.Endpoint, 0, to-from)
	for _, e := range all[from:to] {
		ep := discoveryv1.Endpoint{
			Addresses: e.GetAddresses(),
			Conditions: discoveryv1.EndpointConditions{
				Ready:       ptr.To(e.GetConditions().GetReady()),
				Serving:     ptr.To(e.GetConditions().GetServing()),
				Terminating: ptr.To(e.GetConditions().GetTerminating()),
			},
		}
		if e.GetHostname() != "" {
			ep.Hostname = ptr.To(e.GetHostname())
		}
		if e.GetZone() != "" {
			ep.Zone = ptr.To(e.GetZone())
		}
		if hints != nil {
			ep.Hints = &discoveryv1.EndpointHints{ForZones: hints}
		}
		s.Endpoints = append(s.Endpoints, ep)
	}
	return s
}

// endpointsEqual compares what an existing slice holds with what is
// planned; a field the agent never writes (targetRef, nodeName) or hints
// other than the planned ones are a difference, which the apply repairs.
func endpointsEqual(have, want []discoveryv1.Endpoint) bool {
	if len(have) != len(want) {
		return false
	}
	for i := range have {
		h, w := &have[i], &want[i]
		if !slices.Equal(h.Addresses, w.Addresses) ||
			!boolPtrEqual(h.Conditions.Ready, w.Conditions.Ready) ||
			!boolPtrEqual(h.Conditions.Serving, w.Conditions.Serving) ||
			!boolPtrEqual(h.Conditions.Terminating, w.Conditions.Terminating) ||
			ptr.Deref(h.Hostname, "") != ptr.Deref(w.Hostname, "") ||
			ptr.Deref(h.Zone, "") != ptr.Deref(w.Zone, "") ||
			!locality.SameHints(h.Hints, zonesOf(w.Hints)) ||
			h.TargetRef != nil || h.NodeName != nil || len(h.DeprecatedTopology) > 0 {
			return false
		}
	}
	return true
}

// zonesOf returns a planned endpoint's zone hints (nil: none).
func zonesOf(h *discoveryv1.EndpointHints) []discoveryv1.ForZone {
	if h == nil {
		return nil
	}
	return h.ForZones
}

func boolPtrEqual(a, b *bool) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

func portsEqual(have, want []discoveryv1.EndpointPort) bool {
	return slices.EqualFunc(have, want, func(h, w discoveryv1.EndpointPort) bool {
		return ptr.Deref(h.Name, "") == ptr.Deref(w.Name, "") &&
			ptr.Deref(h.Protocol, corev1.ProtocolTCP) == ptr.Deref(w.Protocol, corev1.ProtocolTCP) &&
			ptr.Deref(h.Port, 0) == ptr.Deref(w.Port, 0) &&
			ptr.Deref(h.AppProtocol, "") == ptr.Deref(w.AppProtocol, "")
	})
}
