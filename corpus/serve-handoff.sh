#!/usr/bin/env bash
# Handoff under load: a new `waf serve` takes the port over from the running
# one N times while wrk sends benign requests (the peers' gen_benign.py,
# bodies included) through CRS PL1 on keep-alive connections. Each time: a new
# process starts with --reuse-port on the same addresses, is waited for
# ("listening on" in its output), then the old one gets SIGTERM and is
# waited for (it stops accepting, answers each connection's next request
# with `Connection: close`, and drains). What a binary upgrade, or a change
# of the settings a reload cannot apply, does in production. Prints wrk's
# totals: failed requests (non-2xx and socket errors) are expected 0.
#
#   corpus/serve-handoff.sh [N]          (default 20 handoffs)
#   MIGRATE=1 corpus/serve-handoff.sh    sets net.ipv4.tcp_migrate_req=1 for
#                                        the run (root; restored on exit)
#   RESTART=1 corpus/serve-handoff.sh    the comparison: no --reuse-port, the
#                                        old process stopped before the new
#                                        one starts (a plain restart)
#
# Connections that wait in a closing listener's accept queue are reset by
# the kernel unless net.ipv4.tcp_migrate_req is 1 (Linux 5.14+), which
# moves them to the listener that stays: the script says which was in force.
#
# Needs target/release/waf, python3, curl and Debian's wrk (installed with
# apt-get when missing and running as root). CRS from $CRS (../shared/crs)
# unless RULES is given. Loopback only; everything is stopped on exit.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=corpus/serve-setup.sh
. "$here/serve-setup.sh"
n="${1:-20}"
migrate=/proc/sys/net/ipv4/tcp_migrate_req
migrate_was="$(cat "$migrate" 2>/dev/null || echo unsupported)"
# After the processes are stopped: the kernel setting as it was.
on_exit() {
  if [ -n "${MIGRATE:-}" ] && [ "$migrate_was" != unsupported ]; then echo "$migrate_was" > "$migrate" 2>/dev/null || true; fi
}

command -v wrk >/dev/null || need_debian wrk
need_waf
if [ -n "${MIGRATE:-}" ]; then
  echo 1 > "$migrate" 2>/dev/null || { echo "serve-handoff.sh: cannot set $migrate (root, Linux 5.14+)" >&2; exit 2; }
fi

rules_conf "$work/rules.conf"
benign_requests

"$WAF" test backend --listen 127.0.0.1:19310 2>"$work/backend.out" & pids+=($!)

reuse=--reuse-port; [ -n "${RESTART:-}" ] && reuse=
# Starts a proxy on the shared addresses; waits until it listens.
start_proxy() {
  local out="$work/serve.$1.out"
  "$WAF" serve -c "$work/rules.conf" $reuse --listen 127.0.0.1:19311 \
    --upstream http://127.0.0.1:19310 --admin 127.0.0.1:19312 \
    --error-log "$work/waf.$1.log" 2>"$out" & pids+=($!); proxy=$!
  for _ in $(seq 1 300); do
    grep -q 'listening on' "$out" 2>/dev/null && return 0
    kill -0 "$proxy" 2>/dev/null || break
    sleep 0.1
  done
  echo "serve-handoff.sh: proxy $1 did not start" >&2; cat "$out" >&2; exit 1
}

start_proxy 0
old=$proxy
wait_http http://127.0.0.1:19310/

wrk -t1 -c16 -d3600s -s "$work/requests.lua" http://127.0.0.1:19311 > "$work/wrk.out" 2>&1 & wrk_pid=$!; pids+=($wrk_pid)
sleep 3
what=handoffs; [ -n "${RESTART:-}" ] && what="restarts (no --reuse-port: stop, then start)"
echo "waf serve: $n $what under wrk -t1 -c16 (benign corpus, CRS PL1), net.ipv4.tcp_migrate_req=$(cat "$migrate" 2>/dev/null || echo unsupported)"
SECONDS=0
for i in $(seq 1 "$n"); do
  if [ -n "${RESTART:-}" ]; then
    kill -TERM "$old"
    wait "$old" 2>/dev/null || true
    start_proxy "$i"
  else
    start_proxy "$i"
    sleep 0.5
    kill -TERM "$old"
    wait "$old" 2>/dev/null || true
  fi
  old=$proxy
  sleep 0.5
done
took=$SECONDS
sleep 1
wrk_stop "$wrk_pid" "$work/wrk.out"
drained=$(grep -h ' 0 cut at the grace period' "$work"/serve.*.out | grep -c . || true)
echo "$n done in $took s; requests: $requests, non-2xx: $non2xx, socket errors: $sockerr"
echo "old processes that drained with no connection cut: $drained of $n"
echo "(wrk's report and the logs: $work)"
[ "$non2xx" = 0 ] && [ "$sockerr" = none ]
