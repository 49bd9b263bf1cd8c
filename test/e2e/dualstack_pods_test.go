package e2e

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/testkit"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Pods that the process node runs in dual-stack east get an address of each
// family, so kube-controller-manager writes IPv4 and IPv6 EndpointSlices for
// a PreferDualStack Service; exported, dual-stack hub imports slices of both
// families with the Pods' addresses, and IPv4-only west the IPv4 ones. A
// hub pod reaches east's pods at both of the import's ClusterSetIPs through
// hub's kube-proxy, and a west pod at the IPv4 one.
func TestDualStackPodsExported(t *testing.T) {
	ns := namespace(t, "e2e-dual-stack-pods")
	cl := kube(t, "east")
	ctx := context.Background()
	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(2)),
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
		Spec: corev1.ServiceSpec{
			Selector:       labels,
			IPFamilyPolicy: ptr(corev1.IPFamilyPolicyPreferDualStack),
			Ports: []corev1.ServicePort{{
				Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("http"),
			}},
		},
	}
	se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	for _, obj := range []ctrlclient.Object{dep, svc, se} {
		if err := cl.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	east, err := state.Cluster("east")
	if err != nil {
		t.Fatal(err)
	}
	// The Pods' addresses by family.
	pods := map[discoveryv1.AddressType][]string{}
	testkit.Eventually(t, time.Minute, "the Pods to run with their addresses", func(ctx context.Context) error {
		list := &corev1.PodList{}
		if err := cl.List(ctx, list, ctrlclient.InNamespace(ns)); err != nil {
			return err
		}
		clear(pods)
		running := 0
		for _, p := range list.Items {
			if p.Status.Phase != corev1.PodRunning || len(p.Status.PodIPs) == 0 {
				continue
			}
			if err := inRanges(p.Status.PodIPs, east.PodCIDRs); err != nil {
				return fmt.Errorf("east: Pod %s: %w", p.Name, err)
			}
			for _, ip := range p.Status.PodIPs {
				typ := addressType(ip.IP)
				pods[typ] = append(pods[typ], ip.IP)
			}
			running++
		}
		if running != 2 {
			return fmt.Errorf("east: %d of 2 Pods running with addresses", running)
		}
		return nil
	})
	for _, a := range pods {
		slices.Sort(a)
	}
	names := map[string]bool{}
	list := &corev1.PodList{}
	if err := cl.List(ctx, list, ctrlclient.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		names[p.Name] = true
	}

	for _, tc := range []struct {
		cluster  string
		families []corev1.IPFamily
		want     map[discoveryv1.AddressType][]string
	}{
		{"east", []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}, pods},
		{"hub", []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}, pods},
		{"west", []corev1.IPFamily{corev1.IPv4Protocol}, map[discoveryv1.AddressType][]string{
			discoveryv1.AddressTypeIPv4: pods[discoveryv1.AddressTypeIPv4],
		}},
	} {
		all := slices.Concat(tc.want[discoveryv1.AddressTypeIPv4], tc.want[discoveryv1.AddressTypeIPv6])
		waitImport(t, tc.cluster, ns, "web", map[string][]string{"east": all}, time.Minute)
		// Every family in a slice of its own address type, as the
		// EndpointSlice controller writes them, under an import of those
		// families.
		testkit.Eventually(t, 30*time.Second, fmt.Sprintf("the families of the import in %s", tc.cluster), func(ctx context.Context) error {
			imp, err := getImport(ctx, kube(t, tc.cluster), ns, "web")
			if err != nil {
				return err
			}
			if !slices.Equal(imp.si.Spec.IPFamilies, tc.families) || len(imp.si.Spec.IPs) != len(tc.families) {
				return fmt.Errorf("%s: ServiceImport families %v, ips %v; want %v with an IP each", tc.cluster, imp.si.Spec.IPFamilies, imp.si.Spec.IPs, tc.families)
			}
			got := map[discoveryv1.AddressType][]string{}
			for _, s := range imp.slices {
				if p := s.Ports; len(p) != 1 || p[0].Port == nil || *p[0].Port != 8080 {
					return fmt.Errorf("%s: imported %s slice %s has ports %+v, want the Pods' port 8080", tc.cluster, s.AddressType, s.Name, p)
				}
				for _, e := range s.Endpoints {
					got[s.AddressType] = append(got[s.AddressType], e.Addresses...)
				}
			}
			for _, a := range got {
				slices.Sort(a)
			}
			if !maps.EqualFunc(got, tc.want, slices.Equal) {
				return fmt.Errorf("%s: imported addresses by slice address type %v, want %v", tc.cluster, got, tc.want)
			}
			return nil
		})
		if tc.cluster == "east" {
			continue
		}
		// Traffic to each ClusterSetIP, from a pod of the importing cluster.
		imp, err := getImport(ctx, kube(t, tc.cluster), ns, "web")
		if err != nil {
			t.Fatal(err)
		}
		runPod(t, tc.cluster, ns, "client-"+tc.cluster)
		for _, ip := range imp.si.Spec.IPs {
			url := "http://" + net.JoinHostPort(ip, "80") + "/hostname"
			testkit.Eventually(t, 30*time.Second, fmt.Sprintf("%s's pod to reach east's pods at %s", tc.cluster, url), func(ctx context.Context) error {
				out, errOut, err := execIn(ctx, t, tc.cluster, ns, "client-"+tc.cluster, "client-"+tc.cluster, false, "curl", "-sS", "--max-time", "3", url)
				if err != nil {
					return fmt.Errorf("curl %s: %w: %s", url, err, errOut)
				}
				if !names[strings.TrimSpace(out)] {
					return fmt.Errorf("curl %s answered %q, not one of east's pods %v", url, out, slices.Sorted(maps.Keys(names)))
				}
				return nil
			})
		}
	}
}

// inRanges checks that a Pod has one address in each of its cluster's pod
// ranges, in their order.
func inRanges(ips []corev1.PodIP, ranges []string) error {
	if len(ips) != len(ranges) {
		return fmt.Errorf("addresses %v, want one in each of %v", ips, ranges)
	}
	for i, ip := range ips {
		addr, err := netip.ParseAddr(ip.IP)
		if err != nil {
			return err
		}
		if !netip.MustParsePrefix(ranges[i]).Contains(addr) {
			return fmt.Errorf("address %s is not in %s", addr, ranges[i])
		}
	}
	return nil
}

func addressType(ip string) discoveryv1.AddressType {
	if netip.MustParseAddr(ip).Is6() {
		return discoveryv1.AddressTypeIPv6
	}
	return discoveryv1.AddressTypeIPv4
}
