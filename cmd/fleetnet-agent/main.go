// Command fleetnet-agent runs in every member cluster: it registers the
// cluster with the fleet registry, keeps its lease, and publishes exported
// Services and their endpoints. See internal/agent.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/fleetnet/fleetnet/internal/agent/app"
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
	// controller-runtime registers --kubeconfig on the Go flag set when it
	// is loaded; klog's flags (--v, …) go there too, and all of them reach
	// pflag the way Kubernetes components add them.
	klog.InitFlags(flag.CommandLine)
	pflag.CommandLine.AddGoFlagSet(flag.CommandLine)
	showVersion := version.AddFlag(pflag.CommandLine)
	pflag.Parse()
	version.ExitIfAsked(*showVersion, "fleetnet-agent")
	// Before the kubeconfig is loaded: a bad flag is the error to report,
	// not a cluster that cannot be reached.
	if err := opts.Validate(); err != nil {
		fail(err)
	}
	log, err := logOpts.New(os.Stderr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fleetnet-agent: %v\n", err)
		os.Exit(2)
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		fail(err)
	}
	if err := app.Run(ctrl.SetupSignalHandler(), cfg, opts, log); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "fleetnet-agent: %v\n", err)
	os.Exit(1)
}
