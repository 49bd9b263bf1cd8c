package agent_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/agent/app"
	"github.com/fleetnet/fleetnet/internal/agent/importer"
	"github.com/fleetnet/fleetnet/internal/registry/registrytest"
	"github.com/fleetnet/fleetnet/internal/registry/server"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/test/fleet"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// importedSlices lists the EndpointSlices the agent imported for ns/name.
func importedSlices(ctx context.Context, c client.Client, name string) ([]discoveryv1.EndpointSlice, error) {
	list := &discoveryv1.EndpointSliceList{}
	err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{mcsv1beta1.LabelServiceName: name, discoveryv1.LabelManagedBy: keys.EndpointSliceManagedBy})
	return list.Items, err
}

// everyImportedSlice is a condition: c has imported slices of name, and
// check passes on each.
func everyImportedSlice(c client.Client, name string, check func(discoveryv1.EndpointSlice) error) func(context.Context) error {
	return func(ctx context.Context) error {
		ss, err := importedSlices(ctx, c, name)
		if err != nil {
			return err
		}
		if len(ss) == 0 {
			return errorf("no imported slices yet")
		}
		for _, s := range ss {
			if err := check(s); err != nil {
				return err
			}
		}
		return nil
	}
}

func addresses(ss []discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range ss {
		for _, e := range s.Endpoints {
			out = append(out, e.Addresses...)
		}
	}
	slices.Sort(out)
	return out
}

