package fleet_test

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"

	aboutv1alpha1 "github.com/fleetnet/fleetnet/api/about/v1alpha1"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/test/fleet"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1alpha1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func TestClustersAreSeparateAndDualStackWorks(t *testing.T) {
	t.Parallel()
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{
		{Name: "hub"}, {Name: "east"}, {Name: "west", DualStack: true},
	}})
	ctx := context.Background()

	hub := f.Cluster(t, "hub").Client(t)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "only-in-hub"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}
	if err := hub.Create(ctx, svc); err != nil {
		t.Fatalf("creating Service in hub: %v", err)
	}
	assertIPInCIDRs(t, svc.Spec.ClusterIP, f.Cluster(t, "hub").ServiceCIDRs)
	for _, name := range []string{"east", "west"} {
		err := f.Cluster(t, name).Client(t).Get(ctx, client.ObjectKeyFromObject(svc), &corev1.Service{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("cluster %s: Get of hub's Service = %v, want NotFound", name, err)
		}
	}

	west := f.Cluster(t, "west")
	dual := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "dual"},
		Spec: corev1.ServiceSpec{
			IPFamilyPolicy: ptr.To(corev1.IPFamilyPolicyPreferDualStack),
			Ports:          []corev1.ServicePort{{Port: 80}},
		},
	}
	if err := west.Client(t).Create(ctx, dual); err != nil {
		t.Fatalf("creating dual-stack Service in west: %v", err)
	}
	if len(dual.Spec.ClusterIPs) != 2 {
		t.Fatalf("west's PreferDualStack Service has ClusterIPs %v, want one per family", dual.Spec.ClusterIPs)
	}
	for _, ip := range dual.Spec.ClusterIPs {
		assertIPInCIDRs(t, ip, west.ServiceCIDRs)
	}
	// A single-stack cluster gives the same Service one address.
	single := dual.DeepCopy()
	single.ResourceVersion, single.Spec.ClusterIP, single.Spec.ClusterIPs, single.Spec.IPFamilies = "", "", nil, nil
	if err := hub.Create(ctx, single); err != nil {
		t.Fatalf("creating PreferDualStack Service in hub: %v", err)
	}
	if len(single.Spec.ClusterIPs) != 1 {
		t.Errorf("hub's PreferDualStack Service has ClusterIPs %v, want one", single.Spec.ClusterIPs)
	}
}

func TestCRDsAreInstalledAndValidated(t *testing.T) {
	t.Parallel()
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "solo"}}})
	ctx := context.Background()
	c := f.Cluster(t, "solo").Client(t)

	export := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}}
	if err := c.Create(ctx, export); err != nil {
		t.Fatalf("creating v1beta1 ServiceExport: %v", err)
	}
	// v1alpha1 is still served.
	if err := c.Get(ctx, client.ObjectKeyFromObject(export), &mcsv1alpha1.ServiceExport{}); err != nil {
		t.Errorf("reading the ServiceExport as v1alpha1: %v", err)
	}
	imp := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: mcsv1beta1.ServiceImportSpec{
			Type:  mcsv1beta1.ClusterSetIP,
			Ports: []mcsv1beta1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}},
		},
	}
	if err := c.Create(ctx, imp); err != nil {
		t.Fatalf("creating v1beta1 ServiceImport: %v", err)
	}

	tests := []struct {
		name    string
		prop    *aboutv1alpha1.ClusterProperty
		wantErr bool
	}{
		{"cluster id", property(aboutv1alpha1.ClusterIDPropertyName, "east"), false},
		{"clusterset id", property(aboutv1alpha1.ClusterSetPropertyName, "fleet"), false},
		{"empty value is refused", property("empty.example.com", ""), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := c.Create(ctx, tt.prop)
			if tt.wantErr != (err != nil) {
				t.Fatalf("creating ClusterProperty %s with value %q: err = %v, want error: %v", tt.prop.Name, tt.prop.Spec.Value, err, tt.wantErr)
			}
			if tt.wantErr && !apierrors.IsInvalid(err) {
				t.Errorf("err = %v, want Invalid", err)
			}
		})
	}
}

