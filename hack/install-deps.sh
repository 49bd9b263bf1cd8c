#!/usr/bin/env bash
# Installs the Debian packages that the README's commands need, and only the
# missing ones. `make demo`, `make test`, `make generate` and `.ci/run` call it
# first, so whichever a newcomer runs first works on a fresh machine. It runs
# apt-get as root; not root and something missing, it stops before anything is
# built and prints the command to run.
#
#   hack/install-deps.sh          install what is missing
#   hack/install-deps.sh bench    and the peers the benchmarks measure beside
#                                 fleetnet (make bench-edge, make bench-l4)
#   hack/install-deps.sh --check  only say what is missing (exit 1 if anything)
set -euo pipefail

# what package why: what is a command, or a file (an absolute path)
deps=(
	"protoc protobuf-compiler make generate: the gRPC contracts' code"
	"/usr/include/google/protobuf/timestamp.proto libprotobuf-dev make generate: protobuf's well-known types"
	"ip iproute2 the local fleet: pods' and nodes' network namespaces, the bridge"
	"nft nftables the local fleet: kube-proxy in nftables mode on every node"
	"sysctl procps the local fleet: forwarding on the bridge"
	"curl curl make demo: the requests it counts; the process node's shell images"
	"socat socat the local fleet: socat in the process node's shell images"
	"nc.openbsd netcat-openbsd the local fleet: nc, with OpenBSD's flags, in the process node's shell images"
	"nslookup bind9-dnsutils the local fleet: nslookup and dig in the process node's shell images"
	"/etc/ssl/certs/ca-certificates.crt ca-certificates make images: the CA bundle every image carries"
	"chromium chromium make test: the headless browser that test/console drives"
	"dot graphviz make docs: Graphviz, which draws docs/images/architecture.svg"
)

# The benchmarks' peers, run by the benchmarks themselves on loopback: their
# packages' own services are never started (policy-rc.d below).
bench=(
	"nginx nginx-light make bench-edge: nginx, the edge's peer"
	"wrk wrk make bench-edge: wrk, the HTTP/1.1 load generator"
	"h2load nghttp2-client make bench-edge: h2load, the HTTP/2 load generator"
	"haproxy haproxy make bench-l4: haproxy, the L4 proxy's peer"
)

check=false
for arg in "$@"; do
	case $arg in
	--check) check=true ;;
	bench) deps+=("${bench[@]}") ;;
	*)
		echo "install-deps: unknown argument $arg (want: bench, --check)" >&2
		exit 2
		;;
	esac
done

# has WHAT: a file that exists, or a command on PATH or in an sbin folder
# that a user's PATH may lack.
has() {
	[[ $1 == /* ]] && { [[ -e $1 ]]; return; }
	command -v "$1" >/dev/null 2>&1 || [[ -x /usr/sbin/$1 || -x /sbin/$1 ]]
}

missing=()
for d in "${deps[@]}"; do
	read -r cmd pkg why <<<"$d"
	if ! has "$cmd"; then
		missing+=("$pkg")
		echo "install-deps: $cmd is missing ($pkg; $why)" >&2
	fi
done
((${#missing[@]})) || exit 0
$check && exit 1

if [[ $(id -u) != 0 ]]; then
	echo "install-deps: run as root first: sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
	echo "install-deps: (or: sudo hack/install-deps.sh)" >&2
	exit 1
fi
echo "install-deps: apt-get install ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# Packages such as nginx start their service when installed, listening on
# every address; policy-rc.d is Debian's way to forbid that.
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
	chmod +x /usr/sbin/policy-rc.d
	trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
for d in "${deps[@]}"; do
	read -r cmd pkg _ <<<"$d"
	if ! has "$cmd"; then
		echo "install-deps: $pkg installed, but $cmd is still not found" >&2
		exit 1
	fi
done
