#!/usr/bin/env bash
# WebSocket tunnels through `waf serve` + CRS PL1: N tunnels (default 2000)
# opened and kept open, each checked (handshake, one frame echoed); prints
# the proxy's RSS before and with all of them open, and /metrics' tunnel
# counters (corpus/serve_tunnels.py does the work).
#
#   corpus/serve-tunnels.sh [N]
#
# Needs target/release/waf and python3. CRS from $CRS (../shared/crs).
# Loopback only; everything is stopped on exit.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=corpus/serve-setup.sh
. "$here/serve-setup.sh"
n="${1:-2000}"
need_waf
ulimit -n $(( 2 * n + 1024 )) 2>/dev/null || [ "$(ulimit -n)" -ge $(( 2 * n + 1024 )) ] \
  || { echo "serve-tunnels.sh: the open-file limit $(ulimit -n) is under $(( 2 * n + 1024 ))" >&2; exit 2; }

"$here/crs-config.sh" "$CRS" 1 > "$work/rules.conf"
"$WAF" serve -c "$work/rules.conf" --listen 127.0.0.1:19711 --upstream http://127.0.0.1:19710 \
  --admin 127.0.0.1:19712 --error-log "$work/waf.log" 2>"$work/serve.out" & pids+=($!); serve_pid=$!
wait_http http://127.0.0.1:19712/healthz
wait_memory_settled http://127.0.0.1:19712
timeout 600 python3 "$here/serve_tunnels.py" --n "$n" --proxy-port 19711 --app-port 19710 --pid "$serve_pid"
curl -s http://127.0.0.1:19712/metrics | grep -E '^waf_tunnels_(total|open)|^waf_tunnel_bytes_total'
