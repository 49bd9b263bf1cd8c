#!/usr/bin/env bash
# The fleetnet demo (`make demo`): a local fleet of four clusters (north on a
# network of its own), a Service
# served by real HTTP pods in two of them (Deployments of Gateway API's echo
# server, applied with kubectl and run by each cluster's process node),
# exported, imported and called;
# then connections by name (clusterset.local DNS and kube-proxy on each
# cluster's node), a conflict, a cluster failure, and the global entry point (a Gateway
# served by fleetnet-edge, a 90/10 split, a BackendTrafficPolicy, failover,
# and a MultiClusterLoadBalancer with a drained cluster), then north's pods
# reached through the east-west gateways. Every step is shown as kubectl shows
# it. The fleet keeps running afterwards; `bin/fleetnetctl dev down` stops it.
set -euo pipefail

cd "$(dirname "$0")/.."
BIN=${BIN:-$PWD/bin}
DIR=${DEMO_DIR:-$PWD/.fleetnet/dev}
FLEETNETCTL="$BIN/fleetnetctl"
KUBECTL=${KUBECTL:-$BIN/kubectl}
export KUBECONFIG=$DIR/kubeconfig
NS=demo
SVC=echo
# Gateway API's echo server: the process node runs bin/echo-basic for it
# (fleetnetctl dev serve uses the same image).
ECHO_IMAGE=registry.k8s.io/gateway-api/echo-basic:v1.6.3

bold=$(tput bold 2>/dev/null || true)
plain=$(tput sgr0 2>/dev/null || true)
step() { printf '\n%s==> %s%s\n' "$bold" "$*" "$plain"; }
show() { printf '%s$ %s%s\n' "$bold" "$*" "$plain"; "$@"; }
show_quiet() { printf '%s$ %s%s\n' "$bold" "$*" "$plain"; "$@" >/dev/null; }
now_ms() { date +%s%3N; }
# apply CONTEXT [ARGS...]: shows the manifest on stdin and applies it in
# CONTEXT (kubectl apply ARGS).
apply() {
	local ctx=$1 manifest
	shift
	manifest=$(cat)
	printf '%s$ kubectl --context %s apply %s-f - <<EOF%s\n%s\n%sEOF%s\n' "$bold" "$ctx" "${*:+$* }" "$plain" "$manifest" "$bold" "$plain"
	"$KUBECTL" --context "$ctx" apply "$@" -f - <<<"$manifest"
}
# apply_again CONTEXT NOTE: applies the manifest on stdin in CONTEXT,
# showing NOTE in its place (a manifest shown before, with a change).
apply_again() {
	printf '%s$ kubectl --context %s apply -f -%s   # %s\n' "$bold" "$1" "$plain" "$2"
	"$KUBECTL" --context "$1" apply -f -
}
# echo_workload KIND NAME REPLICAS: the manifests of an echo workload (KIND
# Deployment, or StatefulSet with a headless Service) and its Service, as a
# user writes them; the pods answer with JSON naming pod, namespace and
# service.
echo_workload() {
	local kind=$1 name=$2 replicas=$3 extra='' cluster_ip=''
	if [[ $kind == StatefulSet ]]; then
		extra="
  serviceName: $name   # pods $name-0, $name-1, each with a DNS name of its own
  podManagementPolicy: Parallel"
		cluster_ip="
  clusterIP: None"
	fi
	cat <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: $NS}
