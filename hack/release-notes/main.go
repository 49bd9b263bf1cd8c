// Command release-notes finishes a release in make release: it prints the
// CHANGELOG.md section of the version (the release notes), and rewrites
// the chart archives helm packaged so that two runs give the same bytes
// (helm stamps each file with the time it packaged it).
package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() {
	changelog := flag.String("changelog", "CHANGELOG.md", "the changelog, one '## vX.Y.Z' section per release")
	version := flag.String("version", "", "the release, e.g. v0.1.0")
	charts := flag.String("normalize-charts", "", "folder of .tgz charts to rewrite with fixed times")
	created := flag.String("created", "0", "the time files are stamped with, Unix seconds (the commit's: SOURCE_DATE_EPOCH)")
	flag.Parse()
	if err := run(*changelog, *version, *charts, *created, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "release-notes: %v\n", err)
		os.Exit(1)
	}
}

func run(changelog, version, charts, created string, out io.Writer) error {
	secs, err := strconv.ParseInt(created, 10, 64)
	if err != nil {
		return fmt.Errorf("--created=%q: not Unix seconds", created)
	}
	if charts != "" {
		files, err := filepath.Glob(filepath.Join(charts, "*.tgz"))
		if err != nil {
			return err
		}
		for _, f := range files {
			if err := normalize(f, time.Unix(secs, 0).UTC()); err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
		}
	}
	notes, err := section(changelog, version)
	if err != nil {
		return err
	}
	_, err = io.WriteString(out, notes)
	return err
}

// section is the text of changelog's "## version" section, heading
// included, up to the next "## ".
func section(changelog, version string) (string, error) {
	f, err := os.Open(changelog)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var b strings.Builder
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			if in {
				break
			}
			fields := strings.Fields(line)
			in = len(fields) > 1 && fields[1] == version
		}
		if in {
			b.WriteString(line + "\n")
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	if b.Len() == 0 {
		return "", fmt.Errorf("%s has no '## %s' section", changelog, version)
	}
	return strings.TrimRight(b.String(), "\n") + "\n", nil
}

// normalize rewrites a gzipped tar with every entry stamped at t, owned by
// 0:0, and a gzip header without name or time.
func normalize(path string, t time.Time) error {
	in, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	zr, err := gzip.NewReader(bytes.NewReader(in))
	if err != nil {
		return err
	}
	var out bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&out, gzip.BestCompression)
	tw := tar.NewWriter(zw)
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		h.ModTime, h.AccessTime, h.ChangeTime = t, time.Time{}, time.Time{}
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, out.Bytes(), 0o644)
}
