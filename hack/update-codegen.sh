#!/usr/bin/env bash
# Generates what Kubernetes' own API groups get, for fleetnet's groups
# (about.k8s.io and networking.fleetnet.dev): a typed clientset, listers,
# informers, apply configurations and OpenAPI definitions, with the
# generators pinned in hack/tools/codegen. Run by `make generate`.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-$PWD/bin}
MODULE=github.com/fleetnet/fleetnet
OUT=pkg/generated
HEADER=hack/boilerplate.go.txt
API_GROUPS=(about/v1alpha1 networking/v1alpha1)

inputs=()
for g in "${API_GROUPS[@]}"; do inputs+=("$MODULE/api/$g"); done

rm -rf "$OUT"

# The OpenAPI definitions of our types and of the apimachinery types they
# embed (as Kubernetes' sample-apiserver does); the Gateway API types they
# reference come from sigs.k8s.io/gateway-api/pkg/generated/openapi.
"$BIN/openapi-gen" --go-header-file "$HEADER" \
	--output-dir "$OUT/openapi" --output-pkg "$MODULE/$OUT/openapi" \
	--output-file zz_generated.openapi.go --report-filename /dev/null \
	k8s.io/apimachinery/pkg/apis/meta/v1 k8s.io/apimachinery/pkg/runtime k8s.io/apimachinery/pkg/version \
	"${inputs[@]}"

# applyconfiguration-gen reads the schema as OpenAPI v2 models, for the
# Extract functions that server-side-apply controllers compare with.
schema=$(mktemp)
trap 'rm -f "$schema"' EXIT
go run ./hack/openapi-schema >"$schema"

"$BIN/applyconfiguration-gen" --go-header-file "$HEADER" \
	--openapi-schema "$schema" \
	--output-dir "$OUT/applyconfiguration" --output-pkg "$MODULE/$OUT/applyconfiguration" \
	--external-applyconfigurations "sigs.k8s.io/gateway-api/apis/v1.LocalPolicyTargetReference:sigs.k8s.io/gateway-api/applyconfiguration/apis/v1,sigs.k8s.io/gateway-api/apis/v1.PolicyAncestorStatus:sigs.k8s.io/gateway-api/applyconfiguration/apis/v1" \
	"${inputs[@]}"

client_inputs=()
for g in "${API_GROUPS[@]}"; do client_inputs+=(--input "$g"); done
"$BIN/client-gen" --go-header-file "$HEADER" \
	--output-dir "$OUT/clientset" --output-pkg "$MODULE/$OUT/clientset" \
	--clientset-name versioned --input-base "$MODULE/api" "${client_inputs[@]}" \
	--apply-configuration-package "$MODULE/$OUT/applyconfiguration"

"$BIN/lister-gen" --go-header-file "$HEADER" \
	--output-dir "$OUT/listers" --output-pkg "$MODULE/$OUT/listers" \
	"${inputs[@]}"

"$BIN/informer-gen" --go-header-file "$HEADER" \
	--output-dir "$OUT/informers" --output-pkg "$MODULE/$OUT/informers" \
	--versioned-clientset-package "$MODULE/$OUT/clientset/versioned" \
	--listers-package "$MODULE/$OUT/listers" \
	"${inputs[@]}"
