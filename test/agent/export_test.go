package agent_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/agent/app"
	"github.com/fleetnet/fleetnet/internal/registry/keyspace"
	"github.com/fleetnet/fleetnet/internal/registry/registrytest"
	"github.com/fleetnet/fleetnet/internal/registry/server"
	"github.com/fleetnet/fleetnet/internal/registry/store"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/test/fleet"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

const ns = "demo"

func setup(t *testing.T, mods ...func(*app.Options)) (client.Client, registryv1.RegistryClient, *registrytest.Registry, *fleet.Cluster, *agent) {
	t.Helper()
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "east"}}})
	east := f.Cluster(t, "east")
	reg := registrytest.Start(t, server.Config{})
	c := east.Client(t)
	createNamespace(t, c, ns)
	a := startAgent(t, east, reg, "east", mods...)
	return c, reg.Client("observer", false), reg, east, a
}

func condition(c client.Client, name string, t mcsv1beta1.ServiceExportConditionType) (*metav1.Condition, error) {
	se := &mcsv1beta1.ServiceExport{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, se); err != nil {
		return nil, err
	}
	cond := meta.FindStatusCondition(se.Status.Conditions, string(t))
	if cond == nil {
		return nil, errorf("ServiceExport %s has no %s condition yet: %v", name, t, se.Status.Conditions)
	}
	return cond, nil
}

func wantCondition(t *testing.T, c client.Client, name string, typ mcsv1beta1.ServiceExportConditionType, status metav1.ConditionStatus, reason string) {
	t.Helper()
	testkit.Eventually(t, 20*time.Second, fmt.Sprintf("ServiceExport %s %s=%s/%s", name, typ, status, reason), func(ctx context.Context) error {
		cond, err := condition(c, name, typ)
		if err != nil {
			return err
		}
		if cond.Status != status || cond.Reason != reason {
			return errorf("%s %s = %s/%s (%s), want %s/%s", name, typ, cond.Status, cond.Reason, cond.Message, status, reason)
		}
		return nil
	})
}

