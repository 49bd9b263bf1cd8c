package dev_test

import (
	"testing"

	"github.com/fleetnet/fleetnet/internal/dev"
	"github.com/fleetnet/fleetnet/internal/node"
)

// dev serve's image is one the process node runs: echo-basic.
func TestEchoImageIsInTheNodesTable(t *testing.T) {
	im, err := node.LookupImage(dev.EchoImage)
	if err != nil {
		t.Fatal(err)
	}
	if im.Tool != "echo-basic" {
		t.Errorf("%s runs %q, want the echo-basic tool", dev.EchoImage, im.Tool)
	}
}
