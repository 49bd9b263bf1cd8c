package node

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// There is no container runtime and no image can be pulled here. The
// programs behind the well-known test images are Go programs that build
// from their modules (`make tools` puts them in bin/), and the shell images
// run their commands with the machine's own tools (installed by
// hack/install-deps.sh). An image outside this table is never started.

// Image is what a known image runs: its ENTRYPOINT and CMD, as the image
// declares them. A container's command replaces the entrypoint and its args
// replace the cmd, as with a container runtime.
type Image struct {
	// Repositories are the image names without registry and tag that map
	// here ("gateway-api/echo-basic", "agnhost").
	Repositories []string
	Entrypoint   []string
	Cmd          []string
	// Tool names a program of the tools folder that stands for the image's
	// own binary; Paths are where the image keeps it ("/agnhost"), so a
	// command naming that path runs the tool.
	Tool  string
	Paths []string
}

// Images is the image table.
var Images = []Image{
	{Repositories: []string{"gateway-api/echo-basic", "echo-basic"}, Tool: "echo-basic", Paths: []string{"/echo-basic", "/echo-server"}, Entrypoint: []string{"/echo-basic"}},
	// CoreDNS with the plugins test Corefiles use (hack/tools/images/coredns).
	{Repositories: []string{"coredns/coredns", "coredns"}, Tool: "coredns", Paths: []string{"/coredns"}, Entrypoint: []string{"/coredns"}},
	{Repositories: []string{"e2e-test-images/agnhost", "agnhost"}, Tool: "agnhost", Paths: []string{"/agnhost"}, Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}},
	// Ends on SIGTERM, as the pause image does (a bare `sleep` as PID 1
	// would ignore it and wait out every grace period), in 2 MB.
	{Repositories: []string{"pause"}, Entrypoint: []string{"sh", "-c", "trap 'exit 0' TERM; sleep infinity & wait"}},
	{Repositories: []string{"busybox", "library/busybox", "e2e-test-images/busybox"}, Cmd: []string{"sh"}},
	{Repositories: []string{"alpine", "library/alpine"}, Cmd: []string{"/bin/sh"}},
	{Repositories: []string{"alpine/socat"}, Entrypoint: []string{"socat"}},
	{Repositories: []string{"nicolaka/netshoot"}, Cmd: []string{"sh"}},
	{Repositories: []string{"curlimages/curl"}, Entrypoint: []string{"curl"}},
	{Repositories: []string{"debian", "library/debian", "ubuntu", "library/ubuntu"}, Cmd: []string{"bash"}},
}

// repository is an image reference without its registry, tag and digest:
// "registry.k8s.io/gateway-api/echo-basic:v1.6.3" → "gateway-api/echo-basic".
func repository(ref string) string {
	if i := strings.IndexByte(ref, '@'); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		ref = ref[:i]
	}
	// The first component is a registry when it has a dot or a port, or
	// is localhost (the Docker reference grammar).
	if i := strings.IndexByte(ref, '/'); i >= 0 {
		first := ref[:i]
		if strings.ContainsAny(first, ".:") || first == "localhost" {
			ref = ref[i+1:]
		}
	}
	return ref
}

// LookupImage returns the table's entry for an image reference.
func LookupImage(ref string) (Image, error) {
	repo := repository(ref)
	for _, im := range Images {
		if slices.Contains(im.Repositories, repo) {
			return im, nil
		}
	}
	return Image{}, fmt.Errorf("image %q is not in the process node's image table (it runs %s); see internal/node/images.go", ref, strings.Join(KnownRepositories(), ", "))
}

// KnownRepositories lists every repository of the table.
func KnownRepositories() []string {
	var out []string
	for _, im := range Images {
		out = append(out, im.Repositories[0])
	}
	sort.Strings(out)
	return out
}

// Argv is the command line a container runs: the image's entrypoint and
// cmd, replaced by the container's command and args as a runtime does, with
// the image's own binary paths pointing at the tools folder.
func (im Image) Argv(command, args []string, tools string) ([]string, error) {
	var argv []string
	switch {
	case len(command) > 0:
		argv = append(slices.Clone(command), args...)
	case len(args) > 0:
		argv = append(slices.Clone(im.Entrypoint), args...)
	default:
		argv = append(slices.Clone(im.Entrypoint), im.Cmd...)
	}
	if len(argv) == 0 {
		return nil, fmt.Errorf("the container names no command and image %s has none", im.Repositories[0])
	}
	if im.Tool != "" && slices.Contains(im.Paths, argv[0]) {
		argv[0] = filepath.Join(tools, im.Tool)
	}
	return argv, nil
}
