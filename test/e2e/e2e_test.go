package e2e

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/dev"
	"github.com/fleetnet/fleetnet/internal/registry/client"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/test/fleet"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func TestExportImportUnexport(t *testing.T) {
	ns := namespace(t, "e2e-basic")
	export(t, "east", ns, service{name: "web", portName: "http", port: 80, addresses: []string{"10.244.1.10", "10.244.1.11"}})
	want := map[string][]string{"east": {"10.244.1.10", "10.244.1.11"}}
	for _, c := range clusters {
		imp := waitImport(t, c, ns, "web", want, 30*time.Second)
		if imp.si.Spec.Type != mcsv1beta1.ClusterSetIP || len(imp.si.Spec.IPs) != 1 {
			t.Errorf("%s: ServiceImport type %s, ips %v; want ClusterSetIP with one IP", c, imp.si.Spec.Type, imp.si.Spec.IPs)
		}
		if len(imp.si.Spec.Ports) != 1 || imp.si.Spec.Ports[0].Port != 80 || imp.si.Spec.Ports[0].Name != "http" {
			t.Errorf("%s: ServiceImport ports %+v, want http:80", c, imp.si.Spec.Ports)
		}
	}
	waitCondition(t, "east", &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, string(mcsv1beta1.ServiceExportConditionReady), metav1.ConditionTrue, "")

	// An endpoint change reaches every importer.
	setEndpoints(t, "east", ns, "web", "http", []string{"10.244.1.10", "10.244.1.12"})
	for _, c := range clusters {
		waitImport(t, c, ns, "web", map[string][]string{"east": {"10.244.1.10", "10.244.1.12"}}, 30*time.Second)
	}

	if err := kube(t, "east").Delete(context.Background(), &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range clusters {
		waitNoImport(t, c, ns, "web", 30*time.Second)
	}
}

func TestHeadless(t *testing.T) {
	ns := namespace(t, "e2e-headless")
	export(t, "west", ns, service{name: "db", headless: true, portName: "pg", port: 5432, addresses: []string{"10.244.2.20"}})
	imp := waitImport(t, "hub", ns, "db", map[string][]string{"west": {"10.244.2.20"}}, 30*time.Second)
	if imp.si.Spec.Type != mcsv1beta1.Headless || len(imp.si.Spec.IPs) != 0 {
		t.Errorf("ServiceImport type %s, ips %v; want Headless without IPs", imp.si.Spec.Type, imp.si.Spec.IPs)
	}
	derived := &corev1.Service{}
	name := imp.slices[0].Labels[discoveryv1.LabelServiceName]
	if err := kube(t, "hub").Get(context.Background(), ctrlclient.ObjectKey{Namespace: ns, Name: name}, derived); err != nil {
		t.Fatalf("derived Service %s: %v", name, err)
	}
	if derived.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("derived Service %s has clusterIP %q, want None", name, derived.Spec.ClusterIP)
	}
}

// A dual-stack Service exported from dual-stack east is imported with both
// families in east and hub, and as IPv4 only (IPv4 slices only) in west,
// whose Service network is IPv4.
func TestDualStack(t *testing.T) {
	ns := namespace(t, "e2e-dual-stack")
	export(t, "east", ns, service{name: "dual", dualStack: true, portName: "http", port: 80, addresses: []string{"10.244.1.90", "fd00:10:244:1::90"}})
	for _, tc := range []struct {
		cluster   string
		families  []corev1.IPFamily
		addresses []string
	}{
		{"east", []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}, []string{"10.244.1.90", "fd00:10:244:1::90"}},
		{"hub", []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}, []string{"10.244.1.90", "fd00:10:244:1::90"}},
		{"west", []corev1.IPFamily{corev1.IPv4Protocol}, []string{"10.244.1.90"}},
	} {
		waitImport(t, tc.cluster, ns, "dual", map[string][]string{"east": tc.addresses}, 30*time.Second)
		cl := kube(t, tc.cluster)
		testkit.Eventually(t, 30*time.Second, fmt.Sprintf("the families of the import in %s", tc.cluster), func(ctx context.Context) error {
			si := &mcsv1beta1.ServiceImport{}
			if err := cl.Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: "dual"}, si); err != nil {
				return err
			}
			if !slices.Equal(si.Spec.IPFamilies, tc.families) || len(si.Spec.IPs) != len(tc.families) {
				return fmt.Errorf("%s: ServiceImport families %v, ips %v; want %v with an IP each", tc.cluster, si.Spec.IPFamilies, si.Spec.IPs, tc.families)
			}
			return nil
		})
	}
}

