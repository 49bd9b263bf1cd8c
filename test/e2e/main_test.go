// Package e2e runs fleetnet end to end on a local fleet of three clusters
// (hub, east, west; hub and east dual-stack) brought up by internal/dev, the
// code behind `fleetnetctl dev up`: every part is its own process, the
// registry and the agents are the binaries users run, and faults are dealt to
// processes (SIGTERM, SIGKILL). The tests share one fleet and run one at a
// time; each works in namespaces of its own.
package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/controlplane"
	"github.com/fleetnet/fleetnet/internal/dev"
	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// leaseTTL is short so that lease expiry is quick to test; agents renew at a
// third of it.
const leaseTTL = 5 * time.Second

var (
	fleetDir   string
	fleetnet   string // folder of the fleetnet binaries built for this run
	devOptions dev.Options
	state      *dev.State
	// haFleet runs the fleet with a 3-member etcd and two registry
	// replicas (the chaos run's).
	haFleet bool
	// networks puts clusters on networks of their own (the east-west
	// run's; dev.Options.Networks).
	networks map[string]string
	// startBinaries, when set, builds the binaries the fleet starts with
	// (the upgrade run's previous release) into a folder under tmp; the
	// binaries of this checkout stay in fleetnet.
	startBinaries func(tmp, checkout string) (string, error)
	// startedWith is the folder of the binaries the fleet started with.
	startedWith string
)

func TestMain(m *testing.M) {
	// The test's controller-runtime clients log nothing worth reading; left
	// unset, the first client prints a stack saying so.
	ctrllog.SetLogger(logr.Discard())
	code, err := run(m)
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	tools, err := controlplane.FindBinaries()
	if err != nil {
		return 0, err
	}
	tmp, err := os.MkdirTemp("", "fleetnet-e2e-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	fleetnet = filepath.Join(tmp, "bin")
	// The binaries under test are built from this checkout, so that a test
	// run never uses stale ones from bin/.
	build := exec.Command("go", "build", "-o", fleetnet+"/", "./cmd/...")
	build.Dir = filepath.Dir(tools.Dir)
	if out, err := build.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("building fleetnet's binaries: %w\n%s", err, out)
	}
	startedWith = fleetnet
	if startBinaries != nil {
		if startedWith, err = startBinaries(tmp, build.Dir); err != nil {
			return 0, err
		}
	}
	fleetDir = filepath.Join(tmp, "fleet")
	devOptions = dev.Options{
		Dir: fleetDir, Clusters: []string{"hub", "east", "west"}, DualStack: []string{"hub", "east"}, LeaseTTL: leaseTTL,
		Tools: tools, Fleetnet: startedWith,
		// Each cluster's node: kube-proxy and fleetnet-dns (root).
		Nodes:    true,
		HA:       haFleet,
		Networks: networks,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	started := time.Now()
	// Another test package may hold ports at the same time: try a few bases,
	// below Linux's ephemeral port range (32768 up) so that no outgoing
	// connection takes one between the check and the listen.
	for attempt := 0; ; attempt++ {
		devOptions.BasePort = 20000 + 100*rand.IntN(120)
		state, err = dev.Up(ctx, devOptions)
		if err == nil {
			break
		}
		inUse := strings.Contains(err.Error(), "is in use") || strings.Contains(err.Error(), "address already in use")
		if attempt == 4 || !inUse {
			return 0, fmt.Errorf("bringing the fleet up: %w", err)
		}
	}
	fmt.Fprintf(os.Stderr, "e2e: fleet of 3 clusters up in %s (ports from %d)\n", time.Since(started).Round(100*time.Millisecond), devOptions.BasePort)
	code := m.Run()
	if code != 0 || os.Getenv("FLEETNET_TEST_LOGS") != "" {
		for _, c := range state.Clusters {
			p := state.Processes[c.Name+"/"+dev.PartAgent]
			fmt.Fprintf(os.Stderr, "--- last lines of %s:\n%s\n", p.Log, controlplane.Tail(p.Log, 30))
		}
		for _, c := range state.Clusters {
			p := state.Processes[c.Name+"/"+dev.PartProcessNode]
			fmt.Fprintf(os.Stderr, "--- last lines of %s:\n%s\n", p.Log, controlplane.Tail(p.Log, 30))
		}
		for _, c := range []string{dev.ComponentRegistry, dev.ComponentEdge} {
			p := state.Processes[c]
			fmt.Fprintf(os.Stderr, "--- last lines of %s:\n%s\n", p.Log, controlplane.Tail(p.Log, 30))
		}
	}
	if err := dev.Down(fleetDir, nil); err != nil {
		return code, fmt.Errorf("tearing the fleet down: %w", err)
	}
	return code, nil
}
