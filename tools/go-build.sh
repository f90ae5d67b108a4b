#!/usr/bin/env sh
# Builds Go programs of one of this directory's modules, at the versions its
# go.mod and go.sum pin, from the Go module proxy:
#
#   tools/go-build.sh MODULE_DIR OUT_DIR NAME=PACKAGE...
#
# (`tools/ftw/build.sh` and `tools/coraza-spoa/build.sh` call it.) The
# checksum database has no entry for some of these modules (CRS's tools,
# haproxy-go): their hashes are the ones pinned in go.sum, which
# `-mod=readonly` enforces.
set -eu
[ "$#" -ge 3 ] || { echo "usage: tools/go-build.sh MODULE_DIR OUT_DIR NAME=PACKAGE..." >&2; exit 2; }
module="$(cd "$1" && pwd)"
mkdir -p "$2"
out="$(cd "$2" && pwd)"
shift 2
command -v go >/dev/null || { echo "tools/go-build.sh: needs the go command" >&2; exit 2; }
cd "$module"
export GONOSUMDB="${GONOSUMDB:+$GONOSUMDB,}github.com/coreruleset,github.com/dropmorepackets"
export GOFLAGS="${GOFLAGS:-} -mod=readonly"
for spec in "$@"; do
  go build -trimpath -o "$out/${spec%%=*}" "${spec#*=}"
done
