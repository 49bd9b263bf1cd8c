package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/registry/client"
	"github.com/fleetnet/fleetnet/internal/scheme"
	"github.com/fleetnet/fleetnet/test/fleet"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// benchServices is how many Services east exports before the measurements;
// FLEETNET_BENCH_SERVICES overrides the 1,000.
func benchServices(b *testing.B) int {
	if v := os.Getenv("FLEETNET_BENCH_SERVICES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("FLEETNET_BENCH_SERVICES=%q: want a positive number", v)
		}
		return n
	}
	return 1000
}

// sliceEvent is an imported EndpointSlice as an importing cluster's watch
// saw it, and when.
type sliceEvent struct {
	cluster, service, name string
	addresses              []string
	at                     time.Time
}

// watchImportedSlices streams every add and update of imported
// EndpointSlices in ns of the importing clusters until ctx ends.
func watchImportedSlices(b *testing.B, ctx context.Context, ns string) <-chan sliceEvent {
	events := make(chan sliceEvent, 100000)
	for _, c := range clusters {
		cs, err := kubernetes.NewForConfig(restConfig(b, c))
		if err != nil {
			b.Fatal(err)
		}
		factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.LabelSelector = discoveryv1.LabelManagedBy + "=" + keys.EndpointSliceManagedBy
			}))
		inf := factory.Discovery().V1().EndpointSlices().Informer()
		send := func(obj any) {
			s, ok := obj.(*discoveryv1.EndpointSlice)
			if !ok {
				return
			}
			ev := sliceEvent{cluster: c, service: s.Labels[mcsv1beta1.LabelServiceName], name: s.Name, at: time.Now()}
			for _, e := range s.Endpoints {
				ev.addresses = append(ev.addresses, e.Addresses...)
			}
			sort.Strings(ev.addresses)
			events <- ev
		}
		_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: send, UpdateFunc: func(_, n any) { send(n) }})
		factory.Start(ctx.Done())
		factory.WaitForCacheSync(ctx.Done())
	}
	return events
}

// watchServiceImports records, per importing cluster and ServiceImport
// name in ns, when it was first seen with its ClusterSetIP, until ctx
// ends.
func watchServiceImports(b *testing.B, ctx context.Context, ns string) *importSeen {
	seen := &importSeen{at: map[string]map[string]time.Time{}}
	for _, c := range clusters {
		seen.at[c] = map[string]time.Time{}
		inf, err := cache.New(restConfig(b, c), cache.Options{Scheme: scheme.Scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
		if err != nil {
			b.Fatal(err)
		}
		si, err := inf.GetInformer(ctx, &mcsv1beta1.ServiceImport{})
		if err != nil {
			b.Fatal(err)
		}
		note := func(obj any) {
			if o, ok := obj.(*mcsv1beta1.ServiceImport); ok && len(o.Spec.IPs) > 0 {
				seen.note(c, o.Name, time.Now())
			}
		}
		if _, err := si.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: note, UpdateFunc: func(_, n any) { note(n) }}); err != nil {
			b.Fatal(err)
		}
		go func() { _ = inf.Start(ctx) }()
		if !inf.WaitForCacheSync(ctx) {
			b.Fatalf("%s: ServiceImport cache not synced", c)
		}
	}
	return seen
}

// watchRegistry records, per service in ns, when the registry's watch
// (as an administrator, who is sent every export) first sent endpoints of
// it: the moment the export left the exporting side and the registry fanned
// it out, which splits an export's latency into the exporter's part and the
// importers'.
func watchRegistry(b *testing.B, ctx context.Context, ns string) *registrySeen {
	rc, conn, err := client.Dial(state.AdminClientOptions())
	if err != nil {
		b.Fatal(err)
	}
	w, err := rc.Watch(ctx, &registryv1.WatchRequest{Namespaces: []string{ns}})
	if err != nil {
		b.Fatal(err)
	}
	seen := &registrySeen{at: map[string]time.Time{}}
	synced := make(chan struct{})
	go func() {
		defer conn.Close()
		for {
			ev, err := w.Recv()
			if err != nil {
				return
			}
			if ev.GetSynced() != nil && synced != nil {
				close(synced)
				synced = nil
			}
			if c := ev.GetEndpointsUpsert(); c != nil {
				seen.mu.Lock()
				if _, ok := seen.at[c.GetKey().GetName()]; !ok {
					seen.at[c.GetKey().GetName()] = time.Now()
				}
				seen.mu.Unlock()
			}
		}
	}()
	select {
	case <-synced:
	case <-time.After(time.Minute):
		b.Fatal("the registry's watch did not sync within a minute")
	}
	return seen
}

