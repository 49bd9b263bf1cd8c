package node

import (
	"slices"
	"strings"
	"testing"
)

func TestRepository(t *testing.T) {
	for ref, want := range map[string]string{
		"registry.k8s.io/gateway-api/echo-basic:v1.6.3": "gateway-api/echo-basic",
		"registry.k8s.io/e2e-test-images/agnhost:2.53":  "e2e-test-images/agnhost",
		"busybox":      "busybox",
		"busybox:1.36": "busybox",
		"docker.io/library/busybox:1.36@sha256:abc": "library/busybox",
		"alpine/socat": "alpine/socat",
		"localhost:5000/nicolaka/netshoot:latest": "nicolaka/netshoot",
	} {
		if got := repository(ref); got != want {
			t.Errorf("repository(%q) = %q, want %q", ref, got, want)
		}
	}
}

func TestArgv(t *testing.T) {
	agnhost, err := LookupImage("registry.k8s.io/e2e-test-images/agnhost:2.53")
	if err != nil {
		t.Fatal(err)
	}
	busybox, err := LookupImage("busybox:1.36")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		im            Image
		command, args []string
		want          []string
	}{
		{"image default", agnhost, nil, nil, []string{"/tools/agnhost", "pause"}},
		{"args replace cmd", agnhost, nil, []string{"netexec", "--http-port=8080"}, []string{"/tools/agnhost", "netexec", "--http-port=8080"}},
		{"command names the image's binary", agnhost, []string{"/agnhost"}, []string{"serve-hostname"}, []string{"/tools/agnhost", "serve-hostname"}},
		{"shell default", busybox, nil, nil, []string{"sh"}},
		{"shell command", busybox, []string{"sh", "-c"}, []string{"sleep 1"}, []string{"sh", "-c", "sleep 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.im.Argv(tc.command, tc.args, "/tools")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Argv = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestUnknownImageNamesTheTable(t *testing.T) {
	_, err := LookupImage("quay.io/someone/app:1")
	if err == nil || !strings.Contains(err.Error(), `"quay.io/someone/app:1"`) || !strings.Contains(err.Error(), "agnhost") {
		t.Fatalf("err = %v, want the image and the table named", err)
	}
}