func TestImportMaterialisesAndRepairs(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "east"}, {Name: "west"}}})
	east, west := f.Cluster(t, "east"), f.Cluster(t, "west")
	r := registrytest.Start(t, server.Config{})
	ec, wc := east.Client(t), west.Client(t)
	ctx := context.Background()
	createNamespace(t, ec, ns)
	for _, obj := range []client.Object{
		service(ns, "echo"),
		endpointSlice(ns, "echo", "echo-1", "10.244.0.1", "10.244.0.2", "10.244.0.3"),
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}},
	} {
		if err := ec.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	startAgent(t, east, r, "east")
	wa := startAgent(t, west, r, "west")

	// west has no namespace demo yet: the import is pending.
	testkit.Eventually(t, 20*time.Second, "the import to be pending", func(context.Context) error {
		if g := wa.gauge(t, "fleetnet_agent_imports_pending", nil); g != 1 {
			return errorf("pending imports = %v, want 1", g)
		}
		return nil
	})
	createNamespace(t, wc, ns)
	key := types.NamespacedName{Namespace: ns, Name: "echo"}
	derived := importer.DerivedName(ns, "echo")
	want := []string{"10.244.0.1", "10.244.0.2", "10.244.0.3"}
	converged := func(ctx context.Context) error {
		si := &mcsv1beta1.ServiceImport{}
		if err := wc.Get(ctx, key, si); err != nil {
			return err
		}
		svc := &corev1.Service{}
		if err := wc.Get(ctx, types.NamespacedName{Namespace: ns, Name: derived}, svc); err != nil {
			return err
		}
		if !slices.Equal(si.Spec.IPs, svc.Spec.ClusterIPs) || len(si.Spec.IPs) != 1 {
			return errorf("ServiceImport ips %v, derived Service ClusterIPs %v", si.Spec.IPs, svc.Spec.ClusterIPs)
		}
		if len(si.Spec.Ports) != 1 || si.Spec.Ports[0].Name != "http" || si.Spec.Type != mcsv1beta1.ClusterSetIP {
			return errorf("ServiceImport spec = %+v", si.Spec)
		}
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 80 || svc.Spec.Selector != nil {
			return errorf("derived Service spec = %+v", svc.Spec)
		}
		if len(si.Status.Clusters) != 1 || si.Status.Clusters[0].Cluster != "east" || si.Status.EndpointSliceObjects != mcsv1beta1.EndpointSliceObjectsPresent ||
			!meta.IsStatusConditionTrue(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady)) {
			return errorf("ServiceImport status = %+v", si.Status)
		}
		ss, err := importedSlices(ctx, wc, "echo")
		if err != nil {
			return err
		}
		if got := addresses(ss); !slices.Equal(got, want) {
			return errorf("imported addresses %v, want %v", got, want)
		}
		for _, s := range ss {
			l := s.Labels
			if l[discoveryv1.LabelServiceName] != derived || l[mcsv1beta1.LabelSourceCluster] != "east" || l[corev1.LabelTopologyRegion] != "region-east" {
				return errorf("slice %s labels %v", s.Name, l)
			}
			if len(s.Ports) != 1 || *s.Ports[0].Name != "http" || *s.Ports[0].Port != 8080 {
				return errorf("slice %s ports %v", s.Name, s.Ports)
			}
			// Owned by the derived Service, as a Service's own slices are.
			if ref := metav1.GetControllerOf(&s); ref == nil || ref.Kind != "Service" || ref.UID != svc.UID {
				return errorf("slice %s controller %+v, want the derived Service %s", s.Name, ref, svc.UID)
			}
		}
		return nil
	}
	testkit.Eventually(t, 30*time.Second, "the import to converge", converged)
	if g := wa.gauge(t, "fleetnet_agent_imports_pending", nil); g != 0 {
		t.Errorf("pending imports = %v after the namespace appeared, want 0", g)
	}
	testkit.Eventually(t, 10*time.Second, "the import to be counted in place", func(context.Context) error {
		if in, all := wa.gauge(t, "fleetnet_agent_imports_in_place", nil), wa.gauge(t, "fleetnet_agent_imports", nil); in != 1 || all != 1 {
			return errorf("imports in place %v of %v, want 1 of 1", in, all)
		}
		return nil
	})

	// Drift, with the registry unchanged: each is repaired.
	ss, _ := importedSlices(ctx, wc, "echo")
	s := ss[0].DeepCopy()
	s.Endpoints[0].Addresses = []string{"10.244.9.9"}
	if err := wc.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "the import to converge", converged)

	svc := &corev1.Service{}
	if err := wc.Get(ctx, types.NamespacedName{Namespace: ns, Name: derived}, svc); err != nil {
		t.Fatal(err)
	}
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "extra", Port: 9999, TargetPort: intstr.FromInt32(9999), Protocol: corev1.ProtocolTCP})
	if err := wc.Update(ctx, svc, client.FieldOwner("someone-else")); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "the import to converge", converged)

	si := &mcsv1beta1.ServiceImport{}
	if err := wc.Get(ctx, key, si); err != nil {
		t.Fatal(err)
	}
	si.Spec.Ports[0].Port = 81
	if err := wc.Update(ctx, si, client.FieldOwner("someone-else")); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "the ServiceImport's port to be put back", func(ctx context.Context) error {
		got := &mcsv1beta1.ServiceImport{}
		if err := wc.Get(ctx, key, got); err != nil {
			return err
		}
		if got.Spec.Ports[0].Port != 80 {
			return errorf("ServiceImport port %d, want 80", got.Spec.Ports[0].Port)
		}
		return nil
	})

	// One endpoint more in east: one slice write in west.
	before, _ := importedSlices(ctx, wc, "echo")
	versions := map[string]string{}
	for _, s := range before {
		versions[s.Name] = s.ResourceVersion
	}
	if err := ec.Update(ctx, withVersion(t, ec, endpointSlice(ns, "echo", "echo-1", "10.244.0.1", "10.244.0.2", "10.244.0.3", "10.244.0.4"))); err != nil {
		t.Fatal(err)
	}
	want = append(want, "10.244.0.4")
	testkit.Eventually(t, 20*time.Second, "the import to converge", converged)
	after, _ := importedSlices(ctx, wc, "echo")
	changed := 0
	for _, s := range after {
		if versions[s.Name] != s.ResourceVersion {
			changed++
		}
	}
	if changed != 1 {
		t.Errorf("%d imported slices rewritten for one endpoint change, want 1", changed)
	}

	// Unexport: the import and its objects leave west.
	if err := ec.Delete(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "the import, its derived Service and slices to be gone", func(ctx context.Context) error {
		if err := wc.Get(ctx, key, &mcsv1beta1.ServiceImport{}); !apierrors.IsNotFound(err) {
			return errorf("ServiceImport still there: %v", err)
		}
		if err := wc.Get(ctx, types.NamespacedName{Namespace: ns, Name: derived}, &corev1.Service{}); !apierrors.IsNotFound(err) {
			return errorf("derived Service still there: %v", err)
		}
		ss, err := importedSlices(ctx, wc, "echo")
		if err != nil || len(ss) != 0 {
			return errorf("%d slices left (%v)", len(ss), err)
		}
		return nil
	})
}

