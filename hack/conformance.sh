#!/usr/bin/env bash
# `make conformance`: the Gateway API conformance suite (profile GATEWAY-HTTP)
# against a local fleet that this script brings up and removes. The fleet's
# fleetnet-gateway gives every Gateway its own loopback address
# (--gateway-address-pool), since the suite's Gateways share port 80; the
# hub's process node runs the suite's echo-basic and CoreDNS Pods. The
# suite's ConformanceReport goes to docs/conformance/, and the count of passed
# and failed tests is printed last. Needs root (pods and nodes).
set -euo pipefail

cd "$(dirname "$0")/.."
BIN=${BIN:-$PWD/bin}
DIR=${CONFORMANCE_DIR:-/tmp/fleetnet-conformance}
POOL=${CONFORMANCE_ADDRESS_POOL:-127.0.1.0/24}
REPORT=${CONFORMANCE_REPORT:-$PWD/docs/conformance/gateway-api-v1.6.3-gateway-http.yaml}
SUMMARY=$DIR.summary
VERSION=$(git describe --tags --always --dirty 2>/dev/null || echo dev)

down() { "$BIN/fleetnetctl" dev down --dir "$DIR" >/dev/null 2>&1 || true; }
trap down EXIT
down
rm -f "$SUMMARY"
"$BIN/fleetnetctl" dev up --dir "$DIR" --clusters hub --gateway-address-pool "$POOL"

mkdir -p "$(dirname "$REPORT")"
status=0
(
	cd test/conformance
	KUBECONFIG="$DIR/hub/kubeconfig" CONFORMANCE_REPORT="$REPORT" CONFORMANCE_SUMMARY="$SUMMARY" FLEETNET_VERSION="$VERSION" \
		go test -count=1 -timeout 80m -run '^TestGatewayAPI$' -v . ${CONFORMANCE_ARGS:-}
) || status=$?
echo
echo "Gateway API conformance report: ${REPORT#"$PWD"/} (fleetnet $VERSION, $(date -u +%Y-%m-%d))"
cat "$SUMMARY" 2>/dev/null || echo "no summary: the suite did not get to write its report (see above)"
exit $status
