// Package fleetsetup sets clusters up as a fleet, as `fleetnetctl fleet`
// does: Init installs the hub (certificates, CRDs, the registry, gateway,
// edges, discovery, an agent and clusterset DNS), Join a member (its
// certificate, the agent and fleetnet-dns) and waits until it is registered
// and its imports are in place, Leave withdraws a member's exports and takes
// out everything Join put in. The charts are the ones embedded in the binary
// (package charts), installed through Helm's Go SDK.
package fleetsetup

import (
	"fmt"

	"github.com/fleetnet/fleetnet/internal/scheme"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Cluster is one cluster, reached through a kubeconfig context.
type Cluster struct {
	// Name is the context's name, for messages.
	Name   string
	Config *rest.Config
	Kube   kubernetes.Interface
	Client client.Client

	kubeconfig, context string
}

// Connect reaches the cluster of a kubeconfig's context; empty values mean
// $KUBECONFIG (or ~/.kube/config) and its current context.
func Connect(kubeconfig, kubeContext string) (*Cluster, error) {
	flags := configFlags(kubeconfig, kubeContext, "")
	raw, err := flags.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	name := kubeContext
	if name == "" {
		name = raw.CurrentContext
	}
	if _, ok := raw.Contexts[name]; !ok {
		return nil, fmt.Errorf("--context=%q: the kubeconfig has no such context", name)
	}
	cfg, err := flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("context %s: %w", name, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("context %s: %w", name, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return nil, fmt.Errorf("context %s: %w", name, err)
	}
	return &Cluster{Name: name, Config: cfg, Kube: kube, Client: c, kubeconfig: kubeconfig, context: kubeContext}, nil
}

// configFlags are kubectl's connection flags, which Helm's actions take.
func configFlags(kubeconfig, kubeContext, namespace string) *genericclioptions.ConfigFlags {
	f := genericclioptions.NewConfigFlags(true)
	f.KubeConfig = &kubeconfig
	f.Context = &kubeContext
	f.Namespace = &namespace
	return f
}
