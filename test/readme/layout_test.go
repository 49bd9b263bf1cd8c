// Package readme_test keeps the documentation true to the tree: the
// contributors' layout table names every Go package (this file), every
// metric is on docs/metrics.md (metrics_test.go), every relative link and
// anchor in README.md and docs/ resolves, and the guide's commands name
// real make targets and fleetnetctl commands and flags (docs_test.go).
package readme_test

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// root is the repository's top folder, from this package's folder.
const root = "../.."

// layoutPage is the page with the layout table, under layoutHeading.
const (
	layoutPage    = "docs/guide/code-layout.md"
	layoutHeading = "## Packages"
)

// checked are the folders whose packages the table must name.
var checked = []string{"api", "cmd", "internal", "hack", "test"}

// row is one row of the layout table: the folders in its first column and
// the rest of its text.
type row struct {
	folders []string
	text    string
}

var code = regexp.MustCompile("`([^`]+)`")

// layoutRows reads the table under layoutHeading of layoutPage.
func layoutRows(t *testing.T) []row {
	t.Helper()
	f, err := os.Open(filepath.Join(root, layoutPage))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []row
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == layoutHeading
		case in && strings.HasPrefix(line, "| `"):
			cells := strings.SplitN(strings.TrimPrefix(line, "|"), "|", 2)
			r := row{text: line}
			for _, m := range code.FindAllStringSubmatch(cells[0], -1) {
				r.folders = append(r.folders, expand(m[1])...)
			}
			rows = append(rows, r)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatalf("%s has no layout table under %q", layoutPage, layoutHeading)
	}
	return rows
}

// expand turns "hack/tools/{kube,kwok}" into both folders.
func expand(s string) []string {
	open, end := strings.Index(s, "{"), strings.Index(s, "}")
	if open < 0 || end < open {
		return []string{strings.TrimSuffix(s, "/")}
	}
	var out []string
	for alt := range strings.SplitSeq(s[open+1:end], ",") {
		out = append(out, expand(s[:open]+alt+s[end+1:])...)
	}
	return out
}

// named says whether the table names package folder dir: a row's first
// column gives it, or a row for "parent/…" names its rest in backquotes.
func named(rows []row, dir string) bool {
	for _, r := range rows {
		for _, f := range r.folders {
			if f == dir {
				return true
			}
			if parent, ok := strings.CutSuffix(f, "/…"); ok && strings.HasPrefix(dir, parent+"/") {
				if strings.Contains(r.text, "`"+strings.TrimPrefix(dir, parent+"/")+"`") {
					return true
				}
			}
		}
	}
	return false
}

// goPackages are the folders under the checked ones holding Go files,
// testdata and generated trees left out.
func goPackages(t *testing.T) []string {
	t.Helper()
	var dirs []string
	for _, top := range checked {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(path, ".go") {
				rel, _ := filepath.Rel(root, filepath.Dir(path))
				if !slices.Contains(dirs, rel) {
					dirs = append(dirs, filepath.ToSlash(rel))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return dirs
}

func TestLayoutNamesEveryPackage(t *testing.T) {
	rows := layoutRows(t)
	for _, dir := range goPackages(t) {
		if strings.HasPrefix(dir, "hack/tools/") {
			continue // the tool pins' go.mod folders, one row
		}
		if !named(rows, dir) {
			t.Errorf("%s's layout table does not name %s: add a row (or name it in its parent's row)", layoutPage, dir)
		}
	}
}

func TestLayoutFoldersExist(t *testing.T) {
	for _, r := range layoutRows(t) {
		for _, f := range r.folders {
			f = strings.TrimSuffix(f, "/…")
			if strings.ContainsAny(f, "<*") {
				continue // a pattern, such as cmd/<binary>
			}
			if _, err := os.Stat(filepath.Join(root, f)); err != nil {
				t.Errorf("%s's layout table names %s, which does not exist", layoutPage, f)
			}
		}
	}
}