---
apiVersion: apps/v1
kind: $kind
metadata: {name: $name, namespace: $NS}
spec:
  replicas: $replicas$extra
  selector: {matchLabels: {app: $name}}
  template:
    metadata: {labels: {app: $name}}
    spec:
      containers:
      - name: echo
        image: $ECHO_IMAGE
        ports: [{name: http, containerPort: 3000}]
        env:
        - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
        - {name: NAMESPACE, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
        - {name: SERVICE_NAME, value: $name}
        readinessProbe: {httpGet: {path: /health, port: http}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: $name, namespace: $NS}
spec:$cluster_ip
  selector: {app: $name}
  ports: [{name: http, port: 80, targetPort: http}]
EOF
}
# The echo server names its pod; which cluster a pod runs in, the clusters'
# APIs tell. CLUSTER_OF maps the names of echo's pods to their clusters.
declare -A CLUSTER_OF
map_pods() {
	local ctx pod
	for ctx in hub east west north; do
		for pod in $("$KUBECTL" --context "$ctx" get pods -n "$NS" -l app="$SVC" -o name); do
			CLUSTER_OF[${pod#pod/}]=$ctx
		done
	done
}
# by_cluster: echo's answers (JSON) on stdin, and "failed" for requests
# that failed, counted by the cluster of the pod that answered.
by_cluster() {
	local pod
	grep -o '"pod": *"[^"]*"\|failed' | sed 's/"pod": *"\([^"]*\)"/\1/' |
		while read -r pod; do echo "${CLUSTER_OF[$pod]:-$pod}"; done | sort | uniq -c
}

# wait_for SECONDS DESCRIPTION COMMAND...: polls COMMAND every 100 ms and
# sets WAITED_MS to how long it took; on a timeout it shows what the last
# try printed.
wait_for() {
	local limit=$1 what=$2 start out
	shift 2
	start=$(now_ms)
	until out=$("$@" 2>&1); do
		if (($(now_ms) - start > limit * 1000)); then
			echo "demo: timed out after ${limit}s waiting for: $what" >&2
			if [[ -n $out ]]; then
				echo "demo: the last try printed:" >&2
				printf '%s\n' "$out" | tail -n 20 | sed 's/^/   /' >&2
			fi
			# A step may say more of what it waited on (explain_timeout).
			if declare -F explain_timeout >/dev/null; then explain_timeout >&2; fi
			echo "demo: look at the agents' logs with: $FLEETNETCTL dev logs CLUSTER/agent --dir $DIR" >&2
			exit 1
		fi
		sleep 0.1
	done
	WAITED_MS=$(($(now_ms) - start))
	echo "   ($what: ${WAITED_MS} ms)"
}

import_clusters() {
	"$KUBECTL" --context "$1" get serviceimport "$SVC" -n "$NS" -o jsonpath='{range .status.clusters[*]}{.cluster}{" "}{end}' 2>/dev/null
}
imports_from() { # CONTEXT CLUSTERS...: the import in CONTEXT lists exactly CLUSTERS
	local ctx=$1 got
	shift
	got=$(import_clusters "$ctx" | xargs -n1 | sort | xargs)
	[[ "$got" == "$(printf '%s\n' "$@" | sort | xargs)" ]]
}
slices_from() { # CONTEXT CLUSTER: imported slices of CLUSTER exist in CONTEXT
	[[ -n $("$KUBECTL" --context "$1" get endpointslices -n "$NS" -o name \
		-l "multicluster.kubernetes.io/service-name=$SVC,multicluster.kubernetes.io/source-cluster=$2") ]]
}
no_slices_from() { ! slices_from "$@"; }
GW_PORT=${DEMO_GATEWAY_PORT:-18080}
LB_PORT=${DEMO_LB_PORT:-18090}
lb_ready() { # the MultiClusterLoadBalancer is Programmed and answers
	[[ $("$KUBECTL" --context hub get mclb "$SVC" -n "$NS" -o jsonpath='{.status.conditions[?(@.type=="Programmed")].status}') == True ]] &&
		curl -s --max-time 2 "http://127.0.0.1:$LB_PORT/" | grep -q '"pod"'
}
lb_draining() { # hub shows as Draining, and the edge serves that generation
	local got
	got=$("$KUBECTL" --context hub get mclb "$SVC" -n "$NS" -o jsonpath='{.status.clusters[?(@.name=="hub")].state} {.metadata.generation} {.status.conditions[?(@.type=="Programmed")].observedGeneration} {.status.conditions[?(@.type=="Programmed")].status}')
	read -r state gen observed programmed <<<"$got"
	[[ $state == Draining && $gen == "$observed" && $programmed == True ]]
}
# count_connections N: N new TCP connections through the load balancer,
# counted by the cluster that answered.
count_connections() {
	for _ in $(seq "$1"); do curl -s --max-time 5 -H 'Connection: close' "http://127.0.0.1:$LB_PORT/" || echo failed; echo; done | by_cluster
}
gateway_ready() { # the Gateway is Programmed, echo's policy accepted and the canary imported in hub
	[[ $("$KUBECTL" --context hub get gateway edge -n "$NS" -o jsonpath='{.status.conditions[?(@.type=="Programmed")].status}') == True ]] &&
		[[ $("$KUBECTL" --context hub get backendtrafficpolicy "$SVC" -n "$NS" -o jsonpath='{.status.conditions[?(@.type=="Accepted")].status}') == True ]] &&
		[[ -n $("$KUBECTL" --context hub get serviceimport canary -n "$NS" -o name 2>/dev/null) ]] &&
		curl -s --max-time 2 "http://127.0.0.1:$GW_PORT/split" | grep -q '"pod"'
}
export_echo() { # CONTEXT: apply the ServiceExport of $SVC
	apply "$1" <<EOF
apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceExport
metadata: {name: $SVC, namespace: $NS}
EOF
}
condition_is() { # CONTEXT KIND TYPE STATUS
	[[ $("$KUBECTL" --context "$1" get "$2" "$SVC" -n "$NS" -o jsonpath="{.status.conditions[?(@.type==\"$3\")].status}") == "$4" ]]
}

if [[ $(id -u) != 0 ]]; then
	echo "demo: the echo pods live in network namespaces on a bridge, which needs root; run 'sudo make demo'" >&2
	exit 1
fi

if ! command -v curl >/dev/null; then
	echo "demo: curl fetches the echo answers; install it (apt-get install curl)" >&2
	exit 1
fi
if [[ -f "$DIR/state.json" ]]; then
	step "0. Removing the fleet an earlier demo left in $DIR"
	"$FLEETNETCTL" dev down --dir "$DIR"
fi

step "1. A local fleet: hub, east and west, and north on a network of its own (etcd, API servers, registry, one agent each; a node per cluster with kube-proxy, CoreDNS, fleetnet-dns and a process node that runs Pods)"
show "$FLEETNETCTL" dev up --dir "$DIR" --clusters hub,east,west,north --networks north=b
show "$KUBECTL" config get-contexts

step "2. Real pods: an HTTP echo Deployment and Service in east (2 pods) and west (1 pod), run by each cluster's process node"
echo_workload Deployment "$SVC" 2 | apply east
echo_workload Deployment "$SVC" 1 | apply_again west "the same manifests, with replicas: 1"
for ctx in east west; do
	show "$KUBECTL" --context "$ctx" rollout status deployment/"$SVC" -n "$NS" --timeout=90s
done
show "$KUBECTL" --context east get pods,service,endpointslices -n "$NS" -o wide
map_pods
# Imports land only in namespaces that exist (KEP-1645 namespace sameness).
"$KUBECTL" --context hub create namespace "$NS" --dry-run=client -o yaml | "$KUBECTL" --context hub apply -f - >/dev/null

step "3. Export echo from east and west"
since=$(now_ms)
for ctx in east west; do
	export_echo "$ctx"
done
wait_for 60 "exported -> imported in hub from both clusters" imports_from hub east west
wait_for 30 "imported EndpointSlices of both clusters in hub" eval 'slices_from hub east && slices_from hub west'
T_EXPORT=$(($(now_ms) - since))
show "$KUBECTL" --context east get serviceexport "$SVC" -n "$NS"
show "$KUBECTL" --context hub get serviceimport "$SVC" -n "$NS" -o wide
show "$KUBECTL" --context hub get serviceimport "$SVC" -n "$NS" -o jsonpath='{range .status.clusters[*]}{.cluster}{"\n"}{end}'
show "$KUBECTL" --context hub get endpointslices -n "$NS" -l "multicluster.kubernetes.io/service-name=$SVC" -L multicluster.kubernetes.io/source-cluster

step "3b. The global discovery API: echo's pool by cluster and region (fleetnet-discovery, kubernetes source on hub)"
# fleetnet-discovery listens in the hub's port range (base + 14), with the
# fleet CA's certificates; the admin's may read.
base=$(sed -n 's/.*"basePort": *\([0-9]*\).*/\1/p' "$DIR/state.json")
DISCOVERY=(--server "https://127.0.0.1:$((base + 14))" --ca-file "$DIR/certs/ca.crt" --cert-file "$DIR/certs/admin.crt" --key-file "$DIR/certs/admin.key")
pool_has() { # CLUSTERS...: discovery's echo pool holds exactly these clusters
	[[ $("$FLEETNETCTL" discovery pools "${DISCOVERY[@]}" "$NS/$SVC" -o json | grep -o '"cluster": *"[a-z]*"' | grep -o '"[a-z]*"$' | tr -d '"' | sort | xargs) == "$*" ]]
}
wait_for 30 "echo's pool served with east and west" pool_has east west
show "$FLEETNETCTL" discovery pools "${DISCOVERY[@]}" -n "$NS" -o wide

step "4. By name: a client pod in hub calls echo.$NS.svc.clusterset.local (hub's CoreDNS forwards the zone to fleetnet-dns, then kube-proxy on hub's node)"
# An ordinary Pod, applied with kubectl: hub's process node runs it.
apply hub <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: client
  namespace: $NS
spec:
  containers:
  - name: client
    image: nicolaka/netshoot
    command: ["sleep", "infinity"]
EOF
show "$KUBECTL" --context hub wait -n "$NS" --for=condition=Ready pod/client --timeout=60s
in_client() { "$KUBECTL" --context hub exec -n "$NS" client -- "$@"; }
NAME=$SVC.$NS.svc.clusterset.local
show "$KUBECTL" --context hub get serviceimport "$SVC" -n "$NS" -o jsonpath='{.spec.type} {.spec.ips}{"\n"}'
show "$KUBECTL" --context hub exec -n "$NS" client -- getent hosts "$NAME"
by_name() { # N: N requests by name from the client pod, counted by the cluster that answered
	in_client sh -c "for i in \$(seq $1); do curl -s --max-time 5 http://$NAME/ || echo failed; echo; done" | by_cluster
}
answers_by_name() { in_client curl -s --max-time 2 "http://$NAME/" | grep -q '"pod"'; }
wait_for 30 "hub's kube-proxy serves the ClusterSetIP" answers_by_name
show "$KUBECTL" --context hub exec -n "$NS" client -- curl -s "http://$NAME/"
echo
echo "   50 requests to http://$NAME/, by the cluster of the pod that answered:"
by_name 50
echo "   West withdraws its export:"
since=$(now_ms)
show "$KUBECTL" --context west delete serviceexport "$SVC" -n "$NS"
wait_for 30 "west gone from hub's import and slices" eval 'imports_from hub east && no_slices_from hub west'
T_WITHDRAW=$(($(now_ms) - since))
echo "   50 requests by name after the withdrawal:"
by_name 50
export_echo west
wait_for 30 "west back in hub's import" eval 'imports_from hub east west && slices_from hub west'
echo "   East-west locality: a BackendTrafficPolicy in hub, LocalFirst with failover to east first. Hub has no echo pod,"
echo "   so hub's agent hints the imported EndpointSlices for east (hub's zone) and west away, and hub's kube-proxy follows:"
apply hub <<EOF
apiVersion: networking.fleetnet.dev/v1alpha1
kind: BackendTrafficPolicy
metadata: {name: east-first, namespace: $NS}
spec:
  targetRefs: [{group: multicluster.x-k8s.io, kind: ServiceImport, name: $SVC}]
  locality: LocalFirst
  failover: {order: [{cluster: east}]}
EOF
locality_is() { [[ $("$KUBECTL" --context hub get serviceimport "$SVC" -n "$NS" -o jsonpath='{.status.conditions[?(@.type=="Locality")].reason}') == "$1" ]]; }
only_from() { # CLUSTERS...: 10 requests by name answered by exactly these clusters
	local got t0
	t0=$(now_ms)
	got=$(by_name 10)
	[[ $(awk '{print $2}' <<<"$got" | xargs) == "$*" ]] || { echo "$got (in $(($(now_ms) - t0)) ms)"; return 1; }
}
wait_for 30 "hub's import sends hub's clients to east" locality_is Nearest
show "$KUBECTL" --context hub get serviceimport "$SVC" -n "$NS" -o jsonpath='{.status.conditions[?(@.type=="Locality")].message}{"\n"}'
show "$KUBECTL" --context hub get endpointslices -n "$NS" -l "multicluster.kubernetes.io/service-name=$SVC" \
	-o custom-columns='NAME:.metadata.name,SOURCE-CLUSTER:.metadata.labels.multicluster\.kubernetes\.io/source-cluster,ZONE-HINTS:.endpoints[0].hints.forZones[*].name'
explain_timeout() {
	echo "demo: hub's imported EndpointSlices of echo, endpoint by endpoint (address ready zone-hints):"
	"$KUBECTL" --context hub get endpointslices -n "$NS" -l "multicluster.kubernetes.io/service-name=$SVC" \
		-o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{range .endpoints[*]}{"   "}{.addresses[0]} {.conditions.ready} {.hints.forZones[*].name}{"\n"}{end}{end}'
	echo "demo: hub's node: $("$KUBECTL" --context hub get nodes -o jsonpath='{range .items[*]}{.metadata.name} zone={.metadata.labels.topology\.kubernetes\.io/zone} {end}')"
	echo "demo: the end of hub's kube-proxy log:"
	"$FLEETNETCTL" dev logs hub/kube-proxy --dir "$DIR" 2>&1 | tail -n 15
}
wait_for 30 "hub's kube-proxy sends echo's requests to east only" only_from east
unset -f explain_timeout
echo "   50 requests by name with the policy:"
by_name 50
show "$KUBECTL" --context hub delete backendtrafficpolicy east-first -n "$NS"
wait_for 30 "both clusters answer again" only_from east west
echo "   A headless Service, db, served by a StatefulSet of 2 pods in east and exported: its name resolves to the pods"
{
	echo_workload StatefulSet db 2
	printf -- '---\napiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceExport\nmetadata: {name: db, namespace: %s}\n' "$NS"
} | apply east
show "$KUBECTL" --context east rollout status statefulset/db -n "$NS" --timeout=90s
resolves_db() { [[ $(in_client getent ahostsv4 "db.$NS.svc.clusterset.local" | awk '{print $1}' | sort -u | wc -l) == 2 ]]; }
wait_for 30 "db.$NS.svc.clusterset.local resolves to both pods in hub" resolves_db
show "$KUBECTL" --context hub get serviceimport db -n "$NS"
in_client getent ahostsv4 "db.$NS.svc.clusterset.local" | awk '{print "   " $1}' | sort -u

step "5. A conflict: hub exports its own echo, whose port is named 'web' instead of 'http'"
echo "   (fleetnetctl dev serve is the shortcut: it applies such a Deployment and Service, and waits for the pods)"
show "$FLEETNETCTL" dev serve --dir "$DIR" --cluster hub --namespace "$NS" --name "$SVC" --replicas 1 --port-name web
map_pods
export_echo hub
wait_for 30 "conflict reported on hub's ServiceExport" condition_is hub serviceexport Conflict True
wait_for 30 "conflict reported on east's ServiceExport, the oldest, too" condition_is east serviceexport Conflict True
for c in east west hub; do
	show "$KUBECTL" --context "$c" get serviceexports -n "$NS"
done
show "$KUBECTL" --context hub get serviceexport "$SVC" -n "$NS" \
	-o jsonpath='{range .status.conditions[*]}{.type}={.status} {.reason}: {.message}{"\n"}{end}'
echo "   The oldest export's ports win (KEP-1645); east and west still serve the import:"
show "$KUBECTL" --context west get serviceimport "$SVC" -n "$NS" -o wide
show "$KUBECTL" --context west get serviceimport "$SVC" -n "$NS" \
	-o jsonpath='{.spec.ports}{"\n"}{range .status.conditions[*]}{.type}={.status} {.reason}: {.message}{"\n"}{end}'

step "6. A cluster failure: west's agent stops; west leaves the import when its lease expires"
watchlog=$(mktemp)
"$FLEETNETCTL" discovery watch "${DISCOVERY[@]}" -n "$NS" >"$watchlog" 2>&1 &
watcher=$!
since=$(now_ms)
show "$FLEETNETCTL" dev stop --dir "$DIR" west/agent
wait_for 90 "west gone from hub's import" imports_from hub east hub
T_LEAVE=$(($(now_ms) - since))
wait_for 30 "west's EndpointSlices gone from hub" no_slices_from hub west
wait_for 30 "discovery's echo pool without west" pool_has east hub
kill "$watcher" 2>/dev/null; wait "$watcher" 2>/dev/null || true
echo "   fleetnet-discovery's watch meanwhile (a snapshot, SYNCED, then the change):"
sed 's/^/   /' "$watchlog"
rm -f "$watchlog"
show "$KUBECTL" --context hub get endpointslices -n "$NS" -l "multicluster.kubernetes.io/service-name=$SVC" -L multicluster.kubernetes.io/source-cluster

step "7. West's agent is back: west returns to the import"
since=$(now_ms)
show_quiet "$FLEETNETCTL" dev up --dir "$DIR" --clusters hub,east,west,north --networks north=b
wait_for 60 "west back in hub's import" imports_from hub east hub west
wait_for 30 "west's EndpointSlices back in hub" slices_from hub west
T_RETURN=$(($(now_ms) - since))
show "$KUBECTL" --context hub get endpointslices -n "$NS" -l "multicluster.kubernetes.io/service-name=$SVC" -L multicluster.kubernetes.io/source-cluster
show "$FLEETNETCTL" dev status --dir "$DIR"

step "8. The global entry point: a Gateway in hub, served by the fleet's fleetnet-edge on 127.0.0.1:$GW_PORT"
show "$FLEETNETCTL" dev serve --dir "$DIR" --cluster east --namespace "$NS" --name canary --replicas 1
apply east <<EOF
apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceExport
metadata: {name: canary, namespace: $NS}
EOF
since=$(now_ms)
apply hub <<EOF
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: fleetnet}
spec: {controllerName: fleetnet.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: $NS}
spec:
  gatewayClassName: fleetnet
  listeners: [{name: http, port: $GW_PORT, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: echo, namespace: $NS}
spec:
  parentRefs: [{name: edge}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /split}}]
    backendRefs:
    - {group: multicluster.x-k8s.io, kind: ServiceImport, name: $SVC, weight: 90}
    - {group: multicluster.x-k8s.io, kind: ServiceImport, name: canary, weight: 10}
  - backendRefs:
    - {group: multicluster.x-k8s.io, kind: ServiceImport, name: $SVC}
