#!/usr/bin/env bash
# Builds the nginx dynamic module (ngx_http_waf_module.so) against Debian's
# nginx-dev (the nginx source tree and configure flags of the packaged
# nginx, so the module loads with `load_module` into Debian's nginx), linked
# with the engine's static C library (target/release/libwaf.a).
#
#   connectors/nginx/build.sh        -> target/release/ngx_http_waf_module.so
#
# The library is taken from cargo's target directory ($CARGO_TARGET_DIR when
# set, relative paths being relative to the repository as cargo runs there);
# the module always lands in the repository's target/release, where the
# scripts under corpus/ load it from.
#
# Needs cargo, a C compiler and Debian's nginx-dev (installed with apt-get
# when missing and running as root).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
src=/usr/share/nginx/src
if [ ! -f "$src/configure" ]; then
  if [ "$(id -u)" = 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nginx-dev >/dev/null
  else
    echo "build.sh: install Debian's nginx-dev" >&2; exit 2
  fi
fi
(cd "$root" && cargo build --release -p waf-ffi)
cargo_target="${CARGO_TARGET_DIR:-target}"
case "$cargo_target" in /*) ;; *) cargo_target="$root/$cargo_target" ;; esac
work="$(mktemp -d /tmp/waf-nginx-build.XXXXXX)"
trap 'rm -rf "$work"' EXIT
cp -r "$src"/. "$work"/
cd "$work"
# shellcheck disable=SC1091
. ./conf_flags
WAF_INCLUDE="$root/ffi/include" WAF_LIB="$cargo_target/release/libwaf.a" \
  ./configure "${NGX_CONF_FLAGS[@]}" --add-dynamic-module="$here" > configure.log 2>&1 \
  || { tail -20 configure.log >&2; exit 1; }
make -f objs/Makefile modules > make.log 2>&1 || { tail -30 make.log >&2; exit 1; }
mkdir -p "$root/target/release"
cp objs/ngx_http_waf_module.so "$root/target/release/ngx_http_waf_module.so"
echo "$root/target/release/ngx_http_waf_module.so"