// Three clusters export one name with different ports and types: the
// oldest export decides, the others are told why they conflict, and every
// importer sees the same import.
func TestConflictsAcrossThreeClusters(t *testing.T) {
	ns := namespace(t, "e2e-conflict")
	export(t, "east", ns, service{name: "api", portName: "http", port: 80, addresses: []string{"10.244.1.30"},
		exportedLabels: map[string]string{"tier": "web"}, exportedAnnotations: map[string]string{"owner": "team-a"}})
	waitImport(t, "hub", ns, "api", map[string][]string{"east": {"10.244.1.30"}}, 30*time.Second)
	export(t, "west", ns, service{name: "api", portName: "web", port: 80, addresses: []string{"10.244.2.30"},
		exportedLabels: map[string]string{"tier": "api"}})
	export(t, "hub", ns, service{name: "api", headless: true, portName: "http", port: 80, addresses: []string{"10.244.0.30"},
		exportedLabels: map[string]string{"tier": "web"}, exportedAnnotations: map[string]string{"owner": "team-a"}})

	se := func(name string) *mcsv1beta1.ServiceExport {
		return &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	// Every export reports the whole disagreement, east's (the oldest) too.
	for _, c := range clusters {
		msg := waitCondition(t, c, se("api"), keys.ConditionConflict, metav1.ConditionTrue, "TypeConflict")
		for _, want := range []string{
			"type differs: ClusterSetIP in east, west, Headless in hub; the import uses ClusterSetIP of cluster east",
			"ports differ: [http 80/TCP] in east, hub, [web 80/TCP] in west; the import has [http 80/TCP]",
			`exportedLabels differ: {tier="web"} in east, hub, {tier="api"} in west; the import uses {tier="web"} of cluster east`,
			"exportedAnnotations differ",
		} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s's Conflict message %q lacks %q", c, msg, want)
			}
		}
	}
	for _, c := range clusters {
		si := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api"}}
		waitCondition(t, c, si, keys.ConditionConflict, metav1.ConditionTrue, "")
		if si.Spec.Type != mcsv1beta1.ClusterSetIP || len(si.Spec.Ports) != 1 || si.Spec.Ports[0].Name != "http" {
			t.Errorf("%s: import is %s with ports %+v; want east's: ClusterSetIP, http:80", c, si.Spec.Type, si.Spec.Ports)
		}
		if si.Labels["tier"] != "web" || si.Annotations["owner"] != "team-a" || si.Labels[keys.LabelManagedBy] != keys.ManagedByAgent {
			t.Errorf("%s: import labels %v, annotations %v; want east's tier=web, owner=team-a and the agent's label", c, si.Labels, si.Annotations)
		}
	}

	// west and hub withdraw: the conflict ends on east's export and on
	// every import.
	for _, c := range []string{"west", "hub"} {
		if err := kube(t, c).Delete(context.Background(), se("api")); err != nil {
			t.Fatal(err)
		}
	}
	waitCondition(t, "east", se("api"), keys.ConditionConflict, metav1.ConditionFalse, "")
	for _, c := range clusters {
		waitCondition(t, c, &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api"}}, keys.ConditionConflict, metav1.ConditionFalse, "")
	}
}

// A cluster whose agent stops leaves every import once its lease expires,
// and returns when the agent is back.
func TestLeaseExpiryAndReturn(t *testing.T) {
	ns := namespace(t, "e2e-lease")
	export(t, "east", ns, service{name: "echo", portName: "http", port: 80, addresses: []string{"10.244.1.40"}})
	export(t, "west", ns, service{name: "echo", portName: "http", port: 80, addresses: []string{"10.244.2.40"}})
	both := map[string][]string{"east": {"10.244.1.40"}, "west": {"10.244.2.40"}}
	waitImport(t, "hub", ns, "echo", both, 30*time.Second)

	stop(t, "west/agent", false)
	t.Cleanup(func() { up(t) })
	stopped := time.Now()
	waitImport(t, "hub", ns, "echo", map[string][]string{"east": {"10.244.1.40"}}, 4*leaseTTL)
	waitImport(t, "east", ns, "echo", map[string][]string{"east": {"10.244.1.40"}}, 4*leaseTTL)
	t.Logf("west left the import %s after its agent stopped (lease TTL %s)", time.Since(stopped).Round(time.Millisecond), leaseTTL)

	up(t)
	waitImport(t, "hub", ns, "echo", both, 30*time.Second)
	waitImport(t, "west", ns, "echo", both, 30*time.Second)
}

