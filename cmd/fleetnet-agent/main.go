// Command fleetnet-agent runs in every member cluster: it registers the
// cluster with the fleet registry, keeps its lease, and publishes exported
// Services and their endpoints. See internal/agent.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/fleetnet/fleetnet/internal/agent/app"
	ctrl "sigs.k8s.io/controller-runtime"
)

func main() {
	var opts app.Options
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	cfg, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintf(os.Stderr, "fleetnet-agent: %v\n", err)
		os.Exit(1)
	}
	if err := app.Run(ctrl.SetupSignalHandler(), cfg, opts, log); err != nil {
		fmt.Fprintf(os.Stderr, "fleetnet-agent: %v\n", err)
		os.Exit(1)
	}
}
