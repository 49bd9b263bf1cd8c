// Package dashboards checks the Grafana dashboards the charts ship
// (charts/<chart>/dashboards/<chart>.json) against docs/metrics.md: every
// PromQL expression parses, selects only metrics its component exports
// with labels they have, takes rate() of counters only and
// histogram_quantile() of histograms' buckets only; and the dashboards are
// Grafana JSON a sidecar can load as they are (a uid, a datasource
// variable, panels with queries). Its tests also render each chart with
// grafanaDashboards.enabled and look for the ConfigMap.
package dashboards

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/fleetnet/fleetnet/test/metricsdoc"
)

// TargetLabels are the labels Prometheus gives every series of a scraped
// target (job, instance) and prometheus-operator's ServiceMonitors add
// (namespace, pod, service, endpoint, container): a selector may use them
// whatever the metric.
var TargetLabels = []string{"job", "instance", "namespace", "pod", "service", "endpoint", "container"}

// builtinVariables are Grafana's own variables.
var builtinVariables = []string{"__rate_interval", "__interval", "__interval_ms", "__range", "__range_s", "__range_ms", "__dashboard", "__from", "__to"}

// counterFunctions want a counter's range; gaugeFunctions a gauge's.
var (
	counterFunctions = []string{"rate", "irate", "increase", "resets"}
	gaugeFunctions   = []string{"delta", "idelta", "deriv", "predict_linear"}
)

// Checker checks the dashboard of one component.
type Checker struct {
	// Component is the section of docs/metrics.md: fleetnet-registry, ...
	Component string
	// Metrics are docs/metrics.md's.
	Metrics map[string]metricsdoc.Metric
	// Used collects the documented metrics the checked expressions select.
	Used map[string]bool
}

// Dashboard is the part of Grafana's dashboard JSON the checks read.
type Dashboard struct {
	ID            json.RawMessage `json:"id"`
	UID           string          `json:"uid"`
	Title         string          `json:"title"`
	SchemaVersion int             `json:"schemaVersion"`
	Tags          []string        `json:"tags"`
	Panels        []Panel         `json:"panels"`
	Templating    struct {
		List []Variable `json:"list"`
	} `json:"templating"`
}

// Panel is a panel, or a row with its panels when collapsed.
type Panel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource json.RawMessage `json:"datasource"`
	GridPos    struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []Target `json:"targets"`
	Panels  []Panel  `json:"panels"`
}

// Target is a panel's query.
type Target struct {
	Expr         string          `json:"expr"`
	LegendFormat string          `json:"legendFormat"`
	RefID        string          `json:"refId"`
	Datasource   json.RawMessage `json:"datasource"`
}

// Variable is a templating variable.
type Variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Datasource json.RawMessage `json:"datasource"`
}

