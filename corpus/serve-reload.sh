#!/usr/bin/env bash
# Hot reload under load: wrk sends benign requests (the peers' gen_benign.py,
# bodies included) through `waf serve` + CRS PL1 while the rules are reloaded
# N times with SIGHUP, each reload waited for (waf_reloads_total on the admin
# address) before the next. Prints the proxy's RSS before, every 10% of the
# way (right after a reload) and 5 s after the last, and wrk's totals:
# every request must get a 2xx (failed requests: non-2xx and socket errors,
# expected 0).
#
#   corpus/serve-reload.sh [N]          (default 1000 reloads)
#   RULES=my.conf corpus/serve-reload.sh 100
#   MAX_SETTLED_GROWTH=2 corpus/serve-reload.sh 50   (what .ci/run does)
#
# With MAX_SETTLED_GROWTH, it also fails if the RSS 5 s after the last
# reload is over that many times the RSS at the start: memory a reload
# freed and the process kept (before serve/src/memory.rs it stayed at
# about 2.6 times the start; with it, 1.5-1.8 after 1,000 reloads).
#
# Needs target/release/waf, python3, curl and Debian's wrk (installed with
# apt-get when missing and running as root). CRS from $CRS (../shared/crs)
# unless RULES is given. Loopback only; everything is stopped on exit.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=corpus/serve-setup.sh
. "$here/serve-setup.sh"
n="${1:-1000}"
command -v wrk >/dev/null || need_debian wrk
need_waf

rules_conf "$work/rules.conf"
benign_requests

"$WAF" test backend --listen 127.0.0.1:19300 2>"$work/backend.out" & pids+=($!)
"$WAF" serve -c "$work/rules.conf" --listen 127.0.0.1:19301 --upstream http://127.0.0.1:19300 \
  --admin 127.0.0.1:19302 --error-log "$work/waf.log" 2>"$work/serve.out" & pids+=($!); serve_pid=$!
wait_http http://127.0.0.1:19300/ http://127.0.0.1:19301/ http://127.0.0.1:19302/
wait_memory_settled http://127.0.0.1:19302

rss() { rss_mib "$serve_pid"; }
reloads() { admin_metric http://127.0.0.1:19302 waf_reloads_total; }
failures() { admin_metric http://127.0.0.1:19302 waf_reload_failures_total; }

# Load for the whole run; wrk prints its totals when interrupted.
wrk -t1 -c16 -d3600s -s "$work/requests.lua" http://127.0.0.1:19301 > "$work/wrk.out" 2>&1 & wrk_pid=$!; pids+=($wrk_pid)
sleep 5
echo "waf serve: $n reloads of $(grep -c . "$work/rules.conf") lines of rules under wrk -t1 -c16 (benign corpus)"
echo "| reloads | RSS MiB | seconds |"
echo "|---|---|---|"
start=$(date +%s)
rss_start=$(rss)
echo "| 0 | $rss_start | 0 |"
step=$(( n / 10 )); [ "$step" -gt 0 ] || step=1
for i in $(seq 1 "$n"); do
  kill -HUP "$serve_pid"
  for _ in $(seq 1 600); do
    [ "$(reloads)" -ge "$i" ] 2>/dev/null && break
    sleep 0.05
  done
  [ "$(reloads)" -ge "$i" ] || { echo "serve-reload.sh: reload $i did not finish in 30 s" >&2; exit 1; }
  if [ $(( i % step )) = 0 ]; then echo "| $i | $(rss) | $(( $(date +%s) - start )) |"; fi
done
# Each sample above is taken right after a reload, near its peak (two
# rulesets, the compilation's garbage); this one once the old rules are gone
# and the freed memory given back (serve/src/memory.rs).
sleep 5
rss_settled=$(rss)
echo "| $n, 5 s later | $rss_settled | $(( $(date +%s) - start )) |"
wrk_stop "$wrk_pid" "$work/wrk.out"
echo
echo "reloads: $(reloads), refused: $(failures); requests: $requests, non-2xx: $non2xx, socket errors: $sockerr"
echo "(wrk's report and the logs: $work)"
settled_ok=1
if [ -n "${MAX_SETTLED_GROWTH:-}" ]; then
  growth=$(awk -v a="$rss_settled" -v b="$rss_start" 'BEGIN {printf "%.2f", a / b}')
  if awk -v g="$growth" -v m="$MAX_SETTLED_GROWTH" 'BEGIN {exit !(g <= m)}'; then
    echo "RSS 5 s after the last reload: $growth times the start's (at most $MAX_SETTLED_GROWTH)"
  else
    echo "serve-reload.sh: RSS 5 s after the last reload is $growth times the start's, over $MAX_SETTLED_GROWTH" >&2
    settled_ok=0
  fi
fi
[ "$non2xx" = 0 ] && [ "$sockerr" = none ] && [ "$(failures)" = 0 ] && [ "$settled_ok" = 1 ]
