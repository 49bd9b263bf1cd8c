package registrysource

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/discovery/store"
	"github.com/fleetnet/fleetnet/internal/registry/importstate"
)

// Import is what the registry says of one import: its merged spec and its
// endpoint chunks by source cluster, then chunk name.
type Import = importstate.Import

// BuildPool makes the pool of an import: its labels are the import's
// (the exporters' spec.exportedLabels), its clusters the participating
// ones that hold endpoint chunks, with their regions. An endpoint's
// instance id is the exporting Pod's name where the registry carries one,
// else its first address; one that two chunks hold (as while the
// EndpointSlice controller moves it) is served once, from the chunk whose
// name sorts first. Endpoints without conditions are ready and serving,
// as a nil ready is in an EndpointSlice.
func BuildPool(k store.Key, imp *Import) discoveryv1.Pool {
	p := discoveryv1.Pool{Namespace: k.Namespace, Name: k.Name, Clusters: []discoveryv1.PoolCluster{}}
	if imp == nil || imp.Import == nil {
		return p
	}
	if len(imp.Import.GetLabels()) > 0 {
		p.Labels = maps.Clone(imp.Import.GetLabels())
	}
	for _, c := range imp.Import.GetClusters() {
		chunks := imp.Chunks[c.GetClusterId()]
		if len(chunks) == 0 {
			continue
		}
		pc := discoveryv1.PoolCluster{Cluster: c.GetClusterId(), Region: c.GetRegion(), Endpoints: []discoveryv1.Endpoint{}}
		seen := map[string]bool{}
		for _, name := range slices.Sorted(maps.Keys(chunks)) {
			ch := chunks[name]
			var ports []discoveryv1.Port
			for _, port := range ch.GetPorts() {
				ports = append(ports, discoveryv1.Port{Name: port.GetName(), Port: port.GetPort(), Protocol: port.GetProtocol()})
			}
			slices.SortFunc(ports, func(a, b discoveryv1.Port) int { return cmp.Compare(a.Name, b.Name) })
			for _, e := range ch.GetEndpoints() {
				if len(e.GetAddresses()) == 0 {
					continue
				}
				id := e.GetPodName()
				if id == "" {
					id = canonicalAddress(e.GetAddresses()[0])
				}
				if seen[id] {
					continue
				}
				seen[id] = true
				ready, serving := true, true
				if cond := e.GetConditions(); cond != nil {
					ready, serving = cond.GetReady(), cond.GetServing()
				}
				pc.Endpoints = append(pc.Endpoints, discoveryv1.Endpoint{
					InstanceID: id, Addresses: slices.Clone(e.GetAddresses()), Ports: slices.Clone(ports),
					Ready: ready, Serving: serving, Terminating: e.GetConditions().GetTerminating(),
					Hostname: e.GetHostname(), Zone: e.GetZone(),
				})
			}
		}
		p.Clusters = append(p.Clusters, pc)
	}
	return p
}

// canonicalAddress writes an IP address one way (an IPv6 address may be
// spelled several), so that an instance id made of it is stable.
func canonicalAddress(a string) string {
	if ip, err := netip.ParseAddr(a); err == nil {
		return ip.String()
	}
	return a
}

// apply applies one import or endpoints delta to m and returns the import
// it touched; false for other events.
func apply(m map[store.Key]*Import, ev *registryv1.WatchEvent) (store.Key, bool) {
	return importstate.Apply(m, ev, func(ns, name string) store.Key { return store.Key{Namespace: ns, Name: name} })
}

// applyStatus applies one export status delta to m (by service, then
// exporting cluster) and returns the service it touched; false for other
// events.
func applyStatus(m map[store.Key]map[string]*registryv1.ExportStatus, ev *registryv1.WatchEvent) (store.Key, bool) {
	var ek *registryv1.ExportKey
	st := ev.GetExportStatus()
	switch {
	case st != nil:
		ek = st.GetKey()
	case ev.GetExportStatusDelete() != nil:
		ek = ev.GetExportStatusDelete()
	default:
		return store.Key{}, false
	}
	k := store.Key{Namespace: ek.GetNamespace(), Name: ek.GetName()}
	if st == nil {
		delete(m[k], ek.GetClusterId())
		if len(m[k]) == 0 {
			delete(m, k)
		}
		return k, true
	}
	if m[k] == nil {
		m[k] = map[string]*registryv1.ExportStatus{}
	}
	m[k][ek.GetClusterId()] = st
	return k, true
}

// snapshot is a registry snapshot being received: imports and statuses.
type snapshot struct {
	imports  map[store.Key]*Import
	statuses map[store.Key]map[string]*registryv1.ExportStatus
}

func newSnapshot() *snapshot {
	return &snapshot{imports: map[store.Key]*Import{}, statuses: map[store.Key]map[string]*registryv1.ExportStatus{}}
}

func (sn *snapshot) apply(ev *registryv1.WatchEvent) {
	if _, ok := apply(sn.imports, ev); !ok {
		applyStatus(sn.statuses, ev)
	}
}
