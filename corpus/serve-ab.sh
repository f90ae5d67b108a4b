#!/usr/bin/env bash
# Same-run A/B of two `waf` binaries as proxies (e.g. before and after a
# change to `waf serve`): both serve side by side in front of one nginx
# backend, and wrk (-t2 -c32, 8 s) alternates between them ROUNDS times on
# the benign corpus of corpus/serve-load.sh, so that the machine's drift
# hits both alike; which of the two runs first alternates between rounds.
# Prints each run's req/s and the proxy's CPU µs per request (from
# /proc), then the medians and the paired differences.
#
#   corpus/serve-ab.sh OLD_WAF NEW_WAF [ROUNDS] [crs|none]
#
# `crs` (default): CRS PL1 from $CRS (../shared/crs), as corpus/crs-config.sh
# prints it; `none`: no rules. Needs nginx and wrk (corpus/serve-load.sh
# installs them). Loopback only; everything is stopped on exit.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=corpus/serve-setup.sh
. "$here/serve-setup.sh"
old="$1"; new="$2"; rounds="${3:-6}"; rules="${4:-crs}"
for tool in nginx wrk; do
  command -v "$tool" >/dev/null || { echo "serve-ab.sh: needs $tool (corpus/serve-load.sh installs it)" >&2; exit 2; }
done
case "$rules" in
  crs) "$here/crs-config.sh" "$CRS" 1 > "$work/rules.conf" ;;
  none) : > "$work/rules.conf" ;;
  *) echo "serve-ab.sh: rules are crs or none" >&2; exit 2 ;;
esac
benign_requests
nginx_conf_in "$work/backend" 1 warn 4096 "" \
  '  server { listen 127.0.0.1:19730; location / { return 200 "ok\n"; } }'
nginx -p "$work/backend" -c "$work/backend/nginx.conf" -g 'daemon off;' & pids+=($!)
"$old" serve -c "$work/rules.conf" --listen 127.0.0.1:19731 --upstream http://127.0.0.1:19730 \
  --error-log "$work/old.log" 2>"$work/old.out" & pids+=($!); old_pid=$!
"$new" serve -c "$work/rules.conf" --listen 127.0.0.1:19732 --upstream http://127.0.0.1:19730 \
  --error-log "$work/new.log" 2>"$work/new.out" & pids+=($!); new_pid=$!
wait_http http://127.0.0.1:19731/ http://127.0.0.1:19732/
tick="$(getconf CLK_TCK)"
cpu() { cpu_ticks "$1" | awk '{print $1 + $2}'; }
: > "$work/runs"
for ((r = 1; r <= rounds; r++)); do
  # Odd rounds run the old binary first, even rounds the new one: the
  # second run of a round had an edge of a few us per request (an A/A
  # test, or a change and its reverse, came out in favour of whichever
  # ran second), which alternating cancels.
  order="old new"
  [ $((r % 2)) = 0 ] && order="new old"
  for which in $order; do
    pid=$old_pid; port=19731
    [ "$which" = new ] && { pid=$new_pid; port=19732; }
    c0="$(cpu "$pid")"
    out="$(wrk -t2 -c32 -d8s -s "$work/requests.lua" "http://127.0.0.1:$port/")"
    c1="$(cpu "$pid")"
    wrk_figures "$out"
    us="$(python3 -c "print(round(($c1 - $c0) / $tick * 1e6 / $requests, 1))")"
    echo "round $r $which: $rps req/s, $us us of CPU per request"
    echo "$which $rps $us" >> "$work/runs"
  done
done
python3 - "$work/runs" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
for w in ("old", "new"):
    rps = statistics.median(float(r[1]) for r in rows if r[0] == w)
    us = statistics.median(float(r[2]) for r in rows if r[0] == w)
    print(f"{w}: median {rps:.0f} req/s, {us:.1f} us of CPU per request")
old = [float(r[2]) for r in rows if r[0] == "old"]
new = [float(r[2]) for r in rows if r[0] == "new"]
print("paired differences (new - old, us per request):", [round(b - a, 1) for a, b in zip(old, new)])
PY
