// Package imagebuild assembles fleetnet's container images without a
// container engine: a static binary on an empty base that holds only CA
// certificates and a non-root user, one OCI image per platform, under one
// OCI image index per binary, written as an OCI image layout that skopeo,
// crane or containerd can load or push.
//
// Every input is explicit (binaries, certificates, the creation time), and
// every tar header and timestamp is fixed, so the same inputs give the
// same digests: the build is reproducible.
package imagebuild

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The user every image runs as: 65532, "nonroot", as distroless images
// name it, so that restricted pod security needs no runAsUser.
const (
	UserID   = 65532
	UserName = "nonroot"
	// BinDir is where the binary lives; the entrypoint is BinDir/<name>.
	BinDir = "/usr/local/bin"
	// CACertificatesPath is where the CA bundle lives, the path Go's
	// crypto/x509 reads on Linux.
	CACertificatesPath = "/etc/ssl/certs/ca-certificates.crt"
)

// OCI annotation and label keys of the image spec.
const (
	LabelTitle    = "org.opencontainers.image.title"
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
	LabelSource   = "org.opencontainers.image.source"
	LabelCreated  = "org.opencontainers.image.created"
	// AnnotationRefName names an image in an OCI layout's index.json.
	AnnotationRefName = "org.opencontainers.image.ref.name"
)

// Image is one binary, built for each platform.
type Image struct {
	// Name is the binary's and the image's name, e.g. fleetnet-agent.
	Name string
	// Binaries are the paths of the binary by platform, "os/arch" or
	// "os/arch/variant", e.g. "linux/arm64".
	Binaries map[string]string
}

// Options are what every image shares.
type Options struct {
	Version  string
	Revision string
	Source   string
	// Created is the images' creation time, usually the commit's time
	// (SOURCE_DATE_EPOCH), never the build's.
	Created time.Time
	// CACertificates is the PEM bundle installed at CACertificatesPath.
	CACertificates []byte
}

// Build returns the image index of img: one image per platform, sorted
// by architecture.
func Build(img Image, o Options) (v1.ImageIndex, error) {
	if len(img.Binaries) == 0 {
		return nil, fmt.Errorf("image %s: no binaries", img.Name)
	}
	if len(o.CACertificates) == 0 {
		return nil, fmt.Errorf("image %s: no CA certificates", img.Name)
	}
	base, err := baseLayer(o)
	if err != nil {
		return nil, fmt.Errorf("image %s: base layer: %w", img.Name, err)
	}
	platforms := make([]string, 0, len(img.Binaries))
	for p := range img.Binaries {
		platforms = append(platforms, p)
	}
	sort.Strings(platforms)
	labels := map[string]string{
		LabelTitle: img.Name, LabelVersion: o.Version, LabelRevision: o.Revision, LabelSource: o.Source,
		LabelCreated: o.Created.UTC().Format(time.RFC3339),
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var adds []mutate.IndexAddendum
	for _, name := range platforms {
		p, err := v1.ParsePlatform(name)
		if err != nil || p.OS == "" || p.Architecture == "" {
			return nil, fmt.Errorf("image %s: platform %q is not os/arch[/variant]", img.Name, name)
		}
		bin, err := os.ReadFile(img.Binaries[name])
		if err != nil {
			return nil, fmt.Errorf("image %s for %s: %w", img.Name, name, err)
		}
		app, err := layer([]file{{path: path.Join(BinDir, img.Name), mode: 0o755, data: bin}}, o.Created)
		if err != nil {
			return nil, fmt.Errorf("image %s: binary layer: %w", img.Name, err)
		}
		image := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
		image, err = mutate.Append(image,
			mutate.Addendum{Layer: base, History: v1.History{Created: v1.Time{Time: o.Created}, CreatedBy: "fleetnet base: CA certificates, user nonroot", Comment: "fleetnet imagebuild"}},
			mutate.Addendum{Layer: app, History: v1.History{Created: v1.Time{Time: o.Created}, CreatedBy: "fleetnet binary " + img.Name, Comment: "fleetnet imagebuild"}},
		)
		if err != nil {
			return nil, err
		}
		cf, err := image.ConfigFile()
		if err != nil {
			return nil, err
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
		cf.Created = v1.Time{Time: o.Created}
		cf.Config = v1.Config{
			User:       fmt.Sprintf("%d:%d", UserID, UserID),
			Entrypoint: []string{path.Join(BinDir, img.Name)},
			Env:        []string{"PATH=" + BinDir + ":/usr/bin:/bin", "SSL_CERT_FILE=" + CACertificatesPath},
			WorkingDir: "/home/" + UserName,
			Labels:     labels,
		}
		image, err = mutate.ConfigFile(image, cf)
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.IndexAddendum{Add: image, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: p.OS, Architecture: p.Architecture, Variant: p.Variant},
		}})
	}
	idx = mutate.AppendManifests(idx, adds...)
	return mutate.Annotations(idx, labels).(v1.ImageIndex), nil
}

// WriteLayout writes idx as the only image of a fresh OCI layout in dir,
// named ref (usually the version) in the layout's index.json.
func WriteLayout(dir string, idx v1.ImageIndex, ref string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("writing layout %s: %w", dir, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{AnnotationRefName: ref})); err != nil {
		return fmt.Errorf("writing layout %s: %w", dir, err)
	}
	return nil
}

type file struct {
	path string
	mode int64
	data []byte
	dir  bool
	uid  int
}

// baseLayer holds what every image needs besides its binary: the CA
// bundle, the users, a home and a /tmp. It is the same in every image, so
// registries and nodes store it once.
func baseLayer(o Options) (v1.Layer, error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:/home/%s:/sbin/nologin\n", UserName, UserID, UserID, UserName, UserName)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", UserName, UserID)
	return layer([]file{
		{path: "/etc/passwd", mode: 0o644, data: []byte(passwd)},
		{path: "/etc/group", mode: 0o644, data: []byte(group)},
		{path: CACertificatesPath, mode: 0o644, data: o.CACertificates},
		{path: "/home/" + UserName, mode: 0o700, dir: true, uid: UserID},
		{path: "/tmp", mode: 0o1777, dir: true},
	}, o.Created)
}

// layer is a gzipped tar of files and their parent directories, with
// fixed owners and times.
func layer(files []file, created time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	var mkdirs func(string) error
	mkdirs = func(d string) error {
		if d == "/" || d == "." || dirs[d] {
			return nil
		}
		if err := mkdirs(path.Dir(d)); err != nil {
			return err
		}
		dirs[d] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d[1:] + "/", Mode: 0o755, ModTime: created, Format: tar.FormatPAX})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	for _, f := range files {
		if err := mkdirs(path.Dir(f.path)); err != nil {
			return nil, err
		}
		h := &tar.Header{Name: f.path[1:], Mode: f.mode, ModTime: created, Uid: f.uid, Gid: f.uid, Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
			dirs[f.path] = true
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
}
