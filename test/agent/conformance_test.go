package agent_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/agent/importer"
	"github.com/fleetnet/fleetnet/internal/registry/registrytest"
	"github.com/fleetnet/fleetnet/internal/registry/server"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/test/fleet"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// The behaviours the mcs-api conformance suite checks across two exporting
// clusters (kubernetes-sigs/mcs-api, conformance/service_import.go): a
// conflict is reported on each ServiceExport, the oldest export's ports,
// labels and annotations win, and the conflict ends on both when the
// exports agree again.
func TestConflictIsReportedOnEveryExport(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "east"}, {Name: "west"}}})
	east, west := f.Cluster(t, "east"), f.Cluster(t, "west")
	r := registrytest.Start(t, server.Config{})
	ec, wc := east.Client(t), west.Client(t)
	ctx := context.Background()
	createNamespace(t, ec, ns)
	createNamespace(t, wc, ns)
	startAgent(t, east, r, "east")
	startAgent(t, west, r, "west")

	// east exports first, so it is the oldest export.
	exportEcho(t, ec, 80, map[string]string{"dummy-label": "true"}, map[string]string{"dummy-annotation": "true"})
	testkit.Eventually(t, 20*time.Second, "east's label and annotation on the import", func(ctx context.Context) error {
		return importHas(ctx, wc, 80, map[string]string{"dummy-label": "true"}, map[string]string{"dummy-annotation": "true"})
	})
	// The ServiceExports' creation times are whole seconds: make west's
	// strictly newer.
	time.Sleep(1100 * time.Millisecond)
	// west: the same port name on another number, and other exported keys.
	exportEcho(t, wc, 81, map[string]string{"dummy-label2": "true"}, map[string]string{"dummy-annotation2": "true"})

	for _, c := range []client.Client{ec, wc} {
		testkit.Eventually(t, 20*time.Second, "the PortConflict condition", func(ctx context.Context) error {
			cond, err := condition(c, "echo", mcsv1beta1.ServiceExportConditionConflict)
			if err != nil {
				return err
			}
			if cond.Status != metav1.ConditionTrue || cond.Reason != string(mcsv1beta1.ServiceExportReasonPortConflict) {
				return fmt.Errorf("Conflict = %s/%s (%s), want True/PortConflict", cond.Status, cond.Reason, cond.Message)
			}
			for _, want := range []string{
				"ports differ: [http 80/TCP] in east, [http 81/TCP] in west; the import has [http 80/TCP]",
				"exportedLabels differ", "exportedAnnotations differ",
			} {
				if !strings.Contains(cond.Message, want) {
					return fmt.Errorf("Conflict message %q lacks %q", cond.Message, want)
				}
			}
			return nil
		})
	}
	// Both clusters import east's definition: port 80, east's labels and
	// annotations and none of west's.
	for _, c := range []client.Client{ec, wc} {
		testkit.Eventually(t, 20*time.Second, "east's label and annotation on the import", func(ctx context.Context) error {
			return importHas(ctx, c, 80, map[string]string{"dummy-label": "true"}, map[string]string{"dummy-annotation": "true"})
		})
	}
	// A Warning event tells of the conflict on the newer export.
	testkit.Eventually(t, 20*time.Second, "the PortConflict Warning event", func(ctx context.Context) error {
		return hasEvent(ctx, wc, "echo", string(mcsv1beta1.ServiceExportReasonPortConflict))
	})

	// A label a user put on the ServiceImport is not the agent's to remove.
	si := &mcsv1beta1.ServiceImport{}
	if err := wc.Get(ctx, types.NamespacedName{Namespace: ns, Name: "echo"}, si); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(si.DeepCopy())
	si.Labels["team"] = "a"
	if err := wc.Patch(ctx, si, patch, client.FieldOwner("kubectl-label")); err != nil {
		t.Fatal(err)
	}

	// west agrees with east: the conflict ends on both.
	updateEcho(t, wc, 80, map[string]string{"dummy-label": "true"}, map[string]string{"dummy-annotation": "true"})
	for _, c := range []client.Client{ec, wc} {
		wantCondition(t, c, "echo", mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionFalse, string(mcsv1beta1.ServiceExportReasonNoConflicts))
	}

	// Removing a key from both exports removes it from every import; the
	// user's label stays.
	updateEcho(t, ec, 80, nil, map[string]string{"dummy-annotation": "true"})
	updateEcho(t, wc, 80, nil, map[string]string{"dummy-annotation": "true"})
	for _, c := range []client.Client{ec, wc} {
		testkit.Eventually(t, 20*time.Second, "the shared annotation on the import, and the user's label kept", func(ctx context.Context) error {
			if err := importHas(ctx, c, 80, nil, map[string]string{"dummy-annotation": "true"}); err != nil {
				return err
			}
			si := &mcsv1beta1.ServiceImport{}
			if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "echo"}, si); err != nil {
				return err
			}
			if _, ok := si.Labels["dummy-label"]; ok {
				return fmt.Errorf("ServiceImport still has dummy-label: %v", si.Labels)
			}
			return nil
		})
	}
	if err := wc.Get(ctx, types.NamespacedName{Namespace: ns, Name: "echo"}, si); err != nil || si.Labels["team"] != "a" {
		t.Errorf("the user's label team=a was not kept: %v, %v", si.Labels, err)
	}
}

