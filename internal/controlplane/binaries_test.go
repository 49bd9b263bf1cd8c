package controlplane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMissingBinarySaysHowToBuildIt(t *testing.T) {
	dir := t.TempDir()
	bins := Binaries{Dir: dir}
	_, err := bins.Path(KubeAPIServerBinary)
	if err == nil || !strings.Contains(err.Error(), "make tools") {
		t.Fatalf("Path of a missing binary: err = %v, want one that says to run make tools", err)
	}
	if err := os.WriteFile(filepath.Join(dir, KubeAPIServerBinary), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := bins.Path(KubeAPIServerBinary); err != nil || got != filepath.Join(dir, KubeAPIServerBinary) {
		t.Fatalf("Path = %q, %v", got, err)
	}
}

func TestFindBinariesFromInsideTheCheckout(t *testing.T) {
	t.Setenv(BinDirEnv, "")
	bins, err := FindBinaries()
	if err != nil {
		t.Fatal(err)
	}
	// Tests run in internal/controlplane; bin/ is two levels up.
	want, _ := filepath.Abs("../../bin")
	if bins.Dir != want {
		t.Fatalf("Dir = %s, want %s", bins.Dir, want)
	}
}
