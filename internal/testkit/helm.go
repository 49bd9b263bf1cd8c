package testkit

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetnet/fleetnet/internal/controlplane"
)

// Helm runs bin/helm (built by `make tools`) with a configuration of its
// own: no user's repositories or plugins.
type Helm struct {
	path string
	home string
}

// NewHelm finds bin/helm; a missing one fails the test saying how to get
// it.
func NewHelm(t testing.TB) *Helm {
	t.Helper()
	bins, err := controlplane.FindBinaries()
	if err != nil {
		t.Fatal(err)
	}
	path, err := bins.Path("helm")
	if err != nil {
		t.Fatal(err) // says to run `make tools`
	}
	return &Helm{path: path, home: t.TempDir()}
}

// Run runs helm with args and returns its combined output.
func (h *Helm) Run(t testing.TB, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(h.path, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(h.home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(h.home, "config"),
		"HELM_DATA_HOME="+filepath.Join(h.home, "data"),
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	result := "ok"
	if err != nil {
		result = err.Error()
	}
	t.Logf("helm %s: %s", strings.Join(args, " "), result)
	return out.String(), err
}

// Must runs helm and fails the test when it fails.
func (h *Helm) Must(t testing.TB, args ...string) string {
	t.Helper()
	out, err := h.Run(t, args...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}
