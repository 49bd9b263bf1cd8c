// Command azure-e2e is the live end-to-end check of the Azure Front Door
// provider (make e2e-setup, e2e-tests, e2e-cleanup): go run
// ./hack/azure-e2e setup|tests|cleanup. Settings come from the
// environment, as make passes them; internal/azure/afde2e says what each
// step does and checks, and docs/azure-front-door.md how to run it.
//
// Required: AZURE_SUBSCRIPTION_ID, AZURE_RESOURCE_GROUP and
// ENABLE_AZURE_FRONT_DOOR=true (a guard: Front Door profiles are billed;
// not needed with AZURE_ARM_ENDPOINT, a simulation). Optional:
// AZURE_LOCATION (westeurope), E2E_TIER (Standard or Premium),
// E2E_CONNECTIVITY (public or private-link, Premium only), HUB_CONTEXT
// (kubeconfig context of the hub), FLEETNET_NAMESPACE (fleetnet-system),
// GATEWAY_RELEASE (fleetnet-gateway; empty: setup leaves the gateway's
// flags alone), E2E_NAMESPACE (afd-e2e), E2E_SERVICE (echo),
// E2E_PROBE_PATH (/healthz), E2E_TIMEOUT (45m), E2E_BLOCKED_FOR (2m),
// E2E_POLL (20s), E2E_DELETE_GROUP=true, E2E_PRINCIPAL_ID (object id of
// the gateway's identity), E2E_ASSIGN_ROLES=true (make the role
// assignments setup prints), E2E_MEMBER_RESOURCE_GROUPS (comma-separated
// node resource groups of the members, [subscription/]group),
// AZURE_CREDENTIAL (default, azure-cli, workload-identity,
// managed-identity), E2E_CHECK_ECHO (true: the backend echoes request
// headers). Against a simulation: AZURE_ARM_ENDPOINT (https URL),
// AZURE_CA_FILE (its CA) and E2E_EDGE_ADDRESS (host:port of its Front
// Door data plane).
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetnet/fleetnet/internal/azure/afde2e"
	"github.com/fleetnet/fleetnet/internal/gateway/provider/azure/crossregion"
	"github.com/fleetnet/fleetnet/internal/scheme"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "azure-e2e:", err)
		os.Exit(1)
	}
}

func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func run() error {
	step := ""
	if len(os.Args) == 2 {
		step = os.Args[1]
	}
	steps := map[string]func(context.Context, afde2e.Config) error{"setup": afde2e.Setup, "tests": afde2e.Tests, "cleanup": afde2e.Cleanup}
	fn, ok := steps[step]
	if !ok {
		return fmt.Errorf("usage: go run ./hack/azure-e2e setup|tests|cleanup")
	}
	cfg, err := config()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := fn(ctx, cfg); err != nil {
		return fmt.Errorf("%s: %w", step, err)
	}
	return nil
}

func config() (afde2e.Config, error) {
	c := afde2e.Config{SubscriptionID: os.Getenv("AZURE_SUBSCRIPTION_ID"), ResourceGroup: os.Getenv("AZURE_RESOURCE_GROUP"),
		Location: env("AZURE_LOCATION", "westeurope"), Tier: env("E2E_TIER", "Standard"), Connectivity: env("E2E_CONNECTIVITY", "public"),
		Namespace: env("E2E_NAMESPACE", "afd-e2e"), Gateway: "afd", Service: env("E2E_SERVICE", "echo"), ProbePath: env("E2E_PROBE_PATH", "/healthz"),
		PrincipalID: os.Getenv("E2E_PRINCIPAL_ID"), ARMEndpoint: os.Getenv("AZURE_ARM_ENDPOINT"), CAFile: os.Getenv("AZURE_CA_FILE"),
		EdgeAddress: os.Getenv("E2E_EDGE_ADDRESS"), Out: os.Stdout}
	if c.ARMEndpoint == "" && os.Getenv("ENABLE_AZURE_FRONT_DOOR") != "true" {
		return c, fmt.Errorf("ENABLE_AZURE_FRONT_DOOR=true is required (Front Door profiles are billed); see docs/azure-front-door.md")
	}
	var err error
	for _, d := range []struct {
		name, def string
		to        *time.Duration
	}{{"E2E_TIMEOUT", "45m", &c.Timeout}, {"E2E_BLOCKED_FOR", "2m", &c.BlockedFor}, {"E2E_POLL", "20s", &c.PollEvery}} {
		if *d.to, err = time.ParseDuration(env(d.name, d.def)); err != nil {
			return c, fmt.Errorf("%s: %w", d.name, err)
		}
	}
	for _, b := range []struct {
		name, def string
		to        *bool
	}{{"E2E_DELETE_GROUP", "false", &c.DeleteGroup}, {"E2E_ASSIGN_ROLES", "false", &c.AssignRoles}, {"E2E_CHECK_ECHO", "true", &c.CheckEcho}} {
		if *b.to, err = strconv.ParseBool(env(b.name, b.def)); err != nil {
			return c, fmt.Errorf("%s: %w", b.name, err)
		}
	}
	if g := os.Getenv("E2E_MEMBER_RESOURCE_GROUPS"); g != "" {
		c.MemberResourceGroups = strings.Split(g, ",")
	}
	if c.ARMEndpoint != "" {
		c.Credential = afde2e.SimulationCredential{}
	} else {
		var cred azcore.TokenCredential
		if cred, err = crossregion.NewCredential(env("AZURE_CREDENTIAL", crossregion.CredentialDefault), os.Getenv("AZURE_CLIENT_ID")); err != nil {
			return c, fmt.Errorf("azure credential: %w", err)
		}
		c.Credential = cred
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rest, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: os.Getenv("HUB_CONTEXT")}).ClientConfig()
	if err != nil {
		return c, fmt.Errorf("the hub's kubeconfig: %w", err)
	}
	if c.Kube, err = client.New(rest, client.Options{Scheme: scheme.Scheme}); err != nil {
		return c, fmt.Errorf("the hub's client: %w", err)
	}
	if release := env("GATEWAY_RELEASE", "fleetnet-gateway"); release != "" {
		c.ConfigureGateway = helmUpgrade(release, env("FLEETNET_NAMESPACE", "fleetnet-system"), os.Getenv("HUB_CONTEXT"))
	}
	return c, nil
}

// helmUpgrade gives the gateway's release the Front Door flags (its
// extraArgs, the rest of its values kept) and waits for the rollout.
func helmUpgrade(release, namespace, kubeContext string) func(context.Context, []string) error {
	return func(ctx context.Context, args []string) error {
		quoted := make([]string, len(args))
		for i, a := range args {
			quoted[i] = strconv.Quote(a)
		}
		cmd := []string{"-n", namespace, "upgrade", release, "charts/fleetnet-gateway", "--reuse-values", "--wait", "--timeout", "5m",
			"--set-json", "extraArgs=[" + strings.Join(quoted, ",") + "]"}
		if kubeContext != "" {
			cmd = append([]string{"--kube-context", kubeContext}, cmd...)
		}
		c := exec.CommandContext(ctx, "helm", cmd...)
		c.Stdout, c.Stderr = os.Stdout, os.Stderr
		if err := c.Run(); err != nil {
			return fmt.Errorf("helm %s: %w", strings.Join(cmd, " "), err)
		}
		return nil
	}
}