// registrySeen holds when the registry first sent each service's endpoints.
type registrySeen struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (s *registrySeen) when(name string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.at[name]
	return at, ok
}

// importSeen holds when each cluster first saw each ServiceImport with
// its ClusterSetIP.
type importSeen struct {
	mu sync.Mutex
	at map[string]map[string]time.Time
}

func (s *importSeen) note(cluster, name string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.at[cluster][name]; !ok {
		s.at[cluster][name] = at
	}
}

// everywhere returns when the last cluster saw name, and whether all had.
func (s *importSeen) everywhere(name string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var last time.Time
	for _, c := range clusters {
		at, ok := s.at[c][name]
		if !ok {
			return time.Time{}, false
		}
		if at.After(last) {
			last = at
		}
	}
	return last, true
}

// awaitEverywhere reads events until every cluster has shown service with
// the addresses, and returns when the last one did.
func awaitEverywhere(b *testing.B, events <-chan sliceEvent, service string, addresses []string, timeout time.Duration) time.Time {
	b.Helper()
	seen := map[string]time.Time{}
	deadline := time.After(timeout)
	for len(seen) < len(clusters) {
		select {
		case ev := <-events:
			if ev.service == service && slices.Equal(ev.addresses, addresses) {
				if _, ok := seen[ev.cluster]; !ok {
					seen[ev.cluster] = ev.at
				}
			}
		case <-deadline:
			imp, err := getImport(context.Background(), kube(b, "hub"), "bench", service)
			if err == nil {
				b.Logf("hub holds %v", imp.addresses)
			}
			b.Fatalf("%s with %v not imported everywhere within %s (seen in %v)", service, addresses, timeout, keysOf(seen))
		}
	}
	var last time.Time
	for _, at := range seen {
		if at.After(last) {
			last = at
		}
	}
	return last
}

