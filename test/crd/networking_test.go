package crd_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	networkingv1alpha1 "github.com/fleetnet/fleetnet/api/networking/v1alpha1"
	"github.com/fleetnet/fleetnet/internal/testkit"
	networkingac "github.com/fleetnet/fleetnet/pkg/generated/applyconfiguration/networking/v1alpha1"
	"github.com/fleetnet/fleetnet/pkg/generated/clientset/versioned"
	"github.com/fleetnet/fleetnet/pkg/generated/informers/externalversions"
	"github.com/fleetnet/fleetnet/test/fleet"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"
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

// The generated typed clientset, apply configurations, informers and
// listers work against a real API server: apply, apply status, Extract of
// one manager's fields, and an informer's lister seeing the object.
func TestGeneratedClient(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "hub", GatewayAPI: true}}})
	hub := f.Cluster(t, "hub")
	cs, err := versioned.NewForConfig(hub.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const ns = "generated"
	if err := hub.Client(t).Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	policies := cs.NetworkingV1alpha1().BackendTrafficPolicies(ns)
	want := networkingac.BackendTrafficPolicy("echo", ns).WithSpec(networkingac.BackendTrafficPolicySpec().
		WithTargetRefs(gatewayac.LocalPolicyTargetReference().WithGroup(mcsv1beta1.GroupName).WithKind("ServiceImport").WithName("echo")).
		WithLocality(networkingv1alpha1.LocalityLocalFirst))
	const manager = "generated-client-test"
	applied, err := policies.Apply(ctx, want, metav1.ApplyOptions{FieldManager: manager})
	if err != nil {
		t.Fatal(err)
	}
	if applied.Spec.Locality != networkingv1alpha1.LocalityLocalFirst || len(applied.Spec.TargetRefs) != 1 {
		t.Fatalf("applied spec = %+v", applied.Spec)
	}
	status := networkingac.BackendTrafficPolicy("echo", ns).WithStatus(networkingac.BackendTrafficPolicyStatus().
		WithConditions(metav1ac.Condition().WithType("Accepted").WithStatus(metav1.ConditionTrue).WithReason("Accepted").
			WithMessage("applied by the test").WithLastTransitionTime(metav1.Now())))
	if _, err := policies.ApplyStatus(ctx, status, metav1.ApplyOptions{FieldManager: manager + "-status"}); err != nil {
		t.Fatal(err)
	}

	// The informer's lister sees the object with its status.
	factory := externalversions.NewSharedInformerFactory(cs, 0)
	lister := factory.Networking().V1alpha1().BackendTrafficPolicies().Lister()
	factory.Start(ctx.Done())
	t.Cleanup(factory.Shutdown)
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("cache of %v did not sync", typ)
		}
	}
	testkit.Eventually(t, 10*time.Second, "the lister to see the applied status", func(context.Context) error {
		p, err := lister.BackendTrafficPolicies(ns).Get("echo")
		if err != nil {
			return err
		}
		if len(p.Status.Conditions) != 1 {
			return fmt.Errorf("lister status = %+v", p.Status)
		}
		// Extract gives back what this manager owns: the spec it applied,
		// not the status another manager wrote.
		got, err := networkingac.ExtractBackendTrafficPolicy(p, manager)
		if err != nil {
			return err
		}
		if got.Spec == nil || got.Spec.Locality == nil || *got.Spec.Locality != networkingv1alpha1.LocalityLocalFirst || got.Status != nil {
			return fmt.Errorf("extracted = %+v", got)
		}
		return nil
	})
}

// What `kubectl get mclb` shows.
func TestMultiClusterLoadBalancerColumns(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "hub", GatewayAPI: true}}})
	hub := f.Cluster(t, "hub")
	cs, err := versioned.NewForConfig(hub.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const ns = "printer"
	if err := hub.Client(t).Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	lbs := cs.NetworkingV1alpha1().MultiClusterLoadBalancers(ns)
	ac := networkingac.MultiClusterLoadBalancer("db", ns).WithSpec(networkingac.MultiClusterLoadBalancerSpec().WithServiceImportName("db").
		WithPorts(networkingac.LoadBalancerPort().WithPort(5432).WithProtocol(networkingv1alpha1.ProtocolTCP),
			networkingac.LoadBalancerPort().WithPort(5433).WithProtocol(networkingv1alpha1.ProtocolTCP)))
	if _, err := lbs.Apply(ctx, ac, metav1.ApplyOptions{FieldManager: "test"}); err != nil {
		t.Fatal(err)
	}
	status := networkingac.MultiClusterLoadBalancer("db", ns).WithStatus(networkingac.MultiClusterLoadBalancerStatus().
		WithAddresses("203.0.113.7").WithPorts("5432/TCP,5433/TCP").WithHealthyClusters(1).
		WithConditions(metav1ac.Condition().WithType("Programmed").WithStatus(metav1.ConditionTrue).WithReason("Programmed").WithMessage("").WithLastTransitionTime(metav1.Now())).
		WithClusters(networkingac.ClusterBackendStatus().WithName("east").WithState("Healthy").WithWeight(1).WithReadyEndpoints(2),
			networkingac.ClusterBackendStatus().WithName("west").WithState("Draining").WithWeight(1).WithReadyEndpoints(1)))
	if _, err := lbs.ApplyStatus(ctx, status, metav1.ApplyOptions{FieldManager: "test-status"}); err != nil {
		t.Fatal(err)
	}
	table := getTable(t, hub.Config, networkingv1alpha1.SchemeGroupVersion, ns, "multiclusterloadbalancers")
	wantColumns(t, table, "Name/0", "Address/0", "Ports/0", "Clusters/0", "Programmed/0", "Class/1", "Age/0")
	wantRow(t, table, "db", map[string]any{"Address": "203.0.113.7", "Ports": "5432/TCP,5433/TCP", "Clusters": float64(1), "Programmed": "True", "Class": "edge"})
}
