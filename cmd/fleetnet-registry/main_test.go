package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestHelp runs the built binary: its flags are pflag's, listed as --flag.
func TestHelp(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fleetnet-registry")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--help")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("--help: %v\n%s", err, out)
	}
	for _, f := range []string{"--listen string", "--tls-cert-file string", "--lease-ttl duration", "--etcd-endpoints string"} {
		if !strings.Contains(string(out), f) {
			t.Errorf("--help does not list %s:\n%s", f, out)
		}
	}
}