// addresses returns 10 endpoint addresses, distinct per service and
// version (versions repeat after 400).
func addresses(service, version int) []string {
	out := make([]string, 10)
	for i := range out {
		ip := 10<<24 + uint32(service)*4096 + uint32(version%400)*10 + uint32(i) + 1
		out[i] = fmt.Sprintf("%d.%d.%d.%d", ip>>24, ip>>16&0xff, ip>>8&0xff, ip&0xff)
	}
	sort.Strings(out)
	return out
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// BenchmarkFleet measures, on the three-cluster dev fleet (every part its own
// process) with east exporting 1,000 Services of 10 endpoints each, how long
// a new export takes to be imported in every cluster, how long an endpoint
// change takes to reach every cluster's imported slice, and the API writes
// per change. Run it with `make bench` or
//
//	go test ./test/e2e -run '^$' -bench Fleet -benchtime 200x
func BenchmarkFleet(b *testing.B) {
	n := benchServices(b)
	ns := namespace(b, "bench")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := watchImportedSlices(b, ctx, ns)

	// Export n Services, then wait until every cluster imports all of them.
	requestsBefore := map[string]map[string]float64{}
	for _, c := range clusters {
		requestsBefore[c] = fleet.APIRequests(b, c, restConfig(b, c))
	}
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			export(b, "east", ns, service{name: fmt.Sprintf("svc-%d", i), portName: "http", port: 80, addresses: addresses(i, 0)})
		})
	}
	wg.Wait()
	created := time.Since(start)
	imported := map[string]map[string]bool{}
	deadline := time.After(10 * time.Minute)
	for done := 0; done < len(clusters); {
		select {
		case ev := <-events:
			if imported[ev.cluster] == nil {
				imported[ev.cluster] = map[string]bool{}
			}
			if len(ev.addresses) == 10 && !imported[ev.cluster][ev.service] {
				imported[ev.cluster][ev.service] = true
				if len(imported[ev.cluster]) == n {
					done++
				}
			}
		case <-deadline:
			b.Fatalf("not all %d exports imported within 10m: %d, %d, %d", n, len(imported["hub"]), len(imported["east"]), len(imported["west"]))
		}
	}
	everywhere := time.Since(start)
	// The API requests each cluster served per exported Service, by verb
	// and resource (east's include the benchmark's own three creates).
	writes := map[string]float64{}
	for _, c := range clusters {
		var lines []string
		for k, v := range fleet.APIRequests(b, c, restConfig(b, c)) {
			d := (v - requestsBefore[c][k]) / float64(n)
			if verb, _, _ := strings.Cut(k, " "); verb != "GET" && verb != "LIST" && verb != "WATCH" {
				writes[c] += d
			}
			if d >= 0.05 {
				lines = append(lines, fmt.Sprintf("%.2f %s", d, k))
			}
		}
		slices.Sort(lines)
		b.Logf("cluster %s, API requests per exported Service: %s", c, strings.Join(lines, ", "))
	}
	// Reported as a sub-benchmark so that the numbers show in the output.
	b.Run("ExportAll", func(b *testing.B) {
		b.ReportMetric(float64(n), "services")
		b.ReportMetric(created.Seconds(), "created-s")
		b.ReportMetric(everywhere.Seconds(), "imported-everywhere-s")
		for _, c := range clusters {
			b.ReportMetric(writes[c], c+"-writes/service")
		}
	})

	// Where an export's time goes: the benchmark's own three creates in
	// east, then until every cluster shows the ServiceImport with its
	// ClusterSetIP, then until every cluster shows the slice.
	imports := watchServiceImports(b, ctx, ns)
	registry := watchRegistry(b, ctx, ns)
	b.Run("ExportToImport", func(b *testing.B) {
		var lat, created, toRegistry, toImport, toSlice []time.Duration
		for i := 0; i < b.N; i++ {
			name := fmt.Sprintf("new-%d-%d", b.N, i)
			addrs := addresses(n+i, 0)
			begin := time.Now()
			export(b, "east", ns, service{name: name, portName: "http", port: 80, addresses: addrs})
			exported := time.Now()
			sliced := awaitEverywhere(b, events, name, addrs, time.Minute)
			imported, ok := imports.everywhere(name)
			for deadline := time.Now().Add(time.Minute); !ok && time.Now().Before(deadline); imported, ok = imports.everywhere(name) {
				time.Sleep(time.Millisecond) // the informer's handler may run after the slice's
			}
			if !ok {
				b.Fatalf("%s: ServiceImport not seen everywhere", name)
			}
			// Imported: both the ServiceImport (with its ClusterSetIP) and
			// the slice, which the agent writes at once, in every cluster.
			done := sliced
			if imported.After(done) {
				done = imported
			}
			lat = append(lat, done.Sub(begin))
			fanned, ok := registry.when(name)
			if !ok {
				b.Fatalf("%s: imported everywhere, but the registry's watch sent no endpoints of it", name)
			}
			created = append(created, exported.Sub(begin))
			toRegistry = append(toRegistry, fanned.Sub(exported))
			toImport = append(toImport, imported.Sub(exported))
			toSlice = append(toSlice, max(0, sliced.Sub(imported)))
		}
		report(b, lat)
		b.ReportMetric(float64(percentile(created, 0.5).Microseconds())/1000, "create-p50-ms")
		b.ReportMetric(float64(percentile(toRegistry, 0.5).Microseconds())/1000, "to-registry-watch-p50-ms")
		b.ReportMetric(float64(percentile(toRegistry, 0.99).Microseconds())/1000, "to-registry-watch-p99-ms")
		b.ReportMetric(float64(percentile(toImport, 0.5).Microseconds())/1000, "to-serviceimport-p50-ms")
		b.ReportMetric(float64(percentile(toImport, 0.99).Microseconds())/1000, "to-serviceimport-p99-ms")
		b.ReportMetric(float64(percentile(toSlice, 0.5).Microseconds())/1000, "then-slice-p50-ms")
		b.ReportMetric(float64(percentile(toSlice, 0.99).Microseconds())/1000, "then-slice-p99-ms")
	})

	changes := 0
	b.Run("EndpointChange", func(b *testing.B) {
		before := map[string]map[string]float64{}
		kinds := []string{"endpointslices", "serviceimports", "services"}
		for _, c := range clusters {
			before[c] = map[string]float64{}
			for _, k := range kinds {
				before[c][k] = fleet.APIWrites(b, c, restConfig(b, c), k)
			}
		}
		var lat []time.Duration
		for i := 0; i < b.N; i++ {
			// The framework runs this more than once: every change must
			// differ from what the slice holds.
			changes++
			svc := (changes * 7919) % n
			name := fmt.Sprintf("svc-%d", svc)
			addrs := addresses(svc, changes)
			begin := time.Now()
			setEndpoints(b, "east", ns, name, "http", addrs)
			lat = append(lat, awaitEverywhere(b, events, name, addrs, time.Minute).Sub(begin))
		}
		report(b, lat)
		// The importers' writes are counted after the measured changes; the
		// exporter's own slice writes (one per change in east) are the
		// benchmark's, not fleetnet's.
		for _, c := range clusters {
			for _, k := range kinds {
				d := fleet.APIWrites(b, c, restConfig(b, c), k) - before[c][k]
				if c == "east" && k == "endpointslices" {
					d -= float64(b.N)
				}
				b.ReportMetric(d/float64(b.N), fmt.Sprintf("%s-%s-writes/change", c, k))
			}
		}
	})
}

