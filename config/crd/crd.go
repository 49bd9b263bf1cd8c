// Package crd holds every CustomResourceDefinition that fleetnet installs:
// ClusterProperty (generated from api/about) and the mcs-api ServiceExport and
// ServiceImport (copied from the sigs.k8s.io/mcs-api module) in this folder,
// and the Gateway API's standard channel (copied from the
// sigs.k8s.io/gateway-api module) in gateway-api/, and fleetnet's own
// networking.fleetnet.dev group (generated from api/networking) in networking/. `make generate` writes the
// YAML files; this package embeds them so that tests and the local fleet
// install exactly what is here.
package crd

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed *.yaml gateway-api/*.yaml networking/*.yaml
var files embed.FS

// All returns the CRDs every member cluster needs (the MCS API's,
// ClusterProperty, sorted by name, and BackendTrafficPolicy, whose
// locality the agents apply to their imports).
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	member, err := read("*.yaml")
	if err != nil {
		return nil, err
	}
	policy, err := read("networking/networking.fleetnet.dev_backendtrafficpolicies.yaml")
	if err != nil {
		return nil, err
	}
	return append(member, policy...), nil
}

// GatewayAPI returns the Gateway API's standard-channel CRDs, which the
// cluster running fleetnet-gateway needs, sorted by name.
func GatewayAPI() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return read("gateway-api/*.yaml")
}

// Networking returns the CRDs of fleetnet's own networking.fleetnet.dev
// group (generated from api/networking), which the cluster running
// fleetnet-gateway needs, sorted by name.
func Networking() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return read("networking/*.yaml")
}

// GatewayCluster returns what the cluster running fleetnet-gateway needs
// besides All: the Gateway API's CRDs, then Networking's but those All
// already has (BackendTrafficPolicy), so that a hub applies each CRD once.
func GatewayCluster() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	gw, err := GatewayAPI()
	if err != nil {
		return nil, err
	}
	own, err := Networking()
	if err != nil {
		return nil, err
	}
	member, err := All()
	if err != nil {
		return nil, err
	}
	inAll := map[string]bool{}
	for _, c := range member {
		inAll[c.Name] = true
	}
	for _, c := range own {
		if !inAll[c.Name] {
			gw = append(gw, c)
		}
	}
	return gw, nil
}

// Hub returns every CRD the hub needs, each once: All, then
// GatewayCluster.
func Hub() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	member, err := All()
	if err != nil {
		return nil, err
	}
	more, err := GatewayCluster()
	if err != nil {
		return nil, err
	}
	return append(member, more...), nil
}

func read(pattern string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(files, pattern)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(names))
	for _, name := range names {
		data, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", name, err)
		}
		crds = append(crds, crd)
	}
	return crds, nil
}
