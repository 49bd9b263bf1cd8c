package ctl

import (
	"errors"
	"strings"
	"testing"

	"github.com/fleetnet/fleetnet/internal/registry/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestWithCredentialsHint(t *testing.T) {
	tests := []struct {
		name string
		err  error
		o    client.Options
		want string // "" for the error unchanged
	}{
		{"a refused handshake, nothing given", status.Error(codes.Unavailable, "connection closed"), client.Options{}, "--cert-file and --key-file"},
		{"a certificate given", status.Error(codes.Unauthenticated, "no identity"), client.Options{CertFile: "c.crt"}, "--cert-file c.crt"},
		{"a token file given", status.Error(codes.PermissionDenied, "not an administrator"), client.Options{TokenFile: "t"}, "--token-file t"},
		{"another error", status.Error(codes.NotFound, "no such cluster"), client.Options{}, ""},
		{"not a status", errors.New("boom"), client.Options{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := withCredentialsHint(tt.err, tt.o)
			if !errors.Is(got, tt.err) {
				t.Fatalf("%v does not wrap %v", got, tt.err)
			}
			if tt.want == "" {
				if got.Error() != tt.err.Error() {
					t.Errorf("changed: %v", got)
				}
				return
			}
			if !strings.Contains(got.Error(), tt.want) {
				t.Errorf("%q does not name %q", got, tt.want)
			}
		})
	}
}