func report(b *testing.B, lat []time.Duration) {
	b.ReportMetric(float64(percentile(lat, 0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(slices.Max(lat).Microseconds())/1000, "max-ms")
}

// BenchmarkBigService measures one endpoint change of a Service of 50,000
// endpoints (500 EndpointSlices of 100 in east) reaching every cluster's
// imported slices, and the exporting agent's resident memory with it. The
// work per change must follow the change, not the Service:
//
//	go test ./test/e2e -run '^$' -bench BigService -benchtime 50x
func BenchmarkBigService(b *testing.B) {
	const slicesN, perSlice = 500, 100
	ns := namespace(b, "bench-big")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := watchImportedSlices(b, ctx, ns)
	addrs := func(slice, version int) []string {
		out := make([]string, perSlice)
		for i := range out {
			n := slice*perSlice + i
			out[i] = fmt.Sprintf("10.%d.%d.%d", 200+n>>16, n>>8&0xff, n&0xff)
		}
		if version > 0 {
			// The changed endpoint takes an address of its own.
			out[0] = fmt.Sprintf("10.250.%d.%d", version>>8&0xff, version&0xff)
		}
		sort.Strings(out)
		return out
	}
	start := time.Now()
	export(b, "east", ns, service{name: "big", portName: "http", port: 80, addresses: addrs(0, 0)})
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for s := 1; s < slicesN; s++ {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			setSlice(b, "east", ns, "big", fmt.Sprintf("big-%03d", s), discoveryv1.AddressTypeIPv4, "http", addrs(s, 0))
		})
	}
	wg.Wait()
	// Every cluster holds all 50,000 endpoints.
	held := map[string]map[string]int{}
	deadline := time.After(5 * time.Minute)
	for done := 0; done < len(clusters); {
		select {
		case ev := <-events:
			if ev.service != "big" {
				continue
			}
			if held[ev.cluster] == nil {
				held[ev.cluster] = map[string]int{}
			}
			before := total(held[ev.cluster])
			held[ev.cluster][ev.name] = len(ev.addresses)
			if before < slicesN*perSlice && total(held[ev.cluster]) == slicesN*perSlice {
				done++
			}
		case <-deadline:
			b.Fatalf("50,000 endpoints not imported everywhere within 5m: %d, %d, %d", total(held["hub"]), total(held["east"]), total(held["west"]))
		}
	}
	imported := time.Since(start)
	b.Run("Import", func(b *testing.B) {
		b.ReportMetric(imported.Seconds(), "imported-everywhere-s")
		b.ReportMetric(rssMiB(b, "east/agent"), "exporter-rss-MiB")
	})
	changes := 0
	b.Run("EndpointChange", func(b *testing.B) {
		before := agentTimes(b)
		var lat []time.Duration
		for i := 0; i < b.N; i++ {
			changes++
			s := (changes * 7919) % slicesN
			want := addrs(s, changes)
			name := "big-e2e"
			if s > 0 {
				name = fmt.Sprintf("big-%03d", s)
			}
			changed := fmt.Sprintf("10.250.%d.%d", changes>>8&0xff, changes&0xff)
			begin := time.Now()
			setSlice(b, "east", ns, "big", name, discoveryv1.AddressTypeIPv4, "http", want)
			lat = append(lat, awaitAddress(b, events, "big", changed, time.Minute).Sub(begin))
		}
		report(b, lat)
		b.ReportMetric(rssMiB(b, "east/agent"), "exporter-rss-MiB")
		// Where the time goes: the agents' own time per change.
		after := agentTimes(b)
		for k, v := range after {
			b.ReportMetric((v-before[k]).Seconds()*1000/float64(b.N), k+"-ms/change")
		}
	})
}

