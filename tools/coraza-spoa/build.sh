#!/usr/bin/env sh
# Builds the Coraza SPOA agent (main.go: Coraza v3 and haproxy-go, at the
# versions pinned in go.mod and go.sum) into target/ftw-tools/coraza-spoa
# (or $1/coraza-spoa). Prints the binary's path. The checksum database has
# no entry for haproxy-go: its hash is the one pinned in go.sum.
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/../../target/ftw-tools}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
command -v go >/dev/null || { echo "tools/coraza-spoa/build.sh: needs the go command" >&2; exit 2; }
cd "$here"
export GONOSUMDB="${GONOSUMDB:+$GONOSUMDB,}github.com/dropmorepackets"
export GOFLAGS="${GOFLAGS:-} -mod=readonly"
go build -trimpath -o "$out/coraza-spoa" .
echo "$out/coraza-spoa"
