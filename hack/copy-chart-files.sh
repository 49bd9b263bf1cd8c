#!/usr/bin/env bash
# Copies what the Helm charts must hold verbatim from config/ into charts/
# (`make generate` runs it; `make verify` fails when the copies drift):
#   the agent's ClusterRole (config/rbac/role.yaml)       -> charts/fleetnet-agent/files/clusterrole.yaml
#   the gateway's ClusterRole (config/rbac/gateway/role.yaml) -> charts/fleetnet-gateway/files/clusterrole.yaml
#   fleetnet-dns's ClusterRole (config/rbac/dns/role.yaml)  -> charts/fleetnet-dns/files/clusterrole.yaml
#   fleetnet-discovery's ClusterRole (config/rbac/discovery/role.yaml) -> charts/fleetnet-discovery/files/clusterrole.yaml
#   fleetnet-console's ClusterRole (config/rbac/console/role.yaml) -> charts/fleetnet-console/files/clusterrole.yaml
#   the member clusters' CRDs (config/crd/*.yaml and the BackendTrafficPolicy's) -> charts/fleetnet-agent/crds/
#   fleetnet's own gateway CRDs (config/crd/networking/)   -> charts/fleetnet-gateway/crds/
# The charts read the roles' rules with .Files.Get, so a chart's RBAC is
# always the generated one. The Gateway API's own CRDs (config/crd/gateway-api)
# are the user's to install and are not copied.
set -euo pipefail
cd "$(dirname "$0")/.."

# copy SRC DST prepends a note that the file is generated, so that nobody
# edits the copy instead of its source.
copy() {
	{
		echo "# Copied from $1 by \`make generate\` (hack/copy-chart-files.sh): edit the source, not this copy."
		cat "$1"
	} >"$2.tmp"
	mv "$2.tmp" "$2"
}

# copydir SRCDIR DSTDIR makes DSTDIR's YAML files exactly SRCDIR's.
copydir() {
	mkdir -p "$2"
	rm -f "$2"/*.yaml
	for f in "$1"/*.yaml; do
		copy "$f" "$2/$(basename "$f")"
	done
}

mkdir -p charts/fleetnet-agent/files charts/fleetnet-gateway/files charts/fleetnet-dns/files charts/fleetnet-discovery/files charts/fleetnet-console/files
copy config/rbac/role.yaml charts/fleetnet-agent/files/clusterrole.yaml
copy config/rbac/gateway/role.yaml charts/fleetnet-gateway/files/clusterrole.yaml
copy config/rbac/dns/role.yaml charts/fleetnet-dns/files/clusterrole.yaml
copy config/rbac/discovery/role.yaml charts/fleetnet-discovery/files/clusterrole.yaml
copy config/rbac/console/role.yaml charts/fleetnet-console/files/clusterrole.yaml
copydir config/crd charts/fleetnet-agent/crds
# agents apply BackendTrafficPolicies' locality to their imports
copy config/crd/networking/networking.fleetnet.dev_backendtrafficpolicies.yaml charts/fleetnet-agent/crds/networking.fleetnet.dev_backendtrafficpolicies.yaml
copydir config/crd/networking charts/fleetnet-gateway/crds
