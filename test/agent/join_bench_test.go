package agent_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/agent/app"
	"github.com/fleetnet/fleetnet/internal/registry/registrytest"
	"github.com/fleetnet/fleetnet/internal/registry/server"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/test/fleet"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// BenchmarkJoin measures a cluster joining a fleet: a registry already
// holds FLEETNET_JOIN_SERVICES Services (5,000 by default) exported by 3
// clusters with 10 endpoints each, and a new cluster's agent starts against
// a fresh API server with its default --kube-api-qps and --kube-api-burst.
// It reports the time until every import is in place (the agent's
// fleetnet_agent_imports_in_place), the API writes per import, the peak
// heap of the test process (the agent runs in it), the API server's CPU
// seconds; then the time the same API server takes to create the same
// objects (a Service, a ServiceImport with its ips and status, a slice per
// source cluster) with a plain client at the same QPS, burst and
// concurrency, in another namespace, and the ratio of the two. Run it with
// `make bench-join`, or
//
//	go test ./test/agent -run '^$' -bench Join -benchtime 1x -timeout 60m
func BenchmarkJoin(b *testing.B) {
	imports := benchCount(b, "FLEETNET_JOIN_SERVICES", 5000)
	sources, endpoints := 3, 10
	defaults := app.Options{}
	defaults.BindFlags(pflag.NewFlagSet("fleetnet-agent", pflag.ContinueOnError))
	f := fleet.Start(b, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "joining"}}})
	c := f.Cluster(b, "joining")
	r := registrytest.Start(b, server.Config{})
	wc := c.Client(b)
	createNamespace(b, wc, ns)
	seeded := time.Now()
	seedRegistry(b, r, imports, sources, endpoints)
	b.Logf("registry seeded with %d Services x %d clusters in %s", imports, sources, time.Since(seeded).Round(time.Second))

	for b.Loop() {
		writes0, cpu0 := c.APIWrites(b), apiServerCPU(b, c)
		peak := sampleHeap()
		start := time.Now()
		a := startAgent(b, c, r, "joining", func(o *app.Options) {
			o.KubeAPIQPS, o.KubeAPIBurst = defaults.KubeAPIQPS, defaults.KubeAPIBurst
		})
		testkit.Eventually(b, 60*time.Minute, "every import in place", func(context.Context) error {
			if in := a.gauge(b, "fleetnet_agent_imports_in_place", nil); in != float64(imports) {
				return fmt.Errorf("%g of %d imports in place", in, imports)
			}
			return nil
		})
		joined := time.Since(start)
		writes, cpu := (c.APIWrites(b)-writes0)/float64(imports), apiServerCPU(b, c)-cpu0
		heap := peak()
		a.stop()

		// The same objects from a plain client, at the same rate limit and
		// concurrency.
		const plainNS = "plain"
		createNamespace(b, wc, plainNS)
		cfg := rest.CopyConfig(c.Config)
		cfg.QPS, cfg.Burst = defaults.KubeAPIQPS, defaults.KubeAPIBurst
		plain, err := client.New(cfg, client.Options{Scheme: wc.Scheme()})
		if err != nil {
			b.Fatal(err)
		}
		pstart := time.Now()
		createPlainImports(b, plain, plainNS, imports, sources, endpoints, defaults.ImportWorkers)
		plainTime := time.Since(pstart)

		b.Logf("joined: %d imports in place in %s (%.2f writes per import, API server CPU %.0f s, peak heap %.0f MiB); a plain client created the same objects in %s",
			imports, joined.Round(time.Second), writes, cpu, heap, plainTime.Round(time.Second))
		b.ReportMetric(float64(imports), "imports")
		b.ReportMetric(joined.Seconds(), "join-s")
		b.ReportMetric(plainTime.Seconds(), "plain-client-s")
		b.ReportMetric(joined.Seconds()/plainTime.Seconds(), "join/plain")
		b.ReportMetric(writes, "writes/import")
		b.ReportMetric(cpu, "apiserver-cpu-s")
		b.ReportMetric(heap, "peak-heap-MiB")
	}
}

// createPlainImports creates, with workers goroutines, what an agent makes
// for each import: its derived Service, the ServiceImport with the
// Service's ClusterIP and its status, and a slice per source cluster.
func createPlainImports(b *testing.B, c client.Client, namespace string, imports, sources, endpoints, workers int) {
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= imports || failed.Load() != nil {
					return
				}
				if err := createPlainImport(ctx, c, namespace, fmt.Sprintf("svc-%04d", i), sources, endpoints); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
}

func createPlainImport(ctx context.Context, c client.Client, namespace, name string, sources, endpoints int) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "derived-" + name, Labels: map[string]string{mcsv1beta1.LabelServiceName: name}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(80)}}},
	}
	if err := c.Create(ctx, svc); err != nil {
		return fmt.Errorf("creating Service %s: %w", svc.Name, err)
	}
	si := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: svc.Spec.ClusterIPs,
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}
	if err := c.Create(ctx, si); err != nil {
		return fmt.Errorf("creating ServiceImport %s: %w", name, err)
	}
	si.Status.Conditions = []metav1.Condition{{Type: string(mcsv1beta1.ServiceImportConditionReady), Status: metav1.ConditionTrue,
		Reason: string(mcsv1beta1.ServiceImportReasonReady), Message: "ready", LastTransitionTime: metav1.Now()}}
	for s := range sources {
		si.Status.Clusters = append(si.Status.Clusters, mcsv1beta1.ClusterStatus{Cluster: fmt.Sprintf("src-%d", s)})
	}
	if err := c.Status().Update(ctx, si); err != nil {
		return fmt.Errorf("writing the status of ServiceImport %s: %w", name, err)
	}
	for s := range sources {
		es := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("%s-src-%d", svc.Name, s), Labels: map[string]string{
				discoveryv1.LabelServiceName: svc.Name, mcsv1beta1.LabelServiceName: name, mcsv1beta1.LabelSourceCluster: fmt.Sprintf("src-%d", s)}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
		}
		for e := range endpoints {
			es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", 100+s, e/250, 1+e%250)},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true)}})
		}
		if err := c.Create(ctx, es); err != nil {
			return fmt.Errorf("creating EndpointSlice %s: %w", es.Name, err)
		}
	}
	return nil
}

// apiServerCPU returns the API server's process_cpu_seconds_total.
func apiServerCPU(b *testing.B, c *fleet.Cluster) float64 {
	mf, ok := fleet.APIServerMetrics(b, c.Name, c.Config)["process_cpu_seconds_total"]
	if !ok {
		b.Fatalf("cluster %s: the API server has no process_cpu_seconds_total", c.Name)
	}
	return fleet.MetricSum(mf, nil)
}

// sampleHeap samples the process's heap in use every 100 ms until the
// returned function is called, which returns the peak in MiB.
func sampleHeap() func() float64 {
	done := make(chan struct{})
	var peak atomic.Uint64
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() float64 {
		close(done)
		wg.Wait()
		return float64(peak.Load()) / (1 << 20)
	}
}

// benchCount is the positive number in the environment variable name, or
// def when it is unset.
func benchCount(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}
