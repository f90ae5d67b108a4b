#!/usr/bin/env bash
# `nginx -s reload` N times under load with our module (connectors/nginx) and
# CRS PL1: wrk sends benign requests the whole time; each reload is waited
# for (a new worker serves). Prints the RSS of nginx's processes before,
# along the way and after, and wrk's totals (failed requests: non-2xx and
# socket errors, expected 0).
#
#   corpus/nginx-reload.sh [N]        (default 100)
#   WAF_SWITCH=off corpus/nginx-reload.sh 100   (the same nginx, module off:
#                                                the baseline for wrk's errors)
#
# nginx closes idle keep-alive connections of its old workers on reload;
# wrk counts a request it had just sent on such a connection as a read
# error, with or without a WAF: compare with WAF_SWITCH=off.
# Needs target/release/waf, Debian's nginx, nginx-dev (the module is built
# with connectors/nginx/build.sh) and wrk. Loopback only.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=corpus/serve-setup.sh
. "$here/serve-setup.sh"
n="${1:-100}"
# nginx runs as a daemon here (a reload needs its master): stopped by its pid.
on_exit() {
  if [ -f "$work/nginx.pid" ]; then kill "$(cat "$work/nginx.pid")" 2>/dev/null || true; fi
}
"$root/connectors/nginx/build.sh" > "$work/build.log" 2>&1 || { tail "$work/build.log" >&2; exit 1; }
"$here/crs-config.sh" "$CRS" 1 > "$work/crs.conf"
benign_requests
nginx_conf_in "$work" 2 warn 1024 "$root/target/release/ngx_http_waf_module.so" \
"  upstream app { server 127.0.0.1:19500; keepalive 32; }
  server {
    listen 127.0.0.1:19501;
    waf ${WAF_SWITCH:-on};
    waf_rules_file $work/crs.conf;
    location / { proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection \"\"; }
  }"
"$WAF" test backend --listen 127.0.0.1:19500 2>/dev/null & pids+=($!)
nginx -p "$work" -c "$work/nginx.conf" 2>"$work/nginx.out"
wait_http http://127.0.0.1:19501/
master=$(cat "$work/nginx.pid")
rss() { local t=0; for p in $master $(pgrep -P "$master" || true); do
  t=$((t + $(awk '/VmRSS/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0))); done; echo $((t / 1024)); }
workers() { pgrep -P "$master" | tr '\n' ' '; }
wrk -t1 -c16 -d3600s -s "$work/requests.lua" http://127.0.0.1:19501 > "$work/wrk.out" 2>&1 & wrk_pid=$!; pids+=($wrk_pid)
sleep 3
echo "nginx + waf module (waf ${WAF_SWITCH:-on}): $n reloads (nginx -s reload) of CRS PL1 under wrk -t1 -c16"
echo "| reloads | RSS MiB (master + workers) |"
echo "|---|---|"
echo "| 0 | $(rss) |"
step=$(( n / 10 )); [ "$step" -gt 0 ] || step=1
for i in $(seq 1 "$n"); do
  before="$(workers)"
  nginx -p "$work" -c "$work/nginx.conf" -s reload 2>/dev/null
  # Wait (bounded) until the old workers are gone.
  for _ in $(seq 1 600); do
    now="$(workers)"; gone=1
    for w in $before; do case " $now " in *" $w "*) gone=0;; esac; done
    [ "$gone" = 1 ] && break
    sleep 0.05
  done
  if [ $(( i % step )) = 0 ]; then echo "| $i | $(rss) |"; fi
done
sleep 5
echo "| $n, 5 s later | $(rss) |"
wrk_stop "$wrk_pid" "$work/wrk.out"
echo
echo "requests: $requests, non-2xx: $non2xx, socket errors: $sockerr (wrk's report and nginx's log: $work)"
[ "$non2xx" = 0 ] && [ "$sockerr" = none ]
