package gateway_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/api/keys"
	networkingv1alpha1 "github.com/fleetnet/fleetnet/api/networking/v1alpha1"
	gatewayapp "github.com/fleetnet/fleetnet/internal/gateway/app"
	"github.com/fleetnet/fleetnet/internal/testkit"

	"github.com/fleetnet/fleetnet/internal/gateway/provider"
	networkingac "github.com/fleetnet/fleetnet/pkg/generated/applyconfiguration/networking/v1alpha1"
	"github.com/fleetnet/fleetnet/pkg/generated/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// dbObjects are a ServiceImport db (TCP 5432) exported by east and west.
func dbObjects() []client.Object {
	slice := func(cluster, addr string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-" + cluster, Labels: map[string]string{
				mcsv1beta1.LabelServiceName: "db", mcsv1beta1.LabelSourceCluster: cluster, discoveryv1.LabelManagedBy: keys.EndpointSliceManagedBy,
			}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("pg"), Port: ptr.To[int32](15432), Protocol: ptr.To(corev1.ProtocolTCP)}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		}
	}
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}, Spec: mcsv1beta1.ServiceImportSpec{
			Type: mcsv1beta1.ClusterSetIP, Ports: []mcsv1beta1.ServicePort{{Name: "pg", Protocol: corev1.ProtocolTCP, Port: 5432}},
		}},
		slice("east", "10.255.252.1"), slice("west", "10.255.252.2"),
	}
}

// lbCondition waits until the load balancer's condition has the status
// and reason for its current generation, and check passes.
func lbCondition(t *testing.T, cs versioned.Interface, name, typ string, status metav1.ConditionStatus, reason string, check func(*networkingv1alpha1.MultiClusterLoadBalancer) error) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, fmt.Sprintf("load balancer %s %s=%s %s", name, typ, status, reason), func(ctx context.Context) error {
		lb, err := cs.NetworkingV1alpha1().MultiClusterLoadBalancers(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(lb.Status.Conditions, typ)
		if c == nil || c.Status != status || c.Reason != reason || c.ObservedGeneration != lb.Generation {
			return fmt.Errorf("%s %s = %+v, want %s %s (generation %d)", name, typ, c, status, reason, lb.Generation)
		}
		if check != nil {
			return check(lb)
		}
		return nil
	})
}

// managers returns the field managers of lb and whether each wrote the
// status subresource.
func managers(lb *networkingv1alpha1.MultiClusterLoadBalancer) map[string]string {
	out := map[string]string{}
	for _, m := range lb.ManagedFields {
		out[m.Manager] = m.Subresource
	}
	return out
}