func TestImportIntoIPv4OnlyClusterAndBlockingService(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "east", DualStack: true}, {Name: "west"}}})
	east, west := f.Cluster(t, "east"), f.Cluster(t, "west")
	r := registrytest.Start(t, server.Config{})
	ec, wc := east.Client(t), west.Client(t)
	ctx := context.Background()
	createNamespace(t, ec, ns)
	createNamespace(t, wc, ns)
	dual := service(ns, "dual")
	dual.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyPreferDualStack)
	v6 := service(ns, "v6only")
	v6.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
	dualV6 := endpointSlice(ns, "dual", "dual-v6", "fd00:10:244::7")
	dualV6.AddressType = discoveryv1.AddressTypeIPv6
	blocked := service(ns, "blocked")
	for _, obj := range []client.Object{dual, v6, blocked, endpointSlice(ns, "dual", "dual-v4", "10.244.0.7"), dualV6,
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dual"}},
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "v6only"}},
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "blocked"}},
	} {
		if err := ec.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	// A Service in west with the derived name that fleetnet does not manage.
	foreign := service(ns, importer.DerivedName(ns, "blocked"))
	if err := wc.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	startAgent(t, east, r, "east")
	startAgent(t, west, r, "west")

	ready := func(name string, status metav1.ConditionStatus, reason string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			si := &mcsv1beta1.ServiceImport{}
			if err := wc.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, si); err != nil {
				return err
			}
			c := meta.FindStatusCondition(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady))
			if c == nil || c.Status != status || c.Reason != reason {
				return errorf("%s Ready = %+v, want %s/%s", name, c, status, reason)
			}
			return nil
		}
	}
	// The dual-stack import becomes single-stack IPv4 in west.
	testkit.Eventually(t, 30*time.Second, "the dual-stack import to be Ready", ready("dual", metav1.ConditionTrue, string(mcsv1beta1.ServiceImportReasonReady)))
	svc := &corev1.Service{}
	if err := wc.Get(ctx, types.NamespacedName{Namespace: ns, Name: importer.DerivedName(ns, "dual")}, svc); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(svc.Spec.IPFamilies, []corev1.IPFamily{corev1.IPv4Protocol}) {
		t.Errorf("derived Service of the dual-stack import has families %v, want IPv4 only", svc.Spec.IPFamilies)
	}
	// Its slices are those of the derived Service's families: west gets the
	// IPv4 slice only, dual-stack east gets both.
	for _, tc := range []struct {
		name  string
		cl    client.Client
		types []discoveryv1.AddressType
	}{
		{"west", wc, []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4}},
		{"east", ec, []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6}},
	} {
		testkit.Eventually(t, 30*time.Second, fmt.Sprintf("the address types of the dual-stack import's slices in %s", tc.name), func(ctx context.Context) error {
			ss, err := importedSlices(ctx, tc.cl, "dual")
			if err != nil {
				return err
			}
			var got []discoveryv1.AddressType
			for _, s := range ss {
				got = append(got, s.AddressType)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.types) {
				return errorf("%s: imported slices of the dual-stack import have address types %v, want %v", tc.name, got, tc.types)
			}
			return nil
		})
	}
	// The IPv6-only import cannot be served in west.
	testkit.Eventually(t, 30*time.Second, "the IPv6-only import to be IPFamilyNotSupported", ready("v6only", metav1.ConditionFalse, string(mcsv1beta1.ServiceImportReasonIPFamilyNotSupported)))
	// The foreign Service blocks its import, which says so.
	testkit.Eventually(t, 30*time.Second, "the blocked import to be ApplyFailed", ready("blocked", metav1.ConditionFalse, keys.ReasonApplyFailed))
	if err := wc.Delete(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "the unblocked import to be Ready", ready("blocked", metav1.ConditionTrue, string(mcsv1beta1.ServiceImportReasonReady)))
}

