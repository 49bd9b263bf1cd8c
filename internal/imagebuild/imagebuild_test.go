package imagebuild

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// hello builds testdata/hello, static, for each platform.
func hello(t *testing.T, platforms ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range platforms {
		goos, goarch, _ := strings.Cut(p, "/")
		bin := filepath.Join(t.TempDir(), "hello")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w -buildid=", "-o", bin, "./testdata/hello")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building hello for %s: %v\n%s", p, err, b)
		}
		out[p] = bin
	}
	return out
}

var created = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func options() Options {
	return Options{Version: "v0.1.0", Revision: "abc123", Source: "https://github.com/fleetnet/fleetnet", Created: created,
		CACertificates: []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")}
}

// The same inputs give the same digest, written twice to a layout; other
// inputs give another.
func TestReproducible(t *testing.T) {
	img := Image{Name: "hello", Binaries: hello(t, "linux/amd64", "linux/arm64")}
	digest := func(o Options) (v1.Hash, []byte) {
		idx, err := Build(img, o)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "layout")
		if err := WriteLayout(dir, idx, o.Version); err != nil {
			t.Fatal(err)
		}
		index, err := os.ReadFile(filepath.Join(dir, "index.json"))
		if err != nil {
			t.Fatal(err)
		}
		d, err := idx.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d, index
	}
	first, firstIndex := digest(options())
	again, againIndex := digest(options())
	if first != again || !bytes.Equal(firstIndex, againIndex) {
		t.Errorf("two builds of the same inputs: %s and %s\n%s\n%s", first, again, firstIndex, againIndex)
	}
	later := options()
	later.Created = created.Add(time.Second)
	if other, _ := digest(later); other == first {
		t.Errorf("another creation time gives the same digest %s", first)
	}
}

// What a node runs: per platform, the binary at the entrypoint, user
// 65532, the labels, the CA bundle; read back from the layout as skopeo or
// containerd would.
func TestContent(t *testing.T) {
	bins := hello(t, "linux/amd64", "linux/arm64")
	idx, err := Build(Image{Name: "hello", Binaries: bins}, options())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WriteLayout(dir, idx, "v0.1.0"); err != nil {
		t.Fatal(err)
	}
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := root.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].Annotations[AnnotationRefName] != "v0.1.0" {
		t.Fatalf("layout index = %+v, want one index named v0.1.0", top.Manifests)
	}
	stored, err := root.ImageIndex(top.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := stored.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.Annotations[LabelVersion] != "v0.1.0" || im.Annotations[LabelRevision] != "abc123" {
		t.Errorf("index annotations = %v", im.Annotations)
	}
	var platforms []string
	for _, m := range im.Manifests {
		p := m.Platform.OS + "/" + m.Platform.Architecture
		platforms = append(platforms, p)
		img, err := stored.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS+"/"+cf.Architecture != p {
			t.Errorf("%s: config platform %s/%s", p, cf.OS, cf.Architecture)
		}
		if cf.Config.User != "65532:65532" || strings.Join(cf.Config.Entrypoint, " ") != "/usr/local/bin/hello" {
			t.Errorf("%s: user %q, entrypoint %q", p, cf.Config.User, cf.Config.Entrypoint)
		}
		for k, v := range map[string]string{LabelTitle: "hello", LabelVersion: "v0.1.0", LabelRevision: "abc123", LabelCreated: "2026-11-30T12:00:00Z"} {
			if cf.Config.Labels[k] != v {
				t.Errorf("%s: label %s = %q, want %q", p, k, cf.Config.Labels[k], v)
			}
		}
		files := extract(t, img)
		want, _ := os.ReadFile(bins[p])
		if f, ok := files["usr/local/bin/hello"]; !ok || !bytes.Equal(f.data, want) || f.mode != 0o755 {
			t.Errorf("%s: /usr/local/bin/hello missing, changed or not 0755 (mode %o)", p, f.mode)
		}
		if f := files["etc/passwd"]; !strings.Contains(string(f.data), "nonroot:x:65532:65532:") {
			t.Errorf("%s: /etc/passwd = %q", p, f.data)
		}
		if f := files["etc/ssl/certs/ca-certificates.crt"]; !bytes.Equal(f.data, options().CACertificates) {
			t.Errorf("%s: CA bundle = %q", p, f.data)
		}
		if f, ok := files["tmp"]; !ok || f.mode != 0o1777 {
			t.Errorf("%s: /tmp missing or not 1777: %v %o", p, ok, f.mode)
		}
	}
	if strings.Join(platforms, ",") != "linux/amd64,linux/arm64" {
		t.Errorf("platforms = %v", platforms)
	}
}

type entry struct {
	mode int64
	data []byte
}

func extract(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	out := map[string]entry{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		// Directories are named without their trailing slash.
		out[strings.TrimSuffix(h.Name, "/")] = entry{mode: h.Mode, data: data}
	}
}

func TestBuildRefuses(t *testing.T) {
	tests := []struct {
		name string
		img  Image
		o    Options
		want string
	}{
		{"no binaries", Image{Name: "x"}, options(), "no binaries"},
		{"bad platform", Image{Name: "x", Binaries: map[string]string{"amd64": "/bin/true"}}, options(), `platform "amd64"`},
		{"no CA bundle", Image{Name: "x", Binaries: map[string]string{"linux/amd64": "/bin/true"}}, Options{}, "no CA certificates"},
		{"missing binary", Image{Name: "x", Binaries: map[string]string{"linux/amd64": "/nonexistent"}}, options(), "/nonexistent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(tt.img, tt.o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Build = %v, want an error with %q", err, tt.want)
			}
		})
	}
}
