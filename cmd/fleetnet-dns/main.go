// Command fleetnet-dns is the clusterset DNS server of KEP-1645: CoreDNS
// with fleetnet's plugin, answering <svc>.<ns>.svc.clusterset.local from the
// cluster's ServiceImports and imported EndpointSlices. It runs in every
// cluster as its own Deployment; the cluster's CoreDNS forwards the zone to
// it (the stanza is in internal/dns/app's documentation). See internal/dns.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/fleetnet/fleetnet/internal/dns/app"
	"github.com/fleetnet/fleetnet/internal/logging"
	"github.com/fleetnet/fleetnet/internal/version"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
)

func main() {
	var opts app.Options
	opts.BindFlags(pflag.CommandLine)
	var logOpts logging.Options
	logOpts.BindFlags(pflag.CommandLine)
	// Only klog's flags (--v, …) join ours: CoreDNS's packages register
	// their own command's flags (-conf, -p, …) on the Go flag set, and
	// those mean nothing here.
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	pflag.CommandLine.AddGoFlagSet(klogFlags)
	showVersion := version.AddFlag(pflag.CommandLine)
	pflag.Parse()
	version.ExitIfAsked(*showVersion, "fleetnet-dns")
	if err := opts.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "fleetnet-dns: %v\n", err)
		os.Exit(2)
	}
	log, err := logOpts.New(os.Stderr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fleetnet-dns: %v\n", err)
		os.Exit(2)
	}
	// The fleetnet plugin logs through slog's default logger, and
	// client-go's informers through klog: both as JSON lines.
	slog.SetDefault(log)
	klog.SetSlogLogger(log)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := app.Run(ctx, opts, log); err != nil {
		fmt.Fprintf(os.Stderr, "fleetnet-dns: %v\n", err)
		os.Exit(1)
	}
}
