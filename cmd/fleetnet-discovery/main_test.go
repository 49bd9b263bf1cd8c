package main

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The built binary: pflag flags, listed as --flag, and a bad flag value is
// refused with exit code 2 naming the flag, before anything starts.
func TestFlags(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fleetnet-discovery")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("--help: %v\n%s", err, out)
	}
	for _, f := range []string{
		"--listen string", "--pool-source string", "--lease-ttl duration", "--registration-grace duration", "--routers strings",
		"--history int", "--tokens-file string", "--tls-cert-file string", "--client-ca-file string", "--metrics-addr string", "--health-addr string",
	} {
		if !strings.Contains(string(out), f) {
			t.Errorf("--help does not list %s:\n%s", f, out)
		}
	}
	out, err = exec.Command(bin, "--pool-source=etcd", "--tokens-file=t.csv").CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), `--pool-source="etcd": unknown; one of kubernetes, memory, registry`) {
		t.Errorf("--pool-source=etcd: %v\n%s", err, out)
	}
}
