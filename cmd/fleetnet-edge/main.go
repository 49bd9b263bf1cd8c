// Command fleetnet-edge is the embedded provider's data plane: it serves
// the Gateways that fleetnet-gateway models, and keeps serving the last
// good model while the gateway is away. See internal/edge.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/fleetnet/fleetnet/internal/edge/app"
	"github.com/spf13/pflag"
)

func main() {
	var opts app.Options
	opts.BindFlags(pflag.CommandLine)
	pflag.CommandLine.AddGoFlagSet(flag.CommandLine)
	pflag.Parse()
	if err := opts.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "fleetnet-edge: %v\n", err)
		os.Exit(2)
	}
	app.TuneGC()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := app.Run(ctx, opts, log); err != nil {
		fmt.Fprintf(os.Stderr, "fleetnet-edge: %v\n", err)
		os.Exit(1)
	}
}
