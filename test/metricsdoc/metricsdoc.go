// Package metricsdoc reads docs/metrics.md, the one list of the metrics
// fleetnet's components export, for the tests that keep it true: against
// the code (test/readme) and against what a running fleet serves
// (test/e2e).
package metricsdoc

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Metric is one documented metric.
type Metric struct {
	Name   string
	Type   string // counter, gauge, histogram or summary
	Labels []string
	// Component is the section it is listed under.
	Component string
	// Meaning is the last cell's text.
	Meaning string
}

var code = regexp.MustCompile("`([^`]*)`")

// Read parses the tables of the metrics page at path: rows of
// | `name` | type | `label`, ... | meaning |, under "## component".
func Read(path string) (map[string]Metric, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]Metric{}
	component := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			component = strings.TrimPrefix(line, "## ")
			continue
		}
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 4 {
			return nil, fmt.Errorf("%s:%d: want 4 cells (metric, type, labels, meaning), got %d", path, n, len(cells))
		}
		m := Metric{Type: strings.TrimSpace(cells[1]), Component: component, Meaning: strings.TrimSpace(cells[3])}
		names := code.FindAllStringSubmatch(cells[0], -1)
		if len(names) != 1 {
			return nil, fmt.Errorf("%s:%d: want one `name` in the first cell", path, n)
		}
		m.Name = names[0][1]
		switch m.Type {
		case "counter", "gauge", "histogram", "summary":
		default:
			return nil, fmt.Errorf("%s:%d: %s: type %q: want counter, gauge, histogram or summary", path, n, m.Name, m.Type)
		}
		for _, l := range code.FindAllStringSubmatch(cells[2], -1) {
			m.Labels = append(m.Labels, l[1])
		}
		if _, dup := out[m.Name]; dup {
			return nil, fmt.Errorf("%s:%d: %s listed twice", path, n, m.Name)
		}
		out[m.Name] = m
	}
	return out, sc.Err()
}