---
# How the edge treats echo's endpoints: an HTTP check every 200 ms, and a
# failed request tried again on up to two other endpoints.
apiVersion: networking.fleetnet.dev/v1alpha1
kind: BackendTrafficPolicy
metadata: {name: $SVC, namespace: $NS}
spec:
  targetRefs: [{group: multicluster.x-k8s.io, kind: ServiceImport, name: $SVC}]
  healthCheck: {type: HTTP, http: {path: /}, interval: 200ms, timeout: 100ms}
  retry: {attempts: 2}
EOF
wait_for 60 "Gateway programmed, the policy accepted and the canary imported" gateway_ready
T_GATEWAY=$(($(now_ms) - since))
show "$KUBECTL" --context hub get gateway,httproute,backendtrafficpolicy -n "$NS"
echo "   100 requests to http://127.0.0.1:$GW_PORT/, by the cluster of the pod that answered:"
for _ in $(seq 100); do curl -s --max-time 5 "http://127.0.0.1:$GW_PORT/" || echo failed; echo; done | by_cluster
echo "   100 requests to /split (90 echo, 10 canary), by the Service of the pod that answered:"
for _ in $(seq 100); do curl -s --max-time 5 "http://127.0.0.1:$GW_PORT/split"; echo; done | grep -o '"service": *"[a-z]*"' | cut -d'"' -f4 | sort | uniq -c