// Dashboard checks a dashboard's JSON and returns its problems, each
// naming the panel or variable.
func (c *Checker) Dashboard(data []byte) []string {
	var d Dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return []string{fmt.Sprintf("not JSON: %v", err)}
	}
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if d.UID == "" || len(d.UID) > 40 {
		add("uid %q: want 1 to 40 characters", d.UID)
	}
	if d.Title == "" {
		add("no title")
	}
	if d.SchemaVersion == 0 {
		add("no schemaVersion")
	}
	if id := strings.TrimSpace(string(d.ID)); id != "" && id != "null" {
		add(`"id": %s: want null, as Grafana gives a provisioned dashboard its own`, id)
	}
	if !slices.Contains(d.Tags, "fleetnet") {
		add(`no tag "fleetnet" (the dashboards' links list the dashboards by it)`)
	}

	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	if !slices.ContainsFunc(d.Templating.List, func(v Variable) bool {
		return v.Name == "datasource" && v.Type == "datasource" && string(v.Query) == `"prometheus"`
	}) {
		add(`no variable "datasource" of type datasource with query "prometheus"`)
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		where := fmt.Sprintf("variable %s", v.Name)
		if msg := checkDatasource(v.Datasource); msg != "" {
			add("%s: %s", where, msg)
		}
		for _, msg := range c.variableQuery(v.Query, vars) {
			add("%s: %s", where, msg)
		}
	}

	if len(d.Panels) == 0 {
		add("no panels")
	}
	ids := map[int]string{}
	var walk func(ps []Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			where := fmt.Sprintf("panel %q", p.Title)
			if other, dup := ids[p.ID]; dup {
				add("%s: id %d is not unique (also %q)", where, p.ID, other)
			} else if p.ID == 0 {
				add("%s: no id", where)
			}
			ids[p.ID] = p.Title
			if g := p.GridPos; g.W < 1 || g.H < 1 || g.X < 0 || g.X+g.W > 24 || g.Y < 0 {
				add("%s: gridPos %+v is outside Grafana's 24 columns", where, g)
			}
			if p.Type == "row" {
				if len(p.Targets) > 0 {
					add("%s: a row with targets", where)
				}
				walk(p.Panels)
				continue
			}
			if p.Title == "" {
				add("panel %d: no title", p.ID)
			}
			if msg := checkDatasource(p.Datasource); msg != "" {
				add("%s: %s", where, msg)
			}
			if len(p.Targets) == 0 {
				add("%s: no targets", where)
			}
			refs := map[string]bool{}
			for _, t := range p.Targets {
				if t.RefID == "" || refs[t.RefID] {
					add("%s: refId %q is empty or not unique", where, t.RefID)
				}
				refs[t.RefID] = true
				if len(t.Datasource) > 0 {
					if msg := checkDatasource(t.Datasource); msg != "" {
						add("%s: target %s: %s", where, t.RefID, msg)
					}
				}
				if strings.TrimSpace(t.Expr) == "" {
					add("%s: target %s: no expr", where, t.RefID)
					continue
				}
				found := c.Expr(t.Expr, vars)
				for _, msg := range found {
					add("%s: %s", where, msg)
				}
				if e, err := Parse(t.Expr); err == nil && len(found) == 0 {
					if l := c.labels(e); l.known && !l.scalar {
						for _, m := range legendLabel.FindAllStringSubmatch(t.LegendFormat, -1) {
							if !l.names[m[1]] {
								add("%s: target %s: legend {{%s}}: %s has no label %s (it has %s)", where, t.RefID, m[1], t.Expr, m[1], l)
							}
						}
					}
				}
			}
		}
	}
	walk(d.Panels)
	return problems
}

// legendLabel is a label in a target's legendFormat.
var legendLabel = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)

// checkDatasource wants the dashboard's datasource variable, so that the
// dashboard works with whatever Prometheus data source Grafana has.
func checkDatasource(raw json.RawMessage) string {
	var ds struct{ Type, UID string }
	if err := json.Unmarshal(raw, &ds); err != nil || ds.Type != "prometheus" || (ds.UID != "${datasource}" && ds.UID != "$datasource") {
		return fmt.Sprintf(`datasource %s: want {"type": "prometheus", "uid": "${datasource}"}`, strings.TrimSpace(string(raw)))
	}
	return ""
}

var labelValues = regexp.MustCompile(`^label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$`)

// variableQuery checks a query variable's label_values(expr, label) or
// query_result(expr).
func (c *Checker) variableQuery(raw json.RawMessage, vars map[string]bool) []string {
	var q string
	if err := json.Unmarshal(raw, &q); err != nil {
		var obj struct{ Query string }
		if err := json.Unmarshal(raw, &obj); err != nil {
			return []string{fmt.Sprintf("query %s: want a string or {query: ...}", raw)}
		}
		q = obj.Query
	}
	q = strings.TrimSpace(q)
	if m := labelValues.FindStringSubmatch(q); m != nil {
		problems := c.Expr(m[1], vars)
		if len(problems) == 0 {
			e, _ := Parse(m[1])
			if l := c.labels(e); l.known && !l.names[m[2]] {
				problems = append(problems, fmt.Sprintf("%s: label_values of %s, which %s does not have (it has %s)", q, m[2], m[1], l))
			}
		}
		return problems
	}
	if inner, ok := strings.CutPrefix(q, "query_result("); ok && strings.HasSuffix(inner, ")") {
		return c.Expr(strings.TrimSuffix(inner, ")"), vars)
	}
	return []string{fmt.Sprintf("query %q: want label_values(expr, label) or query_result(expr)", q)}
}

