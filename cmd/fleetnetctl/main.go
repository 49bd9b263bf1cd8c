// Command fleetnetctl operates a fleetnet fleet: certificates, registry
// administration and a local development fleet (`fleetnetctl dev`). See internal/ctl.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/fleetnet/fleetnet/internal/ctl"
)

func main() {
	// Ctrl-C cancels the command, so that an interrupted `dev up` stops
	// what it started.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := ctl.NewRootCommand().ExecuteContext(ctx); err != nil {
		var exit ctl.ExitError
		if errors.As(err, &exit) {
			os.Exit(exit.Code)
		}
		fmt.Fprintf(os.Stderr, "fleetnetctl: %v\n", err)
		os.Exit(1)
	}
}
