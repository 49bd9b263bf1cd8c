// Command fleetnet-gateway runs on the hub cluster: it implements the
// Gateway API for fleetnet's GatewayClasses (ServiceImport backends per
// GEP-1748) and hands the resulting model to a provider, by default the
// fleetnet-edge processes. See internal/gateway.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/fleetnet/fleetnet/internal/gateway/app"
	"github.com/fleetnet/fleetnet/internal/logging"
	"github.com/fleetnet/fleetnet/internal/version"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
)

func main() {
	var opts app.Options
	opts.BindFlags(pflag.CommandLine)
	var logOpts logging.Options
	logOpts.BindFlags(pflag.CommandLine)
	klog.InitFlags(flag.CommandLine)
	pflag.CommandLine.AddGoFlagSet(flag.CommandLine)
	showVersion := version.AddFlag(pflag.CommandLine)
	pflag.Parse()
	version.ExitIfAsked(*showVersion, "fleetnet-gateway")
	if err := opts.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "fleetnet-gateway: %v\n", err)
		os.Exit(2)
	}
	log, err := logOpts.New(os.Stderr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fleetnet-gateway: %v\n", err)
		os.Exit(2)
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintf(os.Stderr, "fleetnet-gateway: %v\n", err)
		os.Exit(1)
	}
	if err := app.Run(ctrl.SetupSignalHandler(), cfg, opts, log); err != nil {
		fmt.Fprintf(os.Stderr, "fleetnet-gateway: %v\n", err)
		os.Exit(1)
	}
}