func TestExportLifecycle(t *testing.T) {
	c, reg, _, _, a := setup(t)
	ctx := context.Background()
	for _, obj := range []client.Object{
		service(ns, "echo"),
		endpointSlice(ns, "echo", "echo-abc", "10.244.0.1", "10.244.0.2"),
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}},
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, 20*time.Second, "echo's export and its 2 endpoints in the registry", func(ctx context.Context) error {
		resp, err := registryExports(ctx, reg, "east")
		if err != nil {
			return err
		}
		if !hasExport(resp, ns, "echo") || endpointCount(resp, ns, "echo") != 2 {
			return errorf("registry holds %d exports and %d endpoints of echo", len(resp.GetExports()), endpointCount(resp, ns, "echo"))
		}
		return nil
	})
	wantCondition(t, c, "echo", mcsv1beta1.ServiceExportConditionValid, metav1.ConditionTrue, string(mcsv1beta1.ServiceExportReasonValid))
	wantCondition(t, c, "echo", mcsv1beta1.ServiceExportConditionReady, metav1.ConditionTrue, string(mcsv1beta1.ServiceExportReasonReady))
	wantCondition(t, c, "echo", mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionFalse, string(mcsv1beta1.ServiceExportReasonNoConflicts))
	se := &mcsv1beta1.ServiceExport{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "echo"}, se); err != nil || !slices.Contains(se.Finalizers, keys.FinalizerServiceExport) {
		t.Fatalf("finalizer not set: %v %v", se.Finalizers, err)
	}

	// One endpoint more: exactly one registry write.
	before := a.counter(t, "fleetnet_agent_registry_writes_total", nil)
	slice := endpointSlice(ns, "echo", "echo-abc", "10.244.0.1", "10.244.0.2", "10.244.0.3")
	if err := c.Update(ctx, withVersion(t, c, slice)); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "3 endpoints of echo in the registry", func(ctx context.Context) error {
		resp, err := registryExports(ctx, reg, "east")
		if err != nil {
			return err
		}
		if n := endpointCount(resp, ns, "echo"); n != 3 {
			return errorf("registry holds %d endpoints, want 3", n)
		}
		return nil
	})
	// The registry may show the write a moment before the agent counts it.
	testkit.Eventually(t, 10*time.Second, "the agent to count the registry write", func(context.Context) error {
		if d := a.counter(t, "fleetnet_agent_registry_writes_total", nil) - before; d < 1 {
			return errorf("agent counted %v writes", d)
		}
		return nil
	})
	if d := a.counter(t, "fleetnet_agent_registry_writes_total", nil) - before; d != 1 {
		t.Errorf("one endpoint change made %v registry writes, want 1", d)
	}

	// Invalid exports: a condition, an event, and nothing in the registry.
	ext := service(ns, "ext")
	ext.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com"}
	weighted := service(ns, "weighted")
	for _, obj := range []client.Object{
		ext, weighted,
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ext"}},
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nosvc"}},
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "weighted", Annotations: map[string]string{keys.AnnotationWeight: "2000"}}},
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	wantCondition(t, c, "ext", mcsv1beta1.ServiceExportConditionValid, metav1.ConditionFalse, string(mcsv1beta1.ServiceExportReasonInvalidServiceType))
	wantCondition(t, c, "nosvc", mcsv1beta1.ServiceExportConditionValid, metav1.ConditionFalse, string(mcsv1beta1.ServiceExportReasonNoService))
	wantCondition(t, c, "weighted", mcsv1beta1.ServiceExportConditionValid, metav1.ConditionFalse, keys.ReasonInvalidWeight)
	cond, _ := condition(c, "weighted", mcsv1beta1.ServiceExportConditionValid)
	if want := `annotation fleetnet.dev/weight="2000" must be an integer from 0 to 1000`; cond.Message != want {
		t.Errorf("message = %q, want %q", cond.Message, want)
	}
	testkit.Eventually(t, 20*time.Second, "the InvalidServiceType Warning event on ext", func(ctx context.Context) error {
		evs := &eventsv1.EventList{}
		if err := c.List(ctx, evs, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == "ext" && e.Type == corev1.EventTypeWarning && e.Reason == string(mcsv1beta1.ServiceExportReasonInvalidServiceType) {
				return nil
			}
		}
		return errorf("no Warning event for ext among %d events", len(evs.Items))
	})
	resp, err := registryExports(ctx, reg, "east")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ext", "nosvc", "weighted"} {
		if hasExport(resp, ns, name) {
			t.Errorf("invalid export %s is in the registry", name)
		}
	}

	// Fixing the weight makes it valid and exported.
	patchAnnotation(t, c, "weighted", keys.AnnotationWeight, "0")
	wantCondition(t, c, "weighted", mcsv1beta1.ServiceExportConditionValid, metav1.ConditionTrue, string(mcsv1beta1.ServiceExportReasonValid))

	// Unexport: the registry forgets it, the finalizer is released.
	if err := c.Delete(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "the ServiceExport and echo's export to be gone", func(ctx context.Context) error {
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "echo"}, &mcsv1beta1.ServiceExport{})
		if !apierrors.IsNotFound(err) {
			return errorf("ServiceExport still there: %v", err)
		}
		resp, err := registryExports(ctx, reg, "east")
		if err != nil {
			return err
		}
		if hasExport(resp, ns, "echo") || endpointCount(resp, ns, "echo") != 0 {
			return errorf("registry still holds echo")
		}
		return nil
	})
}

func withVersion[T client.Object](t testing.TB, c client.Client, obj T) T {
	t.Helper()
	cur := obj.DeepCopyObject().(T)
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), cur); err != nil {
		t.Fatal(err)
	}
	obj.SetResourceVersion(cur.GetResourceVersion())
	return obj
}