// The registry is killed and restarted: nothing it acknowledged is lost,
// the agents resume, and no imported object is deleted or rewritten.
func TestRegistryKilled(t *testing.T) {
	ns := namespace(t, "e2e-registry-kill")
	export(t, "east", ns, service{name: "svc", portName: "http", port: 80, addresses: []string{"10.244.1.50", "10.244.1.51"}})
	want := map[string][]string{"east": {"10.244.1.50", "10.244.1.51"}}
	before := map[string]map[string]string{}
	for _, c := range []string{"hub", "west"} {
		before[c] = resourceVersions(waitImport(t, c, ns, "svc", want, 30*time.Second))
	}
	writes := map[string]float64{}
	for _, c := range []string{"hub", "west"} {
		settle(t, c)
		writes[c] = importWrites(t, c)
	}
	exports := listExports(t)

	stop(t, dev.ComponentRegistry, true)
	t.Cleanup(func() { up(t) })
	// Longer than the lease TTL: a registry that is away must not make
	// anyone withdraw anything.
	time.Sleep(2 * leaseTTL)
	up(t)

	testkit.Eventually(t, 30*time.Second, "the exports after the restart", func(ctx context.Context) error {
		after := listExports(t)
		if !maps.Equal(after, exports) {
			return fmt.Errorf("exports after restart %v, before %v", after, exports)
		}
		return nil
	})
	// The agents resume: a change made after the restart arrives.
	setEndpoints(t, "east", ns, "svc", "http", []string{"10.244.1.50", "10.244.1.51", "10.244.1.52"})
	want = map[string][]string{"east": {"10.244.1.50", "10.244.1.51", "10.244.1.52"}}
	for _, c := range []string{"hub", "west"} {
		imp := waitImport(t, c, ns, "svc", want, 30*time.Second)
		after := resourceVersions(imp)
		// Only the slice that holds the new endpoint may have changed.
		changed := 0
		for k, rv := range before[c] {
			if after[k] == "" {
				t.Errorf("%s: %s was deleted", c, k)
			} else if after[k] != rv {
				changed++
			}
		}
		if changed > 1 {
			t.Errorf("%s: %d imported objects rewritten for one endpoint change (before %v, after %v)", c, changed, before[c], after)
		}
	}
	for _, c := range []string{"hub", "west"} {
		if d := importWrites(t, c) - writes[c]; d > 1 {
			t.Errorf("%s: %.0f API writes to imported objects across the registry's restart and one endpoint change, want at most 1", c, d)
		}
	}
}

// listExports returns the registry's exports as "cluster/ns/name" -> ports.
func listExports(t testing.TB) map[string]string {
	t.Helper()
	rc, conn, err := client.Dial(state.AdminClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := rc.ListExports(ctx, &registryv1.ListExportsRequest{})
	if err != nil {
		t.Fatalf("listing exports: %v", err)
	}
	out := map[string]string{}
	for _, e := range resp.GetExports() {
		k := e.GetKey()
		out[k.GetClusterId()+"/"+k.GetNamespace()+"/"+k.GetName()] = fmt.Sprint(e.GetPorts())
	}
	return out
}

// An agent restarted on a converged cluster writes nothing.
func TestAgentRestartZeroWrites(t *testing.T) {
	ns := namespace(t, "e2e-agent-restart")
	export(t, "east", ns, service{name: "svc", portName: "http", port: 80, addresses: []string{"10.244.1.60"}})
	export(t, "west", ns, service{name: "svc", portName: "http", port: 80, addresses: []string{"10.244.2.60"}})
	want := map[string][]string{"east": {"10.244.1.60"}, "west": {"10.244.2.60"}}
	waitImport(t, "west", ns, "svc", want, 30*time.Second)
	waitCondition(t, "west", &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "svc"}}, string(mcsv1beta1.ServiceExportConditionReady), metav1.ConditionTrue, "")
	// Let earlier tests' namespaces finish terminating, so that the count
	// below sees only the restart.
	settle(t, "west")
	before := quietWrites(t, "west")

	stop(t, "west/agent", false)
	up(t)
	waitAgentSettled(t, "west")
	if d := agentWrites(t, "west") - before; d != 0 {
		t.Errorf("restarting west's agent on a converged cluster cost %.0f API writes, want 0", d)
	}
}

