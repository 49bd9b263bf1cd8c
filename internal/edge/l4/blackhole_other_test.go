//go:build !linux

package l4_test

import (
	"testing"

	"github.com/fleetnet/fleetnet/internal/gateway/model"
)

func blackhole(t *testing.T) model.Endpoint {
	t.Skip("a loopback endpoint that drops connections needs Linux's accept queue")
	return model.Endpoint{}
}