// agentTimes sums, per agent, the seconds its export and import
// controllers spent reconciling and its publisher spent publishing.
func agentTimes(b *testing.B) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, c := range state.Clusters {
		families, err := fleet.ScrapeMetrics(context.Background(), "http://"+state.AgentMetricsAddress(c)+"/metrics")
		if err != nil {
			b.Fatal(err)
		}
		sum := func(name string, labels map[string]string) time.Duration {
			total := 0.0
			for _, m := range families[name].GetMetric() {
				match := true
				for _, l := range m.GetLabel() {
					if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
						match = false
					}
				}
				if match {
					total += m.GetHistogram().GetSampleSum()
				}
			}
			return time.Duration(total * float64(time.Second))
		}
		out[c.Name+"-import"] = sum("controller_runtime_reconcile_time_seconds", map[string]string{"controller": "serviceimport"})
		if c.Name == "east" {
			out["east-export"] = sum("controller_runtime_reconcile_time_seconds", map[string]string{"controller": "serviceexport"})
			out["east-publish"] = sum("fleetnet_agent_publish_duration_seconds", nil)
		}
	}
	return out
}

// awaitAddress reads events until every cluster has shown addr in one of
// service's imported slices (however they are cut), and returns when the
// last one did.
func awaitAddress(b *testing.B, events <-chan sliceEvent, service, addr string, timeout time.Duration) time.Time {
	b.Helper()
	seen := map[string]time.Time{}
	deadline := time.After(timeout)
	for len(seen) < len(clusters) {
		select {
		case ev := <-events:
			if _, ok := seen[ev.cluster]; !ok && ev.service == service && slices.Contains(ev.addresses, addr) {
				seen[ev.cluster] = ev.at
			}
		case <-deadline:
			b.Fatalf("%s's endpoint %s not imported everywhere within %s (seen in %v)", service, addr, timeout, keysOf(seen))
		}
	}
	var last time.Time
	for _, at := range seen {
		if at.After(last) {
			last = at
		}
	}
	return last
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// rssMiB is a fleet component's resident memory.
func rssMiB(b *testing.B, component string) float64 {
	p := state.Processes[component]
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid))
	if err != nil {
		b.Fatalf("%s: %v", component, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			if err != nil {
				b.Fatalf("%s: VmRSS %q: %v", component, rest, err)
			}
			return float64(kb) / 1024
		}
	}
	b.Fatalf("%s: no VmRSS in /proc/%d/status", component, p.Pid)
	return 0
}