// The controller's status and finalizer on a real API server: conditions
// and reasons, per-cluster state, addresses, separate field managers for
// the finalizer and the status (a user's apply removes neither, and the
// status apply removes none of the user's fields), and deletion that
// waits for the edge to withdraw.
func TestMultiClusterLoadBalancerStatus(t *testing.T) {
	hub := startHub(t)
	c := hub.Client(t)
	ctx := t.Context()
	cs, err := versioned.NewForConfig(hub.Config)
	if err != nil {
		t.Fatal(err)
	}
	startGatewayAndEdge(t, hub)
	create(t, c, dbObjects()...)
	lbs := cs.NetworkingV1alpha1().MultiClusterLoadBalancers(ns)
	const user = "platform-team"
	apply := func(ac *networkingac.MultiClusterLoadBalancerApplyConfiguration) {
		t.Helper()
		if _, err := lbs.Apply(ctx, ac, metav1.ApplyOptions{FieldManager: user}); err != nil {
			t.Fatal(err)
		}
	}
	port := testkit.FreePort(t)
	db := func() *networkingac.MultiClusterLoadBalancerSpecApplyConfiguration {
		return networkingac.MultiClusterLoadBalancerSpec().WithServiceImportName("db").
			WithPorts(networkingac.LoadBalancerPort().WithPort(int32(port)).WithProtocol(networkingv1alpha1.ProtocolTCP).WithTargetPort(5432))
	}
	apply(networkingac.MultiClusterLoadBalancer("db", ns).WithSpec(db()))
	lbCondition(t, cs, "db", networkingv1alpha1.LoadBalancerConditionAccepted, metav1.ConditionTrue, networkingv1alpha1.LoadBalancerReasonAccepted, nil)
	lbCondition(t, cs, "db", networkingv1alpha1.LoadBalancerConditionResolvedRefs, metav1.ConditionTrue, networkingv1alpha1.LoadBalancerReasonResolvedRefs, nil)
	lbCondition(t, cs, "db", networkingv1alpha1.LoadBalancerConditionProgrammed, metav1.ConditionTrue, networkingv1alpha1.LoadBalancerReasonProgrammed,
		func(lb *networkingv1alpha1.MultiClusterLoadBalancer) error {
			if !slices.Equal(lb.Status.Addresses, []string{"127.0.0.1"}) {
				return fmt.Errorf("addresses = %v", lb.Status.Addresses)
			}
			if len(lb.Status.Clusters) != 2 || lb.Status.Clusters[0].Name != "east" || lb.Status.Clusters[0].State != networkingv1alpha1.ClusterStateHealthy ||
				lb.Status.Clusters[1].ReadyEndpoints != 1 {
				return fmt.Errorf("clusters = %+v", lb.Status.Clusters)
			}
			if !slices.Contains(lb.Finalizers, networkingv1alpha1.LoadBalancerFinalizer) {
				return fmt.Errorf("finalizers = %v", lb.Finalizers)
			}
			m := managers(lb)
			if sub, ok := m[keys.FieldManagerGatewayStatus]; !ok || sub != "status" {
				return fmt.Errorf("managers = %v, want %s on status", m, keys.FieldManagerGatewayStatus)
			}
			if sub, ok := m[keys.FieldManagerGateway]; !ok || sub != "" {
				return fmt.Errorf("managers = %v, want %s on the object", m, keys.FieldManagerGateway)
			}
			return nil
		})

	// The user drains west by applying its own fields again: the
	// controller's finalizer and status stay, and the status follows.
	apply(networkingac.MultiClusterLoadBalancer("db", ns).WithSpec(db().WithClusters(networkingac.ClusterOverride().WithName("west").WithDrain(true))))
	lbCondition(t, cs, "db", networkingv1alpha1.LoadBalancerConditionProgrammed, metav1.ConditionTrue, networkingv1alpha1.LoadBalancerReasonProgrammed,
		func(lb *networkingv1alpha1.MultiClusterLoadBalancer) error {
			if len(lb.Status.Clusters) != 2 || lb.Status.Clusters[1].State != networkingv1alpha1.ClusterStateDraining {
				return fmt.Errorf("clusters = %+v", lb.Status.Clusters)
			}
			if !slices.Contains(lb.Finalizers, networkingv1alpha1.LoadBalancerFinalizer) || lb.Spec.ServiceImportName != "db" || len(lb.Spec.Clusters) != 1 {
				return fmt.Errorf("finalizers %v, spec %+v", lb.Finalizers, lb.Spec)
			}
			return nil
		})

	// Conditions and reasons of what cannot be served.
	apply(networkingac.MultiClusterLoadBalancer("cloud", ns).WithSpec(db().WithClass(networkingv1alpha1.LoadBalancerClassAzureCrossRegion)))
	lbCondition(t, cs, "cloud", networkingv1alpha1.LoadBalancerConditionAccepted, metav1.ConditionFalse, networkingv1alpha1.LoadBalancerReasonUnsupportedClass,
		func(lb *networkingv1alpha1.MultiClusterLoadBalancer) error {
			if slices.Contains(lb.Finalizers, networkingv1alpha1.LoadBalancerFinalizer) {
				return fmt.Errorf("an unserved load balancer has the finalizer")
			}
			return nil
		})
	// db's port, likely created in db's second and first by name: db is
	// served and keeps its port.
	apply(networkingac.MultiClusterLoadBalancer("again", ns).WithSpec(db()))
	lbCondition(t, cs, "again", networkingv1alpha1.LoadBalancerConditionAccepted, metav1.ConditionFalse, networkingv1alpha1.LoadBalancerReasonPortConflict, nil)
	apply(networkingac.MultiClusterLoadBalancer("wrongport", ns).WithSpec(networkingac.MultiClusterLoadBalancerSpec().WithServiceImportName("db").
		WithPorts(networkingac.LoadBalancerPort().WithPort(int32(testkit.FreePort(t))).WithProtocol(networkingv1alpha1.ProtocolTCP).WithTargetPort(6543))))
	lbCondition(t, cs, "wrongport", networkingv1alpha1.LoadBalancerConditionResolvedRefs, metav1.ConditionFalse, networkingv1alpha1.LoadBalancerReasonBackendNotFound, nil)
	apply(networkingac.MultiClusterLoadBalancer("udp", ns).WithSpec(networkingac.MultiClusterLoadBalancerSpec().WithServiceImportName("db").
		WithPorts(networkingac.LoadBalancerPort().WithPort(int32(testkit.FreePort(t))).WithProtocol(networkingv1alpha1.ProtocolUDP).WithTargetPort(5432))))
	lbCondition(t, cs, "udp", networkingv1alpha1.LoadBalancerConditionResolvedRefs, metav1.ConditionFalse, networkingv1alpha1.LoadBalancerReasonProtocolMismatch, nil)

	// Deleting withdraws first, then the finalizer goes.
	if err := lbs.Delete(ctx, "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "load balancer db to be deleted", func(ctx context.Context) error {
		_, err := lbs.Get(ctx, "db", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("db still there: %v", err)
	})
	// With db gone, its port is free for "again".
	lbCondition(t, cs, "again", networkingv1alpha1.LoadBalancerConditionAccepted, metav1.ConditionTrue, networkingv1alpha1.LoadBalancerReasonAccepted, nil)
}

