#!/usr/bin/env bash
# Regenerates Go code from every .proto file under api/, with the pinned
# protoc-gen-go and protoc-gen-go-grpc in bin/ and Debian's protoc.
set -euo pipefail
cd "$(dirname "$0")/.."
protos=$(find api -name '*.proto' | sort)
[ -z "$protos" ] && exit 0
command -v protoc >/dev/null || { echo "protoc not found: run 'apt-get install protobuf-compiler'" >&2; exit 1; }
PATH="$PWD/bin:$PATH" protoc -I api \
	--go_out=api --go_opt=paths=source_relative \
	--go-grpc_out=api --go-grpc_opt=paths=source_relative \
	$protos