func TestImportsStayWhileTheRegistryIsAwayAndRestartsWriteNothing(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "east"}, {Name: "west"}}})
	east, west := f.Cluster(t, "east"), f.Cluster(t, "west")
	r := registrytest.Start(t, server.Config{})
	ec, wc := east.Client(t), west.Client(t)
	ctx := context.Background()
	createNamespace(t, ec, ns)
	createNamespace(t, wc, ns)
	for _, obj := range []client.Object{
		service(ns, "echo"),
		endpointSlice(ns, "echo", "echo-1", "10.244.0.1", "10.244.0.2"),
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}},
	} {
		if err := ec.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	fast := func(o *app.Options) { o.ImportResyncPeriod = time.Second }
	startAgent(t, east, r, "east")
	wa := startAgent(t, west, r, "west", fast)
	key := types.NamespacedName{Namespace: ns, Name: "echo"}
	imported := func(ctx context.Context) error {
		ss, err := importedSlices(ctx, wc, "echo")
		if err != nil {
			return err
		}
		if got := addresses(ss); len(got) != 2 {
			return errorf("imported addresses %v", got)
		}
		return wc.Get(ctx, key, &mcsv1beta1.ServiceImport{})
	}
	testkit.Eventually(t, 30*time.Second, "the import", imported)
	resources := []string{"serviceimports", "services", "endpointslices"}
	reconciled := func(min float64) func(context.Context) error {
		start := importReconciles(t)
		return func(context.Context) error {
			if n := importReconciles(t) - start; n < min {
				return errorf("%v import reconciles, want %v", n, min)
			}
			return nil
		}
	}
	// Let the import settle, then take the count of API writes.
	testkit.Eventually(t, 20*time.Second, "2 import reconciles", reconciled(2))
	writes := west.APIWrites(t, resources...)
	if writes == 0 {
		t.Fatal("the API server counted no writes of imported objects; the metric is not read right")
	}

	// The registry goes away: nothing imported is deleted or rewritten,
	// through several resyncs.
	r.Stop()
	testkit.Eventually(t, 20*time.Second, "the registry stream to be unsynced", func(context.Context) error {
		if g := wa.gauge(t, "fleetnet_agent_registry_stream_synced", nil); g != 0 {
			return errorf("stream still synced")
		}
		return nil
	})
	testkit.Eventually(t, 20*time.Second, "3 import reconciles", reconciled(3))
	if err := imported(ctx); err != nil {
		t.Fatalf("while the registry is away: %v", err)
	}
	if n := west.APIWrites(t, resources...) - writes; n != 0 {
		t.Errorf("%v API writes while the registry was away, want 0", n)
	}

	// It returns: the stream syncs again, and nothing needs writing.
	r.Restart()
	testkit.Eventually(t, 30*time.Second, "the registry stream to sync again", func(context.Context) error {
		if g := wa.gauge(t, "fleetnet_agent_registry_stream_synced", nil); g != 1 {
			return errorf("stream not synced again")
		}
		return nil
	})
	testkit.Eventually(t, 20*time.Second, "3 import reconciles", reconciled(3))
	if n := west.APIWrites(t, resources...) - writes; n != 0 {
		t.Errorf("%v API writes after the registry returned to an unchanged state, want 0", n)
	}

	// A restarted agent on the converged cluster writes nothing either.
	wa.stop()
	startAgent(t, west, r, "west", fast)
	testkit.Eventually(t, 20*time.Second, "3 import reconciles", reconciled(3))
	if n := west.APIWrites(t, resources...) - writes; n != 0 {
		t.Errorf("%v API writes by a restarted agent on a converged cluster, want 0", n)
	}
	if err := imported(ctx); err != nil {
		t.Fatal(err)
	}
}

