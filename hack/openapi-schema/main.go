// Command openapi-schema prints the OpenAPI v2 models of fleetnet's API
// groups and of the types they reference (Kubernetes' apimachinery and the
// Gateway API), the schema applyconfiguration-gen needs to generate
// Extract functions. Run by hack/update-codegen.sh, as Kubernetes runs its
// models-schema.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/fleetnet/fleetnet/pkg/generated/openapi"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
	gatewayopenapi "sigs.k8s.io/gateway-api/pkg/generated/openapi"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "openapi-schema:", err)
		os.Exit(1)
	}
}

func run() error {
	ref := func(name string) spec.Ref { return spec.MustCreateRef("#/definitions/" + friendlyName(name)) }
	defs := map[string]spec.Schema{}
	for _, get := range []common.GetOpenAPIDefinitions{gatewayopenapi.GetOpenAPIDefinitions, openapi.GetOpenAPIDefinitions} {
		for name, d := range get(ref) {
			s := d.Schema
			// Keep OpenAPI v2: a type with a v3-only schema embeds its v2
			// form.
			if v2, ok := s.Extensions[common.ExtensionV2Schema]; ok {
				if embedded, ok := v2.(spec.Schema); ok {
					s = embedded
				}
			}
			defs[friendlyName(name)] = s
		}
	}
	doc := spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger:     "2.0",
		Info:        &spec.Info{InfoProps: spec.InfoProps{Title: "fleetnet", Version: "unversioned"}},
		Definitions: defs,
	}}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(&doc)
}

// friendlyName turns a Go type name into an OpenAPI model name as
// Kubernetes writes it: k8s.io/api/core/v1.Pod is io.k8s.api.core.v1.Pod.
func friendlyName(name string) string {
	pkg, typ := name, ""
	if i := strings.LastIndex(name, "."); i >= 0 {
		pkg, typ = name[:i], name[i+1:]
	}
	parts := strings.Split(pkg, "/")
	if host := strings.Split(parts[0], "."); len(host) > 1 {
		for i, j := 0, len(host)-1; i < j; i, j = i+1, j-1 {
			host[i], host[j] = host[j], host[i]
		}
		parts[0] = strings.Join(host, ".")
	}
	out := strings.Join(parts, ".")
	if typ != "" {
		out += "." + typ
	}
	return strings.ReplaceAll(out, "-", "_")
}