step "9. Failover: west's echo Deployment scaled to 0 while requests flow through the edge"
# West's echo pods, as an alternation for grep.
west_pods=$("$KUBECTL" --context west get pods -n "$NS" -l app="$SVC" -o name | sed 's,^pod/,,' | paste -sd'|')
log=$(mktemp)
( while :; do
	out=$(curl -s --max-time 5 -w ' code=%{http_code}' "http://127.0.0.1:$GW_PORT/" | tr -d '\n' || echo ' code=000')
	echo "$(now_ms) $out" >>"$log"
done ) &
load=$!
sleep 1
stopped=$(now_ms)
show "$KUBECTL" --context west scale deployment/"$SVC" -n "$NS" --replicas=0
sleep 3
kill "$load" 2>/dev/null; wait "$load" 2>/dev/null || true
# (none when the stop came before west's turn: grep finds nothing)
last_west=$(grep -E "\"pod\": *\"($west_pods)\"" "$log" | tail -1 | cut -d' ' -f1 || true)
T_FAILOVER=$(( ${last_west:-$stopped} - stopped ))
((T_FAILOVER < 0)) && T_FAILOVER=0
REQS=$(wc -l <"$log")
FAILED=$(grep -cv 'code=200' "$log" || true)
show "$KUBECTL" --context west get deployment "$SVC" -n "$NS"
echo "   $REQS requests meanwhile, $FAILED failed; last answer from west ${T_FAILOVER} ms after the scale-down"
rm -f "$log"