// waitAgentSettled waits until a (re)started agent has done its first pass:
// it holds a synced view of the registry's imports, has finished an export
// resync, has reconciled every ServiceExport and ServiceImport of its
// cluster at least once, and has nothing queued. Any write the restart
// causes has been made by then.
func waitAgentSettled(t testing.TB, cluster string) {
	t.Helper()
	c, err := state.Cluster(cluster)
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + state.AgentMetricsAddress(c) + "/metrics"
	cl := kube(t, cluster)
	testkit.Eventually(t, 30*time.Second, fmt.Sprintf("the agent of %s to settle", cluster), func(ctx context.Context) error {
		m, err := fleet.ScrapeMetrics(ctx, url)
		if err != nil {
			return err
		}
		if v := fleet.Sum(m, "fleetnet_agent_registry_stream_synced", nil); v != 1 {
			return fmt.Errorf("%s: registry stream not synced", cluster)
		}
		if v := fleet.Sum(m, "fleetnet_agent_export_resyncs_total", nil); v < 1 {
			return fmt.Errorf("%s: no export resync completed yet", cluster)
		}
		exports, imports := &mcsv1beta1.ServiceExportList{}, &mcsv1beta1.ServiceImportList{}
		if err := cl.List(ctx, exports); err != nil {
			return err
		}
		if err := cl.List(ctx, imports); err != nil {
			return err
		}
		for controller, objects := range map[string]int{"serviceexport": len(exports.Items), "serviceimport": len(imports.Items)} {
			if n := fleet.Sum(m, "controller_runtime_reconcile_total", map[string]string{"controller": controller}); n < float64(objects) {
				return fmt.Errorf("%s: %s controller reconciled %.0f times, fewer than the %d objects", cluster, controller, n, objects)
			}
			if d := fleet.Sum(m, "workqueue_depth", map[string]string{"name": controller}); d != 0 {
				return fmt.Errorf("%s: %s controller has %.0f queued", cluster, controller, d)
			}
			if a := fleet.Sum(m, "controller_runtime_active_workers", map[string]string{"controller": controller}); a != 0 {
				return fmt.Errorf("%s: %s controller has %.0f reconciles running", cluster, controller, a)
			}
		}
		return nil
	})
}

// settle waits until no namespace of the cluster is terminating.
func settle(t testing.TB, cluster string) {
	t.Helper()
	cl := kube(t, cluster)
	testkit.Eventually(t, time.Minute, fmt.Sprintf("no terminating namespace in %s", cluster), func(ctx context.Context) error {
		list := &corev1.NamespaceList{}
		if err := cl.List(ctx, list); err != nil {
			return err
		}
		for _, ns := range list.Items {
			if ns.Status.Phase == corev1.NamespaceTerminating {
				return fmt.Errorf("%s: namespace %s is terminating", cluster, ns.Name)
			}
		}
		return nil
	})
}

// quietWrites returns the agent's API writes once they have not changed
// for 3 s: what earlier tests left to withdraw is done.
func quietWrites(t testing.TB, cluster string) float64 {
	t.Helper()
	last, since := agentWrites(t, cluster), time.Now()
	testkit.Eventually(t, time.Minute, fmt.Sprintf("%s's agent writes nothing for 3 s", cluster), func(context.Context) error {
		if w := agentWrites(t, cluster); w != last {
			last, since = w, time.Now()
		}
		if quiet := time.Since(since); quiet < 3*time.Second {
			return fmt.Errorf("last write %s ago", quiet.Round(100*time.Millisecond))
		}
		return nil
	})
	return last
}

