#!/usr/bin/env bash
# Live end-to-end check of the Azure Front Door provider, for people with
# an Azure subscription and a running fleet (docs/azure-front-door.md):
#
#   hack/azure-e2e.sh setup     resource group (and WAF policy for Premium),
#                               fleetnet-gateway's Front Door flags, a
#                               GatewayClass, a Gateway and an HTTPRoute
#   hack/azure-e2e.sh tests     wait for Programmed=True, check the profile's
#                               ownership tags, GET through Front Door
#   hack/azure-e2e.sh cleanup   delete the Gateway, wait for the withdrawal,
#                               delete what setup created
#
# Required: AZURE_SUBSCRIPTION_ID, AZURE_RESOURCE_GROUP and
# ENABLE_AZURE_FRONT_DOOR=true (a guard: Front Door profiles cost money).
# Optional: AZURE_LOCATION (westeurope, the resource group's), E2E_TIER
# (Standard or Premium; Premium adds a WAF policy), E2E_CONNECTIVITY
# (public or private-link, Premium only: the members' Services internal
# with azure-pls-create=true, their agents started with
# --azure-load-balancer-id, and their ServiceExports annotated
# fleetnet.dev/pls-approval=auto), HUB_CONTEXT (kubectl context of
# the hub, default the current one), FLEETNET_NAMESPACE (fleetnet-system),
# GATEWAY_RELEASE (fleetnet-gateway), E2E_NAMESPACE (afd-e2e),
# E2E_SERVICE (echo: an exported Service with a ServiceImport in
# E2E_NAMESPACE, port 80), E2E_TIMEOUT (45m: Front Door's first deployment
# commonly takes 10 to 40 minutes), E2E_DELETE_GROUP=true to delete the
# resource group at cleanup.
set -euo pipefail

cmd=${1:-}
: "${AZURE_LOCATION:=westeurope}"
: "${E2E_TIER:=Standard}"
: "${E2E_CONNECTIVITY:=public}"
: "${FLEETNET_NAMESPACE:=fleetnet-system}"
: "${GATEWAY_RELEASE:=fleetnet-gateway}"
: "${E2E_NAMESPACE:=afd-e2e}"
: "${E2E_SERVICE:=echo}"
: "${E2E_TIMEOUT:=45m}"
class="afd-e2e-$(echo "$E2E_TIER" | tr '[:upper:]' '[:lower:]')"
waf="fleetnete2ewaf"

die() { echo "azure-e2e: $*" >&2; exit 1; }

[[ "$cmd" =~ ^(setup|tests|cleanup)$ ]] || die "usage: $0 setup|tests|cleanup"
[[ "${ENABLE_AZURE_FRONT_DOOR:-}" == "true" ]] || die "ENABLE_AZURE_FRONT_DOOR=true is required (Front Door profiles are billed); see docs/azure-front-door.md"
[[ -n "${AZURE_SUBSCRIPTION_ID:-}" ]] || die "AZURE_SUBSCRIPTION_ID is required (az account show --query id -o tsv)"
[[ -n "${AZURE_RESOURCE_GROUP:-}" ]] || die "AZURE_RESOURCE_GROUP is required: the resource group of the Front Door profiles (created by setup if missing)"
[[ "$E2E_TIER" =~ ^(Standard|Premium)$ ]] || die "E2E_TIER=$E2E_TIER: want Standard or Premium"
[[ "$E2E_CONNECTIVITY" =~ ^(public|private-link)$ ]] || die "E2E_CONNECTIVITY=$E2E_CONNECTIVITY: want public or private-link"
[[ "$E2E_CONNECTIVITY" == public || "$E2E_TIER" == Premium ]] || die "E2E_CONNECTIVITY=private-link needs E2E_TIER=Premium"
for tool in az kubectl helm curl; do
  command -v "$tool" >/dev/null || die "$tool is required on PATH"
done

kc() { kubectl ${HUB_CONTEXT:+--context "$HUB_CONTEXT"} "$@"; }
az account set --subscription "$AZURE_SUBSCRIPTION_ID"

