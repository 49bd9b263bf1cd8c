// Command fleetnetctl operates a fleetnet fleet: certificates, registry
// administration and a local development fleet (`fleetnetctl dev`). See internal/ctl.
package main

import (
	"fmt"
	"os"

	"github.com/fleetnet/fleetnet/internal/ctl"
)

func main() {
	if err := ctl.NewRootCommand().Execute(); err != nil {
		fmt.Fprintf(os.Stderr, "fleetnetctl: %v\n", err)
		os.Exit(1)
	}
}