// While the registry is unreachable, imports stay as they are; when it is
// back, what changed meanwhile arrives. The outage lasts several lease TTLs:
// no cluster may lose its lease because the agents find the registry back
// too late (gRPC's reconnect backoff, the renewal's retry), which would
// withdraw its exports everywhere for a moment.
func TestRegistryUnreachable(t *testing.T) {
	ns := namespace(t, "e2e-registry-away")
	export(t, "east", ns, service{name: "svc", portName: "http", port: 80, addresses: []string{"10.244.1.70"}})
	before := resourceVersions(waitImport(t, "hub", ns, "svc", map[string][]string{"east": {"10.244.1.70"}}, 30*time.Second))

	// Watch hub's import from now until it has converged.
	ctx, cancel := context.WithCancel(context.Background())
	lapses := make(chan string, 1000)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		hub := kube(t, "hub")
		for ctx.Err() == nil {
			imp, err := getImport(ctx, hub, ns, "svc")
			if err == nil && len(imp.addresses["east"]) == 0 {
				lapses <- fmt.Sprintf("%s: hub's import has no endpoints from east (clusters %v)", time.Now().Format(time.StampMilli), statusClusters(imp.si))
			} else if apierrors.IsNotFound(err) {
				lapses <- fmt.Sprintf("%s: hub's import is gone", time.Now().Format(time.StampMilli))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()

	stop(t, dev.ComponentRegistry, false)
	t.Cleanup(func() { up(t) })
	setEndpoints(t, "east", ns, "svc", "http", []string{"10.244.1.71"})
	time.Sleep(6 * leaseTTL)
	imp, err := getImport(context.Background(), kube(t, "hub"), ns, "svc")
	if err != nil {
		t.Fatalf("import in hub while the registry is away: %v", err)
	}
	if got := resourceVersions(imp); !maps.Equal(got, before) {
		t.Errorf("imported objects changed while the registry was away: before %v, now %v", before, got)
	}

	up(t)
	back := time.Now()
	waitImport(t, "hub", ns, "svc", map[string][]string{"east": {"10.244.1.71"}}, 30*time.Second)
	t.Logf("the change made while the registry was away reached hub %s after the registry was back", time.Since(back).Round(time.Millisecond))
	// Leases that lapsed after the restart would show within a TTL.
	time.Sleep(leaseTTL)
	cancel()
	<-watched
	close(lapses)
	for l := range lapses {
		t.Error(l)
	}
}

// Imported objects changed by hand are put back.
func TestDriftRepaired(t *testing.T) {
	ns := namespace(t, "e2e-drift")
	export(t, "east", ns, service{name: "svc", portName: "http", port: 80, addresses: []string{"10.244.1.80"}})
	want := map[string][]string{"east": {"10.244.1.80"}}
	imp := waitImport(t, "west", ns, "svc", want, 30*time.Second)
	cl := kube(t, "west")
	ctx := context.Background()

	slice := imp.slices[0].DeepCopy()
	slice.Endpoints[0].Addresses = []string{"10.244.9.9"}
	if err := cl.Update(ctx, slice); err != nil {
		t.Fatal(err)
	}
	waitImport(t, "west", ns, "svc", want, 30*time.Second)

	derived := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: slice.Labels[discoveryv1.LabelServiceName]}}
	if err := cl.Delete(ctx, derived); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "the derived Service to be re-created", func(ctx context.Context) error {
		return cl.Get(ctx, ctrlclient.ObjectKeyFromObject(derived), derived)
	})
	// The endpoints never changed, so wait for the ips themselves: the
	// agent writes them after it has re-created the Service.
	testkit.Eventually(t, 30*time.Second, "the import's ips to follow the re-created Service", func(ctx context.Context) error {
		imp, err := getImport(ctx, cl, ns, "svc")
		if err != nil {
			return err
		}
		if len(imp.si.Spec.IPs) != 1 || imp.si.Spec.IPs[0] != derived.Spec.ClusterIP {
			return fmt.Errorf("ServiceImport ips %v, want the re-created derived Service's %s", imp.si.Spec.IPs, derived.Spec.ClusterIP)
		}
		return nil
	})
	waitImport(t, "west", ns, "svc", want, 30*time.Second)
}

