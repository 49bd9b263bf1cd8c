package importer

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// defaultServiceCIDR is the ServiceCIDR the API server creates from its
// --service-cluster-ip-range.
const defaultServiceCIDR = "kubernetes"

// ServiceFamilies reads the IP families of the cluster's Service network,
// primary first, from the default ServiceCIDR ("kubernetes") that the API
// server keeps from its --service-cluster-ip-range.
func ServiceFamilies(ctx context.Context, reader client.Reader) ([]corev1.IPFamily, error) {
	cidr := &networkingv1.ServiceCIDR{}
	if err := reader.Get(ctx, types.NamespacedName{Name: defaultServiceCIDR}, cidr); err != nil {
		return nil, fmt.Errorf("reading the cluster's Service network (ServiceCIDR %s): %w", defaultServiceCIDR, err)
	}
	var out []corev1.IPFamily
	for _, c := range cidr.Spec.CIDRs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("ServiceCIDR %s has an unparsable CIDR %q: %w", cidr.Name, c, err)
		}
		f := corev1.IPv4Protocol
		if p.Addr().Is6() {
			f = corev1.IPv6Protocol
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("ServiceCIDR %s lists no CIDRs", cidr.Name)
	}
	return out, nil
}
