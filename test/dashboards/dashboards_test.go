package dashboards

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fleetnet/fleetnet/test/metricsdoc"
)

// chart is a chart that ships a dashboard of its component, whose section
// of docs/metrics.md has the chart's name.
type chart struct {
	name string
	// base gives the values the chart requires (test/charts' examples).
	base string
}

var charts = []chart{
	{name: "fleetnet-registry"},
	{name: "fleetnet-agent", base: "examples/member.yaml"},
	{name: "fleetnet-gateway", base: "examples/hub.yaml"},
	{name: "fleetnet-edge"},
}

// root is the checkout's top folder, from this package's folder.
func root(t testing.TB) string {
	t.Helper()
	r, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(r, "go.mod")); err != nil {
		t.Fatalf("test/dashboards must run from its own folder: %v", err)
	}
	return r
}

func dashboardFile(t testing.TB, c chart) string {
	return filepath.Join(root(t), "charts", c.name, "dashboards", c.name+".json")
}

func readMetrics(t testing.TB) map[string]metricsdoc.Metric {
	t.Helper()
	doc, err := metricsdoc.Read(filepath.Join(root(t), "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestEveryDashboardIsChecked fails when a chart ships a dashboard this
// package does not check.
func TestEveryDashboardIsChecked(t *testing.T) {
	found, err := filepath.Glob(filepath.Join(root(t), "charts", "*", "dashboards", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		if !slices.ContainsFunc(charts, func(c chart) bool { return dashboardFile(t, c) == f }) {
			t.Errorf("%s is not in test/dashboards' list of charts (or not named <chart>.json)", f)
		}
	}
}

// TestDashboards checks each chart's dashboard against docs/metrics.md and
// wants every metric of the component's section on one of its panels.
func TestDashboards(t *testing.T) {
	doc := readMetrics(t)
	uids := map[string]string{}
	for _, c := range charts {
		t.Run(c.name, func(t *testing.T) {
			file := dashboardFile(t, c)
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(root(t), file)
			ck := &Checker{Component: c.name, Metrics: doc}
			for _, p := range ck.Dashboard(data) {
				t.Errorf("%s: %s", rel, p)
			}
			for name, m := range doc {
				if m.Component == c.name && !ck.Used[name] {
					t.Errorf("%s: %s (%s) is on docs/metrics.md for %s but on no panel", rel, name, m.Type, c.name)
				}
			}
			var d Dashboard
			if err := json.Unmarshal(data, &d); err == nil {
				if other, dup := uids[d.UID]; dup {
					t.Errorf("%s: uid %q is also %s's", rel, d.UID, other)
				}
				uids[d.UID] = c.name
			}
			// kubectl apply (client side) keeps the whole object in an
			// annotation of at most 256 KiB.
			if len(data) > 200<<10 {
				t.Errorf("%s: %d bytes; a ConfigMap applied with kubectl apply must stay under 256 KiB", rel, len(data))
			}
		})
	}
}

// testMetrics are a docs/metrics.md of two components for the checker's
// own tests.
var testMetrics = map[string]metricsdoc.Metric{
	"x_requests_total":   {Name: "x_requests_total", Type: "counter", Labels: []string{"route", "code"}, Component: "fleetnet-x"},
	"x_duration_seconds": {Name: "x_duration_seconds", Type: "histogram", Labels: []string{"route"}, Component: "fleetnet-x"},
	"x_latency_summary":  {Name: "x_latency_summary", Type: "summary", Component: "fleetnet-x"},
	"x_queue":            {Name: "x_queue", Type: "gauge", Labels: []string{"class"}, Component: "fleetnet-x"},
	"y_shared_total":     {Name: "y_shared_total", Type: "counter", Labels: []string{"where"}, Component: "fleetnet-y", Meaning: "panics (also fleetnet-x's)"},
	"y_cert_seconds":     {Name: "y_cert_seconds", Type: "gauge", Component: "fleetnet-y", Meaning: "expiry; also the z's and the x's; alert on it"},
	"y_only":             {Name: "y_only", Type: "gauge", Component: "fleetnet-y", Meaning: "y's alone (not x's)"},
	"y_also_not_x_total": {Name: "y_also_not_x_total", Type: "counter", Component: "fleetnet-y", Meaning: "(also fleetnet-z's) of x_queue"},
}

// TestExpr: the checker accepts what the dashboards need and finds each
// mistake it is there for, naming the metric.
func TestExpr(t *testing.T) {
	vars := map[string]bool{"job": true, "namespace": true, "datasource": true}
	for _, tc := range []struct {
		expr string
		want string // a problem's text; empty: no problem
	}{
		{expr: `sum by (route) (rate(x_requests_total{job=~"$job", code!="200"}[$__rate_interval]))`},
		{expr: `histogram_quantile(0.99, sum by (route, le) (rate(x_duration_seconds_bucket{namespace=~"$namespace"}[5m])))`},
		{expr: `histogram_quantile(0.5, sum without (route) (rate(x_duration_seconds_bucket[5m])))`},
		{expr: `sum by (route) (rate(x_duration_seconds_sum[5m])) / sum by (route) (rate(x_duration_seconds_count[5m]))`},
		{expr: `rate(x_latency_summary_sum[5m]) / rate(x_latency_summary_count[5m])`},
		{expr: `scalar(max(x_queue)) - max by (instance) (x_queue)`},
		{expr: `count(x_queue < scalar(max(x_queue))) or vector(0)`},
		{expr: `time() - max by (class) (x_queue)`},
		{expr: `-x_queue offset 5m`},
		{expr: `x_queue @ end()`},
		{expr: `max_over_time(sum(x_queue)[1h:5m])`},
		{expr: `deriv(x_queue[10m]) > bool 0`},
		{expr: `sum by (where) (increase(y_shared_total[1h]))`},
		{expr: `min(y_cert_seconds) - time()`},
		{expr: `sum by (route, code) (rate(x_requests_total[5m])) / on (route) group_left sum by (route) (rate(x_requests_total[5m]))`},
		{expr: `rate(x_requests_total[5m]) / ignoring (code) sum without (code) (rate(x_requests_total[5m]))`},
		{expr: `topk(5, sum by (route) (rate(x_requests_total[5m])))`},
		{expr: `sum by (dst) (label_replace(x_queue, "dst", "$1", "class", "(.*)"))`},
		{expr: `{__name__="x_queue", class="a"}`},
		{expr: `1e3 * sum(x_queue) # a comment`},

		{expr: `rate(x_request_total[5m])`, want: "x_request_total is not in docs/metrics.md"},
		{expr: `rate(x_queue[5m])`, want: "rate() of x_queue, a gauge"},
		{expr: `sum(increase(x_queue{class="a"}[1h]))`, want: "increase() of x_queue, a gauge"},
		{expr: `deriv(x_requests_total[5m])`, want: "deriv() of x_requests_total, a counter"},
		{expr: `rate(x_requests_total)`, want: "rate() wants a range"},
		{expr: `histogram_quantile(0.9, sum by (le) (rate(x_requests_total[5m])))`, want: "histogram_quantile over x_requests_total, which is not a histogram's _bucket"},
		{expr: `histogram_quantile(0.9, rate(x_duration_seconds_sum[5m]))`, want: "histogram_quantile over x_duration_seconds_sum, which is not a histogram's _bucket"},
		{expr: `histogram_quantile(0.9, sum by (route) (rate(x_duration_seconds_bucket[5m])))`, want: "without their le label"},
		{expr: `histogram_quantile(0.9, sum(rate(x_duration_seconds_bucket[5m])))`, want: "without their le label"},
		{expr: `rate(x_duration_seconds[5m])`, want: "x_duration_seconds is a histogram: select x_duration_seconds_bucket"},
		{expr: `rate(x_requests_total_bucket[5m])`, want: "x_requests_total is a counter, which has no _bucket series"},
		{expr: `x_latency_summary_bucket`, want: "x_latency_summary is a summary, which has no _bucket series"},
		{expr: `x_queue{route="a"}`, want: "x_queue has no label route"},
		{expr: `x_duration_seconds_sum{le="1"}`, want: "x_duration_seconds_sum has no label le"},
		{expr: `sum by (cluster) (rate(x_requests_total[5m]))`, want: "the expression under it has no label cluster"},
		{expr: `sum by (code) (sum by (route) (rate(x_requests_total[5m])))`, want: "the expression under it has no label code"},
		{expr: `y_only`, want: "y_only is fleetnet-y's (docs/metrics.md), which fleetnet-x does not export"},
		{expr: `rate(y_also_not_x_total[5m])`, want: "which fleetnet-x does not export"},
		{expr: `sum by (route) (rate(x_requests_total[5m])) / sum(rate(x_requests_total[5m]))`, want: "between vectors with different labels"},
		{expr: `sum by (route) (x_queue)`, want: "the expression under it has no label route"},
		{expr: `rat(x_requests_total[5m])`, want: "unknown function rat"},
		{expr: `sum(rate(x_requests_total[5m])`, want: "does not parse"},
		{expr: `sum(x_queue)[5m]`, want: "a range [5m] applies to a selector only"},
		{expr: `x_queue{job=~"$jbo"}`, want: "$jbo is not a variable of the dashboard"},
		{expr: `x_queue{class="a}`, want: "unterminated string"},
		{expr: `sum by (class) x_queue`, want: "does not parse"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			ck := &Checker{Component: "fleetnet-x", Metrics: testMetrics}
			problems := ck.Expr(tc.expr, vars)
			if tc.want == "" {
				for _, p := range problems {
					t.Errorf("unexpected problem: %s", p)
				}
				return
			}
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Errorf("want a problem saying %q, got %q", tc.want, problems)
			}
		})
	}
}

// TestExports reads docs/metrics.md's "also" the way the checker does.
func TestExports(t *testing.T) {
	doc := readMetrics(t)
	for _, tc := range []struct {
		metric, component string
		want              bool
	}{
		{"fleetnet_registry_watchers", "fleetnet-registry", true},
		{"fleetnet_registry_watchers", "fleetnet-edge", false},
		{"fleetnet_certificate_expiry_seconds", "fleetnet-agent", true},
		{"fleetnet_certificate_expiry_seconds", "fleetnet-edge", true},
		{"fleetnet_certificate_expiry_seconds", "fleetnet-gateway", true},
		{"fleetnet_tls_handshake_errors_total", "fleetnet-edge", true},
		{"fleetnet_tls_handshake_errors_total", "fleetnet-agent", false},
		{"fleetnet_panics_recovered_total", "fleetnet-gateway", true},
		{"fleetnet_panics_recovered_total", "fleetnet-edge", false},
		{"fleetnet_panics_recovered_total", "fleetnet-agent", false},
	} {
		m, ok := doc[tc.metric]
		if !ok {
			t.Errorf("%s is no longer on docs/metrics.md: update this table", tc.metric)
			continue
		}
		if got := Exports(m, tc.component); got != tc.want {
			t.Errorf("Exports(%s, %s) = %v, want %v (meaning: %q)", tc.metric, tc.component, got, tc.want, m.Meaning)
		}
	}
}

// TestDashboardShape: the checks of the dashboard around its queries.
func TestDashboardShape(t *testing.T) {
	ds := map[string]any{"type": "prometheus", "uid": "${datasource}"}
	valid := func() map[string]any {
		return map[string]any{
			"id": nil, "uid": "fleetnet-x", "title": "fleetnet / x", "schemaVersion": 39, "tags": []any{"fleetnet"},
			"templating": map[string]any{"list": []any{
				map[string]any{"name": "datasource", "type": "datasource", "query": "prometheus"},
				map[string]any{"name": "job", "type": "query", "datasource": ds, "query": map[string]any{"query": "label_values(x_queue, job)"}},
			}},
			"panels": []any{
				map[string]any{"id": 1, "type": "row", "title": "Row", "gridPos": map[string]any{"h": 1, "w": 24, "x": 0, "y": 0}, "panels": []any{}},
				map[string]any{"id": 2, "type": "timeseries", "title": "Queue", "datasource": ds,
					"gridPos": map[string]any{"h": 8, "w": 12, "x": 0, "y": 1},
					"targets": []any{map[string]any{"expr": `sum(x_queue{job=~"$job"})`, "refId": "A", "datasource": ds}}},
				map[string]any{"id": 3, "type": "row", "title": "Collapsed", "collapsed": true, "gridPos": map[string]any{"h": 1, "w": 24, "x": 0, "y": 9}, "panels": []any{
					map[string]any{"id": 4, "type": "stat", "title": "Requests", "datasource": ds,
						"gridPos": map[string]any{"h": 4, "w": 4, "x": 0, "y": 10},
						"targets": []any{map[string]any{"expr": `sum(rate(x_requests_total[5m]))`, "refId": "A"}}},
				}},
			},
		}
	}
	panel := func(d map[string]any, i int) map[string]any { return d["panels"].([]any)[i].(map[string]any) }
	nested := func(d map[string]any) map[string]any { return panel(d, 2)["panels"].([]any)[0].(map[string]any) }
	variable := func(d map[string]any, i int) map[string]any {
		return d["templating"].(map[string]any)["list"].([]any)[i].(map[string]any)
	}
	for _, tc := range []struct {
		name   string
		change func(d map[string]any)
		want   string
	}{
		{name: "valid", change: func(map[string]any) {}},
		{name: "no uid", change: func(d map[string]any) { delete(d, "uid") }, want: `uid "": want 1 to 40 characters`},
		{name: "no title", change: func(d map[string]any) { d["title"] = "" }, want: "no title"},
		{name: "an id", change: func(d map[string]any) { d["id"] = 12 }, want: `"id": 12: want null`},
		{name: "no tag", change: func(d map[string]any) { d["tags"] = []any{} }, want: `no tag "fleetnet"`},
		{name: "no datasource variable", change: func(d map[string]any) { variable(d, 0)["type"] = "custom" }, want: `no variable "datasource"`},
		{name: "a fixed datasource", change: func(d map[string]any) { panel(d, 1)["datasource"] = "Prometheus" }, want: `panel "Queue": datasource "Prometheus"`},
		{name: "a fixed datasource uid", change: func(d map[string]any) {
			nested(d)["datasource"] = map[string]any{"type": "prometheus", "uid": "P1809F7CD0C75ACF3"}
		}, want: `panel "Requests": datasource`},
		{name: "no targets", change: func(d map[string]any) { panel(d, 1)["targets"] = []any{} }, want: `panel "Queue": no targets`},
		{name: "no expr", change: func(d map[string]any) {
			panel(d, 1)["targets"] = []any{map[string]any{"refId": "A"}}
		}, want: `panel "Queue": target A: no expr`},
		{name: "a gauge's rate in a collapsed row", change: func(d map[string]any) {
			nested(d)["targets"] = []any{map[string]any{"expr": `rate(x_queue[5m])`, "refId": "A"}}
		}, want: `panel "Requests": rate(x_queue[5m]): rate() of x_queue, a gauge`},
		{name: "an unknown metric", change: func(d map[string]any) {
			panel(d, 1)["targets"] = []any{map[string]any{"expr": `sum(x_queue_depth)`, "refId": "A"}}
		}, want: `panel "Queue": sum(x_queue_depth): x_queue_depth is not in docs/metrics.md`},
		{name: "the same id twice", change: func(d map[string]any) { nested(d)["id"] = 2 }, want: "id 2 is not unique"},
		{name: "wider than the grid", change: func(d map[string]any) {
			panel(d, 1)["gridPos"] = map[string]any{"h": 8, "w": 16, "x": 12, "y": 1}
		}, want: "outside Grafana's 24 columns"},
		{name: "a variable of an unknown metric", change: func(d map[string]any) {
			variable(d, 1)["query"] = "label_values(x_jobs, job)"
		}, want: "variable job: x_jobs: x_jobs is not in docs/metrics.md"},
		{name: "a variable of a missing label", change: func(d map[string]any) {
			variable(d, 1)["query"] = map[string]any{"query": "label_values(x_queue, route)"}
		}, want: "label_values of route"},
		{name: "a variable's fixed datasource", change: func(d map[string]any) {
			variable(d, 1)["datasource"] = map[string]any{"type": "prometheus", "uid": "abc"}
		}, want: "variable job: datasource"},
		{name: "a legend of a label aggregated away", change: func(d map[string]any) {
			panel(d, 1)["targets"] = []any{map[string]any{"expr": `sum by (class) (x_queue)`, "legendFormat": "{{class}} {{ route }}", "refId": "A"}}
		}, want: `panel "Queue": target A: legend {{route}}: sum by (class) (x_queue) has no label route (it has class)`},
		{name: "an unknown variable", change: func(d map[string]any) {
			panel(d, 1)["targets"] = []any{map[string]any{"expr": `sum(x_queue{class=~"$class"})`, "refId": "A"}}
		}, want: "$class is not a variable of the dashboard"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := valid()
			tc.change(d)
			data, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			problems := (&Checker{Component: "fleetnet-x", Metrics: testMetrics}).Dashboard(data)
			if tc.want == "" {
				for _, p := range problems {
					t.Errorf("unexpected problem: %s", p)
				}
				return
			}
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Errorf("want a problem saying %q, got %q", tc.want, problems)
			}
		})
	}
}
