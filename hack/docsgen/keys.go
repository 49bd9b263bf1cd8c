package main

import (
	"bytes"
	"cmp"
	"fmt"
	"go/ast"
	"go/constant"
	"go/doc"
	"go/importer"
	"go/printer"
	"go/token"
	"go/types"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// key is one exported constant or variable of api/keys.
type key struct {
	// Name is the Go name: AnnotationWeight.
	Name string
	// Value is what the API sees: fleetnet.dev/weight. A variable's is
	// its Go expression.
	Value string
	// Var says that Value is a variable's, not a constant's.
	Var bool
	// Items are the strings of a variable that is a list of them; Value
	// is then the strings joined by ", ".
	Items []string
	// Doc is the key's doc comment; a key without one takes the comment
	// of the key before it in its block that names it ("PLSApprovalAuto
	// and PLSApprovalManual are ...").
	Doc string
	// Group is the doc comment of the parenthesized block it is declared
	// in, if any: "Condition reasons of ServiceExport that the mcs-api
	// does not define."
	Group string
	// File is the file it is declared in: keys.go.
	File string
}

// loadKeys reads the exported constants and variables of the package in
// dir with their values, as the compiler computes them, and their doc
// comments, in go/doc's order: constants before variables, declaration
// blocks in source order, then single declarations by name.
func loadKeys(dir string) ([]key, error) {
	fset, files, err := parseDir(dir)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no Go files", dir)
	}
	info := &types.Info{Defs: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: importer.Default()}
	if _, err := conf.Check(files[0].Name.Name, fset, files, info); err != nil {
		return nil, fmt.Errorf("type-checking %s: %w", dir, err)
	}
	pkg, err := doc.NewFromFiles(fset, files, modulePath+"/api/keys")
	if err != nil {
		return nil, err
	}
	var keys []key
	add := func(values []*doc.Value, isVar bool) error {
		for _, v := range values {
			grouped := v.Decl.Lparen.IsValid()
			var previous []key // the block's keys so far, for shared comments
			for _, spec := range v.Decl.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if !id.IsExported() {
						continue
					}
					k := key{Name: id.Name, Var: isVar, File: filepath.Base(fset.Position(id.Pos()).Filename)}
					switch {
					case !grouped:
						k.Doc = v.Doc
					case vs.Doc != nil:
						k.Doc = vs.Doc.Text()
						k.Group = v.Doc
					default:
						k.Group = v.Doc
						for _, p := range slices.Backward(previous) {
							if strings.Contains(p.Doc, id.Name) {
								k.Doc = p.Doc
								break
							}
						}
					}
					obj := info.Defs[id]
					switch obj := obj.(type) {
					case *types.Const:
						k.Value = constantString(obj.Val())
					case *types.Var:
						if i >= len(vs.Values) {
							return fmt.Errorf("%s has no value of its own", id.Name)
						}
						items, expr, err := varValue(vs.Values[i])
						if err != nil {
							return fmt.Errorf("%s: %w", id.Name, err)
						}
						k.Items, k.Value = items, expr
						if items != nil {
							k.Value = strings.Join(items, ", ")
						}
					default:
						return fmt.Errorf("%s: not a constant or variable", id.Name)
					}
					previous = append(previous, k)
					keys = append(keys, k)
				}
			}
		}
		return nil
	}
	if err := add(pkg.Consts, false); err != nil {
		return nil, err
	}
	if err := add(pkg.Vars, true); err != nil {
		return nil, err
	}
	return keys, nil
}

// varValue is a variable's value as the page shows it: the strings of a
// slice of string literals, or any other expression in Go syntax.
func varValue(e ast.Expr) (items []string, expr string, err error) {
	if lit, ok := e.(*ast.CompositeLit); ok {
		var items []string
		for _, elt := range lit.Elts {
			bl, ok := elt.(*ast.BasicLit)
			if !ok || bl.Kind != token.STRING {
				items = nil
				break
			}
			s, err := strconv.Unquote(bl.Value)
			if err != nil {
				return nil, "", err
			}
			items = append(items, s)
		}
		if items != nil {
			return items, "", nil
		}
	}
	var b bytes.Buffer
	if err := printer.Fprint(&b, token.NewFileSet(), e); err != nil {
		return nil, "", err
	}
	return nil, b.String(), nil
}

