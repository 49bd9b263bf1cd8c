package importer

import (
	"sync"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// verifiedSlices remembers, per import, which chunk part each imported slice
// was last found equal to or written from, and the slice's resourceVersion
// then. It is a record of a comparison between two observed versions, not
// an input hash: a slice edited by anyone has another resourceVersion, a
// changed chunk is another object, and either makes the planner compare
// again. It saves the comparison of the unchanged slices of a large import.
type verifiedSlices struct {
	mu       sync.Mutex
	byImport map[types.NamespacedName]*importMemo
}

// importMemo is one import's record. controller-runtime never reconciles
// one import twice at once, so it needs no lock of its own.
type importMemo struct {
	entries map[string]memoEntry
}

// memoEntry is what a slice was last verified against.
type memoEntry struct {
	resourceVersion string
	chunk           *registryv1.EndpointChunk
	part            int
	hints           string
}

// of returns an import's record, made empty when there is none.
func (v *verifiedSlices) of(key types.NamespacedName) *importMemo {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.byImport == nil {
		v.byImport = map[types.NamespacedName]*importMemo{}
	}
	m := v.byImport[key]
	if m == nil {
		m = &importMemo{entries: map[string]memoEntry{}}
		v.byImport[key] = m
	}
	return m
}

// drop forgets an import's record (removed, or waiting for its namespace).
func (v *verifiedSlices) drop(key types.NamespacedName) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.byImport, key)
}

// check is a Verified.
func (m *importMemo) check(s *discoveryv1.EndpointSlice, c *registryv1.EndpointChunk, part int, hints string) bool {
	e, ok := m.entries[s.Name]
	return ok && e.resourceVersion == s.ResourceVersion && e.chunk == c && e.part == part && e.hints == hints
}

func (m *importMemo) set(s *discoveryv1.EndpointSlice, c *registryv1.EndpointChunk, part int, hints string) {
	m.entries[s.Name] = memoEntry{resourceVersion: s.ResourceVersion, chunk: c, part: part, hints: hints}
}

func (m *importMemo) forget(name string) { delete(m.entries, name) }

// retain forgets the slices not named in keep.
func (m *importMemo) retain(keep map[string]bool) {
	for name := range m.entries {
		if !keep[name] {
			delete(m.entries, name)
		}
	}
}