step "10. One global TCP address: a MultiClusterLoadBalancer for echo on 127.0.0.1:$LB_PORT (fleetnet-edge's L4 proxy)"
since=$(now_ms)
apply hub --server-side --field-manager=demo <<EOF
apiVersion: networking.fleetnet.dev/v1alpha1
kind: MultiClusterLoadBalancer
metadata: {name: $SVC, namespace: $NS}
spec:
  serviceImportName: $SVC
  ports: [{port: $LB_PORT, protocol: TCP, targetPort: 80}]
EOF
wait_for 60 "load balancer programmed and answering" lb_ready
T_LB=$(($(now_ms) - since))
show "$KUBECTL" --context hub get mclb -n "$NS"
echo "   30 TCP connections to 127.0.0.1:$LB_PORT, by the cluster that answered:"
count_connections 30
echo "   Hub drained: established connections may finish, new ones go elsewhere."
apply hub --server-side --field-manager=demo <<EOF
apiVersion: networking.fleetnet.dev/v1alpha1
kind: MultiClusterLoadBalancer
metadata: {name: $SVC, namespace: $NS}
spec:
  serviceImportName: $SVC
  ports: [{port: $LB_PORT, protocol: TCP, targetPort: 80}]
  clusters: [{name: hub, drain: true}]