func patchAnnotation(t *testing.T, c client.Client, name, key, value string) {
	t.Helper()
	se := &mcsv1beta1.ServiceExport{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, se); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(se.DeepCopy())
	se.Annotations[key] = value
	if err := c.Patch(context.Background(), se, patch); err != nil {
		t.Fatal(err)
	}
}

func TestAutoExportLabel(t *testing.T) {
	c, _, _, _, _ := setup(t)
	ctx := context.Background()
	key := types.NamespacedName{Namespace: ns, Name: "web"}
	svc := service(ns, "web")
	svc.Labels = map[string]string{keys.LabelExport: "true"}
	if err := c.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	managed := func(ctx context.Context) error {
		se := &mcsv1beta1.ServiceExport{}
		if err := c.Get(ctx, key, se); err != nil {
			return err
		}
		if se.Labels[keys.LabelAutoExport] != "true" {
			return errorf("ServiceExport is not the managed one: %v", se.Labels)
		}
		return nil
	}
	gone := func(ctx context.Context) error {
		if err := c.Get(ctx, key, &mcsv1beta1.ServiceExport{}); !apierrors.IsNotFound(err) {
			return errorf("ServiceExport still there: %v", err)
		}
		return nil
	}
	testkit.Eventually(t, 20*time.Second, "the managed ServiceExport", managed)

	// Label removed: the managed ServiceExport goes.
	setLabel(t, c, svc, nil)
	testkit.Eventually(t, 20*time.Second, "the managed ServiceExport to be gone", gone)

	// A hand-made ServiceExport is never touched, label or not.
	if err := c.Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}); err != nil {
		t.Fatal(err)
	}
	setLabel(t, c, svc, map[string]string{keys.LabelExport: "true"})
	setLabel(t, c, svc, nil)
	testkit.Eventually(t, 5*time.Second, "the hand-made ServiceExport", func(ctx context.Context) error {
		return c.Get(ctx, key, &mcsv1beta1.ServiceExport{})
	})
	se := &mcsv1beta1.ServiceExport{}
	if err := c.Get(ctx, key, se); err != nil || se.Labels[keys.LabelAutoExport] == "true" {
		t.Fatalf("hand-made ServiceExport was replaced or removed: %v %v", se.Labels, err)
	}

	// Deleting the hand-made one of a labelled Service brings the managed one.
	setLabel(t, c, svc, map[string]string{keys.LabelExport: "true"})
	if err := c.Delete(ctx, se); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "the managed ServiceExport", managed)
}

func setLabel(t *testing.T, c client.Client, svc *corev1.Service, labels map[string]string) {
	t.Helper()
	cur := &corev1.Service{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(svc), cur); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Labels = labels
	if err := c.Patch(context.Background(), cur, patch); err != nil {
		t.Fatal(err)
	}
}

func TestRegistryLossIsRepairedWithoutRestart(t *testing.T) {
	c, reg, r, _, _ := setup(t)
	ctx := context.Background()
	for _, obj := range []client.Object{
		service(ns, "echo"),
		endpointSlice(ns, "echo", "echo-a", "10.244.0.1"),
		endpointSlice(ns, "echo", "echo-b", "10.244.0.2"),
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}},
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	complete := func(ctx context.Context) error {
		resp, err := registryExports(ctx, reg, "east")
		if err != nil {
			return err
		}
		if !hasExport(resp, ns, "echo") || endpointCount(resp, ns, "echo") != 2 {
			return errorf("registry holds export: %v, %d endpoints", hasExport(resp, ns, "echo"), endpointCount(resp, ns, "echo"))
		}
		return nil
	}
	testkit.Eventually(t, 20*time.Second, "echo's export and its 2 endpoints in the registry", complete)

	exportKey := &registryv1.ExportKey{Namespace: ns, Name: "echo", ClusterId: "east"}
	// The registry loses one endpoint chunk only.
	if ok, _, _ := r.Store.Delete(ctx, keyspace.ChunkKey(&registryv1.ChunkKey{Namespace: ns, Name: "echo", ClusterId: "east", Chunk: "echo-b"}), 0); !ok {
		t.Fatal("chunk was not in the store")
	}
	testkit.Eventually(t, 20*time.Second, "the lost chunk to be repaired", complete)

	// The registry loses the export and all its endpoints.
	if _, err := r.Store.DeletePrefix(ctx, keyspace.ExportEndpointsPrefix(exportKey)); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := r.Store.Delete(ctx, keyspace.ExportKey(exportKey), 0); !ok {
		t.Fatal("export was not in the store")
	}
	testkit.Eventually(t, 20*time.Second, "the lost export and endpoints to be repaired", complete)
}

