package view

import (
	"fmt"
	"testing"

	"github.com/fleetnet/fleetnet/internal/registry/keyspace"
	"github.com/fleetnet/fleetnet/internal/registry/store"
)

// BenchmarkChunkChange changes one endpoint chunk of a Service exported by
// 100 clusters, of which `scoped` export to one other cluster each: as
// many distinct audiences, so as many groups of watchers, as scoped
// exports.
func BenchmarkChunkChange(b *testing.B) {
	for _, scoped := range []int{0, 10, 50} {
		b.Run(fmt.Sprintf("scoped=%d", scoped), func(b *testing.B) {
			l := &log{data: map[string]store.KV{}}
			v := New()
			var evs []store.Event
			for i := range 100 {
				id := fmt.Sprintf("c%03d", i)
				e := exp(id, 0, "http")
				if i < scoped {
					e.ExportTo = []string{fmt.Sprintf("c%03d", (i+1)%100)}
				}
				evs = append(evs, l.put(b, keyspace.ClusterKey(id), clusterWith(id, "env", "prod")), l.put(b, keyspace.LiveKey(id), nil),
					l.put(b, keyspace.ExportKey(e.Key), e), l.put(b, keyspace.ChunkKey(chunk(id, "c0", "http").Key), chunk(id, "c0", "http", fmt.Sprintf("10.0.%d.1", i))))
			}
			if _, err := v.Apply(evs); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				n++
				c := chunk("c099", "c0", "http", fmt.Sprintf("10.1.%d.%d", n/250%250, n%250))
				if _, err := v.Apply([]store.Event{l.put(b, keyspace.ChunkKey(c.Key), c)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
