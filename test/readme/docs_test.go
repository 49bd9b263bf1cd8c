package readme_test

// The checks of issue 51 §4 on README.md and docs/:
//
//   - TestLinksResolve: every relative link and image in README.md,
//     CHANGELOG.md and docs/**/*.md points at a file or folder of the repository that
//     exists, and every #anchor at a heading (GitHub's slugs) or an
//     <a id>/<a name> of the page it names. (A link out of the repository,
//     to the workspace's ../shared/design.md, is not checked.)
//   - TestGuideCommandsAreReal: in the ```sh blocks of README.md and
//     docs/guide/, each `make X` names a target of the Makefile, and each
//     `fleetnetctl a b --flag` an existing subcommand and flag, found by
//     walking fleetnetctl's command tree in this process.
//   - TestMakeTargetsPage: docs/guide/make-targets.md has a row for every
//     target the Makefile documents (a `## ` help text) and names no other.
//
// What these tests do not do is run the commands: most need root, real
// clusters or minutes of building. The local-fleet task of the guide
// (docs/guide/tasks/try-locally.md) is `sudo make demo`, which CI
// (.ci/run) runs end to end on a fresh machine after `make test`, so a
// demo that stops working fails CI there.

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/fleetnet/fleetnet/internal/ctl"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// markdownPages are README.md, CHANGELOG.md and every .md file under
// docs/, as paths relative to root with forward slashes.
func markdownPages(t *testing.T) []string {
	t.Helper()
	pages := []string{"README.md", "CHANGELOG.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			pages = append(pages, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pages
}

// mdLine is one line of a Markdown page outside or inside a fenced code
// block.
type mdLine struct {
	n    int    // 1-based line number
	text string // the line as written
	// fence is the info string of the fenced block the line is in ("sh",
	// "yaml", ...; "" for a block without one); inFence says whether it is
	// in one at all. Fence lines themselves are not returned.
	fence   string
	inFence bool
}

var fenceOpen = regexp.MustCompile("^\\s*(```+|~~~+)\\s*([^`\\s]*)")

// readLines reads page (relative to root) into lines marked with the
// fenced block they are in.
func readLines(t *testing.T, page string) []mdLine {
	t.Helper()
	f, err := os.Open(filepath.Join(root, filepath.FromSlash(page)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		out    []mdLine
		marker string // the open fence's marker, "" outside
		info   string
		n      int
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		n++
		line := sc.Text()
		if m := fenceOpen.FindStringSubmatch(line); m != nil {
			switch {
			case marker == "":
				marker, info = m[1], m[2]
				continue
			case strings.HasPrefix(strings.TrimSpace(line), marker) && strings.TrimSpace(strings.Trim(strings.TrimSpace(line), marker[:1])) == "":
				marker, info = "", ""
				continue
			}
		}
		out = append(out, mdLine{n: n, text: line, fence: info, inFence: marker != ""})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if marker != "" {
		t.Errorf("%s: a fenced code block (%s) is never closed", page, marker)
	}
	return out
}

var (
	// codeSpan is inline code, whose text is not Markdown.
	codeSpan = regexp.MustCompile("`+[^`]*`+")
	// inlineLink is [text](target) or ![alt](target), with an optional
	// title after the target.
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	// refDefinition is a reference-style link's definition: [label]: target.
	refDefinition = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$`)
	// htmlRef is an HTML src= or href= attribute.
	htmlRef = regexp.MustCompile(`(?:src|href)="([^"]*)"`)
	// htmlAnchor is an explicit anchor: <a id="x"> or <a name="x">.
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	// atxHeading is a "# heading" line.
	atxHeading = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	// mdLinkText turns [text](target) into text inside a heading.
	mdLinkText = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTag    = regexp.MustCompile(`<[^>]+>`)
)

// link is one relative link found on a page.
type link struct {
	page   string
	line   int
	target string
}

// pageLinks returns the links of page that point into the repository:
// not URLs with a scheme, not mail addresses.
func pageLinks(t *testing.T, page string) []link {
	t.Helper()
	var out []link
	for _, l := range readLines(t, page) {
		if l.inFence {
			continue
		}
		text := codeSpan.ReplaceAllString(l.text, "")
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(text, -1) {
			targets = append(targets, m[1])
		}
		if m := refDefinition.FindStringSubmatch(text); m != nil {
			targets = append(targets, m[1])
		}
		for _, m := range htmlRef.FindAllStringSubmatch(text, -1) {
			targets = append(targets, m[1])
		}
		for _, target := range targets {
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			out = append(out, link{page: page, line: l.n, target: target})
		}
	}
	return out
}

// slug is GitHub's anchor for a heading's text: lower case, letters,
// digits, marks, '_' and '-' kept, spaces made '-', everything else
// dropped (github-slugger), after the Markdown is rendered to text.
func slug(heading string) string {
	heading = mdLinkText.ReplaceAllString(heading, "$1")
	heading = htmlTag.ReplaceAllString(heading, "")
	heading = strings.ReplaceAll(heading, "`", "")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.M, r) || unicode.Is(unicode.Pc, r) || r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// anchors returns the anchors a page offers: each heading's slug (a
// repeated one numbered -1, -2, … as GitHub does) and explicit <a id>s.
func anchors(t *testing.T, page string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range readLines(t, page) {
		if l.inFence {
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(l.text, -1) {
			out[m[1]] = true
		}
		m := atxHeading.FindStringSubmatch(l.text)
		if m == nil {
			continue
		}
		s := slug(m[2])
		if k := seen[s]; k > 0 {
			out[fmt.Sprintf("%s-%d", s, k)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// TestLinksResolve: every relative link in README.md and docs/ names a
// file or folder that exists, and its #anchor a heading of that page.
func TestLinksResolve(t *testing.T) {
	pages := markdownPages(t)
	if len(pages) < 10 {
		t.Fatalf("found only %d Markdown pages: the walk is broken", len(pages))
	}
	cache := map[string]map[string]bool{}
	checked := 0
	for _, page := range pages {
		for _, l := range pageLinks(t, page) {
			checked++
			file, anchor, _ := strings.Cut(l.target, "#")
			file = strings.SplitN(file, "?", 2)[0]
			target := page
			if file != "" {
				if strings.HasPrefix(file, "/") {
					t.Errorf("%s:%d: link %q is absolute: GitHub resolves it against the site, not the repository; make it relative", l.page, l.line, l.target)
					continue
				}
				target = path.Clean(path.Join(path.Dir(page), file))
				if target == ".." || strings.HasPrefix(target, "../") {
					// Outside the repository: the workspace's shared
					// design (../shared/design.md), which a checkout
					// alone may not have. Not checked.
					continue
				}
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(target))); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", l.page, l.line, l.target, target)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(target, ".md") {
				t.Errorf("%s:%d: link %q has an anchor into %s, which is not a Markdown page", l.page, l.line, l.target, target)
				continue
			}
			if cache[target] == nil {
				cache[target] = anchors(t, target)
			}
			if !cache[target][anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading whose anchor is #%s", l.page, l.line, l.target, target, anchor)
			}
		}
	}
	if checked < 50 {
		t.Errorf("checked only %d links: the scan is broken", checked)
	}
}

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Pool sources (`--pool-source`)":                         "pool-sources---pool-source",
		"mcs-api conformance specs (KEP-1645)":                   "mcs-api-conformance-specs-kep-1645",
		"East-west gateways (fleetnet-edge `--eastwest-listen`)": "east-west-gateways-fleetnet-edge---eastwest-listen",
		"The [console](x.md)'s pages":                            "the-consoles-pages",
		"Symptom: `fleetnetctl diagnose` says ✗":                 "symptom-fleetnetctl-diagnose-says-",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// shellCommand is one simple command of a ```sh block.
type shellCommand struct {
	page string
	line int
	args []string
}

var heredoc = regexp.MustCompile(`<<-?\s*['"]?([A-Za-z_][A-Za-z0-9_]*)['"]?`)

// shellBlocks returns the simple commands of the ```sh (or bash, shell)
// blocks of page: continuation lines joined, here-documents' bodies and
// comments left out, split at ; && || | and &.
func shellBlocks(t *testing.T, page string) []shellCommand {
	t.Helper()
	var (
		out     []shellCommand
		pending string // a line continued with a trailing backslash
		start   int
		endDoc  string // the here-document's delimiter while in its body
	)
	for _, l := range readLines(t, page) {
		if !l.inFence || (l.fence != "sh" && l.fence != "bash" && l.fence != "shell") {
			continue
		}
		if endDoc != "" {
			if strings.TrimSpace(l.text) == endDoc {
				endDoc = ""
			}
			continue
		}
		if pending == "" {
			start = l.n
		}
		text := l.text
		if strings.HasSuffix(text, `\`) {
			pending += strings.TrimSuffix(text, `\`) + " "
			continue
		}
		text, pending = pending+text, ""
		if m := heredoc.FindStringSubmatch(strings.ReplaceAll(text, "<<<", "   ")); m != nil {
			endDoc = m[1]
		}
		for _, args := range splitShell(text) {
			out = append(out, shellCommand{page: page, line: start, args: args})
		}
	}
	return out
}

// splitShell splits a shell line into simple commands' words: quotes
// kept together (and taken off), a comment dropped, the operators ; && ||
// | & ( ) ending a command.
func splitShell(line string) [][]string {
	var (
		cmds  [][]string
		words []string
		word  strings.Builder
		inW   bool
		quote rune
	)
	endWord := func() {
		if inW {
			words = append(words, word.String())
			word.Reset()
			inW = false
		}
	}
	endCmd := func() {
		endWord()
		if len(words) > 0 {
			cmds = append(cmds, words)
		}
		words = nil
	}
	rs := []rune(line)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				word.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inW = r, true
		case r == '#' && !inW:
			endCmd()
			return cmds
		case r == ' ' || r == '\t':
			endWord()
		case r == ';' || r == '|' || r == '&' || r == '(' || r == ')':
			if r == '(' && i > 0 && rs[i-1] == '$' {
				// $(...): a command of its own, not checked; keep it in the word.
				depth := 0
				for ; i < len(rs); i++ {
					word.WriteRune(rs[i])
					if rs[i] == '(' {
						depth++
					} else if rs[i] == ')' {
						depth--
						if depth == 0 {
							break
						}
					}
				}
				continue
			}
			endCmd()
		default:
			word.WriteRune(r)
			inW = true
		}
	}
	endCmd()
	return cmds
}

var envAssignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// program drops what comes before the program a command runs: variable
// assignments, sudo, shell keywords, nice -n N, time, env.
func program(args []string) []string {
	for len(args) > 0 {
		switch a := args[0]; {
		case envAssignment.MatchString(a):
			args = args[1:]
		case a == "sudo" || a == "do" || a == "then" || a == "else" || a == "time" || a == "env" || a == "exec" || a == "!":
			args = args[1:]
		case a == "nice" && len(args) > 2 && args[1] == "-n":
			args = args[3:]
		default:
			return args
		}
	}
	return nil
}

// makeTargets are the targets the Makefile defines, and those it
// documents with a "## " help text.
func makeTargets(t *testing.T) (all, documented map[string]bool) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	all, documented = map[string]bool{}, map[string]bool{}
	rule := regexp.MustCompile(`^([A-Za-z0-9_.%/ -]+):(?:[^=]|$)`)
	for line := range strings.SplitSeq(string(data), "\n") {
		m := rule.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for _, target := range strings.Fields(m[1]) {
			if target == ".PHONY" {
				continue
			}
			all[target] = true
			if strings.Contains(line, "## ") {
				documented[target] = true
			}
		}
	}
	if len(all) < 20 {
		t.Fatalf("found only %d targets in the Makefile: the scan is broken", len(all))
	}
	return all, documented
}

// checkFleetnetctl checks args (after the program's name) against
// fleetnetctl's command tree: the words before the first positional
// argument name subcommands, and every flag exists on the command they
// reach (its own or inherited).
func checkFleetnetctl(root *cobra.Command, args []string) error {
	cmd := root
	positional, informational := false, false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			var f *pflag.Flag
			if strings.HasPrefix(a, "--") {
				f = cmd.Flags().Lookup(name)
				if f == nil {
					f = cmd.InheritedFlags().Lookup(name)
				}
			} else if len(name) == 1 {
				f = cmd.Flags().ShorthandLookup(name)
				if f == nil {
					f = cmd.InheritedFlags().ShorthandLookup(name)
				}
			}
			if f == nil && (name == "help" || name == "h" || (name == "version" && cmd == root)) {
				informational = true // cobra adds these flags when it runs
				continue
			}
			if f == nil {
				return fmt.Errorf("%q has no flag %s", cmd.CommandPath(), a)
			}
			if !hasValue && f.NoOptDefVal == "" {
				i++ // the flag's value is the next word
			}
			continue
		}
		if !positional {
			if sub := findSub(cmd, a); sub != nil {
				cmd = sub
				continue
			}
			if cmd.HasSubCommands() && !cmd.Runnable() {
				return fmt.Errorf("%q has no subcommand %q", cmd.CommandPath(), a)
			}
		}
		positional = true
	}
	if cmd.HasSubCommands() && !cmd.Runnable() && !informational {
		return fmt.Errorf("%q needs a subcommand", cmd.CommandPath())
	}
	return nil
}

func findSub(cmd *cobra.Command, name string) *cobra.Command {
	for _, c := range cmd.Commands() {
		if c.Name() == name || slices.Contains(c.Aliases, name) {
			return c
		}
	}
	return nil
}

// guidePages are the pages whose ```sh blocks are checked: README.md and
// docs/guide/.
func guidePages(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, p := range markdownPages(t) {
		if p == "README.md" || strings.HasPrefix(p, "docs/guide/") {
			out = append(out, p)
		}
	}
	return out
}

// TestGuideCommandsAreReal: each make and fleetnetctl command of the
// guide's ```sh blocks names a real target, or subcommand and flags.
func TestGuideCommandsAreReal(t *testing.T) {
	targets, _ := makeTargets(t)
	tree := ctl.NewRootCommand()
	var makes, ctls int
	for _, page := range guidePages(t) {
		for _, c := range shellBlocks(t, page) {
			args := program(c.args)
			if len(args) == 0 {
				continue
			}
			switch {
			case args[0] == "make":
				makes++
				for _, a := range args[1:] {
					if strings.HasPrefix(a, "-") || envAssignment.MatchString(a) {
						continue
					}
					if !targets[a] {
						t.Errorf("%s:%d: make %s: the Makefile has no target %q", c.page, c.line, strings.Join(args[1:], " "), a)
					}
				}
			case path.Base(args[0]) == "fleetnetctl":
				ctls++
				if err := checkFleetnetctl(tree, args[1:]); err != nil {
					t.Errorf("%s:%d: %s: %v", c.page, c.line, strings.Join(args, " "), err)
				}
			case len(args) > 2 && args[0] == "go" && args[1] == "run" && strings.TrimSuffix(args[2], "/") == "./cmd/fleetnetctl":
				ctls++
				if err := checkFleetnetctl(tree, args[3:]); err != nil {
					t.Errorf("%s:%d: %s: %v", c.page, c.line, strings.Join(args, " "), err)
				}
			}
		}
	}
	if makes < 5 || ctls < 20 {
		t.Errorf("found %d make and %d fleetnetctl commands in the guide's sh blocks: the scan is broken", makes, ctls)
	}
}

// TestCheckFleetnetctl keeps the command check honest: it refuses what
// fleetnetctl would refuse.
func TestCheckFleetnetctl(t *testing.T) {
	tree := ctl.NewRootCommand()
	for _, tc := range []struct {
		line string
		ok   bool
	}{
		{"fleet join --hub-context hub --context east --region eu-central-1", true},
		{"diagnose hub/demo/echo --registry 127.0.0.1:17402 --hub hub", true},
		{"registry clusters --registry=r:7443 --cert-file c --key-file k", true},
		{"dev logs east/agent -f", true},
		{"dev up --ha", true},
		{"--version", true},
		{"fleet joins --context east", false},
		{"fleet join --no-such-flag x", false},
		{"fleet", false},
		{"registry clusters --region x", false},
	} {
		err := checkFleetnetctl(tree, strings.Fields(tc.line))
		if (err == nil) != tc.ok {
			t.Errorf("fleetnetctl %s: error %v, want ok=%v", tc.line, err, tc.ok)
		}
	}
}

func TestSplitShell(t *testing.T) {
	got := splitShell(`sudo make demo   # a comment; make nothing`)
	if len(got) != 1 || strings.Join(got[0], " ") != "sudo make demo" {
		t.Errorf("comment: %q", got)
	}
	got = splitShell(`kubectl apply -f - <<<'{"a":"b; c"}' && bin/fleetnetctl dev status | grep console:`)
	if len(got) != 3 || got[1][0] != "bin/fleetnetctl" || got[0][3] != "-" {
		t.Errorf("operators and quotes: %q", got)
	}
	got = splitShell(`export X=$(kubectl get svc -o name); make build`)
	if len(got) != 2 || got[1][1] != "build" {
		t.Errorf("command substitution: %q", got)
	}
}

// TestMakeTargetsPage: the make targets page has a row for every target
// the Makefile documents, and its rows name real targets.
func TestMakeTargetsPage(t *testing.T) {
	const page = "docs/guide/make-targets.md"
	all, documented := makeTargets(t)
	row := regexp.MustCompile("^\\| `make ([^`]+)`")
	listed := map[string]bool{}
	for _, l := range readLines(t, page) {
		if l.inFence {
			continue
		}
		m := row.FindStringSubmatch(l.text)
		if m == nil {
			continue
		}
		for _, target := range strings.Fields(m[1]) {
			if envAssignment.MatchString(target) {
				continue
			}
			listed[target] = true
			if !all[target] {
				t.Errorf("%s:%d lists make %s, which the Makefile does not define", page, l.n, target)
			}
		}
	}
	for target := range documented {
		if !listed[target] {
			t.Errorf("the Makefile documents target %q (a ## help text); add a row for it to %s", target, page)
		}
	}
}
