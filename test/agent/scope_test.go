package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	aboutv1alpha1 "github.com/fleetnet/fleetnet/api/about/v1alpha1"
	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/agent/app"
	"github.com/fleetnet/fleetnet/internal/registry/registrytest"
	"github.com/fleetnet/fleetnet/internal/registry/server"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/test/fleet"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// TestExportScope: east exports echo to west only
// (fleetnet.dev/export-to): west imports it, south never does (it imports
// a later, unscoped export, so it has read past echo's), and east's
// ServiceExport says where echo is imported. A malformed scope makes the
// ServiceExport Valid=False with a Warning event naming the annotation;
// fixed to name south, south imports echo and west's import goes. When
// west exports echo to everyone too, south imports both clusters, and west
// is sent the merge of its own export alone: its ServiceImport never names
// east.
func TestExportScope(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "east"}, {Name: "west"}, {Name: "south"}}})
	r := registrytest.Start(t, server.Config{})
	ctx := context.Background()
	clients := map[string]client.Client{}
	for _, name := range []string{"east", "west", "south"} {
		c := f.Cluster(t, name)
		clients[name] = c.Client(t)
		createNamespace(t, clients[name], ns)
		startAgent(t, c, r, name)
	}
	ec := clients["east"]
	exportService(t, ec, ns, "echo", "10.244.0.1", map[string]string{keys.AnnotationExportTo: "west"})
	imported := func(cluster, name string) func(context.Context) error {
		return func(ctx context.Context) error {
			si := &mcsv1beta1.ServiceImport{}
			if err := clients[cluster].Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, si); err != nil {
				return err
			}
			if ss, err := importedSlices(ctx, clients[cluster], name); err != nil || len(ss) == 0 {
				return fmt.Errorf("%s has the ServiceImport %s but no slice (%v)", cluster, name, err)
			}
			return nil
		}
	}
	notImported := func(cluster, name string) {
		t.Helper()
		err := clients[cluster].Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &mcsv1beta1.ServiceImport{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s has a ServiceImport %s (%v), outside the export's scope", cluster, name, err)
		}
		if ss, _ := importedSlices(ctx, clients[cluster], name); len(ss) > 0 {
			t.Errorf("%s has %d slices of %s, outside the export's scope", cluster, len(ss), name)
		}
	}
	testkit.Eventually(t, 20*time.Second, "west to import echo", imported("west", "echo"))
	// A later export to everyone: once south has it, it has read past echo.
	exportService(t, ec, ns, "marker", "10.244.0.2", nil)
	testkit.Eventually(t, 20*time.Second, "south to import marker", imported("south", "marker"))
	notImported("south", "echo")
	// What the registry sends south, not only what south's agent made so
	// far: marker, never echo.
	list, err := r.Client("south", false).ListImports(ctx, &registryv1.ListImportsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range list.GetImports() {
		if imp.GetKey().GetName() == "echo" {
			t.Errorf("the registry lists echo for south, outside its scope")
		}
	}
	testkit.Eventually(t, 20*time.Second, "echo's Ready condition to name west", func(context.Context) error {
		cond, err := condition(ec, "echo", mcsv1beta1.ServiceExportConditionReady)
		if err != nil {
			return err
		}
		if want := "exported to west only (fleetnet.dev/export-to); imported by: west"; cond == nil || cond.Message != want {
			return fmt.Errorf("Ready = %v, want message %q", cond, want)
		}
		return nil
	})

	// Malformed: refused, said on the ServiceExport.
	patchAnnotation(t, ec, "echo", keys.AnnotationExportTo, "west,South")
	wantCondition(t, ec, "echo", mcsv1beta1.ServiceExportConditionValid, metav1.ConditionFalse, keys.ReasonInvalidExportScope)
	cond, _ := condition(ec, "echo", mcsv1beta1.ServiceExportConditionValid)
	if want := `metadata.annotations[fleetnet.dev/export-to][1]: Invalid value: "South"`; !strings.Contains(cond.Message, want) {
		t.Errorf("Valid message %q lacks %q", cond.Message, want)
	}
	testkit.Eventually(t, 20*time.Second, "the InvalidExportScope Warning event", func(ctx context.Context) error {
		return hasEvent(ctx, ec, "echo", keys.ReasonInvalidExportScope)
	})

	// Fixed to south: south imports it, west's import goes.
	patchAnnotation(t, ec, "echo", keys.AnnotationExportTo, "south")
	testkit.Eventually(t, 20*time.Second, "south to import echo", imported("south", "echo"))
	testkit.Eventually(t, 20*time.Second, "west's import of echo to go", func(ctx context.Context) error {
		err := clients["west"].Get(ctx, types.NamespacedName{Namespace: ns, Name: "echo"}, &mcsv1beta1.ServiceImport{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("west still imports echo (%v)", err)
	})

	// west exports echo to everyone: south, in east's scope, imports both
	// clusters; west, outside it, imports its own export alone, and
	// nothing it holds of echo names east.
	exportService(t, clients["west"], ns, "echo", "10.244.1.1", nil)
	importsFrom := func(cluster string, want ...string) func(context.Context) error {
		return func(ctx context.Context) error {
			si := &mcsv1beta1.ServiceImport{}
			if err := clients[cluster].Get(ctx, types.NamespacedName{Namespace: ns, Name: "echo"}, si); err != nil {
				return err
			}
			var got []string
			for _, c := range si.Status.Clusters {
				got = append(got, c.Cluster)
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				return fmt.Errorf("%s's ServiceImport lists clusters %v, want %v", cluster, got, want)
			}
			return nil
		}
	}
	testkit.Eventually(t, 20*time.Second, "south to import echo from east and west", importsFrom("south", "east", "west"))
	testkit.Eventually(t, 20*time.Second, "west to import echo from west alone", importsFrom("west", "west"))
	si := &mcsv1beta1.ServiceImport{}
	if err := clients["west"].Get(ctx, types.NamespacedName{Namespace: ns, Name: "echo"}, si); err != nil {
		t.Fatal(err)
	}
	si.ManagedFields = nil
	if b, _ := json.Marshal(si); strings.Contains(string(b), `"east"`) || strings.Contains(string(b), "10.244.0.1") {
		t.Errorf("west's ServiceImport names east, outside whose scope it is: %s", b)
	}
	ss, err := importedSlices(ctx, clients["west"], "echo")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		if src := s.Labels[mcsv1beta1.LabelSourceCluster]; src != "west" {
			t.Errorf("west holds slice %s of source cluster %q", s.Name, src)
		}
	}
}

// TestExportScopeBySelector: each agent publishes its cluster's
// ClusterProperties; east exports echo to env=prod
// (fleetnet.dev/export-to-selector): west (env=prod) imports it, south
// (env=dev) does not; south's property changed to prod, south imports it;
// changed back, south's import goes, west's stays. A malformed selector
// makes the ServiceExport Valid=False naming the annotation and value.
func TestExportScopeBySelector(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "east"}, {Name: "west"}, {Name: "south"}}})
	r := registrytest.Start(t, server.Config{})
	ctx := context.Background()
	clients := map[string]client.Client{}
	env := map[string]string{"west": "prod", "south": "dev"}
	for _, name := range []string{"east", "west", "south"} {
		c := f.Cluster(t, name)
		clients[name] = c.Client(t)
		createNamespace(t, clients[name], ns)
		if v, ok := env[name]; ok {
			p := &aboutv1alpha1.ClusterProperty{ObjectMeta: metav1.ObjectMeta{Name: "env"}, Spec: aboutv1alpha1.ClusterPropertySpec{Value: v}}
			if err := clients[name].Create(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		startAgent(t, c, r, name)
	}
	setEnv := func(cluster, value string) {
		t.Helper()
		p := &aboutv1alpha1.ClusterProperty{}
		if err := clients[cluster].Get(ctx, types.NamespacedName{Name: "env"}, p); err != nil {
			t.Fatal(err)
		}
		p.Spec.Value = value
		if err := clients[cluster].Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	hasImport := func(cluster string, want bool) func(context.Context) error {
		return func(ctx context.Context) error {
			err := clients[cluster].Get(ctx, types.NamespacedName{Namespace: ns, Name: "echo"}, &mcsv1beta1.ServiceImport{})
			switch {
			case want && err != nil:
				return err
			case !want && !apierrors.IsNotFound(err):
				return fmt.Errorf("%s still imports echo (%v)", cluster, err)
			}
			if ss, err := importedSlices(ctx, clients[cluster], "echo"); err != nil || (len(ss) > 0) != want {
				return fmt.Errorf("%s holds %d slices of echo (%v), want some: %v", cluster, len(ss), err, want)
			}
			return nil
		}
	}
	// The registry holds each cluster's properties, identity included.
	testkit.Eventually(t, 20*time.Second, "the clusters' properties in the registry", func(ctx context.Context) error {
		list, err := r.Client("east", false).ListClusters(ctx, &registryv1.ListClustersRequest{})
		if err != nil {
			return err
		}
		got := map[string]string{}
		for _, c := range list.GetClusters() {
			if c.GetProperties()[aboutv1alpha1.ClusterIDPropertyName] != c.GetId() {
				return fmt.Errorf("cluster %s has properties %v, without its id", c.GetId(), c.GetProperties())
			}
			got[c.GetId()] = c.GetProperties()["env"]
		}
		if len(got) != 3 || got["west"] != "prod" || got["south"] != "dev" || got["east"] != "" {
			return fmt.Errorf("env properties %v, want west=prod, south=dev, east none", got)
		}
		return nil
	})

	ec := clients["east"]
	exportService(t, ec, ns, "echo", "10.244.0.1", map[string]string{keys.AnnotationExportToSelector: "env=prod"})
	testkit.Eventually(t, 20*time.Second, "west to import echo", hasImport("west", true))
	// A later export to everyone: once south has it, it has read past echo.
	exportService(t, ec, ns, "marker", "10.244.0.2", nil)
	testkit.Eventually(t, 20*time.Second, "south to import marker", func(ctx context.Context) error {
		return clients["south"].Get(ctx, types.NamespacedName{Namespace: ns, Name: "marker"}, &mcsv1beta1.ServiceImport{})
	})
	if err := hasImport("south", false)(ctx); err != nil {
		t.Errorf("south, env=dev: %v", err)
	}
	testkit.Eventually(t, 20*time.Second, "echo's Ready condition to name west", func(context.Context) error {
		cond, err := condition(ec, "echo", mcsv1beta1.ServiceExportConditionReady)
		if err != nil {
			return err
		}
		if want := "exported to the clusters matching env=prod only (fleetnet.dev/export-to-selector); imported by: west"; cond == nil || cond.Message != want {
			return fmt.Errorf("Ready = %v, want message %q", cond, want)
		}
		return nil
	})

	// south becomes prod: it imports echo; back to dev: its import goes.
	setEnv("south", "prod")
	testkit.Eventually(t, 20*time.Second, "south, now env=prod, to import echo", hasImport("south", true))
	setEnv("south", "dev")
	testkit.Eventually(t, 20*time.Second, "south, env=dev again, to lose echo", hasImport("south", false))
	if err := hasImport("west", true)(ctx); err != nil {
		t.Errorf("west lost echo when south's properties changed: %v", err)
	}

	// Malformed: refused, said on the ServiceExport.
	patchAnnotation(t, ec, "echo", keys.AnnotationExportToSelector, "env in (prod")
	wantCondition(t, ec, "echo", mcsv1beta1.ServiceExportConditionValid, metav1.ConditionFalse, keys.ReasonInvalidExportSelector)
	cond, _ := condition(ec, "echo", mcsv1beta1.ServiceExportConditionValid)
	if want := `metadata.annotations[fleetnet.dev/export-to-selector]: Invalid value: "env in (prod"`; !strings.Contains(cond.Message, want) {
		t.Errorf("Valid message %q lacks %q", cond.Message, want)
	}
	testkit.Eventually(t, 20*time.Second, "the InvalidExportSelector Warning event", func(ctx context.Context) error {
		return hasEvent(ctx, ec, "echo", keys.ReasonInvalidExportSelector)
	})
}

// TestImportNamespaces: a member's import policy (--import-namespaces)
// narrows what it holds. west first imports echo from demo and from web;
// restarted with --import-namespaces=web, its agent is sent web's import
// alone and removes demo's.
func TestImportNamespaces(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "east"}, {Name: "west"}}})
	east, west := f.Cluster(t, "east"), f.Cluster(t, "west")
	r := registrytest.Start(t, server.Config{})
	ec, wc := east.Client(t), west.Client(t)
	const web = "web"
	for _, c := range []client.Client{ec, wc} {
		createNamespace(t, c, ns)
		createNamespace(t, c, web)
	}
	for _, namespace := range []string{ns, web} {
		exportService(t, ec, namespace, "echo", "10.244.0.1", nil)
	}
	startAgent(t, east, r, "east")
	hasImport := func(namespace string, want bool) func(context.Context) error {
		return func(ctx context.Context) error {
			err := wc.Get(ctx, types.NamespacedName{Namespace: namespace, Name: "echo"}, &mcsv1beta1.ServiceImport{})
			switch {
			case want && err != nil:
				return err
			case !want && !apierrors.IsNotFound(err):
				return fmt.Errorf("west still imports %s/echo (%v)", namespace, err)
			}
			return nil
		}
	}
	a := startAgent(t, west, r, "west")
	testkit.Eventually(t, 20*time.Second, "west to import demo/echo", hasImport(ns, true))
	testkit.Eventually(t, 20*time.Second, "west to import web/echo", hasImport(web, true))
	a.stop()

	startAgent(t, west, r, "west", func(o *app.Options) { o.ImportNamespaces = web })
	testkit.Eventually(t, 30*time.Second, "west's import of demo/echo to go", hasImport(ns, false))
	testkit.Eventually(t, 20*time.Second, "west to keep web/echo", hasImport(web, true))
	// The agent deletes the ServiceImport first, then its slices.
	testkit.Eventually(t, 20*time.Second, "west's slices of demo/echo to go", func(ctx context.Context) error {
		ss, err := importedSlices(ctx, wc, "echo")
		if err != nil {
			return err
		}
		if len(ss) != 0 {
			return fmt.Errorf("west keeps %d slices of demo/echo outside its import policy", len(ss))
		}
		return nil
	})
}

// exportService creates, as a user would, a Service without selector, its
// EndpointSlice with one endpoint at addr, and a ServiceExport with the
// given annotations.
func exportService(t *testing.T, c client.Client, namespace, name, addr string, annotations map[string]string) {
	t.Helper()
	for _, obj := range []client.Object{
		service(namespace, name),
		endpointSlice(namespace, name, name+"-1", addr),
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Annotations: annotations}},
	} {
		if err := c.Create(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
	}
}