EOF
wait_for 30 "hub draining" lb_draining
show "$KUBECTL" --context hub get mclb "$SVC" -n "$NS" -o jsonpath='{range .status.clusters[*]}{.name}{": "}{.state}{"\n"}{end}'
echo "   30 TCP connections after the drain, by the cluster that answered:"
count_connections 30

step "11. Networks: north's pods are on a network of their own, with east's pod range; hub reaches them only through the east-west gateways"
echo "   North's network is a namespace of its own: its pod addresses are east's, and no route leads from one to the other."
echo "   Each side's east-west gateway (fleetnet-edge in the east-west role, fed by its cluster's agent) carries"
echo "   connections between them over mutual TLS 1.3 (HTTP/2 CONNECT), authorized by the export's scope."
since=$(now_ms)
echo_workload Deployment "$SVC" 2 | apply_again north "the same manifests, with replicas: 2"
show "$KUBECTL" --context north rollout status deployment/"$SVC" -n "$NS" --timeout=90s
show "$KUBECTL" --context north get pods -n "$NS" -o wide
export_echo north
map_pods
wait_for 60 "north in hub's import, through hub's east-west gateway" eval 'imports_from hub east hub west north && condition_is hub serviceimport Networks True'
T_NETWORK=$(($(now_ms) - since))
show "$KUBECTL" --context hub get serviceimport "$SVC" -n "$NS" -o jsonpath='{.status.conditions[?(@.type=="Networks")].message}{"\n"}'
echo "   Hub's slices now name hub's east-west gateway alone (10.244.255.1, on the port the agent gave echo): no pod of north's network:"
show "$KUBECTL" --context hub get endpointslices -n "$NS" -l "multicluster.kubernetes.io/service-name=$SVC" -o wide
north_pod=$("$KUBECTL" --context north get pods -n "$NS" -l app="$SVC" -o jsonpath='{.items[0].metadata.name} {.items[0].status.podIP}')
read -r north_name north_ip <<<"$north_pod"
echo "   60 requests to http://$NAME/, by the cluster of the pod that answered:"
by_name 60
echo "   North's pod $north_name is $north_ip; that address, dialled from hub's client, is not north's pod:"
printf '%s$ kubectl --context hub exec -n %s client -- curl -s --max-time 2 http://%s:3000/%s   # by the cluster of the pod that answered\n' "$bold" "$NS" "$north_ip" "$plain"
{ in_client curl -s --max-time 2 "http://$north_ip:3000/" || echo failed; } | by_cluster
echo "   (east's pod has that address in hub's network; north's pods are reached only through the gateways)"
echo "   North's gateway counts the streams hub's gateway sent it (its metrics, in north's network):"
curl -s "http://172.31.1.2:15090/metrics" | grep -E '^fleetnet_eastwest_streams_total' | sed 's/^/   /'