func TestResyncDeletesStaleAndRestartWritesNothing(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "east"}}})
	east := f.Cluster(t, "east")
	r := registrytest.Start(t, server.Config{})
	c := east.Client(t)
	createNamespace(t, c, ns)
	ctx := context.Background()

	// A record from an earlier life of this cluster, with no ServiceExport.
	self := r.Client("east", false)
	if _, err := self.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Cluster: &registryv1.Cluster{Id: "east", ClustersetId: "fleet", Region: "region-east"}}); err != nil {
		t.Fatal(err)
	}
	stale := &registryv1.Export{Key: &registryv1.ExportKey{Namespace: ns, Name: "stale", ClusterId: "east"}, ExportedSince: metav1Now(),
		Type: "ClusterSetIP", Ports: []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}}
	if _, err := self.PutExport(ctx, &registryv1.PutExportRequest{Export: stale}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		name := "svc-" + string(rune('a'+i))
		for _, obj := range []client.Object{
			service(ns, name),
			endpointSlice(ns, name, name+"-1", "10.244.1.1", "10.244.1.2"),
			&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
		} {
			if err := c.Create(ctx, obj); err != nil {
				t.Fatal(err)
			}
		}
	}
	a := startAgent(t, east, r, "east")
	reg := r.Client("observer", false)
	converged := func(ctx context.Context) error {
		resp, err := registryExports(ctx, reg, "east")
		if err != nil {
			return err
		}
		if hasExport(resp, ns, "stale") {
			return errorf("stale export still in the registry")
		}
		if len(resp.GetExports()) != 20 || len(resp.GetEndpoints()) != 20 {
			return errorf("registry holds %d exports and %d chunks, want 20 and 20", len(resp.GetExports()), len(resp.GetEndpoints()))
		}
		return nil
	}
	testkit.Eventually(t, 30*time.Second, "the registry to hold the 20 exports and no stale one", converged)
	a.stop()

	// A new agent on the converged cluster writes nothing.
	reconciles := reconcileCount(t)
	b := startAgent(t, east, r, "east")
	testkit.Eventually(t, 30*time.Second, "a resync of the new agent", func(context.Context) error {
		if n := b.counter(t, "fleetnet_agent_export_resyncs_total", nil); n < 1 {
			return errorf("no resync completed yet")
		}
		return nil
	})
	// Wait until the new agent has reconciled every ServiceExport, then
	// count its writes.
	testkit.Eventually(t, 30*time.Second, "the new agent to reconcile every ServiceExport", func(context.Context) error {
		if n := reconcileCount(t) - reconciles; n < 20 {
			return errorf("the new agent reconciled %v times, want at least 20", n)
		}
		return nil
	})
	if n := b.counter(t, "fleetnet_agent_registry_writes_total", nil); n != 0 {
		t.Errorf("restarted agent made %v registry writes on a converged cluster, want 0", n)
	}
	testkit.Eventually(t, 10*time.Second, "the registry to hold the 20 exports and no stale one", converged)
}

