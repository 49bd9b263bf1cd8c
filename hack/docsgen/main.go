// Command docsgen writes the references under docs/reference that `make
// docs` generates from the code, so that they never drift from it:
//
//   - api.md, every field of fleetnet's custom resources, by crd-ref-docs
//     from the Go types under api/ (api.go);
//   - keys.md, the labels, annotations, finalizers, condition types and
//     reasons of api/keys, from its constants and their doc comments
//     (keys.go);
//   - cli/, a page per fleetnetctl command, written by cobra's doc package
//     from the command tree, and a page per server binary, from the flags
//     the built binary prints (cli.go);
//   - README.md, the index of all of them (index.go).
//
// The whole tree is written to a temporary folder first, then copied over
// the output folder: a file the code no longer generates is removed, and a
// file whose content is the same is left untouched. Two runs give the same
// bytes; `make verify` fails when the committed files differ.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

func main() {
	root := flag.String("root", ".", "the repository's top folder")
	out := flag.String("out", "docs/reference", "the folder the references are written to (replaced whole)")
	binDir := flag.String("bin-dir", "bin", "the folder of the built fleetnet binaries (make build), whose --help the server pages show")
	crdRefDocs := flag.String("crd-ref-docs", "bin/crd-ref-docs", "the crd-ref-docs binary (make tools)")
	flag.Parse()
	if err := run(*root, *out, *binDir, *crdRefDocs); err != nil {
		fmt.Fprintf(os.Stderr, "docsgen: %v\n", err)
		os.Exit(1)
	}
}

// run generates every reference into a temporary folder and then syncs out
// with it.
func run(root, out, binDir, crdRefDocs string) error {
	tmp, err := os.MkdirTemp("", "docsgen-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	api, err := apiReference(root, crdRefDocs, tmp)
	if err != nil {
		return fmt.Errorf("API reference: %w", err)
	}
	keys, err := loadKeys(filepath.Join(root, "api", "keys"))
	if err != nil {
		return fmt.Errorf("keys reference: %w", err)
	}
	files := map[string][]byte{
		"api.md":  api,
		"keys.md": renderKeys(keys),
	}
	cli, err := cliReference(root, binDir)
	if err != nil {
		return fmt.Errorf("CLI reference: %w", err)
	}
	for _, p := range cli.pages() {
		files[filepath.Join("cli", p.file)] = p.content
	}
	files["README.md"] = renderIndex(cli)
	return sync(out, files)
}

// sync makes folder dir hold exactly files (paths relative to dir): it
// writes those that are missing or differ and removes every other file,
// then the folders left empty.
func sync(dir string, files map[string][]byte) error {
	for name, content := range files {
		path := filepath.Join(dir, name)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, content) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, content, 0o644); err != nil {
			return err
		}
	}
	var dirs []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, path)
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if _, ok := files[rel]; !ok {
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("removing a file no longer generated: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Deepest first, so that a folder emptied by its children goes too.
	slices.Reverse(dirs)
	for _, d := range dirs[:len(dirs)-1] {
		if entries, err := os.ReadDir(d); err == nil && len(entries) == 0 {
			if err := os.Remove(d); err != nil {
				return err
			}
		}
	}
	return nil
}
