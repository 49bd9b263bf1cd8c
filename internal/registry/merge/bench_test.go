package merge

import (
	"fmt"
	"testing"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
)

// BenchmarkMerge merges one Service exported by 100 clusters, as the
// registry does on every change of an export or a lease: once with every
// export agreeing, once with one that differs in type, ports and labels.
func BenchmarkMerge(b *testing.B) {
	for _, tc := range []struct {
		name     string
		conflict bool
	}{{"agree", false}, {"conflict", true}} {
		b.Run(tc.name, func(b *testing.B) {
			var exports []*registryv1.Export
			clusters := map[string]Cluster{}
			for i := range 100 {
				id := fmt.Sprintf("cluster-%03d", i)
				exports = append(exports, export(id, i, []*registryv1.ServicePort{port("http", 80), port("grpc", 9000), port("metrics", 9090)},
					func(e *registryv1.Export) { e.Labels = map[string]string{"tier": "web", "team": "a"} }))
				clusters[id] = Cluster{Live: true, Region: "r"}
			}
			if tc.conflict {
				exports[50].Type = "Headless"
				exports[50].Ports = append(exports[50].Ports, port("http", 8080))
				exports[50].Labels = map[string]string{"tier": "api"}
			}
			b.ReportAllocs()
			for b.Loop() {
				Merge(key, exports, clusters)
			}
		})
	}
}
