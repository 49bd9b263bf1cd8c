// Package crd holds every CustomResourceDefinition that fleetnet installs:
// ClusterProperty (generated from api/about) and the mcs-api ServiceExport and
// ServiceImport (copied from the sigs.k8s.io/mcs-api module). `make generate`
// writes the YAML files; this package embeds them so that tests and the agent
// install exactly what is in this folder.
package crd

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed *.yaml
var files embed.FS

// All returns every CRD of this folder, sorted by name.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(files, "*.yaml")
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
