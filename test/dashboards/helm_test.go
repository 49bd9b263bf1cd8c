package dashboards

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetnet/fleetnet/internal/testkit"
	"sigs.k8s.io/yaml"
)

// helmTemplate runs bin/helm template (built by `make tools`; a missing
// helm fails the test saying so) on chart c with its base values and args,
// with a configuration of its own, and returns its combined output.
func helmTemplate(t *testing.T, c chart, args ...string) (string, error) {
	t.Helper()
	dir := filepath.Join(root(t), "charts", c.name)
	all := []string{"template", c.name, dir, "--namespace", "fleetnet-system"}
	if c.base != "" {
		all = append(all, "-f", filepath.Join(dir, c.base))
	}
	all = append(all, args...)
	return testkit.NewHelm(t).Run(t, all...)
}

// object is the part of a rendered object the test reads.
type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Data map[string]string `json:"data"`
}

// dashboardConfigMaps are the rendered ConfigMaps that hold a dashboard.
func dashboardConfigMaps(t *testing.T, rendered string) []object {
	t.Helper()
	var out []object
	for doc := range strings.SplitSeq(rendered, "\n---\n") {
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("rendered YAML does not parse: %v\n%s", err, doc)
		}
		if o.Kind == "ConfigMap" && strings.HasSuffix(o.Metadata.Name, "-dashboard") {
			out = append(out, o)
		}
	}
	return out
}

// TestChartsRenderDashboards renders each chart: no dashboard with its
// values as they are; with grafanaDashboards.enabled one ConfigMap that
// the Grafana sidecar finds by its label, holding the chart's
// dashboards/<chart>.json as it is; the label, value, namespace and
// annotations as set; a wrong label refused naming the value.
func TestChartsRenderDashboards(t *testing.T) {
	for _, c := range charts {
		t.Run(c.name, func(t *testing.T) {
			want, err := os.ReadFile(dashboardFile(t, c))
			if err != nil {
				t.Fatal(err)
			}
			out, err := helmTemplate(t, c)
			if err != nil {
				t.Fatalf("helm template with the chart's values: %v\n%s", err, out)
			}
			if got := dashboardConfigMaps(t, out); len(got) != 0 {
				t.Errorf("grafanaDashboards is off by default, but %s renders %s", c.name, got[0].Metadata.Name)
			}

			for _, tc := range []struct {
				name                  string
				set                   []string
				label, value          string
				namespace, annotation string
			}{
				{name: "enabled", set: []string{"grafanaDashboards.enabled=true"},
					label: "grafana_dashboard", value: "1", namespace: "fleetnet-system"},
				{name: "set", set: []string{"grafanaDashboards.enabled=true", "grafanaDashboards.label=example.com/dashboard",
					"grafanaDashboards.labelValue=fleetnet", "grafanaDashboards.namespace=monitoring",
					"grafanaDashboards.annotations.grafana_folder=fleetnet"},
					label: "example.com/dashboard", value: "fleetnet", namespace: "monitoring", annotation: "fleetnet"},
				{name: "a number as the value", set: []string{"grafanaDashboards.enabled=true", "grafanaDashboards.labelValue=2"},
					label: "grafana_dashboard", value: "2", namespace: "fleetnet-system"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					var args []string
					for _, s := range tc.set {
						args = append(args, "--set", s)
					}
					out, err := helmTemplate(t, c, args...)
					if err != nil {
						if strings.Contains(out, "additional properties 'grafanaDashboards' not allowed") {
							t.Fatalf("charts/%s/values.schema.json does not allow grafanaDashboards: add it (and its values to values.yaml) as in charts/fleetnet-registry\n%s", c.name, out)
						}
						t.Fatalf("helm template %s: %v\n%s", strings.Join(args, " "), err, out)
					}
					cms := dashboardConfigMaps(t, out)
					if len(cms) != 1 {
						t.Fatalf("want one dashboard ConfigMap, got %d:\n%s", len(cms), out)
					}
					cm := cms[0]
					if got := cm.Metadata.Labels[tc.label]; got != tc.value {
						t.Errorf("%s: label %s=%q, want %q (labels %v)", cm.Metadata.Name, tc.label, got, tc.value, cm.Metadata.Labels)
					}
					if cm.Metadata.Namespace != tc.namespace {
						t.Errorf("%s: namespace %q, want %q", cm.Metadata.Name, cm.Metadata.Namespace, tc.namespace)
					}
					if got := cm.Metadata.Annotations["grafana_folder"]; got != tc.annotation {
						t.Errorf("%s: annotation grafana_folder=%q, want %q", cm.Metadata.Name, got, tc.annotation)
					}
					key := c.name + ".json"
					data, ok := cm.Data[key]
					if !ok {
						t.Fatalf("%s has no data %s (keys: %v)", cm.Metadata.Name, key, cm.Data)
					}
					if data != strings.TrimSpace(string(want)) {
						t.Errorf("%s's %s is not charts/%s/dashboards/%s", cm.Metadata.Name, key, c.name, key)
					}
					var d Dashboard
					if err := json.Unmarshal([]byte(data), &d); err != nil || d.UID == "" {
						t.Errorf("%s's %s is not a dashboard: %v", cm.Metadata.Name, key, err)
					}
				})
			}

			t.Run("wrong label", func(t *testing.T) {
				out, err := helmTemplate(t, c, "--set", "grafanaDashboards.enabled=true", "--set", "grafanaDashboards.label=grafana dashboard")
				if err == nil || !strings.Contains(out, "at '/grafanaDashboards/label'") {
					t.Errorf("a label with a space: want a failure naming /grafanaDashboards/label, got %v:\n%s", err, out)
				}
			})
		})
	}
}