func property(name, value string) *aboutv1alpha1.ClusterProperty {
	return &aboutv1alpha1.ClusterProperty{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       aboutv1alpha1.ClusterPropertySpec{Value: value},
	}
}

// Deployments get Running Pods with an address from each of the cluster's
// pod ranges, and kube-controller-manager makes an EndpointSlice per family
// of a PreferDualStack Service with those addresses: IPv4 only in a
// single-stack cluster, both families in a dual-stack one.
func TestKwokRunsDeployments(t *testing.T) {
	t.Parallel()
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{
		{Name: "workloads", ControllerManager: true, Kwok: true},
		{Name: "dual", DualStack: true, ControllerManager: true, Kwok: true},
	}})
	for _, cluster := range f.Clusters {
		t.Run(cluster.Name, func(t *testing.T) {
			t.Parallel()
			runDeployment(t, cluster)
		})
	}
}

func runDeployment(t *testing.T, cluster *fleet.Cluster) {
	ctx := context.Background()
	c := cluster.Client(t)
	labels := map[string]string{"app": "echo"}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "echo"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "echo", Image: "registry.invalid/echo:1",
					Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
				}}},
			},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "echo"},
		Spec: corev1.ServiceSpec{
			Selector:       labels,
			IPFamilyPolicy: ptr.To(corev1.IPFamilyPolicyPreferDualStack),
			Ports:          []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	for _, obj := range []client.Object{deploy, svc} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T: %v", obj, err)
		}
	}

	// Pod addresses by slice address type.
	want := map[discoveryv1.AddressType][]string{}
	testkit.Eventually(t, time.Minute, "the Pods to run with their addresses", func(ctx context.Context) error {
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.InNamespace("default"), client.MatchingLabels(labels)); err != nil {
			return err
		}
		clear(want)
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning || len(p.Status.PodIPs) == 0 {
				continue
			}
			if len(p.Status.PodIPs) != len(cluster.PodCIDRs) {
				return fmt.Errorf("Pod %s has addresses %v, want one in each of %v", p.Name, p.Status.PodIPs, cluster.PodCIDRs)
			}
			for i, ip := range p.Status.PodIPs {
				assertIPInCIDRs(t, ip.IP, cluster.PodCIDRs[i:i+1])
				typ := discoveryv1.AddressTypeIPv4
				if netip.MustParseAddr(ip.IP).Is6() {
					typ = discoveryv1.AddressTypeIPv6
				}
				want[typ] = append(want[typ], ip.IP)
			}
			running++
		}
		if running != 2 {
			return fmt.Errorf("%d of %d Pods running, want 2", running, len(pods.Items))
		}
		return nil
	})
	testkit.Eventually(t, time.Minute, "the EndpointSlices of echo", func(ctx context.Context) error {
		list := &discoveryv1.EndpointSliceList{}
		if err := c.List(ctx, list, client.InNamespace("default"), client.MatchingLabels{discoveryv1.LabelServiceName: "echo"}); err != nil {
			return err
		}
		got := map[discoveryv1.AddressType][]string{}
		for _, s := range list.Items {
			for _, e := range s.Endpoints {
				if ptr.Deref(e.Conditions.Ready, false) {
					got[s.AddressType] = append(got[s.AddressType], e.Addresses...)
				}
			}
		}
		for typ := range got {
			slices.Sort(got[typ])
		}
		for typ := range want {
			slices.Sort(want[typ])
		}
		if !maps.EqualFunc(got, want, slices.Equal) {
			return fmt.Errorf("ready endpoints by address type %v, want the Pods' %v", got, want)
		}
		return nil
	})
}

func assertIPInCIDRs(t *testing.T, ip string, cidrs []string) {
	t.Helper()
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		t.Fatalf("parsing IP %q: %v", ip, err)
	}
	for _, c := range cidrs {
		if netip.MustParsePrefix(c).Contains(addr) {
			return
		}
	}
	t.Errorf("IP %s is in none of %v", ip, cidrs)
}
