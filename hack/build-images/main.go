// Command build-images writes an OCI image layout per fleetnet binary
// (`make images`): the binaries, built static for each platform beforehand
// into <bin-dir>/<os>_<arch>/, on an empty base with CA certificates and a
// non-root user. See internal/imagebuild.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fleetnet/fleetnet/internal/imagebuild"
)

func main() {
	binDir := flag.String("bin-dir", "_output/bin", "where the binaries are, in <os>_<arch>/ subfolders")
	out := flag.String("out", "_output/images", "where each image's OCI layout is written, one folder per binary")
	platforms := flag.String("platforms", "linux/amd64,linux/arm64", "comma-separated os/arch list")
	version := flag.String("version", "dev", "image version (label and the layout's ref name)")
	revision := flag.String("revision", "", "source revision (label)")
	source := flag.String("source", "https://github.com/fleetnet/fleetnet", "source repository (label)")
	created := flag.String("created", "0", "creation time in Unix seconds (SOURCE_DATE_EPOCH: the commit's time)")
	caBundle := flag.String("ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "PEM CA bundle installed in every image (Debian: ca-certificates)")
	flag.Parse()
	if err := run(*binDir, *out, *platforms, *version, *revision, *source, *created, *caBundle, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "build-images:", err)
		os.Exit(1)
	}
}

func run(binDir, out, platforms, version, revision, source, created, caBundle string, names []string) error {
	if len(names) == 0 {
		return fmt.Errorf("name at least one binary")
	}
	secs, err := strconv.ParseInt(created, 10, 64)
	if err != nil {
		return fmt.Errorf("--created=%q: not Unix seconds", created)
	}
	ca, err := os.ReadFile(caBundle)
	if err != nil {
		return fmt.Errorf("--ca-bundle: %w (apt-get install ca-certificates)", err)
	}
	o := imagebuild.Options{Version: version, Revision: revision, Source: source, Created: time.Unix(secs, 0).UTC(), CACertificates: ca}
	for _, name := range names {
		img := imagebuild.Image{Name: name, Binaries: map[string]string{}}
		for _, p := range strings.Split(platforms, ",") {
			img.Binaries[p] = filepath.Join(binDir, strings.ReplaceAll(p, "/", "_"), name)
		}
		idx, err := imagebuild.Build(img, o)
		if err != nil {
			return err
		}
		dir := filepath.Join(out, name)
		if err := imagebuild.WriteLayout(dir, idx, version); err != nil {
			return err
		}
		d, err := idx.Digest()
		if err != nil {
			return err
		}
		fmt.Printf("%-20s %s  %s\n", name, d, dir)
	}
	return nil
}
