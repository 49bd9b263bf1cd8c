package export

import (
	"sort"
	"sync"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/agent/publish"
	discoveryv1 "k8s.io/api/discovery/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// chunkCache keeps, per export, the chunk built from each EndpointSlice with
// the slice's UID and resourceVersion then. An unchanged slice gives the
// same chunk object again, which the publisher recognises without
// comparing: one changed slice of a 50,000-endpoint Service costs one
// chunk's work, not the Service's. The chunk is built from the slice itself
// whenever the slice is another object or version, so the cache never
// stands between the cluster's state and what is published.
type chunkCache struct {
	mu       sync.Mutex
	byExport map[publish.ExportKey]map[string]cachedChunk
}

type cachedChunk struct {
	uid, resourceVersion string
	chunk                *registryv1.EndpointChunk
}

// build returns the export's chunks from slices, sorted by name, and
// forgets the chunks of slices that are gone.
func (c *chunkCache) build(cluster string, se *mcsv1beta1.ServiceExport, slices []discoveryv1.EndpointSlice) []*registryv1.EndpointChunk {
	k := publish.ExportKey{Namespace: se.Namespace, Name: se.Name}
	c.mu.Lock()
	old := c.byExport[k]
	c.mu.Unlock()
	next := make(map[string]cachedChunk, len(slices))
	out := make([]*registryv1.EndpointChunk, 0, len(slices))
	for i := range slices {
		s := &slices[i]
		if e, ok := old[s.Name]; ok && e.uid == string(s.UID) && e.resourceVersion == s.ResourceVersion && s.ResourceVersion != "" {
			next[s.Name] = e
			out = append(out, e.chunk)
			continue
		}
		ch := BuildChunk(cluster, se, s)
		if ch == nil {
			continue
		}
		next[s.Name] = cachedChunk{uid: string(s.UID), resourceVersion: s.ResourceVersion, chunk: ch}
		out = append(out, ch)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetKey().GetChunk() < out[j].GetKey().GetChunk() })
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byExport == nil {
		c.byExport = map[publish.ExportKey]map[string]cachedChunk{}
	}
	c.byExport[k] = next
	return out
}

// forget drops an export's chunks (withdrawn).
func (c *chunkCache) forget(k publish.ExportKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byExport, k)
}
