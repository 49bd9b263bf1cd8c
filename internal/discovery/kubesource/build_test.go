package kubesource

import (
	"strings"
	"testing"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/discovery/store"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	k8sdiscoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func slice(name string, labels, annotations map[string]string, eps ...k8sdiscoveryv1.Endpoint) *k8sdiscoveryv1.EndpointSlice {
	return &k8sdiscoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "demo", Name: name, Labels: labels, Annotations: annotations},
		AddressType: k8sdiscoveryv1.AddressTypeIPv4,
		Ports:       []k8sdiscoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}, {Name: ptr.To("all")}},
		Endpoints:   eps,
	}
}

func karmadaLabels(svc string) map[string]string {
	return map[string]string{k8sdiscoveryv1.LabelServiceName: svc, k8sdiscoveryv1.LabelManagedBy: keys.KarmadaEndpointSliceManagedBy}
}

func TestOriginOf(t *testing.T) {
	mcs := func(svc, cluster, region string) map[string]string {
		l := map[string]string{mcsv1beta1.LabelServiceName: svc, mcsv1beta1.LabelSourceCluster: cluster}
		if region != "" {
			l[corev1.LabelTopologyRegion] = region
		}
		return l
	}
	tests := []struct {
		name    string
		sel     Selection
		slice   *k8sdiscoveryv1.EndpointSlice
		want    Origin
		wantErr string
	}{
		{name: "mcs labels", sel: SelectionMCS, slice: slice("derived-1a2b-east-x", mcs("web", "east", "eu-west"), nil),
			want: Origin{Pool: store.Key{Namespace: "demo", Name: "web"}, Cluster: "east", Region: "eu-west"}},
		{name: "mcs without a cluster", sel: SelectionMCS, slice: slice("s", mcs("web", "", ""), nil),
			wantErr: `labels multicluster.kubernetes.io/service-name="web" and multicluster.kubernetes.io/source-cluster="": both must be set`},
		{name: "karmada, the cluster from the name", sel: SelectionKarmada, slice: slice("imported-member1-web-5x7kq", karmadaLabels("derived-web"), nil),
			want: Origin{Pool: store.Key{Namespace: "demo", Name: "web"}, Cluster: "member1"}},
		{name: "karmada, a cluster with dashes and the service's name in it", sel: SelectionKarmada, slice: slice("imported-web-east-web-5x7kq", karmadaLabels("derived-web"), nil),
			want: Origin{Pool: store.Key{Namespace: "demo", Name: "web"}, Cluster: "web-east"}},
		{name: "karmada, the annotation agrees with the name", sel: SelectionKarmada,
			slice: slice("imported-eu-1-web-web-5x7kq", karmadaLabels("derived-web-web"), map[string]string{keys.KarmadaAnnotationWorkNamespace: "karmada-es-eu-1"}),
			want:  Origin{Pool: store.Key{Namespace: "demo", Name: "web-web"}, Cluster: "eu-1"}},
		{name: "karmada, the annotation of a member cluster's Work is not believed", sel: SelectionKarmada,
			slice: slice("imported-member1-web-5x7kq", karmadaLabels("derived-web"), map[string]string{keys.KarmadaAnnotationWorkNamespace: "karmada-es-member2"}),
			want:  Origin{Pool: store.Key{Namespace: "demo", Name: "web"}, Cluster: "member1"}},
		{name: "karmada, a slice name without the service", sel: SelectionKarmada, slice: slice("imported-member1-abcde", karmadaLabels("derived-web"), nil),
			wantErr: `name "imported-member1-abcde": no source cluster before -web-`},
		{name: "karmada, not imported", sel: SelectionKarmada, slice: slice("member1-web-abcde", karmadaLabels("derived-web"), nil),
			wantErr: `name "member1-web-abcde": want imported-<cluster>-<slice>`},
		{name: "karmada, no derived prefix", sel: SelectionKarmada, slice: slice("imported-member1-web-abcde", karmadaLabels("web"), nil),
			wantErr: `label kubernetes.io/service-name="web": want derived-<service>`},
		{name: "karmada MultiClusterService", sel: SelectionKarmada,
			slice: slice("member1-web-abcde", map[string]string{k8sdiscoveryv1.LabelServiceName: "web", k8sdiscoveryv1.LabelManagedBy: keys.KarmadaDispatchEndpointSliceManagedBy, corev1.LabelTopologyRegion: "cn-north"},
				map[string]string{keys.KarmadaAnnotationProvisionCluster: "member1"}),
			want: Origin{Pool: store.Key{Namespace: "demo", Name: "web"}, Cluster: "member1", Region: "cn-north"}},
		{name: "karmada MultiClusterService without its annotation", sel: SelectionKarmada,
			slice:   slice("member1-web-abcde", map[string]string{k8sdiscoveryv1.LabelServiceName: "web", k8sdiscoveryv1.LabelManagedBy: keys.KarmadaDispatchEndpointSliceManagedBy}, nil),
			wantErr: "annotation endpointslice.karmada.io/provision-cluster is missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.sel.OriginOf(tt.slice)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("OriginOf() error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("OriginOf() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuildPool(t *testing.T) {
	k := store.Key{Namespace: "demo", Name: "web"}
	ep := func(addr string, ready *bool) k8sdiscoveryv1.Endpoint {
		return k8sdiscoveryv1.Endpoint{Addresses: []string{addr}, Conditions: k8sdiscoveryv1.EndpointConditions{Ready: ready}}
	}
	terminating := ep("10.0.1.3", ptr.To(false))
	terminating.Conditions.Serving, terminating.Conditions.Terminating = ptr.To(true), ptr.To(true)
	terminating.Zone, terminating.Hostname = ptr.To("eu-west-1a"), ptr.To("web-2")
	sl := []*k8sdiscoveryv1.EndpointSlice{
		slice("b", nil, nil, ep("10.0.1.1", nil), terminating),
		slice("a", nil, nil, ep("10.0.1.1", ptr.To(false))), // the same endpoint in two slices: "a" sorts first
		slice("c", nil, nil, ep("10.0.2.1", ptr.To(true)), k8sdiscoveryv1.Endpoint{}),
	}
	origins := []Origin{{Pool: k, Cluster: "east", Region: "eu-west"}, {Pool: k, Cluster: "east"}, {Pool: k, Cluster: "west"}}
	http := []discoveryv1.Port{{Name: "http", Port: 8080, Protocol: "TCP"}}
	want := discoveryv1.Pool{Namespace: "demo", Name: "web", Clusters: []discoveryv1.PoolCluster{
		{Cluster: "east", Region: "eu-west", Endpoints: []discoveryv1.Endpoint{
			{InstanceID: "east/10.0.1.1", Addresses: []string{"10.0.1.1"}, Ports: http, Serving: true}, // not ready; a nil serving is true
			{InstanceID: "east/10.0.1.3", Addresses: []string{"10.0.1.3"}, Ports: http, Serving: true, Terminating: true, Zone: "eu-west-1a", Hostname: "web-2"},
		}},
		{Cluster: "west", Endpoints: []discoveryv1.Endpoint{
			{InstanceID: "west/10.0.2.1", Addresses: []string{"10.0.2.1"}, Ports: http, Ready: true, Serving: true},
		}},
	}}
	want.Labels = map[string]string{"tier": "web"}
	labels := map[string]string{"tier": "web", keys.LabelManagedBy: keys.ManagedByAgent, "multicluster.kubernetes.io/x": "y"}
	if diff := cmp.Diff(want, BuildPool(k, labels, sl, origins)); diff != "" {
		t.Errorf("BuildPool() (-want +got):\n%s", diff)
	}
	// A nil ready is ready, a nil serving serving.
	p := BuildPool(k, nil, sl[:1], origins[:1])
	if e := p.Clusters[0].Endpoints[0]; !e.Ready || !e.Serving || e.Terminating {
		t.Errorf("endpoint with nil conditions: %+v, want ready and serving", e)
	}
}

func TestRouters(t *testing.T) {
	s := slice("router-abcde", nil, nil,
		k8sdiscoveryv1.Endpoint{Addresses: []string{"10.0.0.7"}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "router-7d9f-x2"}, Zone: ptr.To("z1")},
		k8sdiscoveryv1.Endpoint{Addresses: []string{"10.0.0.8"}, Conditions: k8sdiscoveryv1.EndpointConditions{Ready: ptr.To(false)}},
	)
	got := Routers("hub", []*k8sdiscoveryv1.EndpointSlice{s})
	http := []discoveryv1.Port{{Name: "http", Port: 8080, Protocol: "TCP"}} // "all" has no number
	want := []discoveryv1.Router{
		{InstanceID: "10.0.0.8", Addresses: []string{"10.0.0.8"}, Ports: http, Cluster: "hub"},
		{InstanceID: "router-7d9f-x2", Addresses: []string{"10.0.0.7"}, Ports: http, Cluster: "hub", Zone: "z1", Ready: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Routers() (-want +got):\n%s", diff)
	}
}