// importReconciles is how many ServiceImport reconciles the agents of this
// test process have finished.
func importReconciles(t *testing.T) float64 {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "controller_runtime_reconcile_total" {
			for _, m := range mf.GetMetric() {
				if matches(m, map[string]string{"controller": "serviceimport"}) {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

func v4s(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("10.244.%d.%d", i/250, 1+i%250))
	}
	return out
}

func TestDualStackImportKeepsSlicesStable(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "east", DualStack: true}, {Name: "west", DualStack: true}}})
	east, west := f.Cluster(t, "east"), f.Cluster(t, "west")
	r := registrytest.Start(t, server.Config{})
	ec, wc := east.Client(t), west.Client(t)
	ctx := context.Background()
	createNamespace(t, ec, ns)
	createNamespace(t, wc, ns)
	svc := service(ns, "echo")
	svc.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
	v6 := endpointSlice(ns, "echo", "echo-v6", "fd00:10:244::1")
	v6.AddressType = discoveryv1.AddressTypeIPv6
	for _, obj := range []client.Object{svc, endpointSlice(ns, "echo", "echo-v4", v4s(100)...), v6,
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}}} {
		if err := ec.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	startAgent(t, east, r, "east")
	startAgent(t, west, r, "west")

	shape := func(v4Slices, v4Endpoints int) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			ss, err := importedSlices(ctx, wc, "echo")
			if err != nil {
				return err
			}
			got := map[discoveryv1.AddressType][2]int{}
			for _, s := range ss {
				g := got[s.AddressType]
				got[s.AddressType] = [2]int{g[0] + 1, g[1] + len(s.Endpoints)}
				if want := "-" + importer.FamilySuffix(s.AddressType) + "-"; !strings.Contains(s.Name, want) {
					return errorf("slice %s of %s lacks %q in its name", s.Name, s.AddressType, want)
				}
			}
			if got[discoveryv1.AddressTypeIPv4] != [2]int{v4Slices, v4Endpoints} || got[discoveryv1.AddressTypeIPv6] != [2]int{1, 1} {
				return errorf("imported slices (count, endpoints) by family = %v, want IPv4 %d/%d and IPv6 1/1", got, v4Slices, v4Endpoints)
			}
			return nil
		}
	}
	v6UID := func() types.UID {
		ss, _ := importedSlices(ctx, wc, "echo")
		for _, s := range ss {
			if s.AddressType == discoveryv1.AddressTypeIPv6 {
				return s.UID
			}
		}
		t.Fatal("no IPv6 slice")
		return ""
	}
	testkit.Eventually(t, 30*time.Second, "1 IPv4 slice of 100 endpoints", shape(1, 100))
	uid := v6UID()
	for _, step := range []struct{ n, slices int }{{101, 2}, {100, 1}} {
		if err := ec.Update(ctx, withVersion(t, ec, endpointSlice(ns, "echo", "echo-v4", v4s(step.n)...))); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 30*time.Second, fmt.Sprintf("%d IPv4 slices of %d endpoints", step.slices, step.n), shape(step.slices, step.n))
		if got := v6UID(); got != uid {
			t.Fatalf("the IPv6 slice was replaced (UID %s, was %s) when IPv4 endpoints changed", got, uid)
		}
	}

	// An older export that puts IPv6 first changes the import's primary
	// family: the derived Service is created again, IPv6 first.
	other := r.Client("south", false)
	if _, err := other.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Cluster: &registryv1.Cluster{Id: "south", ClustersetId: "fleet"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.PutExport(ctx, &registryv1.PutExportRequest{Export: &registryv1.Export{
		Key: &registryv1.ExportKey{Namespace: ns, Name: "echo", ClusterId: "south"}, ExportedSince: timestamppb.New(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)),
		Type: "ClusterSetIP", Ports: []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}, IpFamilies: []string{"IPv6", "IPv4"}, Weight: 1,
	}}); err != nil {
		t.Fatal(err)
	}
	derived := importer.DerivedName(ns, "echo")
	testkit.Eventually(t, 30*time.Second, "the derived Service IPv6 first", func(ctx context.Context) error {
		svc := &corev1.Service{}
		if err := wc.Get(ctx, types.NamespacedName{Namespace: ns, Name: derived}, svc); err != nil {
			return err
		}
		si := &mcsv1beta1.ServiceImport{}
		if err := wc.Get(ctx, types.NamespacedName{Namespace: ns, Name: "echo"}, si); err != nil {
			return err
		}
		if len(svc.Spec.IPFamilies) != 2 || svc.Spec.IPFamilies[0] != corev1.IPv6Protocol || !slices.Equal(si.Spec.IPs, svc.Spec.ClusterIPs) {
			return errorf("derived Service families %v, ClusterIPs %v; ServiceImport ips %v", svc.Spec.IPFamilies, svc.Spec.ClusterIPs, si.Spec.IPs)
		}
		return nil
	})
}

