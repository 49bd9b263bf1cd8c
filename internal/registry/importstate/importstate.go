// Package importstate folds the registry's watch events into what a
// watcher holds of each import: the merged Import and its endpoint chunks
// by source cluster. The agent's importer and fleetnet-discovery's
// registry source both follow the watch this way.
package importstate

import registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"

// Import is what the watch has said of one import. Import is nil while
// only chunks are known (they may arrive first).
type Import struct {
	Import *registryv1.Import
	// Chunks by source cluster, then chunk name.
	Chunks map[string]map[string]*registryv1.EndpointChunk
}

// Apply applies one import or endpoints delta of the watch to m, whose
// keys key makes from a namespace and name, and returns the key it
// touched; false for the other events (reset, synced marks). An import
// left with neither its Import nor chunks is removed from m.
func Apply[K comparable](m map[K]*Import, ev *registryv1.WatchEvent, key func(namespace, name string) K) (K, bool) {
	entry := func(ns, name string) (*Import, K) {
		k := key(ns, name)
		d := m[k]
		if d == nil {
			d = &Import{Chunks: map[string]map[string]*registryv1.EndpointChunk{}}
			m[k] = d
		}
		return d, k
	}
	switch e := ev.GetEvent().(type) {
	case *registryv1.WatchEvent_ImportUpsert:
		d, k := entry(e.ImportUpsert.GetKey().GetNamespace(), e.ImportUpsert.GetKey().GetName())
		d.Import = e.ImportUpsert
		return k, true
	case *registryv1.WatchEvent_ImportDelete:
		k := key(e.ImportDelete.GetNamespace(), e.ImportDelete.GetName())
		delete(m, k)
		return k, true
	case *registryv1.WatchEvent_EndpointsUpsert:
		c := e.EndpointsUpsert
		d, k := entry(c.GetKey().GetNamespace(), c.GetKey().GetName())
		if d.Chunks[c.GetKey().GetClusterId()] == nil {
			d.Chunks[c.GetKey().GetClusterId()] = map[string]*registryv1.EndpointChunk{}
		}
		d.Chunks[c.GetKey().GetClusterId()][c.GetKey().GetChunk()] = c
		return k, true
	case *registryv1.WatchEvent_EndpointsDelete:
		c := e.EndpointsDelete
		k := key(c.GetNamespace(), c.GetName())
		if d := m[k]; d != nil {
			delete(d.Chunks[c.GetClusterId()], c.GetChunk())
			if len(d.Chunks[c.GetClusterId()]) == 0 {
				delete(d.Chunks, c.GetClusterId())
			}
			if d.Import == nil && len(d.Chunks) == 0 {
				delete(m, k)
			}
		}
		return k, true
	}
	var zero K
	return zero, false
}