// reconcileCount is how many ServiceExport reconciles every agent of this
// test process has finished, from controller-runtime's metrics.
func reconcileCount(t *testing.T) float64 {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if matches(m, map[string]string{"controller": "serviceexport"}) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func TestNarrowedWatchNamespacesReleaseFinalizers(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "east"}}})
	east := f.Cluster(t, "east")
	r := registrytest.Start(t, server.Config{})
	c := east.Client(t)
	ctx := context.Background()
	createNamespace(t, c, ns)
	createNamespace(t, c, "other")
	for _, n := range []string{ns, "other"} {
		for _, obj := range []client.Object{service(n, "echo"), &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "echo"}}} {
			if err := c.Create(ctx, obj); err != nil {
				t.Fatal(err)
			}
		}
	}
	reg := r.Client("observer", false)
	exported := func(want ...string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			resp, err := registryExports(ctx, reg, "east")
			if err != nil {
				return err
			}
			var got []string
			for _, e := range resp.GetExports() {
				got = append(got, e.GetKey().GetNamespace())
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				return errorf("registry exports from namespaces %v, want %v", got, want)
			}
			return nil
		}
	}
	a := startAgent(t, east, r, "east")
	testkit.Eventually(t, 20*time.Second, "the exports of both namespaces", exported(ns, "other"))
	a.stop()

	// Restarted watching only demo: other's export is withdrawn and its
	// finalizer released, so it can be deleted.
	startAgent(t, east, r, "east", func(o *app.Options) { o.WatchNamespaces = ns })
	testkit.Eventually(t, 20*time.Second, "the exports of the watched namespace only", exported(ns))
	if err := c.Delete(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "echo"}}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "the ServiceExport outside the watched namespaces to be deleted", func(ctx context.Context) error {
		err := c.Get(ctx, types.NamespacedName{Namespace: "other", Name: "echo"}, &mcsv1beta1.ServiceExport{})
		if !apierrors.IsNotFound(err) {
			return errorf("ServiceExport outside the watched namespaces is stuck: %v", err)
		}
		return nil
	})
}