// TestOneFailingSourceClusterDoesNotStopTheOthers puts a foreign
// EndpointSlice, with the immutable address type of the other family, where
// one source cluster's slice must go. That cluster's slice cannot be
// applied; the other cluster's slices and the status still are.
func TestOneFailingSourceClusterDoesNotStopTheOthers(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "west"}}})
	west := f.Cluster(t, "west")
	r := registrytest.Start(t, server.Config{})
	wc := west.Client(t)
	ctx := context.Background()
	createNamespace(t, wc, ns)
	for i, id := range []string{"east", "south"} {
		exportDirectly(t, r, id, time.Date(2026, 1, 1, 0, i, 0, 0, time.UTC), httpPort, fmt.Sprintf("10.244.%d.1", i))
	}
	blockerName := importer.SliceName(importer.DerivedName(ns, "echo")+"-south", discoveryv1.AddressTypeIPv4, "c0", 0)
	blocker := endpointSlice(ns, "unrelated", blockerName, "fd00::1")
	blocker.AddressType = discoveryv1.AddressTypeIPv6
	if err := wc.Create(ctx, blocker); err != nil {
		t.Fatal(err)
	}
	startAgent(t, west, r, "west")
	key := types.NamespacedName{Namespace: ns, Name: "echo"}
	testkit.Eventually(t, 30*time.Second, "the ApplyFailed condition naming the blocker", func(ctx context.Context) error {
		si := &mcsv1beta1.ServiceImport{}
		if err := wc.Get(ctx, key, si); err != nil {
			return err
		}
		c := meta.FindStatusCondition(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady))
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != keys.ReasonApplyFailed || !strings.Contains(c.Message, blockerName) || !strings.Contains(c.Message, "cluster south") {
			return errorf("Ready = %+v, want False/ApplyFailed naming %s and cluster south", c, blockerName)
		}
		if len(si.Status.Clusters) != 2 {
			return errorf("status clusters %v", si.Status.Clusters)
		}
		ss, err := importedSlicesOf(ctx, wc, "echo", "east")
		if err != nil || len(ss) != 1 {
			return errorf("east's slices: %d (%v)", len(ss), err)
		}
		return nil
	})
	if err := wc.Delete(ctx, blocker); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 60*time.Second, "the import to be Ready", func(ctx context.Context) error {
		si := &mcsv1beta1.ServiceImport{}
		if err := wc.Get(ctx, key, si); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady)) {
			return errorf("not Ready yet: %v", si.Status.Conditions)
		}
		ss, err := importedSlicesOf(ctx, wc, "echo", "south")
		if err != nil || len(ss) != 1 {
			return errorf("south's slices: %d (%v)", len(ss), err)
		}
		return nil
	})
}

// TestImportWithMixedPortNames: east exports one unnamed port, south (newer)
// two named ones. A Service cannot mix them, so the import keeps east's
// ports whole and the importing cluster reports the conflict.
func TestImportWithMixedPortNames(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "west"}}})
	west := f.Cluster(t, "west")
	r := registrytest.Start(t, server.Config{})
	wc := west.Client(t)
	createNamespace(t, wc, ns)
	ports := map[string][]*registryv1.ServicePort{
		"east":  {{Protocol: "TCP", Port: 80}},
		"south": {{Name: "http", Protocol: "TCP", Port: 80}, {Name: "admin", Protocol: "TCP", Port: 81}},
	}
	for i, id := range []string{"east", "south"} {
		exportDirectly(t, r, id, time.Date(2026, 1, 1, 0, i, 0, 0, time.UTC), ports[id])
	}
	startAgent(t, west, r, "west")
	testkit.Eventually(t, 30*time.Second, "east's single unnamed port on the import", func(ctx context.Context) error {
		si := &mcsv1beta1.ServiceImport{}
		if err := wc.Get(ctx, types.NamespacedName{Namespace: ns, Name: "echo"}, si); err != nil {
			return err
		}
		if len(si.Spec.Ports) != 1 || si.Spec.Ports[0].Name != "" || si.Spec.Ports[0].Port != 80 {
			return errorf("ServiceImport ports %+v, want east's single unnamed port", si.Spec.Ports)
		}
		c := meta.FindStatusCondition(si.Status.Conditions, keys.ConditionConflict)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "PortConflict" || !strings.Contains(c.Message, "in south") {
			return errorf("Conflict = %+v, want True/PortConflict naming south's ports", c)
		}
		if !meta.IsStatusConditionTrue(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady)) {
			return errorf("not Ready: %+v", si.Status.Conditions)
		}
		return nil
	})
}

// TestReconcilerRepairsDriftWhenCalledDirectly runs the import reconciler
// by hand, with no manager and no events: after drift, one call repairs it.
func TestReconcilerRepairsDriftWhenCalledDirectly(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "west"}}})
	west := f.Cluster(t, "west")
	r := registrytest.Start(t, server.Config{})
	wc := west.Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	createNamespace(t, wc, ns)
	exportDirectly(t, r, "east", time.Now(), httpPort, "10.244.0.1")
	stream := &importer.Stream{Client: r.Client("west", false), Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Changed: func(types.NamespacedName) {}}
	go stream.Start(ctx)
	testkit.Eventually(t, 10*time.Second, "the stream to sync with the import", func(context.Context) error {
		if d, synced := stream.Get(types.NamespacedName{Namespace: ns, Name: "echo"}); !synced || d == nil || len(d.Chunks) != 1 {
			return errorf("stream not synced with the import yet")
		}
		return nil
	})
	rec := &importer.Reconciler{Client: wc, Stream: stream, Families: []corev1.IPFamily{corev1.IPv4Protocol}, EndpointsPerSlice: 100,
		Recorder: events.NewFakeRecorder(100), Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Pending: importer.NewPendingTracker(nil)}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "echo"}}
	if _, err := rec.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	ss, err := importedSlices(ctx, wc, "echo")
	if err != nil || len(ss) != 1 || addresses(ss)[0] != "10.244.0.1" {
		t.Fatalf("after one reconcile: %v, %v", addresses(ss), err)
	}
	s := ss[0].DeepCopy()
	s.Endpoints[0].Addresses = []string{"10.244.9.9"}
	if err := wc.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if ss, _ := importedSlices(ctx, wc, "echo"); len(ss) != 1 || addresses(ss)[0] != "10.244.0.1" {
		t.Fatalf("drift not repaired by a direct call: %v", addresses(ss))
	}
}

