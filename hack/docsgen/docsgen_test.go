package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLoadKeys(t *testing.T) {
	keys, err := loadKeys("testdata/keys")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]key{}
	var names []string
	for _, k := range keys {
		got[k.Name] = k
		names = append(names, k.Name)
	}
	// go/doc's order (blocks, then single declarations by name),
	// constants then variables, unexported left out.
	if want := []string{"AnnotationColour", "LabelShape", "LabelSize", "MaxWidgets", "ReasonBroken", "Prefixes"}; !slices.Equal(names, want) {
		t.Fatalf("keys %v, want %v", names, want)
	}
	for name, want := range map[string]string{
		"AnnotationColour": "example.dev/colour", // computed, not the source text
		"MaxWidgets":       "12",
		"Prefixes":         "example.dev/, k8s.io/",
	} {
		if got[name].Value != want {
			t.Errorf("%s = %q, want %q", name, got[name].Value, want)
		}
	}
	if items := got["Prefixes"].Items; !slices.Equal(items, []string{"example.dev/", "k8s.io/"}) {
		t.Errorf("Prefixes items %q", items)
	}
	// A key without a comment of its own shares the one naming it.
	if d := got["LabelSize"].Doc; !strings.HasPrefix(d, "LabelShape and LabelSize describe") {
		t.Errorf("LabelSize's doc %q, want LabelShape's", d)
	}
	if g := got["LabelSize"].Group; g != "Things of the widget.\n" {
		t.Errorf("LabelSize's group %q", g)
	}
	// A key declared alone has its declaration's comment and no group.
	if k := got["ReasonBroken"]; k.Group != "" || !strings.HasPrefix(k.Doc, "ReasonBroken: the widget") {
		t.Errorf("ReasonBroken: doc %q, group %q", k.Doc, k.Group)
	}
	if f := got["MaxWidgets"].File; f != "keys.go" {
		t.Errorf("MaxWidgets' file %q", f)
	}
}

func TestDocCell(t *testing.T) {
	values := map[string]string{"AnnotationColour": "example.dev/colour", "LabelShape": "example.dev/shape"}
	for in, want := range map[string]string{
		// Constant names become their values, qualified by keys or not;
		// another package's are left alone.
		"AnnotationColour on a widget; see LabelShape and keys.LabelShape, not other.LabelShape.": "`example.dev/colour` on a widget; see `example.dev/shape` and `example.dev/shape`, not other.LabelShape.",
		// Markdown's own characters are escaped, code spans kept.
		"the widget is <broken> | *very* [broken] `a|b <c>` snake_case": "the widget is &lt;broken&gt; \\| \\*very\\* \\[broken\\] `a\\|b <c>` snake\\_case",
		// Paragraphs become line breaks, lines are joined.
		"one\nline\n\ntwo": "one line<br /><br />two",
	} {
		if got := docCell(in, values); got != want {
			t.Errorf("docCell(%q)\n got %q\nwant %q", in, got, want)
		}
	}
}

func TestSectionOf(t *testing.T) {
	for name, want := range map[string]string{
		"AnnotationWeight":               "Annotations",
		"KarmadaAnnotationWorkNamespace": "Karmada's keys",
		"ReasonBlocked":                  "Condition and event reasons",
		"SpanPublish":                    "Trace spans and attributes",
		"ResourceClusterID":              "Trace spans and attributes",
		"Labelled":                       "Other names and values", // a prefix must end at a word
		"ClustersetZone":                 "Other names and values",
	} {
		if got := sections[sectionOf(key{Name: name})].Title; got != want {
			t.Errorf("%s is in %q, want %q", name, got, want)
		}
	}
}

// TestEveryKeyIsDocumented checks the real api/keys: every exported
// constant and variable is on keys.md, and none falls through to no
// description.
func TestEveryKeyIsDocumented(t *testing.T) {
	keys, err := loadKeys("../../api/keys")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) < 50 {
		t.Fatalf("only %d keys in api/keys: the loader is broken", len(keys))
	}
	page := string(renderKeys(keys))
	for _, k := range keys {
		if !strings.Contains(page, "[`"+k.Name+"`]") {
			t.Errorf("%s is not on keys.md", k.Name)
		}
		if strings.TrimSpace(k.Doc) == "" {
			t.Errorf("%s has no doc comment: say what it is in api/keys", k.Name)
		}
	}
}

func TestForeignTypes(t *testing.T) {
	known, err := foreignTypes("../../api")
	if err != nil {
		t.Fatal(err)
	}
	want := knownType{Name: "Duration", Package: "sigs.k8s.io/gateway-api/apis/v1"}
	if !slices.Contains(known, want) {
		t.Errorf("foreign types %v lack %v", known, want)
	}
	for _, k := range known {
		if strings.HasPrefix(k.Package, "k8s.io/") || strings.HasPrefix(k.Package, modulePath) {
			t.Errorf("%v is not foreign", k)
		}
	}
}

func TestKubernetesMinor(t *testing.T) {
	if got, err := kubernetesMinor("v0.37.2"); got != "1.37" || err != nil {
		t.Errorf("kubernetesMinor(v0.37.2) = %q, %v", got, err)
	}
	if _, err := kubernetesMinor("v1.2.3"); err == nil {
		t.Error("kubernetesMinor(v1.2.3): no error")
	}
}

func TestTidy(t *testing.T) {
	in := "\n\n# A  \n\n\n\n| a | x <br /> |\n| b | y<br /> |\ntext\n\n\n"
	want := "# A\n\n| a | x |\n| b | y |\ntext\n"
	if got := string(tidy([]byte(in))); got != want {
		t.Errorf("tidy:\n got %q\nwant %q", got, want)
	}
}

func TestAnchor(t *testing.T) {
	for title, want := range map[string]string{
		"Karmada's keys":              "karmadas-keys",
		"Condition and event reasons": "condition-and-event-reasons",
		"ClusterProperty names":       "clusterproperty-names",
	} {
		if got := anchor(title); got != want {
			t.Errorf("anchor(%q) = %q, want %q", title, got, want)
		}
	}
}

func TestSync(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("same.md", "same\n")
	write("changed.md", "old\n")
	write("gone/stale.md", "stale\n")
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "same.md"), old, old); err != nil {
		t.Fatal(err)
	}
	err := sync(dir, map[string][]byte{
		"same.md":    []byte("same\n"),
		"changed.md": []byte("new\n"),
		"cli/new.md": []byte("new\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"same.md": "same\n", "changed.md": "new\n", "cli/new.md": "new\n"} {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "gone")); !os.IsNotExist(err) {
		t.Errorf("a folder of files no longer generated stays: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "same.md")); err != nil || !fi.ModTime().Equal(old) {
		t.Errorf("an unchanged file was written again: %v", err)
	}
}

func TestHelpFlags(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fake")
	// pflag's --help: "Usage of NAME:", the flags, spaces at line ends.
	script := "#!/bin/sh\nprintf 'Usage of fake:\\n      --a string   the a (default \"x\")  \\n'\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := helpFlags(bin, "fake")
	if err != nil {
		t.Fatal(err)
	}
	if want := "      --a string   the a (default \"x\")\n"; got != want {
		t.Errorf("helpFlags: %q, want %q", got, want)
	}
	if _, err := helpFlags(bin, "other"); err == nil {
		t.Error("a usage line of another name: no error")
	}
}
