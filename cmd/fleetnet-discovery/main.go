// Command fleetnet-discovery is the fleet's discovery API for client-side
// routers: every pool of endpoints across the fleet, by cluster and region,
// the router replicas, and a resumable watch. See internal/discovery.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/fleetnet/fleetnet/internal/discovery/app"
	"github.com/fleetnet/fleetnet/internal/logging"
	"github.com/fleetnet/fleetnet/internal/version"
	"github.com/spf13/pflag"
)

func main() {
	var opts app.Options
	opts.BindFlags(pflag.CommandLine)
	var logOpts logging.Options
	logOpts.BindFlags(pflag.CommandLine)
	// Flags that libraries register on the Go flag set are accepted too, as
	// in Kubernetes components.
	pflag.CommandLine.AddGoFlagSet(flag.CommandLine)
	showVersion := version.AddFlag(pflag.CommandLine)
	pflag.Parse()
	version.ExitIfAsked(*showVersion, "fleetnet-discovery")
	if err := opts.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "fleetnet-discovery: %v\n", err)
		os.Exit(2)
	}
	log, err := logOpts.New(os.Stderr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fleetnet-discovery: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := app.Run(ctx, opts, log); err != nil {
		fmt.Fprintf(os.Stderr, "fleetnet-discovery: %v\n", err)
		os.Exit(1)
	}
}