// Imported slices carry their source cluster's weight (fleetnet.dev/weight
// on its ServiceExport) and regional frontend (fleetnet.dev/regional-frontend),
// so a gateway in the importing cluster can split traffic by cluster and
// program a cross-region load balancer; a weight change relabels the
// slices in place.
func TestImportedSlicesCarryTheClusterWeight(t *testing.T) {
	const frontend = "/subscriptions/0000/resourceGroups/mc-east/providers/Microsoft.Network/loadBalancers/kubernetes/frontendIPConfigurations/aecho"
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "east"}, {Name: "west"}}})
	east, west := f.Cluster(t, "east"), f.Cluster(t, "west")
	r := registrytest.Start(t, server.Config{})
	ec, wc := east.Client(t), west.Client(t)
	ctx := context.Background()
	createNamespace(t, ec, ns)
	createNamespace(t, wc, ns)
	for _, obj := range []client.Object{
		service(ns, "echo"),
		endpointSlice(ns, "echo", "echo-1", "10.244.0.1"),
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo", Annotations: map[string]string{
			keys.AnnotationWeight: "5", keys.AnnotationRegionalFrontend: frontend,
		}}},
	} {
		if err := ec.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	startAgent(t, east, r, "east")
	startAgent(t, west, r, "west")
	weightIs := func(want string) func(context.Context) error {
		return everyImportedSlice(wc, "echo", func(s discoveryv1.EndpointSlice) error {
			if got := s.Annotations[keys.AnnotationWeight]; got != want {
				return errorf("slice %s has weight %q, want %q", s.Name, got, want)
			}
			if got := s.Annotations[keys.AnnotationRegionalFrontend]; got != frontend {
				return errorf("slice %s has regional frontend %q, want %q", s.Name, got, frontend)
			}
			return nil
		})
	}
	testkit.Eventually(t, 20*time.Second, "weight 5 on the imported slice", weightIs("5"))
	ss, _ := importedSlices(ctx, wc, "echo")
	before := ss[0].UID
	patchAnnotation(t, ec, "echo", keys.AnnotationWeight, "0")
	testkit.Eventually(t, 20*time.Second, "weight 0 on the imported slice", weightIs("0"))
	if ss, _ := importedSlices(ctx, wc, "echo"); len(ss) != 1 || ss[0].UID != before {
		t.Errorf("the slice was replaced, not updated in place")
	}
}

