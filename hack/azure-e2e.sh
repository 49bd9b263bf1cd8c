#!/usr/bin/env bash
# Live end-to-end check of the Azure Front Door provider: a thin wrapper
# of the Go program that does it (hack/azure-e2e, on the Azure SDK; its
# package comment lists every variable, docs/azure-front-door.md says how
# to run it). Kept for people who call the script directly.
#
#   hack/azure-e2e.sh setup|tests|cleanup
set -euo pipefail
cd "$(dirname "$0")/.."
exec go run ./hack/azure-e2e "$@"
