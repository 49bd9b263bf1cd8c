// Package crd_test checks what kubectl shows of the CRDs fleetnet installs,
// against a real API server: the server-side tables that `kubectl get`
// prints come from the CRDs' printer columns.
package crd_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/test/fleet"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// tableAccept asks for the table kubectl prints, as kubectl does.
const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io"

func TestPrinterColumns(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "east"}}})
	east := f.Cluster(t, "east")
	c := east.Client(t)
	ctx := t.Context()
	const ns = "printer"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}

	// One export with every condition set, as the agent sets them, and one
	// the agent has not seen yet.
	web := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}}
	if err := c.Create(ctx, web); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	web.Status.Conditions = []metav1.Condition{
		{Type: string(mcsv1beta1.ServiceExportConditionValid), Status: metav1.ConditionTrue, Reason: string(mcsv1beta1.ServiceExportReasonValid), LastTransitionTime: now},
		{Type: string(mcsv1beta1.ServiceExportConditionReady), Status: metav1.ConditionFalse, Reason: keys.ReasonRegistryUnavailable, LastTransitionTime: now},
		{Type: string(mcsv1beta1.ServiceExportConditionConflict), Status: metav1.ConditionTrue, Reason: string(mcsv1beta1.ServiceExportReasonPortConflict), LastTransitionTime: now},
	}
	if err := c.Status().Update(ctx, web); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "new", Namespace: ns}}); err != nil {
		t.Fatal(err)
	}

	// One import from two clusters, one from none yet.
	for name, clusters := range map[string][]string{"web": {"east", "west"}, "solo": nil} {
		si := &mcsv1beta1.ServiceImport{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{keys.AnnotationDerivedService: "derived-" + name}},
			Spec: mcsv1beta1.ServiceImportSpec{
				Type:  mcsv1beta1.ClusterSetIP,
				IPs:   []string{"10.96.0.10"},
				Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
			},
		}
		if err := c.Create(ctx, si); err != nil {
			t.Fatal(err)
		}
		for _, cl := range clusters {
			si.Status.Clusters = append(si.Status.Clusters, mcsv1beta1.ClusterStatus{Cluster: cl})
		}
		if err := c.Status().Update(ctx, si); err != nil {
			t.Fatal(err)
		}
	}

	// Both served versions print the same: kubectl uses the preferred one,
	// v1beta1, but a client may ask for either.
	for _, version := range []string{"v1beta1", "v1alpha1"} {
		t.Run(version, func(t *testing.T) {
			gv := schema.GroupVersion{Group: mcsv1beta1.GroupName, Version: version}
			exports := getTable(t, east.Config, gv, ns, "serviceexports")
			// Columns of priority 0 are what `kubectl get` shows.
			wantColumns(t, exports, "Name/0", "Valid/0", "Ready/0", "Conflict/0", "Age/0")
			wantRow(t, exports, "web", map[string]any{"Valid": "True", "Ready": "False", "Conflict": "True"})
			wantRow(t, exports, "new", map[string]any{"Valid": nil, "Ready": nil, "Conflict": nil})

			imports := getTable(t, east.Config, gv, ns, "serviceimports")
			// Service and Clusters have priority 1: only `kubectl get -o
			// wide` shows them.
			wantColumns(t, imports, "Name/0", "Type/0", "IP/0", "Age/0", "Service/1", "Clusters/1")
			wantRow(t, imports, "web", map[string]any{"Type": "ClusterSetIP", "Service": "derived-web", "Clusters": `[{"cluster":"east"},{"cluster":"west"}]`})
			wantRow(t, imports, "solo", map[string]any{"Type": "ClusterSetIP", "Service": "derived-solo", "Clusters": nil})
		})
	}
}

// getTable lists a resource of namespace ns as the API server's table.
func getTable(t *testing.T, cfg *rest.Config, gv schema.GroupVersion, ns, resource string) *metav1.Table {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(runtime.NewScheme()).WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := rc.Get().Namespace(ns).Resource(resource).SetHeader("Accept", tableAccept).DoRaw(t.Context())
	if err != nil {
		t.Fatalf("listing %s as a table: %v", resource, err)
	}
	table := &metav1.Table{}
	if err := json.Unmarshal(raw, table); err != nil {
		t.Fatalf("decoding the table of %s: %v\n%s", resource, err, raw)
	}
	if table.Kind != "Table" {
		t.Fatalf("got a %s for %s, want a Table", table.Kind, resource)
	}
	return table
}

func wantColumns(t *testing.T, table *metav1.Table, want ...string) {
	t.Helper()
	var got []string
	for _, c := range table.ColumnDefinitions {
		got = append(got, fmt.Sprintf("%s/%d", c.Name, c.Priority))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("columns (name/priority) = %v, want %v", got, want)
	}
}

// wantRow checks the cells of the row of the named object; a nil cell is
// one kubectl prints as <none>.
func wantRow(t *testing.T, table *metav1.Table, name string, want map[string]any) {
	t.Helper()
	for _, row := range table.Rows {
		if len(row.Cells) != len(table.ColumnDefinitions) {
			t.Fatalf("row of %d cells for %d columns", len(row.Cells), len(table.ColumnDefinitions))
		}
		if row.Cells[0] != name {
			continue
		}
		for i, col := range table.ColumnDefinitions {
			if w, ok := want[col.Name]; ok && row.Cells[i] != w {
				t.Errorf("%s: %s = %#v, want %#v", name, col.Name, row.Cells[i], w)
			}
		}
		return
	}
	t.Errorf("no row for %s", name)
}
