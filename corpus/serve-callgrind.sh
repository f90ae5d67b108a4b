#!/usr/bin/env bash
# Instructions per request of `waf serve` (all its threads), counted by
# valgrind's callgrind: a measure of a change to the proxy's or the
# engine's request path that the shared machine's drifting speed does not
# blur (timings move by 10-30 % from one minute to the next; instruction
# counts repeat to the instruction). `waf serve --workers 1` in front of an
# nginx backend answering 200; the 1,000 benign requests of serve-load.sh
# (the peers' gen_benign.py, seed 1, bodies included) sent in order over one
# keep-alive connection, twice to warm the caches, then the counters are
# zeroed and they are sent twice more and counted.
#
#   [RULES=FILE] corpus/serve-callgrind.sh [WAF...]
#
# Each WAF binary (default target/release/waf) in turn, on CRS PL1 from
# $CRS (../shared/crs) or the rules in $RULES; prints one line each. Needs
# valgrind, nginx and python3. Loopback only; everything is stopped on exit.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=corpus/serve-setup.sh
. "$here/serve-setup.sh"
for tool in valgrind callgrind_control nginx python3; do
  command -v "$tool" >/dev/null || { echo "$script: needs $tool (Debian packages valgrind, nginx)" >&2; exit 2; }
done
[ "$#" -gt 0 ] || set -- "$WAF"
rules_conf "$work/rules.conf"
benign_requests
nginx_conf_in "$work/backend" 1 warn 4096 "" \
  '  server { listen 127.0.0.1:19760; location / { return 200 "ok\n"; } }'
nginx -p "$work/backend" -c "$work/backend/nginx.conf" -g 'daemon off;' & pids+=($!)
n=0
for bin in "$@"; do
  n=$((n + 1))
  out="$work/callgrind.$n"
  valgrind --tool=callgrind --callgrind-out-file="$out.%p" "$bin" serve --workers 1 \
    -c "$work/rules.conf" --listen 127.0.0.1:19761 --upstream http://127.0.0.1:19760 \
    --error-log "$work/error.$n.log" 2>"$work/serve.$n.out" &
  vpid=$!; pids+=("$vpid")
  # CRS compiles ~50 times slower under valgrind: 20-40 s on this machine.
  wait_http_secs=180 wait_http http://127.0.0.1:19761/
  python3 "$here/send_requests.py" "$work/benign.jsonl" 19761 2 >/dev/null
  callgrind_control -z "$vpid" >/dev/null
  sent="$(python3 "$here/send_requests.py" "$work/benign.jsonl" 19761 2)"
  callgrind_control -d "$vpid" >/dev/null
  dump="$(ls -t "$out".* | head -1)"
  total="$(callgrind_annotate "$dump" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')"
  kill "$vpid"; wait "$vpid" 2>/dev/null || true
  echo "$bin: $((total / 2000)) instructions per request ($sent)"
done
