#!/usr/bin/env sh
# Builds the Coraza SPOA agent (main.go: Coraza v3 and haproxy-go, at the
# versions pinned in go.mod and go.sum) into target/ftw-tools/coraza-spoa
# (or $1/coraza-spoa). Prints the binary's path.
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/../../target/ftw-tools}"
"$here/../go-build.sh" "$here" "$out" coraza-spoa=.
echo "$(cd "$out" && pwd)/coraza-spoa"
