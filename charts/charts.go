// Package charts embeds fleetnet's Helm charts, so that `fleetnetctl fleet
// init` and `fleet join` install exactly the charts of the binary's own
// version, from anywhere, without this checkout.
package charts

import "embed"

// FS holds one folder per chart (fleetnet-registry, fleetnet-agent, ...),
// each as `helm install charts/<name>` reads it.
//
//go:embed all:fleetnet-registry all:fleetnet-agent all:fleetnet-gateway all:fleetnet-edge all:fleetnet-dns all:fleetnet-discovery all:fleetnet-console
var FS embed.FS