step "12. The fleet in a browser: fleetnet-console (read-only; it follows the registry, the hub and the edge live)"
CONSOLE_URL=$("$FLEETNETCTL" dev status --dir "$DIR" | sed -n 's/^console: //p')
CONSOLE_TOKEN=${CONSOLE_URL##*token=}
echo "   What its services page shows of $NS (the same JSON the page reads):"
curl -sf -H "Authorization: Bearer $CONSOLE_TOKEN" "${CONSOLE_URL%%\?*}api/services?q=$NS/" |
	grep -o '"name":"[a-z0-9-]*","type":"[A-Za-z]*","exporters":\[[^]]*\]' |
	sed -E 's/"name":"([^"]*)","type":"([^"]*)","exporters":\[(.*)\]/   \1 (\2): \3/; s/\{"cluster":"([^"]*)","inImport":(true|false),"ready":([0-9]+)\}/\1 \3 ready/g; s/,/, /g'
echo "   Open it in a browser on this machine (the URL logs in once, then a cookie does):"
echo "   $CONSOLE_URL"

lease=$(sed -n 's/.*"leaseTTL": *\([0-9]*\).*/\1/p' "$DIR/state.json")
step "Convergence, as measured by this run"
row() { printf '  %-58s %9s\n' "$1" "$2"; }
row "ServiceExports applied -> imported slices of both in hub" "$T_EXPORT ms"
row "west's export deleted -> gone from hub's import and slices" "$T_WITHDRAW ms"
row "west's agent stopped -> west gone from hub's import" "$T_LEAVE ms"
row "  (the registry's lease TTL bounds this; a lease renewed" ""
row "   up to TTL/3 before the stop expires sooner: TTL is)" "$((lease / 1000000)) ms"
row "west's agent started -> west's slices back in hub" "$T_RETURN ms"
row "Gateway and HTTPRoute applied -> programmed on the edge" "$T_GATEWAY ms"
row "west's echo scaled to 0 -> last answer from west" "$T_FAILOVER ms"
row "  requests that failed meanwhile (of $REQS)" "$FAILED"
row "MultiClusterLoadBalancer applied -> answering on the edge" "$T_LB ms"
row "north's pods applied -> in hub's import, through the gateways" "$T_NETWORK ms"

cat <<EOF

The fleet keeps running. Explore it:
  export KUBECONFIG=$KUBECONFIG
  $KUBECTL --context west get serviceimports,endpointslices -n $NS
  $KUBECTL --context east get pods -n $NS -o wide
  $KUBECTL --context hub exec -n $NS client -- curl -s http://$NAME/
  $FLEETNETCTL dev status --dir $DIR
  $FLEETNETCTL dev logs east/agent --dir $DIR
  a browser on this machine: $CONSOLE_URL
Stop it and remove everything:
  $FLEETNETCTL dev down --dir $DIR
EOF
