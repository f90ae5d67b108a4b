#!/usr/bin/env sh
# Builds grpc-check (main.go: grpc-go at the version pinned in go.mod and
# go.sum) into target/ftw-tools/grpc-check (or $1/grpc-check). Prints the
# binary's path.
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/../../target/ftw-tools}"
"$here/../go-build.sh" "$here" "$out" grpc-check=.
echo "$(cd "$out" && pwd)/grpc-check"