// A cluster's certificate cannot write another cluster's records.
func TestCrossClusterCertificateRefused(t *testing.T) {
	rc, conn, err := client.Dial(state.ClusterClientOptions("east"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := &registryv1.ExportKey{Namespace: "default", Name: "stolen", ClusterId: "west"}
	calls := map[string]func() error{
		"PutExport": func() error {
			_, err := rc.PutExport(ctx, &registryv1.PutExportRequest{Export: &registryv1.Export{
				Key: key, ExportedSince: timestamppb.Now(), Type: "ClusterSetIP", IpFamilies: []string{"IPv4"}, Weight: 1,
				Ports: []*registryv1.ServicePort{{Name: "http", Port: 80, Protocol: "TCP"}},
			}})
			return err
		},
		"DeleteExport": func() error {
			_, err := rc.DeleteExport(ctx, &registryv1.DeleteExportRequest{Key: key})
			return err
		},
		"RenewLease": func() error {
			_, err := rc.RenewLease(ctx, &registryv1.RenewLeaseRequest{ClusterId: "west"})
			return err
		},
		"EvictCluster": func() error {
			_, err := rc.EvictCluster(ctx, &registryv1.EvictClusterRequest{ClusterId: "west"})
			return err
		},
	}
	for name, call := range calls {
		if err := call(); status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s for west with east's certificate: %v, want PermissionDenied", name, err)
		}
	}
	if _, ok := listExports(t)["west/default/stolen"]; ok {
		t.Error("the registry holds an export written for west with east's certificate")
	}
}

// Real HTTP pods (echo Deployments on the process nodes of east and west)
// answer through the endpoints imported into hub. Needs root.
func TestHTTPThroughImportedEndpoints(t *testing.T) {
	if err := dev.NodeRequirements(); err != nil {
		t.Fatalf("%v (the e2e suite runs as root in CI)", err)
	}
	ns := namespace(t, "e2e-http")
	for _, c := range []string{"east", "west"} {
		serveEcho(t, c, ns, "echo", 2, false)
		se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}}
		if err := kube(t, c).Create(context.Background(), se); err != nil {
			t.Fatal(err)
		}
	}
	cl := kube(t, "hub")
	var imp *imported
	testkit.Eventually(t, 30*time.Second, "two addresses from each of east and west in hub", func(ctx context.Context) error {
		var err error
		if imp, err = getImport(ctx, cl, ns, "echo"); err != nil {
			return err
		}
		if len(imp.addresses["east"]) != 2 || len(imp.addresses["west"]) != 2 {
			return fmt.Errorf("imported addresses %v, want two from each of east and west", imp.addresses)
		}
		return nil
	})
	pods := appPods(t, ns, "echo")
	for src, addrs := range imp.addresses {
		for _, a := range addrs {
			resp, err := http.Get(fmt.Sprintf("http://%s:%d/", a, *imp.slices[0].Ports[0].Port))
			if err != nil {
				t.Errorf("GET %s (from %s): %v", a, src, err)
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			// The pod that answered is, by the API, in the source cluster
			// and holds the address.
			answer, err := parseEcho(body)
			if err != nil {
				t.Errorf("GET %s (from %s): %v", a, src, err)
				continue
			}
			p, ok := pods[answer.Pod]
			if !ok || p.cluster != src || p.pod.Status.PodIP != a {
				t.Errorf("GET %s answered from pod %q (cluster %q, address %q), want a pod of cluster %s at that address", a, answer.Pod, p.cluster, p.pod.Status.PodIP, src)
			}
		}
	}
}

// A standard Deployment works in the dev fleet: the process node runs its Pods,
// kube-controller-manager makes the EndpointSlices, and the export carries
// the Pods' addresses to every cluster.
func TestDeploymentExported(t *testing.T) {
	ns := namespace(t, "e2e-deployment")
	cl := kube(t, "east")
	ctx := context.Background()
	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(3)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "web", Image: "registry.k8s.io/e2e-test-images/agnhost:2.53", Args: []string{"netexec", "--http-port=8080"},
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				}}},
			},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{
			Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("http"),
		}}},
	}
	se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	for _, obj := range []ctrlclient.Object{dep, svc, se} {
		if err := cl.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	var podIPs []string
	testkit.Eventually(t, time.Minute, "the Pods to run", func(ctx context.Context) error {
		pods := &corev1.PodList{}
		if err := cl.List(ctx, pods, ctrlclient.InNamespace(ns)); err != nil {
			return err
		}
		podIPs = podIPs[:0]
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
				podIPs = append(podIPs, p.Status.PodIP)
			}
		}
		if len(podIPs) != 3 {
			return fmt.Errorf("%d of 3 Pods running with an address", len(podIPs))
		}
		return nil
	})
	imp := waitImport(t, "hub", ns, "web", map[string][]string{"east": podIPs}, time.Minute)
	if p := imp.slices[0].Ports; len(p) != 1 || *p[0].Port != 8080 {
		t.Errorf("imported slice ports %+v, want the Pods' port 8080", p)
	}
}

// `dev up` on a running fleet starts nothing and changes nothing.
func TestUpAgainChangesNothing(t *testing.T) {
	before, err := dev.Load(fleetDir)
	if err != nil {
		t.Fatal(err)
	}
	up(t)
	after, err := dev.Load(fleetDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range before.Components() {
		if before.Processes[c] != after.Processes[c] {
			t.Errorf("%s: %+v before the second up, %+v after", c, before.Processes[c], after.Processes[c])
		}
	}
}