// Exported keys that would overwrite the agent's, the MCS API's or
// Kubernetes' own are refused with Valid=False naming the key, and the
// Service is not exported.
func TestReservedExportedKeysAreRefused(t *testing.T) {
	c, reg, _, _, _ := setup(t)
	ctx := context.Background()
	se := &mcsv1beta1.ServiceExport{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"},
		Spec:       mcsv1beta1.ServiceExportSpec{ExportedLabels: map[string]string{keys.LabelManagedBy: "someone"}},
	}
	for _, obj := range []client.Object{service(ns, "echo"), se} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	wantCondition(t, c, "echo", mcsv1beta1.ServiceExportConditionValid, metav1.ConditionFalse, keys.ReasonReservedExportKey)
	cond, _ := condition(c, "echo", mcsv1beta1.ServiceExportConditionValid)
	if want := `spec.exportedLabels[app.kubernetes.io/managed-by]: Invalid value: "app.kubernetes.io/managed-by"`; !strings.Contains(cond.Message, want) {
		t.Errorf("Valid message %q lacks %q", cond.Message, want)
	}
	testkit.Eventually(t, 20*time.Second, "the ReservedExportKey Warning event", func(ctx context.Context) error {
		return hasEvent(ctx, c, "echo", keys.ReasonReservedExportKey)
	})
	if resp, err := registryExports(ctx, reg, "east"); err != nil || hasExport(resp, ns, "echo") {
		t.Fatalf("the refused export is in the registry (%v)", err)
	}

	// Fixed, it is exported.
	updateEcho(t, c, 80, map[string]string{"tier": "web"}, nil)
	wantCondition(t, c, "echo", mcsv1beta1.ServiceExportConditionValid, metav1.ConditionTrue, string(mcsv1beta1.ServiceExportReasonValid))
	testkit.Eventually(t, 20*time.Second, "the tier label on the import", func(ctx context.Context) error {
		return importHas(ctx, c, 80, map[string]string{"tier": "web"}, nil)
	})
}

