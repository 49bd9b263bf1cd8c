package ctl

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetnet/fleetnet/internal/diagnose"
)

func TestParseTarget(t *testing.T) {
	tests := []struct {
		in   string
		want diagnose.Target
		err  bool
	}{
		{in: "hub/demo/echo", want: diagnose.Target{Cluster: "hub", Namespace: "demo", Name: "echo"}},
		{in: "hub/demo", err: true},
		{in: "/demo/echo", err: true},
		{in: "hub/demo/echo/x", err: true},
		{in: "hub/Demo/echo", err: true},
	}
	for _, tc := range tests {
		got, err := parseTarget(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("parseTarget(%q) = %+v, %v; want %+v, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// TestDiagnoseCommandFailsWithReport: a cluster the kubeconfig does not
// reach is a broken step of the report, and the command exits with 1
// without a message of its own (scripts test the exit code, people read
// the report).
func TestDiagnoseCommandFailsWithReport(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := NewRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"diagnose", "hub/demo/echo", "--kubeconfig", kc, "--registry", ""})
	err := cmd.Execute()
	var exit ExitError
	if !errors.As(err, &exit) || exit.Code != 1 {
		t.Fatalf("err = %v, want ExitError 1", err)
	}
	for _, want := range []string{"✗  cluster hub", `no context "hub"`, "--context hub=CONTEXT", "-  registry"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}