// The API server refuses what the CRD's schema checks, naming the field.
func TestMultiClusterLoadBalancerValidation(t *testing.T) {
	hub := startHub(t)
	cs, err := versioned.NewForConfig(hub.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := hub.Client(t).Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	port := func(p int32, proto networkingv1alpha1.L4Protocol) networkingv1alpha1.LoadBalancerPort {
		return networkingv1alpha1.LoadBalancerPort{Port: p, Protocol: proto}
	}
	tests := []struct {
		name string
		spec networkingv1alpha1.MultiClusterLoadBalancerSpec
		want []string
	}{
		{"no ports", networkingv1alpha1.MultiClusterLoadBalancerSpec{ServiceImportName: "db"}, []string{"spec.ports"}},
		{"protocol", networkingv1alpha1.MultiClusterLoadBalancerSpec{ServiceImportName: "db", Ports: []networkingv1alpha1.LoadBalancerPort{port(80, "SCTP")}},
			[]string{"spec.ports[0].protocol", "SCTP"}},
		{"port range", networkingv1alpha1.MultiClusterLoadBalancerSpec{ServiceImportName: "db", Ports: []networkingv1alpha1.LoadBalancerPort{port(70000, "TCP")}},
			[]string{"spec.ports[0].port"}},
		{"port twice", networkingv1alpha1.MultiClusterLoadBalancerSpec{ServiceImportName: "db", Ports: []networkingv1alpha1.LoadBalancerPort{port(80, "TCP"), port(80, "TCP")}},
			[]string{"spec.ports[1]", "Duplicate"}},
		{"class", networkingv1alpha1.MultiClusterLoadBalancerSpec{ServiceImportName: "db", Class: "gcp", Ports: []networkingv1alpha1.LoadBalancerPort{port(80, "TCP")}},
			[]string{"spec.class", "gcp"}},
		{"import name", networkingv1alpha1.MultiClusterLoadBalancerSpec{ServiceImportName: "Db_1", Ports: []networkingv1alpha1.LoadBalancerPort{port(80, "TCP")}},
			[]string{"spec.serviceImportName"}},
		{"health timeout", networkingv1alpha1.MultiClusterLoadBalancerSpec{ServiceImportName: "db", Ports: []networkingv1alpha1.LoadBalancerPort{port(80, "TCP")},
			HealthCheck: &networkingv1alpha1.L4HealthCheck{Interval: "1s", Timeout: "2s"}}, []string{"spec.healthCheck", "timeout must be shorter than interval"}},
		{"drain", networkingv1alpha1.MultiClusterLoadBalancerSpec{ServiceImportName: "db", Ports: []networkingv1alpha1.LoadBalancerPort{port(80, "TCP")},
			Timeouts: &networkingv1alpha1.L4Timeouts{Drain: "2h"}}, []string{"spec.timeouts.drain", "drain must be at most 1h"}},
		{"cluster weight", networkingv1alpha1.MultiClusterLoadBalancerSpec{ServiceImportName: "db", Ports: []networkingv1alpha1.LoadBalancerPort{port(80, "TCP")},
			Clusters: []networkingv1alpha1.ClusterOverride{{Name: "east", Weight: ptr.To[int32](2000)}}}, []string{"spec.clusters[0].weight"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lb := &networkingv1alpha1.MultiClusterLoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("bad-%d", i)}, Spec: tt.spec}
			_, err := cs.NetworkingV1alpha1().MultiClusterLoadBalancers(ns).Create(ctx, lb, metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) {
				t.Fatalf("Create = %v, want Invalid", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

// hangingProvider never returns from Deploy, as a cloud API that stopped
// answering would.
type hangingProvider struct{}

func (hangingProvider) Deploy(ctx context.Context, _ *edgev1.Model) error {
	<-ctx.Done()
	return ctx.Err()
}

func (hangingProvider) Progress() provider.Progress {
	return provider.Progress{Message: "deploying"}
}

// A provider call that hangs does not hold reconciles: a new load
// balancer's Accepted and ResolvedRefs are written meanwhile, with
// Programmed=False.
func TestHangingProviderKeepsStatusFlowing(t *testing.T) {
	hub := startHub(t)
	c := hub.Client(t)
	ctx := t.Context()
	startGateway(t, hub.Config, gatewayapp.Options{Provider: hangingProvider{}}, quiet)
	create(t, c, dbObjects()...)
	cs, err := versioned.NewForConfig(hub.Config)
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"first", "second"} {
		lb := networkingac.MultiClusterLoadBalancer(name, ns).WithSpec(networkingac.MultiClusterLoadBalancerSpec().WithServiceImportName("db").
			WithPorts(networkingac.LoadBalancerPort().WithPort(int32(7000 + i)).WithProtocol(networkingv1alpha1.ProtocolTCP).WithTargetPort(5432)))
		if _, err := cs.NetworkingV1alpha1().MultiClusterLoadBalancers(ns).Apply(ctx, lb, metav1.ApplyOptions{FieldManager: "test"}); err != nil {
			t.Fatal(err)
		}
		lbCondition(t, cs, name, networkingv1alpha1.LoadBalancerConditionResolvedRefs, metav1.ConditionTrue, networkingv1alpha1.LoadBalancerReasonResolvedRefs, nil)
		lbCondition(t, cs, name, networkingv1alpha1.LoadBalancerConditionProgrammed, metav1.ConditionFalse, networkingv1alpha1.LoadBalancerReasonPending, nil)
	}
}