// variableRef is a Grafana variable in an expression: $name, ${name},
// ${name:format} or [[name]] (not label_replace's $1).
var variableRef = regexp.MustCompile(`\$\{([a-zA-Z_][a-zA-Z0-9_]*)(?::[a-z]+)?\}|\$([a-zA-Z_][a-zA-Z0-9_]*)|\[\[([a-zA-Z_][a-zA-Z0-9_]*)\]\]`)

// Expr checks one PromQL expression; vars are the dashboard's variables.
func (c *Checker) Expr(expr string, vars map[string]bool) []string {
	if c.Used == nil {
		c.Used = map[string]bool{}
	}
	var problems []string
	add := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s: ", expr)+fmt.Sprintf(format, args...))
	}
	for _, m := range variableRef.FindAllStringSubmatch(expr, -1) {
		name := m[1] + m[2] + m[3]
		if !vars[name] && !slices.Contains(builtinVariables, name) {
			add("$%s is not a variable of the dashboard", name)
		}
	}
	e, err := Parse(expr)
	if err != nil {
		add("does not parse: %v", err)
		return problems
	}
	Walk(e, func(e Expr) {
		switch n := e.(type) {
		case *VectorSelector:
			s, err := c.resolve(n.Name)
			if err != nil {
				add("%v", err)
				return
			}
			c.Used[s.metric.Name] = true
			have := s.labels()
			for _, m := range n.Matchers {
				if m.Label != "__name__" && !have[m.Label] {
					add("%s has no label %s (it has %s)", n.Name, m.Label, labelSet{known: true, names: have})
				}
			}
		case *Call:
			c.call(n, add)
		case *Aggregate:
			if n.Without || slices.Contains([]string{"topk", "bottomk", "limitk", "limit_ratio"}, n.Op) {
				return
			}
			if l := c.labels(n.Expr); l.known && !l.scalar {
				for _, g := range n.Grouping {
					if !l.names[g] {
						add("%s by (%s): the expression under it has no label %s (it has %s)", n.Op, strings.Join(n.Grouping, ", "), g, l)
					}
				}
			}
		case *Binary:
			c.binary(n, add)
		}
	})
	return problems
}

func (c *Checker) call(n *Call, add func(string, ...any)) {
	switch {
	case slices.Contains(counterFunctions, n.Func), slices.Contains(gaugeFunctions, n.Func):
		if len(n.Args) == 0 {
			add("%s() without arguments", n.Func)
			return
		}
		arg := unwrap(n.Args[0])
		switch arg.(type) {
		case *MatrixSelector, *Subquery:
		default:
			add("%s() wants a range: %s(metric[$__rate_interval])", n.Func, n.Func)
			return
		}
		for _, vs := range Selectors(arg) {
			s, err := c.resolve(vs.Name)
			if err != nil {
				continue // reported with the selector
			}
			switch kind := s.kind(); {
			case slices.Contains(counterFunctions, n.Func) && kind == "gauge":
				add("%s() of %s, a gauge: %s() is for counters (and histograms' _bucket, _sum, _count)", n.Func, vs.Name, n.Func)
			case slices.Contains(gaugeFunctions, n.Func) && kind != "gauge":
				add("%s() of %s, a %s: %s() is for gauges, use rate() or increase()", n.Func, vs.Name, kind, n.Func)
			}
		}
	case n.Func == "histogram_quantile":
		if len(n.Args) != 2 {
			add("histogram_quantile wants 2 arguments, got %d", len(n.Args))
			return
		}
		for _, vs := range Selectors(n.Args[1]) {
			if s, err := c.resolve(vs.Name); err == nil && s.kind() != "bucket" {
				add("histogram_quantile over %s, which is not a histogram's _bucket (%s is a %s)", vs.Name, s.metric.Name, s.metric.Type)
			}
		}
		if l := c.labels(n.Args[1]); l.known && !l.names["le"] {
			add("histogram_quantile over buckets without their le label: keep le in the aggregation, e.g. sum by (le) (rate(x_bucket[$__rate_interval]))")
		}
	}
}

