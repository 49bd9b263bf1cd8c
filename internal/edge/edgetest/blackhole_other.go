//go:build !linux

package edgetest

import (
	"testing"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
)

// Blackhole needs Linux's accept queue semantics (a full queue drops every
// SYN); elsewhere the tests that use it cannot run.
func Blackhole(t *testing.T) edgev1.Endpoint {
	t.Helper()
	t.Fatal("this test needs Linux: a loopback endpoint that drops connections relies on Linux's accept queue; run the edge tests on Linux")
	return edgev1.Endpoint{}
}
