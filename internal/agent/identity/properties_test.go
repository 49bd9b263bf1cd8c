package identity

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	aboutv1alpha1 "github.com/fleetnet/fleetnet/api/about/v1alpha1"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/registry/validate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func prop(name, value string) aboutv1alpha1.ClusterProperty {
	return aboutv1alpha1.ClusterProperty{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: aboutv1alpha1.ClusterPropertySpec{Value: value}}
}

// TestProperties: what the agent publishes of its ClusterProperties, and
// what it ignores, saying why; what it publishes the registry accepts.
func TestProperties(t *testing.T) {
	cluster := &registryv1.Cluster{Id: "east", ClustersetId: "fleet"}
	own := map[string]string{aboutv1alpha1.ClusterIDPropertyName: "east", aboutv1alpha1.ClusterSetPropertyName: "fleet"}
	with := func(kv ...string) map[string]string {
		m := maps.Clone(own)
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	var many []aboutv1alpha1.ClusterProperty
	for i := range validate.MaxClusterProperties {
		many = append(many, prop(fmt.Sprintf("p%02d", i), "v"))
	}
	manyWant := maps.Clone(own)
	for i := range validate.MaxClusterProperties - 2 {
		manyWant[fmt.Sprintf("p%02d", i)] = "v"
	}
	tests := []struct {
		name        string
		props       []aboutv1alpha1.ClusterProperty
		want        map[string]string
		wantIgnored []string
	}{
		{"none: the identity alone", nil, own, nil},
		{"label keys and values", []aboutv1alpha1.ClusterProperty{prop("env", "prod"), prop("example.com/tier", "gold")}, with("env", "prod", "example.com/tier", "gold"), nil},
		{"the well-known ones, as registered", []aboutv1alpha1.ClusterProperty{prop(aboutv1alpha1.ClusterIDPropertyName, "east"), prop(aboutv1alpha1.ClusterSetPropertyName, "fleet")}, own, nil},
		{"a cluster id other than the agent's", []aboutv1alpha1.ClusterProperty{prop(aboutv1alpha1.ClusterIDPropertyName, "west")}, own,
			[]string{`ClusterProperty cluster.clusterset.k8s.io="west" is not published: the agent registers as "east"`}},
		{"a value too long for a label", []aboutv1alpha1.ClusterProperty{prop("env", "prod"), prop("description", strings.Repeat("d", 64))}, with("env", "prod"),
			[]string{`ClusterProperty description="ddd`, "the value must be a label value: must be no more than 63 bytes"}},
		{"a value with spaces", []aboutv1alpha1.ClusterProperty{prop("owner", "team a")}, own,
			[]string{`ClusterProperty owner="team a" is not published: the value must be a label value`}},
		{"beyond the count", many, manyWant,
			[]string{`ClusterProperty p62="v" is not published: beyond the registry's bounds`, `ClusterProperty p63="v"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ignored := Properties(tt.props, cluster)
			if !maps.Equal(got, tt.want) {
				t.Errorf("published %v, want %v", got, tt.want)
			}
			var msgs []string
			for _, ig := range ignored {
				msgs = append(msgs, ig.String())
			}
			all := strings.Join(msgs, "\n")
			for _, w := range tt.wantIgnored {
				if !strings.Contains(all, w) {
					t.Errorf("ignored:\n%s\nlacks %q", all, w)
				}
			}
			if len(tt.wantIgnored) == 0 && len(ignored) > 0 {
				t.Errorf("ignored %v, want none", msgs)
			}
			c := &registryv1.Cluster{Id: "east", ClustersetId: "fleet", Properties: got}
			if errs := validate.Cluster(c, field.NewPath("cluster")); len(errs) > 0 {
				t.Errorf("the registry refuses what the agent publishes: %v", errs.ToAggregate())
			}
		})
	}
}