// An internal Service of type LoadBalancer for which cloud-provider-azure
// makes a Private Link Service (azure-pls-create) publishes that PLS with
// its export once it has its address, and the importing cluster's slices
// carry it, with fleetnet.dev/pls-approval=auto while the ServiceExport
// allows it; a malformed approval makes the ServiceExport Valid=False
// naming it.
func TestImportedSlicesCarryThePrivateLinkService(t *testing.T) {
	const lb = "/subscriptions/0000/resourceGroups/mc-east/providers/Microsoft.Network/loadBalancers/kubernetes"
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "east"}, {Name: "west"}}})
	east, west := f.Cluster(t, "east"), f.Cluster(t, "west")
	r := registrytest.Start(t, server.Config{})
	ec, wc := east.Client(t), west.Client(t)
	ctx := context.Background()
	createNamespace(t, ec, ns)
	createNamespace(t, wc, ns)
	svc := service(ns, "echo")
	svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	svc.Annotations = map[string]string{
		"service.beta.kubernetes.io/azure-load-balancer-internal": "true",
		"service.beta.kubernetes.io/azure-pls-create":             "true",
	}
	for _, obj := range []client.Object{
		svc,
		endpointSlice(ns, "echo", "echo-1", "10.244.0.1"),
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo", Annotations: map[string]string{keys.AnnotationPLSApproval: "auto"}}},
	} {
		if err := ec.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	startAgent(t, east, r, "east", func(o *app.Options) { o.AzureLoadBalancerID = lb })
	startAgent(t, west, r, "west")
	slicesSay := func(pls, approval string) func(context.Context) error {
		return everyImportedSlice(wc, "echo", func(s discoveryv1.EndpointSlice) error {
			if got := s.Annotations[keys.AnnotationPrivateLinkService]; got != pls {
				return errorf("slice %s has Private Link Service %q, want %q", s.Name, got, pls)
			}
			if got := s.Annotations[keys.AnnotationPLSApproval]; got != approval {
				return errorf("slice %s has approval %q, want %q", s.Name, got, approval)
			}
			return nil
		})
	}
	// Without an address the load balancer has no frontend, nor the PLS.
	testkit.Eventually(t, 20*time.Second, "slices without a Private Link Service", slicesSay("", ""))
	if err := ec.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "10.224.0.9"}}
	if err := ec.Status().Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	pls := "/subscriptions/0000/resourceGroups/mc-east/providers/Microsoft.Network/privateLinkServices/pls-" +
		strings.ReplaceAll("a"+string(svc.UID), "-", "")[:32]
	testkit.Eventually(t, 20*time.Second, "slices with the Private Link Service, approval auto", slicesSay(pls, "auto"))

	patchAnnotation(t, ec, "echo", keys.AnnotationPLSApproval, "yes")
	wantCondition(t, ec, "echo", mcsv1beta1.ServiceExportConditionValid, metav1.ConditionFalse, keys.ReasonInvalidPrivateLink)
	if cond, err := condition(ec, "echo", mcsv1beta1.ServiceExportConditionValid); err != nil || !strings.Contains(cond.Message, `fleetnet.dev/pls-approval="yes"`) {
		t.Errorf("Valid condition %+v (%v) does not name the annotation and its value", cond, err)
	}
	// An invalid export is not exported (KEP-1645), as with any other
	// invalid annotation: the only exporter's slices are withdrawn.
	testkit.Eventually(t, 20*time.Second, "the invalid export's slices to be withdrawn", func(ctx context.Context) error {
		if ss, err := importedSlices(ctx, wc, "echo"); err != nil || len(ss) > 0 {
			return errorf("%d imported slices (%v), want none", len(ss), err)
		}
		return nil
	})
	patchAnnotation(t, ec, "echo", keys.AnnotationPLSApproval, "manual")
	testkit.Eventually(t, 20*time.Second, "slices with the Private Link Service, no approval", slicesSay(pls, ""))
}

// With --create-import-namespaces, an import whose namespace the cluster
// lacks creates it (labelled as the agent's) instead of waiting.
func TestImportCreatesItsNamespace(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "east"}, {Name: "west"}}})
	east, west := f.Cluster(t, "east"), f.Cluster(t, "west")
	r := registrytest.Start(t, server.Config{})
	ec, wc := east.Client(t), west.Client(t)
	ctx := context.Background()
	const other = "made-by-import"
	createNamespace(t, ec, other)
	for _, obj := range []client.Object{
		service(other, "echo"),
		endpointSlice(other, "echo", "echo-1", "10.244.0.1"),
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "echo"}},
	} {
		if err := ec.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	startAgent(t, east, r, "east")
	wa := startAgent(t, west, r, "west", func(o *app.Options) { o.CreateImportNamespaces = true })
	testkit.Eventually(t, 30*time.Second, "the import in its new namespace", func(ctx context.Context) error {
		n := &corev1.Namespace{}
		if err := wc.Get(ctx, types.NamespacedName{Name: other}, n); err != nil {
			return err
		}
		if n.Labels[keys.LabelManagedBy] != keys.ManagedByAgent {
			return errorf("namespace labels %v, want %s=%s", n.Labels, keys.LabelManagedBy, keys.ManagedByAgent)
		}
		list := &discoveryv1.EndpointSliceList{}
		if err := wc.List(ctx, list, client.InNamespace(other), client.MatchingLabels{mcsv1beta1.LabelServiceName: "echo", discoveryv1.LabelManagedBy: keys.EndpointSliceManagedBy}); err != nil {
			return err
		}
		ss := list.Items
		if got := addresses(ss); !slices.Equal(got, []string{"10.244.0.1"}) {
			return errorf("imported addresses %v", got)
		}
		return nil
	})
	if g := wa.gauge(t, "fleetnet_agent_imports_pending", nil); g != 0 {
		t.Errorf("pending imports = %v, want 0", g)
	}
}