// constantString is a constant's value as it appears in an object: a
// string unquoted, anything else in Go syntax.
func constantString(v constant.Value) string {
	if v.Kind() == constant.String {
		return constant.StringVal(v)
	}
	return v.ExactString()
}

// A section is a kind of key, told by its constant's name: a name
// starting with Prefix (and a capital letter or its end) is of the
// section. Keys of no section go to the last, "Other names and values".
type section struct {
	Prefixes []string
	Title    string
	Intro    string
}

// sections are keys.md's sections, in page order.
var sections = []section{
	// First: Karmada's keys are annotations and names too, but Karmada's.
	{[]string{"Karmada"}, "Karmada's keys", "Keys of Karmada, not fleetnet's: fleetnet-discovery's kubernetes pool source reads them with `--slice-selection=karmada`."},
	{[]string{"Annotation"}, "Annotations", "Annotations fleetnet reads from the objects users write, or writes on the objects it manages."},
	{[]string{"Label"}, "Labels", "Labels fleetnet reads or sets."},
	{[]string{"Finalizer"}, "Finalizers", "Finalizers fleetnet sets, and what they wait for."},
	{[]string{"Property"}, "ClusterProperty names", "Names of ClusterProperty objects (`about.k8s.io`) that fleetnet reads, besides KEP-2149's `cluster.clusterset.k8s.io` and `clusterset.k8s.io`."},
	{[]string{"Condition"}, "Condition types", "Condition types fleetnet sets beside those the Multi-Cluster Services API and the Gateway API define."},
	{[]string{"Reason"}, "Condition and event reasons", "Reasons of the conditions and events fleetnet writes, beside those the Multi-Cluster Services API and the Gateway API define: what `kubectl describe` and `kubectl get events` show."},
	{[]string{"FieldManager"}, "Field managers", "Server-side apply field managers: who owns which fields in `kubectl get -o yaml --show-managed-fields`."},
	{[]string{"Tag"}, "Azure resource tags", "Tags on Azure resources: fleetnet's on what it creates, and those it reads."},
	{[]string{"Span", "Attribute", "Resource"}, "Trace spans and attributes", "OpenTelemetry span names and attribute keys of an export's path (`--otlp-endpoint`)."},
	{nil, "Other names and values", "Names and values fleetnet uses that are none of the above."},
}

// sectionOf returns the index in sections of the key's section.
func sectionOf(k key) int {
	for i, s := range sections {
		for _, p := range s.Prefixes {
			rest, ok := strings.CutPrefix(k.Name, p)
			if ok && (rest == "" || rest[0] >= 'A' && rest[0] <= 'Z') {
				return i
			}
		}
	}
	return len(sections) - 1
}

// renderKeys writes keys.md: a section per kind of key; in a section, the
// keys declared alone first, then those of each declaration block under
// the first sentence of the block's doc comment, in source order; in each
// table, keys sorted by value.
func renderKeys(keys []key) []byte {
	var b bytes.Buffer
	b.WriteString(`# Labels, annotations and other keys

<!-- Generated by ` + "`make docs`" + ` (hack/docsgen) from api/keys. Do not edit. -->

Every label, annotation, finalizer, condition type, reason and other name
that fleetnet reads or writes, generated from the constants of
[` + "`api/keys`" + `](../../api/keys) and their doc comments: the Go code uses these
constants and nothing else. Keys of the Multi-Cluster Services API itself
(` + "`multicluster.kubernetes.io/service-name`" + `, its condition types) are the
mcs-api's; the custom resources' fields are in [api.md](api.md).

`)
	values := map[string]string{}
	for _, k := range keys {
		if !k.Var {
			values[k.Name] = k.Value
		}
	}
	bySection := make([][]key, len(sections))
	for _, k := range keys {
		i := sectionOf(k)
		bySection[i] = append(bySection[i], k)
	}
	for i, s := range sections {
		if len(bySection[i]) > 0 {
			fmt.Fprintf(&b, "- [%s](#%s)\n", s.Title, anchor(s.Title))
		}
	}
	for i, s := range sections {
		if len(bySection[i]) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n## %s\n\n%s\n", s.Title, s.Intro)
		// Keys arrive in declaration order, so groups do too; "" (keys
		// declared alone) goes first.
		groups := []string{""}
		byGroup := map[string][]key{}
		for _, k := range bySection[i] {
			g := synopsis(k.Group)
			if _, ok := byGroup[g]; !ok && g != "" {
				groups = append(groups, g)
			}
			byGroup[g] = append(byGroup[g], k)
		}
		for _, g := range groups {
			ks := byGroup[g]
			if len(ks) == 0 {
				continue
			}
			if g != "" {
				fmt.Fprintf(&b, "\n_%s_\n", docCell(g, values))
			}
			slices.SortStableFunc(ks, func(a, b key) int {
				return cmp.Or(strings.Compare(a.Value, b.Value), strings.Compare(a.Name, b.Name))
			})
			b.WriteString("\n| Key | Description | Constant |\n| --- | --- | --- |\n")
			for _, k := range ks {
				fmt.Fprintf(&b, "| %s | %s | [`%s`](../../api/keys/%s) |\n", keyCell(k), docCell(k.Doc, values), k.Name, k.File)
			}
		}
	}
	return b.Bytes()
}

