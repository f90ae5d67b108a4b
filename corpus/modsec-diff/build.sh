#!/bin/sh
# Builds modsec-diff (libmodsecurity 3's side of corpus/diff_fuzz.py) into
# ${1:-$TMPDIR/waf-modsec-diff}. Needs Debian's libmodsecurity-dev,
# nlohmann-json3-dev, pkg-config and g++; installs them when it can.
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-${TMPDIR:-/tmp}/waf-modsec-diff}"
if ! pkg-config --exists modsecurity 2>/dev/null || [ ! -e /usr/include/nlohmann/json.hpp ]; then
  [ "$(id -u)" = 0 ] && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    libmodsecurity-dev nlohmann-json3-dev pkg-config g++ >/dev/null 2>&1 || true
fi
mkdir -p "$out"
g++ -O2 -std=c++17 -Wall -Wextra -o "$out/modsec-diff" "$here/main.cc" $(pkg-config --cflags --libs modsecurity)
echo "$out/modsec-diff"
