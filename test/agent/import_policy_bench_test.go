package agent_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/agent/app"
	"github.com/fleetnet/fleetnet/internal/registry/registrytest"
	"github.com/fleetnet/fleetnet/internal/registry/server"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/test/fleet"
)

// BenchmarkImportPolicy measures what a member's import policy
// (--import-namespaces) saves: the registry holds FLEETNET_POLICY_SERVICES
// Services (1,000 by default) in each of four namespaces, exported by 3
// clusters with 10 endpoints each; a member's agent joins on a fresh API
// server importing every namespace, then (on another fresh API server)
// only one. It reports the time until every import it takes is in place,
// the API writes the member's API server served, and the agent's peak heap
// above the test process's before it started (the registry runs in the
// same process, holding the same data in both runs).
//
//	go test ./test/agent -run '^$' -bench ImportPolicy -benchtime 1x -timeout 30m
func BenchmarkImportPolicy(b *testing.B) {
	perNamespace := benchCount(b, "FLEETNET_POLICY_SERVICES", 1000)
	sources, endpoints := 3, 10
	namespaces := []string{ns, "team-1", "team-2", "team-3"}
	r := registrytest.Start(b, server.Config{})
	clients, _ := seedRegistry(b, r, perNamespace, sources, endpoints)
	for _, other := range namespaces[1:] {
		publishServices(b, clients, other, perNamespace, endpoints)
	}

	for _, variant := range []struct {
		name   string
		policy string
		want   int
	}{
		{"every-namespace", "", perNamespace * len(namespaces)},
		{"one-namespace", ns, perNamespace},
	} {
		b.Run(variant.name, func(b *testing.B) {
			for b.Loop() {
				f := fleet.Start(b, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "member"}}})
				c := f.Cluster(b, "member")
				wc := c.Client(b)
				for _, n := range namespaces {
					createNamespace(b, wc, n)
				}
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				base := float64(ms.HeapInuse) / (1 << 20)
				writes0 := c.APIWrites(b)
				peak := sampleHeap()
				start := time.Now()
				a := startAgent(b, c, r, "member", func(o *app.Options) { o.ImportNamespaces = variant.policy })
				testkit.Eventually(b, 30*time.Minute, "every import in place", func(context.Context) error {
					if in := a.gauge(b, "fleetnet_agent_imports_in_place", nil); in != float64(variant.want) {
						return fmt.Errorf("%g of %d imports in place", in, variant.want)
					}
					return nil
				})
				joined := time.Since(start)
				writes := c.APIWrites(b) - writes0
				heap := peak() - base
				a.stop()
				b.Logf("%s: %d imports in place in %s, %.0f API writes, agent peak heap +%.0f MiB", variant.name, variant.want, joined.Round(time.Second), writes, heap)
				b.ReportMetric(float64(variant.want), "imports")
				b.ReportMetric(joined.Seconds(), "join-s")
				b.ReportMetric(writes, "api-writes")
				b.ReportMetric(heap, "agent-heap-MiB")
			}
		})
	}
}