// synopsis is the first sentence of a doc comment, as go doc shows it.
var synopsis = new(doc.Package).Synopsis

// keyCell is the Key column of a key: its value as code, or each string
// of a list.
func keyCell(k key) string {
	if k.Items == nil {
		return codeSpan(k.Value)
	}
	cells := make([]string, len(k.Items))
	for i, item := range k.Items {
		cells[i] = codeSpan(item)
	}
	return strings.Join(cells, ", ")
}

// identifier finds Go identifiers, with the package they are qualified
// by, in doc text.
var identifier = regexp.MustCompile(`\b(?:([A-Za-z_][A-Za-z0-9_]*)\.)?([A-Za-z_][A-Za-z0-9_]*)\b`)

// docCell turns a doc comment into the text of one table cell: the names
// of constants (AnnotationExportTo, keys.PropertyNetwork) become their
// values in code spans, paragraphs are joined by line breaks, and
// Markdown's special characters are escaped outside code spans.
func docCell(text string, values map[string]string) string {
	var paras []string
	for p := range strings.SplitSeq(strings.TrimSpace(text), "\n\n") {
		if p = strings.Join(strings.Fields(p), " "); p != "" {
			paras = append(paras, p)
		}
	}
	var out []string
	for _, p := range paras {
		var b strings.Builder
		// Outside code spans (odd parts are inside).
		for j, part := range strings.Split(p, "`") {
			if j%2 == 1 {
				b.WriteString("`" + strings.ReplaceAll(part, "|", `\|`) + "`")
				continue
			}
			last := 0
			for _, m := range identifier.FindAllStringSubmatchIndex(part, -1) {
				qualifier, name := "", part[m[4]:m[5]]
				if m[2] >= 0 {
					qualifier = part[m[2]:m[3]]
				}
				v, ok := values[name]
				if !ok || (qualifier != "" && qualifier != "keys") {
					continue
				}
				b.WriteString(escapeMarkdown(part[last:m[0]]))
				b.WriteString(codeSpan(v))
				last = m[1]
			}
			b.WriteString(escapeMarkdown(part[last:]))
		}
		out = append(out, b.String())
	}
	return strings.Join(out, "<br /><br />")
}

// markdownSpecial escapes what Markdown (GitHub's, in a table cell) would
// take for markup in plain text.
var markdownSpecial = strings.NewReplacer(`\`, `\\`, `|`, `\|`, `*`, `\*`, `<`, `&lt;`, `>`, `&gt;`, `[`, `\[`, `]`, `\]`, "_", `\_`)

func escapeMarkdown(s string) string { return markdownSpecial.Replace(s) }

// codeSpan writes s as a Markdown code span in a table cell.
func codeSpan(s string) string {
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	s = strings.ReplaceAll(s, "|", `\|`)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " "
	}
	return fence + s + fence
}

// anchor is the id GitHub gives a heading.
func anchor(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}
