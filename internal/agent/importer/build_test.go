package importer

import (
	"maps"
	"testing"

	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/agent/locality"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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

// Keys the agent owns must match exactly, absent included; keys others
// added do not matter.
func TestOwnedMatch(t *testing.T) {
	owned := []string{"weight", "frontend"}
	tests := []struct {
		name       string
		have, want map[string]string
		match      bool
	}{
		{"same", map[string]string{"weight": "1", "frontend": "x"}, map[string]string{"weight": "1", "frontend": "x"}, true},
		{"another manager's key", map[string]string{"weight": "1", "team": "a"}, map[string]string{"weight": "1"}, true},
		{"a cleared key still there", map[string]string{"weight": "1", "frontend": "x"}, map[string]string{"weight": "1"}, false},
		{"a key missing", map[string]string{"weight": "1"}, map[string]string{"weight": "1", "frontend": "x"}, false},
		{"a value changed", map[string]string{"weight": "1"}, map[string]string{"weight": "2"}, false},
	}
	for _, tt := range tests {
		if got := ownedMatch(tt.have, tt.want, owned); got != tt.match {
			t.Errorf("%s: ownedMatch = %v, want %v", tt.name, got, tt.match)
		}
	}
}

// TestWithLocality: under a policy the derived Service of a ClusterSetIP
// import prefers close endpoints (unless the export chose) and carries
// topology-mode Auto; a headless one, or no policy, neither.
func TestWithLocality(t *testing.T) {
	if keys.AnnotationTopologyMode != corev1.AnnotationTopologyMode {
		t.Fatalf("keys.AnnotationTopologyMode = %q, want Kubernetes' %q", keys.AnnotationTopologyMode, corev1.AnnotationTopologyMode)
	}
	policy := &locality.Decision{}
	for _, tc := range []struct {
		name         string
		spec         corev1.ServiceSpec
		decision     *locality.Decision
		distribution string
		annotated    bool
	}{
		{"no policy", corev1.ServiceSpec{}, nil, "", false},
		{"policy", corev1.ServiceSpec{}, policy, corev1.ServiceTrafficDistributionPreferClose, true},
		{"policy, the export's distribution", corev1.ServiceSpec{TrafficDistribution: ptr.To("PreferSameNode")}, policy, "PreferSameNode", true},
		{"headless", corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}, policy, "", false},
	} {
		spec, annotations := withLocality(tc.spec, tc.decision)
		if got := ptr.Deref(spec.TrafficDistribution, ""); got != tc.distribution {
			t.Errorf("%s: trafficDistribution %q, want %q", tc.name, got, tc.distribution)
		}
		if got := annotations[keys.AnnotationTopologyMode] == keys.TopologyModeAuto; got != tc.annotated || (!tc.annotated && len(annotations) > 0) {
			t.Errorf("%s: annotations %v, want topology-mode Auto: %v", tc.name, annotations, tc.annotated)
		}
	}
}

// TestMetadataApplied: the agent writes when a key it wants is missing or
// one it applied is no longer wanted, and leaves alone the same key set
// by someone else, so that it never fights another manager over it.
func TestMetadataApplied(t *testing.T) {
	mode := map[string]string{keys.AnnotationTopologyMode: keys.TopologyModeAuto}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		managed     []metav1.ManagedFieldsEntry
		want        map[string]string
		matches     bool
	}{
		{"wanted and there", mode, appliedTopologyMode(keys.FieldManagerAgent), mode, true},
		{"wanted, missing", nil, nil, mode, false},
		{"the agent's, no longer wanted", mode, appliedTopologyMode(keys.FieldManagerAgent), nil, false},
		{"someone else's, not wanted", mode, appliedTopologyMode("kubectl"), nil, true},
	} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations, ManagedFields: tc.managed}}
		if got := metadataApplied(svc, nil, tc.want); got != tc.matches {
			t.Errorf("%s: metadataApplied = %v, want %v", tc.name, got, tc.matches)
		}
	}
}

// An operator's topology-mode on a derived Service is left alone under a
// policy: the agent wants its own value only where the key is missing,
// equal, or the agent's own applied field.
func TestWithoutForeign(t *testing.T) {
	mode := map[string]string{keys.AnnotationTopologyMode: keys.TopologyModeAuto}
	disabled := map[string]string{keys.AnnotationTopologyMode: "Disabled"}
	for _, tc := range []struct {
		name     string
		existing map[string]string
		managed  []metav1.ManagedFieldsEntry
		want     map[string]string
	}{
		{"missing", nil, nil, mode},
		{"equal", mode, appliedTopologyMode("kubectl"), mode},
		{"the agent's, changed since", disabled, appliedTopologyMode(keys.FieldManagerAgent), mode},
		{"someone else's value", disabled, appliedTopologyMode("kubectl"), map[string]string{}},
		{"someone else's value, no managed fields", disabled, nil, map[string]string{}},
	} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: tc.existing, ManagedFields: tc.managed}}
		wanted := maps.Clone(mode)
		if got := withoutForeign(svc, wanted); !maps.Equal(got, tc.want) {
			t.Errorf("%s: withoutForeign = %v, want %v", tc.name, got, tc.want)
		}
		if !maps.Equal(wanted, mode) {
			t.Errorf("%s: the wanted map was changed: %v", tc.name, wanted)
		}
	}
}

// appliedTopologyMode is the managed fields of an object whose
// topology-mode annotation manager applied.
func appliedTopologyMode(manager string) []metav1.ManagedFieldsEntry {
	return []metav1.ManagedFieldsEntry{{
		Manager: manager, Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
		FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{"f:service.kubernetes.io/topology-mode":{}}}}`),
	}}
}
