// Package version is this binary's version: the release it was built as,
// the commit and the Go toolchain, shown by --version, `fleetnetctl
// version` and fleetnet_build_info, and announced to the registry and the
// model streams (api/skew).
package version

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
)

// Release is the version this tree builds. A release sets it (make release
// checks that CHANGELOG.md has its section); builds between releases are
// Release-dev.
const Release = "v0.1.0"

// stamped and stampedRevision are set by release builds (-ldflags -X
// ...version.stamped=v0.1.0): only a release build says it is exactly a
// release. Other builds find their revision in the Go build information
// when it was recorded (-buildvcs).
var stamped, stampedRevision string

// Info is what a binary says of itself.
type Info struct {
	// Version is semantic: the release, or Release-dev for other builds.
	Version string `json:"version"`
	// Revision is the git commit the binary was built from, "+dirty" when
	// the tree had changes; empty when unknown (built without git).
	Revision  string `json:"revision,omitempty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

func (i Info) String() string {
	s := i.Version
	if i.Revision != "" {
		s += " (" + i.Revision + ")"
	}
	return fmt.Sprintf("%s %s %s", s, i.GoVersion, i.Platform)
}

var get = sync.OnceValue(func() Info {
	i := Info{Version: stamped, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if i.Version == "" {
		i.Version = Release + "-dev"
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if rev != "" && modified == "true" {
			rev += "+dirty"
		}
		i.Revision = rev
	}
	if stampedRevision != "" {
		i.Revision = stampedRevision
	}
	return i
})

// Get returns this binary's version.
func Get() Info { return get() }

// AddFlag adds --version to fs; after parsing, ExitIfAsked acts on it.
func AddFlag(fs *pflag.FlagSet) *bool {
	return fs.Bool("version", false, "Print the version and exit.")
}

// ExitIfAsked prints program's version and exits when asked is true.
func ExitIfAsked(asked bool, program string) {
	if asked {
		fmt.Println(program, Get())
		os.Exit(0)
	}
}

// Collector is fleetnet_build_info: 1, labelled with the program, the
// version, revision and Go version, as Prometheus' own build_info metrics
// are.
func Collector() prometheus.Collector {
	i := Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fleetnet_build_info",
		Help: "Always 1; the labels say which fleetnet program and build this process runs.",
		ConstLabels: prometheus.Labels{"program": filepath.Base(os.Args[0]), "version": i.Version,
			"revision": i.Revision, "goversion": i.GoVersion},
	})
	g.Set(1)
	return g
}