// A port of the derived Service changed by hand (here as `kubectl patch
// --type=json` does: an update that replaces the list entry) is put back
// to exactly the import's ports. Server-side apply alone would merge its
// port 80 beside the foreign 81 under the same name, which the API server
// refuses.
func TestDerivedServicePortEditedByHandIsRepaired(t *testing.T) {
	c, _, _, _, _ := setup(t)
	ctx := context.Background()
	exportEcho(t, c, 80, nil, nil)
	derived := types.NamespacedName{Namespace: ns, Name: importer.DerivedName(ns, "echo")}
	svc := &corev1.Service{}
	testkit.Eventually(t, 20*time.Second, "the derived Service", func(ctx context.Context) error { return c.Get(ctx, derived, svc) })

	raw := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"replace","path":"/spec/ports/0/port","value":81}]`))
	edited := time.Now()
	if err := c.Patch(ctx, svc, raw, client.FieldOwner("kubectl-patch")); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "the derived Service's port to be put back", func(ctx context.Context) error {
		if err := c.Get(ctx, derived, svc); err != nil {
			return err
		}
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 80 || svc.Spec.Ports[0].Name != "http" {
			return fmt.Errorf("derived Service ports = %+v, want only http 80", svc.Spec.Ports)
		}
		si := &mcsv1beta1.ServiceImport{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "echo"}, si); err != nil {
			return err
		}
		if cond := meta.FindStatusCondition(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady)); cond == nil || cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("ServiceImport Ready = %+v", cond)
		}
		return nil
	})
	t.Logf("derived Service ports repaired %s after the edit", time.Since(edited).Round(time.Millisecond))

	// A port added beside ours by another field manager's apply goes too.
	extra := corev1ac.Service(derived.Name, ns).WithSpec(corev1ac.ServiceSpec().WithPorts(
		corev1ac.ServicePort().WithName("debug").WithPort(6060).WithProtocol(corev1.ProtocolTCP)))
	if err := c.Apply(ctx, extra, client.FieldOwner("someone-else")); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "the other manager's port to be removed", func(ctx context.Context) error {
		if err := c.Get(ctx, derived, svc); err != nil {
			return err
		}
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 80 {
			return fmt.Errorf("derived Service ports = %+v, want only http 80", svc.Spec.Ports)
		}
		return nil
	})
}

// exportEcho creates Service echo with one port "http" and its
// ServiceExport with the given exported labels and annotations.
func exportEcho(t *testing.T, c client.Client, port int32, labels, annotations map[string]string) {
	t.Helper()
	svc := service(ns, "echo")
	svc.Spec.Ports[0].Port = port
	se := &mcsv1beta1.ServiceExport{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"},
		Spec:       mcsv1beta1.ServiceExportSpec{ExportedLabels: labels, ExportedAnnotations: annotations},
	}
	for _, obj := range []client.Object{svc, se} {
		if err := c.Create(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
	}
}

// updateEcho sets echo's port and its export's labels and annotations.
func updateEcho(t *testing.T, c client.Client, port int32, labels, annotations map[string]string) {
	t.Helper()
	ctx := context.Background()
	key := types.NamespacedName{Namespace: ns, Name: "echo"}
	// The agent writes the ServiceExport too (finalizer, status): retry on
	// a conflict with its writes.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		svc := &corev1.Service{}
		if err := c.Get(ctx, key, svc); err != nil {
			return err
		}
		svc.Spec.Ports[0].Port = port
		return c.Update(ctx, svc)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		se := &mcsv1beta1.ServiceExport{}
		if err := c.Get(ctx, key, se); err != nil {
			return err
		}
		se.Spec.ExportedLabels, se.Spec.ExportedAnnotations = labels, annotations
		return c.Update(ctx, se)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// importHas checks the ServiceImport echo: one port http with the number,
// the given exported labels and annotations beside the agent's label.
func importHas(ctx context.Context, c client.Client, port int32, labels, annotations map[string]string) error {
	si := &mcsv1beta1.ServiceImport{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "echo"}, si); err != nil {
		return err
	}
	if len(si.Spec.Ports) != 1 || si.Spec.Ports[0].Port != port || si.Spec.Ports[0].Name != "http" {
		return fmt.Errorf("ServiceImport ports = %+v, want http %d", si.Spec.Ports, port)
	}
	want := maps.Clone(labels)
	if want == nil {
		want = map[string]string{}
	}
	want[keys.LabelManagedBy] = keys.ManagedByAgent
	got := maps.Clone(si.Labels)
	delete(got, "team") // a user's label, in one test
	if !maps.Equal(got, want) {
		return fmt.Errorf("ServiceImport labels = %v, want %v", si.Labels, want)
	}
	wantAnnotations := maps.Clone(annotations)
	if wantAnnotations == nil {
		wantAnnotations = map[string]string{}
	}
	// The agent's own: the derived Service's name.
	wantAnnotations[keys.AnnotationDerivedService] = importer.DerivedName(ns, "echo")
	if !maps.Equal(si.Annotations, wantAnnotations) {
		return fmt.Errorf("ServiceImport annotations = %v, want %v", si.Annotations, wantAnnotations)
	}
	svc := &corev1.Service{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: si.Annotations[keys.AnnotationDerivedService]}, svc); err != nil {
		return fmt.Errorf("the Service the ServiceImport names: %w", err)
	}
	return nil
}

// hasEvent reports whether a Warning event with reason regards the object
// name in ns.
func hasEvent(ctx context.Context, c client.Client, name, reason string) error {
	evs := &eventsv1.EventList{}
	if err := c.List(ctx, evs, client.InNamespace(ns)); err != nil {
		return err
	}
	for _, e := range evs.Items {
		if e.Regarding.Name == name && e.Type == corev1.EventTypeWarning && e.Reason == reason {
			return nil
		}
	}
	return fmt.Errorf("no Warning event %s for %s among %d events", reason, name, len(evs.Items))
}
