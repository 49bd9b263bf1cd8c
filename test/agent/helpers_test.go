// Package agent_test runs the agent against real API servers and a real
// registry.
package agent_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/agent/app"
	"github.com/fleetnet/fleetnet/internal/agent/identity"
	"github.com/fleetnet/fleetnet/internal/registry/registrytest"
	"github.com/fleetnet/fleetnet/test/fleet"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// agent is a running agent.
type agent struct {
	metrics *prometheus.Registry
	stop    func()
}

func startAgent(t testing.TB, c *fleet.Cluster, reg *registrytest.Registry, id string, mods ...func(*app.Options)) *agent {
	t.Helper()
	return startAgentAs(t, c.Config, reg, id, mods...)
}

// startAgentAs starts an agent that reaches its API server with cfg (a
// ServiceAccount's, for a FlowSchema to match).
func startAgentAs(t testing.TB, cfg *rest.Config, reg *registrytest.Registry, id string, mods ...func(*app.Options)) *agent {
	t.Helper()
	o := app.Options{
		Identity:           identity.Flags{Source: identity.SourceFlags, ClusterID: id, ClusterSetID: "fleet", Region: "region-" + id},
		Registry:           reg.ClientOptions(id, false),
		MetricsAddr:        "0",
		HealthAddr:         "0",
		ExportResyncPeriod: 10 * time.Minute,
		ImportResyncPeriod: 10 * time.Minute,
		EndpointsPerSlice:  100,
		ImportWorkers:      4,
		Registerer:         prometheus.NewRegistry(),
	}
	for _, m := range mods {
		m(&o)
	}
	logOut := io.Discard
	if os.Getenv("FLEETNET_TEST_LOGS") != "" {
		logOut = os.Stderr
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, cfg, o, slog.New(slog.NewTextHandler(logOut, nil)).With("agent", id))
	}()
	a := &agent{metrics: o.Registerer.(*prometheus.Registry)}
	stopped := false
	a.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		// Longer than the manager's graceful shutdown period (30s): a
		// runnable that outlives it makes Run return an error. Either way,
		// what it hangs in is the finding, so every goroutine is printed.
		began := time.Now()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("agent %s: %v; goroutines:\n%s", id, err, goroutines())
			}
			if d := time.Since(began); d > 10*time.Second {
				t.Logf("agent %s took %s to stop", id, d.Round(time.Millisecond))
			}
		case <-time.After(45 * time.Second):
			t.Errorf("agent %s did not stop within 45s; goroutines:\n%s", id, goroutines())
		}
	}
	t.Cleanup(a.stop)
	return a
}

func goroutines() string {
	var stacks strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&stacks, 1)
	return stacks.String()
}

// counter sums a counter of the agent's metrics over all label values
// matching labels.
func (a *agent) counter(t testing.TB, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := a.metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if matches(m, labels) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func matches(m *dto.Metric, labels map[string]string) bool {
	for k, v := range labels {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == k && l.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func createNamespace(t testing.TB, c client.Client, name string) {
	t.Helper()
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
}

func service(ns, name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
}

// endpointSlice is a slice of Service ns/svc with one endpoint per address.
func endpointSlice(ns, svc, name string, addrs ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}})
	}
	return s
}

// registryExports lists a cluster's exports and chunks as the registry
// holds them.
func registryExports(ctx context.Context, reg registryv1.RegistryClient, cluster string) (*registryv1.ListExportsResponse, error) {
	return reg.ListExports(ctx, &registryv1.ListExportsRequest{ClusterId: cluster, IncludeEndpoints: true})
}

// endpointCount counts the endpoints of ns/name the registry holds.
func endpointCount(resp *registryv1.ListExportsResponse, ns, name string) int {
	n := 0
	for _, c := range resp.GetEndpoints() {
		if c.GetKey().GetNamespace() == ns && c.GetKey().GetName() == name {
			n += len(c.GetEndpoints())
		}
	}
	return n
}

func hasExport(resp *registryv1.ListExportsResponse, ns, name string) bool {
	for _, e := range resp.GetExports() {
		if e.GetKey().GetNamespace() == ns && e.GetKey().GetName() == name {
			return true
		}
	}
	return false
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

func metav1Now() *timestamppb.Timestamp { return timestamppb.New(time.Now()) }

func namespaceObj(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// gauge reads one gauge of the agent's metrics.
func (a *agent) gauge(t testing.TB, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := a.metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				if matches(m, labels) {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

// exportDirectly writes to the registry, as cluster id, what that cluster's
// agent would: a registration, an export of ns/echo exported since the given
// time, and one endpoint chunk with addrs (none when addrs is empty).
func exportDirectly(t testing.TB, r *registrytest.Registry, id string, since time.Time, ports []*registryv1.ServicePort, addrs ...string) registryv1.RegistryClient {
	t.Helper()
	return exportDirectlyIn(t, r, id, "", since, ports, addrs...)
}

// exportDirectlyIn is exportDirectly for a cluster registered in region.
func exportDirectlyIn(t testing.TB, r *registrytest.Registry, id, region string, since time.Time, ports []*registryv1.ServicePort, addrs ...string) registryv1.RegistryClient {
	t.Helper()
	ctx := context.Background()
	c := r.Client(id, false)
	if _, err := c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Cluster: &registryv1.Cluster{Id: id, ClustersetId: "fleet", Region: region}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutExport(ctx, &registryv1.PutExportRequest{Export: &registryv1.Export{
		Key: &registryv1.ExportKey{Namespace: ns, Name: "echo", ClusterId: id}, ExportedSince: timestamppb.New(since),
		Type: "ClusterSetIP", Ports: ports, IpFamilies: []string{"IPv4"}, Weight: 1,
	}}); err != nil {
		t.Fatal(err)
	}
	if len(addrs) == 0 {
		return c
	}
	chunk := &registryv1.EndpointChunk{
		Key: &registryv1.ChunkKey{Namespace: ns, Name: "echo", ClusterId: id, Chunk: "c0"}, AddressType: "IPv4",
		Ports: []*registryv1.EndpointPort{{Name: "http", Protocol: "TCP", Port: 8080}},
	}
	for _, a := range addrs {
		chunk.Endpoints = append(chunk.Endpoints, &registryv1.Endpoint{Addresses: []string{a}, Conditions: &registryv1.EndpointConditions{Ready: true, Serving: true}})
	}
	if _, err := c.PutEndpoints(ctx, &registryv1.PutEndpointsRequest{Chunk: chunk}); err != nil {
		t.Fatal(err)
	}
	return c
}

var httpPort = []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}