setup() {
  if [[ "$(az group exists -n "$AZURE_RESOURCE_GROUP")" != true ]]; then
    az group create -n "$AZURE_RESOURCE_GROUP" -l "$AZURE_LOCATION" --tags fleetnet-e2e=created >/dev/null
  fi
  local annotations="fleetnet.dev/azure-probe-path: /"
  if [[ "$E2E_TIER" == Premium ]]; then
    az network front-door waf-policy create -g "$AZURE_RESOURCE_GROUP" -n "$waf" --sku Premium_AzureFrontDoor --mode Prevention >/dev/null
    local wafid
    wafid=$(az network front-door waf-policy show -g "$AZURE_RESOURCE_GROUP" -n "$waf" --query id -o tsv)
    annotations+=$'\n'"    fleetnet.dev/azure-waf-policy: $wafid"
    annotations+=$'\n'"    fleetnet.dev/azure-connectivity: $E2E_CONNECTIVITY"
  fi
  # The gateway's Front Door flags (replacing the release's extraArgs).
  helm ${HUB_CONTEXT:+--kube-context "$HUB_CONTEXT"} -n "$FLEETNET_NAMESPACE" upgrade "$GATEWAY_RELEASE" charts/fleetnet-gateway --reuse-values \
    --set-json "extraArgs=[\"--azure-subscription-id=$AZURE_SUBSCRIPTION_ID\",\"--azure-resource-group=$AZURE_RESOURCE_GROUP\",\"--azure-location=$AZURE_LOCATION\",\"--azure-front-door-classes=$class=$E2E_TIER\"]"
  kc -n "$FLEETNET_NAMESPACE" rollout status deploy/"$GATEWAY_RELEASE" --timeout=5m
  kc apply -f - <<EOF
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata:
  name: $class
spec:
  controllerName: fleetnet.dev/gateway-controller
  description: Azure Front Door $E2E_TIER (fleetnet e2e)
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: afd
  namespace: $E2E_NAMESPACE
  annotations:
    $annotations
spec:
  gatewayClassName: $class
  listeners:
  - name: http
    port: 80
    protocol: HTTP
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: afd
  namespace: $E2E_NAMESPACE
spec:
  parentRefs:
  - name: afd
  rules:
  - backendRefs:
    - group: multicluster.x-k8s.io
      kind: ServiceImport
      name: $E2E_SERVICE
      port: 80
EOF
}

tests() {
  echo "waiting up to $E2E_TIMEOUT for Gateway $E2E_NAMESPACE/afd to be Programmed (Front Door deploys to its edge)..."
  if ! kc -n "$E2E_NAMESPACE" wait gateway/afd --for=condition=Programmed --timeout="$E2E_TIMEOUT"; then
    kc -n "$E2E_NAMESPACE" get gateway afd -o jsonpath='{range .status.conditions[*]}{.type}={.status} {.reason}: {.message}{"\n"}{end}'
    die "Gateway not Programmed"
  fi
  local host profile owner
  host=$(kc -n "$E2E_NAMESPACE" get gateway afd -o jsonpath='{.status.addresses[0].value}')
  [[ "$host" == *.azurefd.net ]] || die "Gateway address $host is not a Front Door endpoint host name"
  profile=$(az afd profile list -g "$AZURE_RESOURCE_GROUP" --query "[?tags.\"fleetnet-gateway-namespace\"=='$E2E_NAMESPACE' && tags.\"fleetnet-gateway-name\"=='afd'].name | [0]" -o tsv)
  [[ -n "$profile" ]] || die "no profile tagged for Gateway $E2E_NAMESPACE/afd in $AZURE_RESOURCE_GROUP"
  owner=$(az afd profile show -g "$AZURE_RESOURCE_GROUP" --profile-name "$profile" --query 'tags."fleetnet-owner"' -o tsv)
  [[ -n "$owner" ]] || die "profile $profile has no fleetnet-owner tag"
  local code
  code=$(curl -s -o /dev/null -w '%{http_code}' --retry 10 --retry-delay 30 --retry-all-errors "http://$host/")
  [[ "$code" =~ ^[23] ]] || die "GET http://$host/ answered $code"
  echo "ok: profile $profile (owner $owner) serves http://$host/ ($code)"
}

cleanup() {
  kc -n "$E2E_NAMESPACE" delete httproute/afd gateway/afd --ignore-not-found --wait
  echo "waiting for fleetnet to withdraw the Gateway's profile..."
  for _ in $(seq 1 90); do
    local left
    left=$(az afd profile list -g "$AZURE_RESOURCE_GROUP" --query "[?tags.\"fleetnet-gateway-namespace\"=='$E2E_NAMESPACE' && tags.\"fleetnet-gateway-name\"=='afd'] | length(@)" -o tsv)
    [[ "$left" == 0 ]] && break
    sleep 20
  done
  kc delete gatewayclass "$class" --ignore-not-found
  if [[ "$E2E_TIER" == Premium ]]; then
    az network front-door waf-policy delete -g "$AZURE_RESOURCE_GROUP" -n "$waf" 2>/dev/null || true
  fi
  if [[ "${E2E_DELETE_GROUP:-}" == true ]]; then
    az group delete -n "$AZURE_RESOURCE_GROUP" --yes --no-wait
  fi
}

"$cmd"
