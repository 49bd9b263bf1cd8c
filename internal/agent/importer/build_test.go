package importer

import (
	"slices"
	"testing"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func TestSliceLabels(t *testing.T) {
	tests := []struct {
		region     string
		wantRegion bool
	}{
		{"eu-west-1", true},
		{"", false},
		{"US West (Oregon)", false}, // not a label value: left out, never fails the apply
	}
	for _, tt := range tests {
		l := SliceLabels("echo", "derived-abc", "east", tt.region)
		_, has := l[corev1.LabelTopologyRegion]
		if has != tt.wantRegion {
			t.Errorf("region %q: label present = %v, want %v", tt.region, has, tt.wantRegion)
		}
		if l[discoveryv1.LabelServiceName] != "derived-abc" || l[mcsv1beta1.LabelServiceName] != "echo" || l[mcsv1beta1.LabelSourceCluster] != "east" {
			t.Errorf("labels = %v", l)
		}
	}
}

// The exporter's node and Pod names (node_name, pod_name) never become an
// imported endpoint's nodeName or targetRef: those are not in this cluster.
func TestGroupsSplitByFamilyAndDropNodeReferences(t *testing.T) {
	chunks := map[string]*registryv1.EndpointChunk{
		"b": {AddressType: "IPv6", Ports: []*registryv1.EndpointPort{{Name: "http", Protocol: "TCP", Port: 8080}},
			Endpoints: []*registryv1.Endpoint{{Addresses: []string{"fd00::1"}, NodeName: "node-1", Conditions: &registryv1.EndpointConditions{Ready: true}}}},
		"a": {AddressType: "IPv4", Ports: []*registryv1.EndpointPort{{Name: "http", Protocol: "TCP", Port: 8080}},
			Endpoints: []*registryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Zone: "z1", Hostname: "web-0", PodName: "web-0"}}},
		"c": {AddressType: "IPv4", Endpoints: []*registryv1.Endpoint{{Addresses: []string{"10.0.0.2"}}}},
	}
	dual := []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	groups := Groups("east", chunks, dual)
	if len(groups) != 2 || groups[0].AddressType != discoveryv1.AddressTypeIPv4 || groups[1].AddressType != discoveryv1.AddressTypeIPv6 {
		t.Fatalf("groups = %+v, want IPv4 then IPv6", groups)
	}
	if len(groups[0].Endpoints) != 2 || *groups[0].Endpoints[0].Zone != "z1" || *groups[0].Endpoints[0].Hostname != "web-0" {
		t.Errorf("IPv4 endpoints = %+v", groups[0].Endpoints)
	}
	for _, g := range groups {
		for _, e := range g.Endpoints {
			if e.NodeName != nil || e.TargetRef != nil {
				t.Errorf("endpoint %v refers to a node or Pod of another cluster", e.Addresses)
			}
		}
	}
	if !*groups[1].Endpoints[0].Conditions.Ready || *groups[1].Endpoints[0].Conditions.Serving {
		t.Errorf("conditions not carried: %+v", groups[1].Endpoints[0].Conditions)
	}
}

func TestGroupsKeepTheServiceFamiliesAndFQDN(t *testing.T) {
	chunks := map[string]*registryv1.EndpointChunk{
		"v4":   {AddressType: "IPv4", Endpoints: []*registryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}}},
		"v6":   {AddressType: "IPv6", Endpoints: []*registryv1.Endpoint{{Addresses: []string{"fd00::1"}}}},
		"fqdn": {AddressType: "FQDN", Endpoints: []*registryv1.Endpoint{{Addresses: []string{"db.example.com"}}}},
	}
	v4, v6 := corev1.IPv4Protocol, corev1.IPv6Protocol
	tests := []struct {
		families []corev1.IPFamily
		want     []discoveryv1.AddressType
	}{
		{[]corev1.IPFamily{v4}, []discoveryv1.AddressType{"IPv4", "FQDN"}},
		{[]corev1.IPFamily{v6}, []discoveryv1.AddressType{"IPv6", "FQDN"}},
		{[]corev1.IPFamily{v6, v4}, []discoveryv1.AddressType{"IPv4", "IPv6", "FQDN"}},
		{nil, []discoveryv1.AddressType{"FQDN"}},
	}
	for _, tt := range tests {
		var got []discoveryv1.AddressType
		for _, g := range Groups("east", chunks, tt.families) {
			got = append(got, g.AddressType)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("families %v: groups of %v, want %v", tt.families, got, tt.want)
		}
	}
}

func TestFamiliesAndPorts(t *testing.T) {
	dual := &registryv1.Import{IpFamilies: []string{"IPv6", "IPv4"}}
	if got := Families(dual, []corev1.IPFamily{corev1.IPv4Protocol}); len(got) != 1 || got[0] != corev1.IPv4Protocol {
		t.Errorf("dual-stack import in an IPv4 cluster: %v", got)
	}
	if got := Families(&registryv1.Import{IpFamilies: []string{"IPv6"}}, []corev1.IPFamily{corev1.IPv4Protocol}); len(got) != 0 {
		t.Errorf("IPv6-only import in an IPv4 cluster: %v, want none", got)
	}
	spec := DerivedServiceSpec(&registryv1.Import{Type: "ClusterSetIP", IpFamilies: []string{"IPv4", "IPv6"}}, []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol})
	if *spec.IPFamilyPolicy != corev1.IPFamilyPolicyPreferDualStack {
		t.Errorf("two families: policy %s", *spec.IPFamilyPolicy)
	}
	if err := CheckPorts([]*registryv1.ServicePort{{Name: "", Port: 80, Protocol: "TCP"}, {Name: "admin", Port: 81, Protocol: "TCP"}}); err == nil {
		t.Error("mixed port names accepted")
	}
	if err := CheckPorts([]*registryv1.ServicePort{{Port: 80, Protocol: "TCP"}}); err != nil {
		t.Errorf("one unnamed port refused: %v", err)
	}
	if a, b := DerivedName("ns", "a"), DerivedName("ns", "b"); a == b || len(a) != len("derived-")+10 {
		t.Errorf("derived names %s, %s", a, b)
	}
}