// TestResyncNeverDeletesWhatWasWrittenMeanwhile races the start-up resync,
// which deletes registry exports without a local ServiceExport, against
// ServiceExports created for those very names while it runs. Every delete
// the store sees must come before the agent's own write of that export.
func TestResyncNeverDeletesWhatWasWrittenMeanwhile(t *testing.T) {
	const n = 500
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "east"}}})
	east := f.Cluster(t, "east")
	r := registrytest.Start(t, server.Config{})
	c := east.Client(t)
	createNamespace(t, c, ns)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	self := r.Client("east", false)
	if _, err := self.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Cluster: &registryv1.Cluster{Id: "east", ClustersetId: "fleet", Region: "region-east"}}); err != nil {
		t.Fatal(err)
	}
	name := func(i int) string { return fmt.Sprintf("svc-%d", i) }
	for i := range n {
		stale := &registryv1.Export{Key: &registryv1.ExportKey{Namespace: ns, Name: name(i), ClusterId: "east"}, ExportedSince: metav1Now(),
			Type: "Headless"}
		if _, err := self.PutExport(ctx, &registryv1.PutExportRequest{Export: stale}); err != nil {
			t.Fatal(err)
		}
	}
	from, _ := r.Store.Revision(ctx)
	type change struct {
		put bool
		rev int64
	}
	var mu sync.Mutex
	history := map[string][]change{}
	resyncStarted := make(chan struct{})
	var once sync.Once
	go func() {
		for resp := range r.Store.Watch(ctx, keyspace.ExportsPrefix, from) {
			mu.Lock()
			for _, e := range resp.Events {
				history[e.KV.Key] = append(history[e.KV.Key], change{e.Type == store.EventPut, e.KV.ModRevision})
				if e.Type == store.EventDelete {
					once.Do(func() { close(resyncStarted) })
				}
			}
			mu.Unlock()
		}
	}()

	// Once the resync deletes its first stale export, ServiceExports appear
	// from the end of its list while it deletes from the start, so the two
	// meet while it runs.
	created := make(chan error, 1)
	go func() {
		<-resyncStarted
		for i := n - 1; i >= 0; i-- {
			for _, obj := range []client.Object{service(ns, name(i)), &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name(i)}}} {
				if err := c.Create(ctx, obj); err != nil {
					created <- err
					return
				}
			}
		}
		created <- nil
	}()
	startAgent(t, east, r, "east")
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	reg := r.Client("observer", false)
	testkit.Eventually(t, time.Minute, "every ClusterSetIP export published", func(ctx context.Context) error {
		resp, err := registryExports(ctx, reg, "east")
		if err != nil {
			return err
		}
		clusterSetIP := 0
		for _, e := range resp.GetExports() {
			if e.GetType() == "ClusterSetIP" {
				clusterSetIP++
			}
		}
		if clusterSetIP != n {
			return errorf("%d of %d exports published by the agent", clusterSetIP, n)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	deletedStale := 0
	for key, changes := range history {
		sawPut := false
		for _, ch := range changes {
			if ch.put {
				sawPut = true
			} else if sawPut {
				t.Errorf("%s was deleted at revision %d after the agent wrote it: %v", key, ch.rev, changes)
			} else {
				deletedStale++
			}
		}
	}
	t.Logf("%d stale exports deleted by the resync before their ServiceExport was published, %d rewritten in place", deletedStale, n-deletedStale)
}

func TestEvictedClusterRegistersAgainAndRepublishes(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "east"}}})
	east := f.Cluster(t, "east")
	r := registrytest.Start(t, server.Config{LeaseTTL: 3 * time.Second})
	c := east.Client(t)
	ctx := context.Background()
	createNamespace(t, c, ns)
	for _, obj := range []client.Object{
		service(ns, "echo"),
		endpointSlice(ns, "echo", "echo-1", "10.244.0.1"),
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}},
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	a := startAgent(t, east, r, "east")
	reg := r.Client("observer", false)
	complete := func(ctx context.Context) error {
		resp, err := registryExports(ctx, reg, "east")
		if err != nil {
			return err
		}
		if !hasExport(resp, ns, "echo") || endpointCount(resp, ns, "echo") != 1 {
			return errorf("registry holds export: %v, %d endpoints", hasExport(resp, ns, "echo"), endpointCount(resp, ns, "echo"))
		}
		return nil
	}
	testkit.Eventually(t, 20*time.Second, "echo's export and its endpoint in the registry", complete)
	testkit.Eventually(t, 20*time.Second, "fleetnet_agent_exports{state=exported} to be 1", func(context.Context) error {
		if got := a.gauge(t, "fleetnet_agent_exports", map[string]string{"state": "exported"}); got != 1 {
			return errorf("fleetnet_agent_exports{state=exported} = %v, want 1", got)
		}
		return nil
	})

	// An administrator evicts the cluster: its next renewal finds no lease,
	// it registers again and republishes.
	if _, err := r.Client("ops", true).EvictCluster(ctx, &registryv1.EvictClusterRequest{ClusterId: "east"}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "the eviction to show in the registry", func(ctx context.Context) error {
		resp, err := registryExports(ctx, reg, "east")
		if err != nil {
			return err
		}
		if hasExport(resp, ns, "echo") {
			return errorf("eviction not yet visible")
		}
		return nil
	})
	testkit.Eventually(t, 20*time.Second, "echo's export to be registered again", complete)
}