// binary checks that both sides of an arithmetic or comparison operator
// between vectors have the labels they are matched on: otherwise nothing
// matches and the panel stays empty.
func (c *Checker) binary(n *Binary, add func(string, ...any)) {
	if slices.Contains([]string{"and", "or", "unless"}, n.Op) {
		return
	}
	l, r := c.labels(n.LHS), c.labels(n.RHS)
	if !l.known || !r.known || l.scalar || r.scalar {
		return
	}
	switch {
	case n.Matching && n.On:
		for _, name := range n.Labels {
			if !l.names[name] || !r.names[name] {
				add("%s on (%s): both sides need label %s (left %s, right %s)", n.Op, strings.Join(n.Labels, ", "), name, l, r)
			}
		}
	case n.Include == nil && !n.GroupRight:
		ln, rn := maps.Clone(l.names), maps.Clone(r.names)
		for _, name := range n.Labels { // ignoring(...)
			delete(ln, name)
			delete(rn, name)
		}
		if !maps.Equal(ln, rn) {
			add("%s between vectors with different labels (left %s, right %s): they match nothing; aggregate both sides to the same labels, or use on (...)", n.Op, l, r)
		}
	}
}

// unwrap returns e without parentheses, offset and @.
func unwrap(e Expr) Expr {
	for {
		switch n := e.(type) {
		case *Paren:
			e = n.Expr
		case *Modified:
			e = n.Expr
		default:
			return e
		}
	}
}

// series is a selected metric name resolved to its documented metric.
type series struct {
	metric metricsdoc.Metric
	suffix string // _bucket, _sum or _count of a histogram or summary; empty otherwise
}

// kind is counter (a counter, a histogram's or summary's _sum or _count),
// bucket (a histogram's _bucket) or gauge.
func (s series) kind() string {
	switch {
	case s.suffix == "_bucket":
		return "bucket"
	case s.suffix != "", s.metric.Type == "counter":
		return "counter"
	}
	return s.metric.Type
}

// labels are the labels a selector of s may name.
func (s series) labels() map[string]bool {
	have := map[string]bool{}
	for _, l := range s.metric.Labels {
		have[l] = true
	}
	for _, l := range TargetLabels {
		have[l] = true
	}
	if s.suffix == "_bucket" {
		have["le"] = true
	}
	return have
}

// resolve finds a selected name in docs/metrics.md, and checks that the
// checker's component exports it.
func (c *Checker) resolve(name string) (series, error) {
	if name == "" {
		return series{}, fmt.Errorf("a selector without a metric name")
	}
	s, ok := series{}, false
	if m, found := c.Metrics[name]; found {
		if m.Type == "histogram" || m.Type == "summary" {
			return series{}, fmt.Errorf("%s is a %s: select %s_bucket, %s_sum or %s_count", name, m.Type, name, name, name)
		}
		s, ok = series{metric: m}, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, cut := strings.CutSuffix(name, suffix)
		if m, found := c.Metrics[base]; !ok && cut && found {
			if m.Type != "histogram" && (m.Type != "summary" || suffix == "_bucket") {
				return series{}, fmt.Errorf("%s: %s is a %s, which has no %s series", name, base, m.Type, suffix)
			}
			s, ok = series{metric: m, suffix: suffix}, true
		}
	}
	if !ok {
		return series{}, fmt.Errorf("%s is not in docs/metrics.md", name)
	}
	if !Exports(s.metric, c.Component) {
		return series{}, fmt.Errorf("%s is %s's (docs/metrics.md), which %s does not export", name, s.metric.Component, c.Component)
	}
	return s, nil
}

