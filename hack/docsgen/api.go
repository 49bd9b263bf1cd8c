package main

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// templates are crd-ref-docs' markdown templates as fleetnet renders them
// (templates/markdown/*.tpl).
//
//go:embed templates
var templates embed.FS

// modulePath is fleetnet's module: its types are documented on the page,
// every other module's are linked.
const modulePath = "github.com/fleetnet/fleetnet"

// crdRefDocsConfig is crd-ref-docs' configuration file (YAML, which JSON
// is).
type crdRefDocsConfig struct {
	Processor struct {
		IgnoreTypes  []string `json:"ignoreTypes"`
		IgnoreFields []string `json:"ignoreFields"`
	} `json:"processor"`
	Render struct {
		KubernetesVersion string      `json:"kubernetesVersion"`
		KnownTypes        []knownType `json:"knownTypes"`
	} `json:"render"`
}

// knownType is a type of another module that crd-ref-docs links to
// instead of documenting it.
type knownType struct {
	Name    string `json:"name"`
	Package string `json:"package"`
	Link    string `json:"link"`
}

// apiReference runs crd-ref-docs on the API groups under root/api (the
// packages with a +groupName marker) and returns its page, tidied.
// Kubernetes' own types link to the API reference of the Kubernetes
// version of go.mod's k8s.io/api; other modules' types to their
// pkg.go.dev page at the version go.mod resolves.
func apiReference(root, crdRefDocs, tmp string) ([]byte, error) {
	known, err := foreignTypes(filepath.Join(root, "api"))
	if err != nil {
		return nil, err
	}
	var pkgs []string
	for _, k := range known {
		pkgs = append(pkgs, k.Package)
	}
	mods, err := modules(root, append(slices.Compact(slices.Sorted(slices.Values(pkgs))), "k8s.io/api/core/v1"))
	if err != nil {
		return nil, err
	}
	var cfg crdRefDocsConfig
	// List types are the kinds' collections: nothing to say of their own.
	cfg.Processor.IgnoreTypes = []string{"List$"}
	cfg.Processor.IgnoreFields = []string{"TypeMeta$"}
	kube, err := kubernetesMinor(mods["k8s.io/api/core/v1"].Version)
	if err != nil {
		return nil, err
	}
	cfg.Render.KubernetesVersion = kube
	for _, k := range known {
		m := mods[k.Package]
		k.Link = fmt.Sprintf("https://pkg.go.dev/%s@%s%s#%s", m.Path, m.Version, strings.TrimPrefix(k.Package, m.Path), k.Name)
		cfg.Render.KnownTypes = append(cfg.Render.KnownTypes, k)
	}
	config, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, err
	}
	configFile := filepath.Join(tmp, "crd-ref-docs.yaml")
	if err := os.WriteFile(configFile, config, 0o644); err != nil {
		return nil, err
	}
	tplDir := filepath.Join(tmp, "templates")
	if err := os.CopyFS(tplDir, templates); err != nil {
		return nil, fmt.Errorf("writing the templates: %w", err)
	}
	outFile := filepath.Join(tmp, "api.md")
	cmd := exec.Command(crdRefDocs, "--source-path="+filepath.Join(root, "api"), "--config="+configFile,
		"--renderer=markdown", "--templates-dir="+filepath.Join(tplDir, "templates", "markdown"),
		"--output-mode=single", "--output-path="+outFile, "--log-level=WARN")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", crdRefDocs, err, stderr.Bytes())
	}
	page, err := os.ReadFile(outFile)
	if err != nil {
		return nil, err
	}
	return tidy(page), nil
}

// foreignTypes are the types of other modules that the API groups' Go
// types name (gwv1.Duration), Kubernetes' own left out: crd-ref-docs links
// those itself.
func foreignTypes(apiDir string) ([]knownType, error) {
	var known []knownType
	err := filepath.WalkDir(apiDir, func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		_, files, err := parseDir(dir)
		if err != nil || !hasGroupName(files) {
			return err
		}
		for _, f := range files {
			imports := map[string]string{}
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				name := filepath.Base(path)
				if imp.Name != nil {
					name = imp.Name.Name
				}
				imports[name] = path
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				x, ok := sel.X.(*ast.Ident)
				if !ok {
					return true
				}
				path, ok := imports[x.Name]
				if !ok || strings.HasPrefix(path, modulePath+"/") || strings.HasPrefix(path, "k8s.io/") || !strings.Contains(path, ".") {
					return true
				}
				if ast.IsExported(sel.Sel.Name) {
					known = append(known, knownType{Name: sel.Sel.Name, Package: path})
				}
				return true
			})
		}
		return nil
	})
	slices.SortFunc(known, func(a, b knownType) int {
		return strings.Compare(a.Package+"."+a.Name, b.Package+"."+b.Name)
	})
	return slices.Compact(known), err
}

// parseDir parses the Go files of dir but its tests and generated code,
// in the order of their names.
func parseDir(dir string) (*token.FileSet, []*ast.File, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, nil, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") || strings.HasPrefix(filepath.Base(name), "zz_generated") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, nil, err
		}
		files = append(files, f)
	}
	return fset, files, nil
}

// hasGroupName says whether a package is an API group version: its doc
// comment carries +groupName, which crd-ref-docs documents.
func hasGroupName(files []*ast.File) bool {
	for _, f := range files {
		if f.Doc != nil && strings.Contains(f.Doc.Text(), "+groupName=") {
			return true
		}
		// Markers often sit in a comment of their own above the package
		// clause, which is not the package's doc.
		for _, c := range f.Comments {
			if c.Pos() < f.Package && strings.Contains(c.Text(), "+groupName=") {
				return true
			}
		}
	}
	return false
}

// module is the module of a package as go list reports it.
type module struct {
	Path    string
	Version string
}

// modules reports the module, and its version in the build list of root's
// go.mod, of each package.
func modules(root string, pkgs []string) (map[string]module, error) {
	cmd := exec.Command("go", append([]string{"list", "-f", "{{.ImportPath}} {{.Module.Path}} {{.Module.Version}}"}, pkgs...)...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w\n%s", err, stderr.Bytes())
	}
	mods := map[string]module{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("go list: unexpected line %q", line)
		}
		mods[f[0]] = module{Path: f[1], Version: f[2]}
	}
	return mods, nil
}

// kubernetesMinor turns the version of k8s.io/api (v0.37.2) into the
// Kubernetes release whose API reference crd-ref-docs links (1.37).
func kubernetesMinor(v string) (string, error) {
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if len(parts) < 2 || parts[0] != "0" {
		return "", fmt.Errorf("k8s.io/api version %q is not v0.MINOR.PATCH", v)
	}
	return "1." + parts[1], nil
}

// cellEndBreak is a line break at the end of a table cell.
var cellEndBreak = regexp.MustCompile(`\s*<br />\s*\|`)

// tidy trims trailing spaces and the line break that ends a cell, keeps at
// most one blank line in a row (crd-ref-docs' templates leave many),
// outside and inside code blocks alike, and ends the page with one
// newline.
func tidy(page []byte) []byte {
	var b bytes.Buffer
	blank := true // no blank line at the top
	for line := range strings.Lines(string(page)) {
		line = strings.TrimRight(line, " \t\r\n")
		// A table cell's list of validations ends with a line break.
		line = cellEndBreak.ReplaceAllString(line, " |")
		if line == "" {
			if blank {
				continue
			}
			blank = true
		} else {
			blank = false
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return append(bytes.TrimRight(b.Bytes(), "\n"), '\n')
}
