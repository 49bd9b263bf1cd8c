package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFlags runs the built binary: what a user sees is the command line
// and the exit, not Options.
func TestFlags(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fleetnet-agent")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// No cluster can be found: the kubeconfig named does not exist, and
	// neither the home folder nor the environment offer another.
	home := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "KUBECONFIG=" + filepath.Join(home, "missing", "kubeconfig")}
	run := func(t *testing.T, args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("running %v: %v", args, err)
		}
		return string(out), cmd.ProcessState.ExitCode()
	}
	registry := []string{"--registry=127.0.0.1:1", "--registry-ca-file=" + filepath.Join(home, "ca.crt")}

	t.Run("help lists every flag set", func(t *testing.T) {
		out, code := run(t, "--help")
		if code != 0 {
			t.Fatalf("--help exited %d:\n%s", code, out)
		}
		// Ours, controller-runtime's and klog's.
		for _, f := range []string{"--cluster-id string", "--region string", "--kubeconfig string", "--v Level", "--vmodule"} {
			if !strings.Contains(out, f) {
				t.Errorf("--help does not list %s:\n%s", f, out)
			}
		}
	})
	t.Run("without a cluster, valid flags fail on the kubeconfig", func(t *testing.T) {
		// The control for the next case: this environment has no cluster.
		out, code := run(t, append([]string{"--cluster-id=east", "--clusterset-id=fleet"}, registry...)...)
		if code == 0 || strings.Contains(out, "--cluster-id") {
			t.Fatalf("exit %d, want a failure to load a kubeconfig:\n%s", code, out)
		}
	})
	t.Run("a bad identity flag is reported before the kubeconfig", func(t *testing.T) {
		out, code := run(t, append([]string{"--cluster-id=Bad_ID", "--clusterset-id=fleet", "--region=eu-west-1"}, registry...)...)
		if code != 1 {
			t.Fatalf("exit %d, want 1:\n%s", code, out)
		}
		if !strings.Contains(out, `--cluster-id="Bad_ID": a lowercase RFC 1123 label`) {
			t.Errorf("output does not name --cluster-id and its value:\n%s", out)
		}
		for _, s := range []string{"kubeconfig", "configuration", "--clusterset-id", "--region"} {
			if strings.Contains(out, s) {
				t.Errorf("output mentions %s:\n%s", s, out)
			}
		}
	})
	t.Run("single-dash long flags are refused", func(t *testing.T) {
		// pflag reads -cluster-id as shorthands; command lines built for
		// the agent (internal/dev) must use --flag=value.
		out, code := run(t, "-cluster-id=east")
		if code == 0 {
			t.Fatalf("exit 0 for -cluster-id=east:\n%s", out)
		}
	})
}
