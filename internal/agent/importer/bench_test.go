package importer

import (
	"fmt"
	"testing"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// bigService is one source cluster's 50,000 endpoints in 500 chunks of 100,
// as an exporter of a large Service publishes them.
func bigService(version int) map[string]*registryv1.EndpointChunk {
	chunks := map[string]*registryv1.EndpointChunk{}
	for c := range 500 {
		ch := &registryv1.EndpointChunk{
			Key:         &registryv1.ChunkKey{Namespace: "bench", Name: "big", ClusterId: "east", Chunk: fmt.Sprintf("big-%03d", c)},
			AddressType: string(discoveryv1.AddressTypeIPv4),
			Ports:       []*registryv1.EndpointPort{{Name: "http", Protocol: "TCP", Port: 8080}},
		}
		for e := range 100 {
			n := c*100 + e
			ch.Endpoints = append(ch.Endpoints, &registryv1.Endpoint{
				Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", n>>16, n>>8&0xff, n&0xff)},
				Zone:       "zone-a",
				Conditions: &registryv1.EndpointConditions{Ready: true, Serving: true},
			})
		}
		chunks[ch.Key.Chunk] = ch
	}
	return chunks
}

// BenchmarkOneEndpointChange is the import side's work for one changed
// endpoint of a 50,000-endpoint Service: planning the source cluster's
// slices against the existing ones. It should cost
// in proportion to the change, not to the Service.
//
//	go test ./internal/agent/importer -run '^$' -bench OneEndpointChange -benchmem
func BenchmarkOneEndpointChange(b *testing.B) {
	chunks := bigService(0)
	families := []corev1.IPFamily{corev1.IPv4Protocol}
	memo := &importMemo{entries: map[string]memoEntry{}}
	existing := map[string]*discoveryv1.EndpointSlice{}
	rv := 0
	write := func(p Plan) {
		for _, s := range p.Apply {
			rv++
			es := &discoveryv1.EndpointSlice{AddressType: s.AddressType, Endpoints: s.Endpoints, Ports: s.Ports}
			es.Name, es.ResourceVersion = s.Name, fmt.Sprint(rv)
			existing[s.Name] = es
			memo.set(es, s.Chunk, s.Part, s.Hints)
		}
		for _, s := range p.Keep {
			memo.set(existing[s.Name], s.Chunk, s.Part, s.Hints)
		}
	}
	write(PlanSlices("derived-big-east", chunks, families, existing, 100, nil, memo.check))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		// One endpoint of one chunk changes readiness: a new chunk object,
		// as the stream stores it.
		old := chunks["big-250"]
		changed := &registryv1.EndpointChunk{Key: old.Key, AddressType: old.AddressType, Ports: old.Ports, Endpoints: append([]*registryv1.Endpoint(nil), old.Endpoints...)}
		changed.Endpoints[7] = &registryv1.Endpoint{Addresses: old.Endpoints[7].Addresses, Zone: "zone-a", Conditions: &registryv1.EndpointConditions{Ready: i%2 == 1, Serving: true}}
		chunks["big-250"] = changed
		plan := PlanSlices("derived-big-east", chunks, families, existing, 100, nil, memo.check)
		if len(plan.Apply) != 1 {
			b.Fatalf("%d slices to apply, want 1", len(plan.Apply))
		}
		write(plan)
	}
}