// Exports says whether component exports m: m is in the component's
// section of docs/metrics.md, or its meaning says "also" of it, as in
// "(also fleetnet-gateway's)" or "also the agent's, the gateway's, ...".
func Exports(m metricsdoc.Metric, component string) bool {
	if m.Component == component {
		return true
	}
	_, also, ok := strings.Cut(m.Meaning, "also ")
	if !ok {
		return false
	}
	if i := strings.IndexAny(also, ");"); i >= 0 {
		also = also[:i]
	}
	short := regexp.QuoteMeta(strings.TrimPrefix(component, "fleetnet-"))
	return regexp.MustCompile(`\b` + short + `\b`).MatchString(also)
}

// labelSet is what labels the series of an expression carry.
type labelSet struct {
	known  bool // false: cannot tell (an unknown metric, absent())
	scalar bool
	names  map[string]bool
}

func (l labelSet) String() string {
	if len(l.names) == 0 {
		return "no labels"
	}
	return strings.Join(slices.Sorted(maps.Keys(l.names)), ", ")
}

func vectorOf(names ...string) labelSet {
	l := labelSet{known: true, names: map[string]bool{}}
	for _, n := range names {
		l.names[n] = true
	}
	return l
}

var (
	scalarSet  = labelSet{known: true, scalar: true}
	unknownSet = labelSet{}
)

// labels computes the labels of e's series.
func (c *Checker) labels(e Expr) labelSet {
	switch n := e.(type) {
	case NumberLit, StringLit:
		return scalarSet
	case *VectorSelector:
		s, err := c.resolve(n.Name)
		if err != nil {
			return unknownSet
		}
		return labelSet{known: true, names: s.labels()}
	case *MatrixSelector:
		return c.labels(n.VS)
	case *Subquery:
		return c.labels(n.Expr)
	case *Paren:
		return c.labels(n.Expr)
	case *Modified:
		return c.labels(n.Expr)
	case *Unary:
		return c.labels(n.Expr)
	case *Call:
		switch n.Func {
		case "time", "pi", "scalar":
			return scalarSet
		case "vector":
			return vectorOf()
		case "absent", "absent_over_time":
			return unknownSet
		case "histogram_quantile":
			if len(n.Args) != 2 {
				return unknownSet
			}
			l := c.labels(n.Args[1])
			if l.known {
				l.names = maps.Clone(l.names)
				delete(l.names, "le")
			}
			return l
		case "label_replace", "label_join":
			if len(n.Args) < 2 {
				return unknownSet
			}
			l := c.labels(n.Args[0])
			if dst, ok := n.Args[1].(StringLit); ok && l.known {
				l.names = maps.Clone(l.names)
				l.names[dst.Value] = true
			}
			return l
		}
		for _, a := range n.Args {
			if l := c.labels(a); !l.scalar {
				return l
			}
		}
		if len(n.Args) == 0 {
			return vectorOf() // hour(), month(), ...: of time()
		}
		return scalarSet
	case *Aggregate:
		inner := c.labels(n.Expr)
		switch {
		case slices.Contains([]string{"topk", "bottomk", "limitk", "limit_ratio"}, n.Op):
			return inner
		case n.Without:
			if !inner.known {
				return inner
			}
			out := vectorOf(slices.Collect(maps.Keys(inner.names))...)
			for _, g := range n.Grouping {
				delete(out.names, g)
			}
			return out
		}
		out := vectorOf(n.Grouping...)
		if n.Op == "count_values" {
			if l, ok := n.Param.(StringLit); ok {
				out.names[l.Value] = true
			}
		}
		return out
	case *Binary:
		l, r := c.labels(n.LHS), c.labels(n.RHS)
		switch {
		case l.scalar && r.scalar:
			return scalarSet
		case l.scalar:
			return r
		case r.scalar:
			return l
		case !l.known || !r.known:
			return unknownSet
		case n.Op == "or":
			out := vectorOf(slices.Collect(maps.Keys(l.names))...)
			maps.Copy(out.names, r.names)
			return out
		case n.GroupRight:
			out := vectorOf(slices.Collect(maps.Keys(r.names))...)
			for _, i := range n.Include {
				out.names[i] = true
			}
			return out
		}
		out := vectorOf(slices.Collect(maps.Keys(l.names))...)
		for _, i := range n.Include {
			out.names[i] = true
		}
		return out
	}
	return unknownSet
}
