// Command fleetnet-edge is the embedded provider's data plane: it serves
// the Gateways that fleetnet-gateway models, and keeps serving the last
// good model while the gateway is away. See internal/edge.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/fleetnet/fleetnet/internal/edge/app"
	"github.com/fleetnet/fleetnet/internal/logging"
	"github.com/fleetnet/fleetnet/internal/version"
	"github.com/spf13/pflag"
)

func main() {
	var opts app.Options
	opts.BindFlags(pflag.CommandLine)
	var logOpts logging.Options
	logOpts.BindFlags(pflag.CommandLine)
	pflag.CommandLine.AddGoFlagSet(flag.CommandLine)
	showVersion := version.AddFlag(pflag.CommandLine)
	pflag.Parse()
	version.ExitIfAsked(*showVersion, "fleetnet-edge")
	if err := opts.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "fleetnet-edge: %v\n", err)
		os.Exit(2)
	}
	app.TuneGC()
	log, err := logOpts.New(os.Stderr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fleetnet-edge: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := app.Run(ctx, opts, log); err != nil {
		fmt.Fprintf(os.Stderr, "fleetnet-edge: %v\n", err)
		os.Exit(1)
	}
}
