package version

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/semver"
	"sigs.k8s.io/yaml"
)

// TestChartsCarryTheRelease: every chart's appVersion is Release and its
// version Release without the v, so that make release packages what the
// binaries say they are.
func TestChartsCarryTheRelease(t *testing.T) {
	if !semver.IsValid(Release) || semver.Prerelease(Release) != "" {
		t.Fatalf("Release %q is not a release version vX.Y.Z", Release)
	}
	charts, err := filepath.Glob(filepath.Join("..", "..", "charts", "*", "Chart.yaml"))
	if err != nil || len(charts) == 0 {
		t.Fatalf("no charts found from %s: %v", must(os.Getwd()), err)
	}
	for _, path := range charts {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			Version    string `json:"version"`
			AppVersion string `json:"appVersion"`
		}
		if err := yaml.Unmarshal(b, &c); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if c.AppVersion != Release || c.Version != strings.TrimPrefix(Release, "v") {
			t.Errorf("%s: version %q, appVersion %q; want %q and %q (internal/version.Release)", path, c.Version, c.AppVersion, strings.TrimPrefix(Release, "v"), Release)
		}
	}
}

func TestGet(t *testing.T) {
	i := Get()
	if i.Version != Release+"-dev" && i.Version != Release {
		t.Errorf("Get().Version = %q, want %s or %s-dev", i.Version, Release, Release)
	}
	if i.GoVersion == "" || i.Platform == "" {
		t.Errorf("Get() = %+v: Go version or platform missing", i)
	}
}

func must(s string, _ error) string { return s }
