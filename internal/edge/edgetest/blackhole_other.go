//go:build !linux

package edgetest

import (
	"testing"

	"github.com/fleetnet/fleetnet/internal/gateway/model"
)

// Blackhole needs Linux's accept queue semantics (a full queue drops every
// SYN); elsewhere the tests that use it cannot run.
func Blackhole(t *testing.T) model.Endpoint {
	t.Helper()
	t.Fatal("this test needs Linux: a loopback endpoint that drops connections relies on Linux's accept queue; run the edge tests on Linux")
	return model.Endpoint{}
}
