#!/usr/bin/env bash
# Copies the Gateway API's standard-channel CRDs from the sigs.k8s.io/gateway-api
# module (the version in go.mod) into DIR, so that the CRDs we install are
# always those of the API types we compile against. The module ships them as
# plain YAML, not embedded in a Go package, hence a script. Its
# ValidatingAdmissionPolicy against downgrades (vap_safeupgrades) is not a CRD
# and is left out.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: copy-gateway-crds.sh DIR}
go mod download sigs.k8s.io/gateway-api
src=$(go list -m -f '{{.Dir}}' sigs.k8s.io/gateway-api)/config/crd/standard
mkdir -p "$dir"
rm -f "$dir"/*.yaml
for f in "$src"/gateway.networking.k8s.io_*.yaml; do
	case $f in *_vap_*) continue ;; esac
	install -m 0644 "$f" "$dir/"
done
