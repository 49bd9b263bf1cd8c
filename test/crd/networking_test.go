package crd_test

import (
	"testing"

	networkingv1alpha1 "github.com/fleetnet/fleetnet/api/networking/v1alpha1"
	"github.com/fleetnet/fleetnet/test/fleet"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// What `kubectl get btp` shows of a BackendTrafficPolicy.
func TestBackendTrafficPolicyColumns(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "hub", GatewayAPI: true}}})
	hub := f.Cluster(t, "hub")
	c := hub.Client(t)
	ctx := t.Context()
	const ns = "printer"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	p := &networkingv1alpha1.BackendTrafficPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns},
		Spec: networkingv1alpha1.BackendTrafficPolicySpec{
			TargetRefs:  []gwv1.LocalPolicyTargetReference{{Group: mcsv1beta1.GroupName, Kind: "ServiceImport", Name: "echo"}},
			HealthCheck: &networkingv1alpha1.HealthCheck{Type: networkingv1alpha1.HealthCheckHTTP, HTTP: &networkingv1alpha1.HTTPHealthCheck{Path: "/healthz"}},
			Locality:    networkingv1alpha1.LocalityLocalFirst,
		},
	}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	p.Status.Conditions = []metav1.Condition{{Type: string(gwv1.PolicyConditionAccepted), Status: metav1.ConditionFalse, Reason: string(gwv1.PolicyReasonConflicted), LastTransitionTime: metav1.Now()}}
	if err := c.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &networkingv1alpha1.BackendTrafficPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: ns},
		Spec:       networkingv1alpha1.BackendTrafficPolicySpec{TargetRefs: []gwv1.LocalPolicyTargetReference{{Kind: "Service", Name: "web"}}},
	}); err != nil {
		t.Fatal(err)
	}
	table := getTable(t, hub.Config, networkingv1alpha1.SchemeGroupVersion, ns, "backendtrafficpolicies")
	wantColumns(t, table, "Name/0", "Locality/0", "Health check/0", "Accepted/0", "Age/0", "Reason/1")
	wantRow(t, table, "echo", map[string]any{"Locality": "LocalFirst", "Health check": "HTTP", "Accepted": "False", "Reason": "Conflicted"})
	wantRow(t, table, "plain", map[string]any{"Locality": "Weighted", "Health check": nil, "Accepted": nil})
}