func TestPermanentRegistryErrorsAreNotRetriedHot(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "east"}}})
	east := f.Cluster(t, "east")
	metricsReg := prometheus.NewRegistry()
	r := registrytest.Start(t, server.Config{Registerer: metricsReg})
	// The agent claims to be east but holds west's certificate.
	startAgent(t, east, r, "east", func(o *app.Options) { o.Registry = r.ClientOptions("west", false) })
	denied := func() float64 {
		mfs, _ := metricsReg.Gather()
		sum := 0.0
		for _, mf := range mfs {
			if mf.GetName() == "fleetnet_registry_requests_total" {
				for _, m := range mf.GetMetric() {
					if matches(m, map[string]string{"method": "/fleetnet.registry.v1.Registry/RegisterCluster", "code": "PermissionDenied"}) {
						sum += m.GetCounter().GetValue()
					}
				}
			}
		}
		return sum
	}
	testkit.Eventually(t, 20*time.Second, "a refused registration attempt", func(context.Context) error {
		if denied() < 1 {
			return errorf("no registration attempt yet")
		}
		return nil
	})
	// Beside the cluster's objects, not only in the log: a Warning event
	// on the agent's leader election Lease (this agent's namespace for it
	// is "", so the event goes to default), naming the registry's reason.
	c := east.Client(t)
	testkit.Eventually(t, 20*time.Second, "a RegistryRefused Warning event", func(ctx context.Context) error {
		evs := &eventsv1.EventList{}
		if err := c.List(ctx, evs, client.InNamespace(metav1.NamespaceDefault)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == keys.ReasonRegistryRefused && e.Type == corev1.EventTypeWarning && e.Regarding.Kind == "Lease" && e.Regarding.Name == keys.LeaderElectionID &&
				strings.Contains(e.Note, "registering") && strings.Contains(e.Note, "east") {
				return nil
			}
		}
		return fmt.Errorf("no Warning event %s on Lease %s among %d events", keys.ReasonRegistryRefused, keys.LeaderElectionID, len(evs.Items))
	})
	// A hot loop would retry every few hundred milliseconds; a permanent
	// error waits a minute. Give a hot loop time to show.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if n := denied(); n > 1 {
			t.Fatalf("%v registrations refused with PermissionDenied within seconds: retried hot", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestConflictFromTheRegistryReachesTheServiceExport(t *testing.T) {
	c, reg, r, _, _ := setup(t)
	ctx := context.Background()
	// west exported the Service first, naming its port "web".
	west := r.Client("west", false)
	if _, err := west.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Cluster: &registryv1.Cluster{Id: "west", ClustersetId: "fleet"}}); err != nil {
		t.Fatal(err)
	}
	older := &registryv1.Export{Key: &registryv1.ExportKey{Namespace: ns, Name: "echo", ClusterId: "west"},
		ExportedSince: timestamppb.New(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)), Type: "ClusterSetIP",
		Ports: []*registryv1.ServicePort{{Name: "web", Protocol: "TCP", Port: 80}}, Weight: 1}
	if _, err := west.PutExport(ctx, &registryv1.PutExportRequest{Export: older}); err != nil {
		t.Fatal(err)
	}
	se := &mcsv1beta1.ServiceExport{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo", Annotations: map[string]string{keys.AnnotationWeight: "5"}},
		Spec:       mcsv1beta1.ServiceExportSpec{ExportedLabels: map[string]string{"tier": "web"}, ExportedAnnotations: map[string]string{"owner": "team-a"}},
	}
	for _, obj := range []client.Object{service(ns, "echo"), se} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	wantCondition(t, c, "echo", mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionTrue, string(mcsv1beta1.ServiceExportReasonPortConflict))
	cond, _ := condition(c, "echo", mcsv1beta1.ServiceExportConditionConflict)
	for _, want := range []string{"http 80/TCP", "web 80/TCP", "cluster west"} {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("Conflict message %q does not name %s", cond.Message, want)
		}
	}
	resp, err := registryExports(ctx, reg, "east")
	if err != nil || len(resp.GetExports()) != 1 {
		t.Fatalf("registry exports: %v, %v", resp, err)
	}
	e := resp.GetExports()[0]
	if e.GetWeight() != 5 || e.GetLabels()["tier"] != "web" || e.GetAnnotations()["owner"] != "team-a" {
		t.Errorf("export lacks weight, exported labels or annotations: %v", e)
	}

	// west withdraws: the conflict clears.
	if _, err := west.DeleteExport(ctx, &registryv1.DeleteExportRequest{Key: older.GetKey()}); err != nil {
		t.Fatal(err)
	}
	wantCondition(t, c, "echo", mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionFalse, string(mcsv1beta1.ServiceExportReasonNoConflicts))
}
