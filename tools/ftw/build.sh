#!/usr/bin/env sh
# Builds CRS's test tools from the Go module proxy, at the versions pinned in
# this directory's go.mod and go.sum:
#   go-ftw  (github.com/coreruleset/go-ftw/v2, CRS's regression-test runner)
#   albedo  (github.com/coreruleset/albedo, CRS's test backend)
# into target/ftw-tools/ (or $1). Prints the directory.
#
# The proxy serves these exact versions but not their version lists (so
# `go install ...@latest` is refused here) and the checksum database has no
# entry for them: their hashes are the ones pinned in go.sum.
#
# go-ftw imports wait4x.dev/v3 for its optional --wait-for-host flag; the
# proxy refuses that module, so ./wait4x is a small implementation of the
# part go-ftw calls (poll an HTTP endpoint until it answers as expected),
# used through a `replace` in go.mod. Nothing else is replaced.
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/../../target/ftw-tools}"
"$here/../go-build.sh" "$here" "$out" \
  go-ftw=github.com/coreruleset/go-ftw/v2 albedo=github.com/coreruleset/albedo
cd "$out" && pwd
