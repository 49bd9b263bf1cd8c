package tunnel_test

import (
	"strings"
	"testing"

	"github.com/fleetnet/fleetnet/internal/eastwest/tunnel"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestParseAuthority(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    tunnel.Target
		wantErr string
	}{
		{in: "echo.demo.svc.clusterset.local:80", want: tunnel.Target{Namespace: "demo", Name: "echo", Port: 80}},
		{in: "Echo.Demo.SVC.clusterset.local:8080", want: tunnel.Target{Namespace: "demo", Name: "echo", Port: 8080}},
		{in: "echo.demo.svc.clusterset.local", wantErr: "want <service>.<namespace>"},
		{in: "echo.demo.svc.cluster.local:80", wantErr: "not in svc.clusterset.local"},
		{in: "169.254.169.254:80", wantErr: "not in svc.clusterset.local"},
		{in: "[::1]:80", wantErr: "want <service>.<namespace>"},
		{in: "a.b.demo.svc.clusterset.local:80", wantErr: "want <service>.<namespace>"},
		{in: "demo.svc.clusterset.local:80", wantErr: "want <service>.<namespace>"},
		{in: "echo.demo.svc.clusterset.local:0", wantErr: `port "0"`},
		{in: "echo.demo.svc.clusterset.local:65536", wantErr: `port "65536"`},
		{in: "echo.demo.svc.clusterset.local:080", wantErr: `port "080"`},
		{in: "echo.demo.svc.clusterset.local:+80", wantErr: `port "+80"`},
		{in: "ec_ho.demo.svc.clusterset.local:80", wantErr: `service "ec_ho"`},
		{in: ".demo.svc.clusterset.local:80", wantErr: `service ""`},
		{in: "echo..svc.clusterset.local:80", wantErr: `namespace ""`},
	} {
		got, err := tunnel.ParseAuthority(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseAuthority(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseAuthority(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// FuzzParseAuthority: whatever is accepted names one valid service and
// namespace and a real port, and reads back the same from its own
// Authority.
func FuzzParseAuthority(f *testing.F) {
	for _, s := range []string{"echo.demo.svc.clusterset.local:80", "a.b.svc.clusterset.local:65535", "x:1", "", ":", "echo.demo.svc.clusterset.local:", "ECHO.demo.svc.clusterset.local:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := tunnel.ParseAuthority(s)
		if err != nil {
			return
		}
		if len(validation.IsDNS1123Label(got.Name)) > 0 || len(validation.IsDNS1123Label(got.Namespace)) > 0 || got.Port < 1 || got.Port > 65535 {
			t.Fatalf("ParseAuthority(%q) accepted %+v", s, got)
		}
		again, err := tunnel.ParseAuthority(got.Authority())
		if err != nil || again != got {
			t.Fatalf("%q → %+v → %q → %+v, %v", s, got, got.Authority(), again, err)
		}
	})
}
