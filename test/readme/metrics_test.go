package readme_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fleetnet/fleetnet/test/metricsdoc"
)

// metricName is what a fleetnet metric's name looks like in the code.
var metricName = regexp.MustCompile(`^fleetnet_[a-z0-9_]*[a-z0-9]$`)

// corednsMetric is a CoreDNS plugin metric: Subsystem Name (the plugin's,
// "fleetnet") and the metric's own name.
var corednsMetric = regexp.MustCompile(`Subsystem: Name, Name: "([a-z0-9_]+)"`)

// codeMetrics are the metric names in the non-test Go files of internal/
// and cmd/: every string literal shaped like a fleetnet metric name, and
// the CoreDNS plugin's.
func codeMetrics(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{} // name -> file
	for _, dir := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil && metricName.MatchString(s) {
						out[s] = path
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	setup := filepath.Join(root, "internal", "dns", "fleetnet", "setup.go")
	data, err := os.ReadFile(setup)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range corednsMetric.FindAllStringSubmatch(string(data), -1) {
		out["coredns_fleetnet_"+m[1]] = setup
	}
	return out
}

// TestMetricsDocumented: every metric in the code is on docs/metrics.md
// and every metric there is in the code.
func TestMetricsDocumented(t *testing.T) {
	doc, err := metricsdoc.Read(filepath.Join(root, "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	inCode := codeMetrics(t)
	if len(inCode) < 40 {
		t.Fatalf("found only %d metric names in the code: the scan is broken", len(inCode))
	}
	for _, name := range slices.Sorted(maps.Keys(inCode)) {
		if _, ok := doc[name]; !ok {
			t.Errorf("%s (%s) is not on docs/metrics.md", name, inCode[name])
		}
	}
	for _, name := range slices.Sorted(maps.Keys(doc)) {
		if _, ok := inCode[name]; !ok {
			t.Errorf("docs/metrics.md lists %s, which no code exports", name)
		}
	}
}
