#!/usr/bin/env bash
# Load comparison of `waf serve` with nginx + ModSecurity v3, same machine,
# same run (issue 11's table): wrk sends benign browser-like requests
# (../shared/peers/corpus/gen_benign.py, as issue 11 says; bodies included;
# see benign_requests in serve-setup.sh) through
#   (a) nginx proxying, no WAF
#   (b) nginx + libnginx-mod-http-modsecurity (ModSecurity v3) + CRS PL1
#   (c) waf serve, no rules
#   (d) waf serve + CRS PL1 (the same configuration text as (b))
#   (e) nginx + our module (connectors/nginx) + CRS PL1, when it builds
#   (f) HAProxy (Debian's 2.6) alone, and (g) HAProxy + `waf spoa` + CRS PL1
#       (connectors/haproxy), when haproxy is there, and (h) HAProxy + the
#       Coraza v3 agent (tools/coraza-spoa, when Go builds it) with the same
#       HAProxy and SPOE configuration (CPU and RSS: HAProxy and the agent
#       together). Both agent setups use tune.bufsize 65536, the largest
#       frame haproxy-go (the Coraza agent's SPOP library) accepts.
# to the same backend (nginx answering 200). Prints throughput, p50/p99
# latency, non-2xx responses, CPU seconds and peak RSS of each proxy.
#
#   [ROUNDS=N] corpus/serve-load.sh [SECONDS]
#
# SECONDS per timed run (default 10); ROUNDS (default 3) rounds, each running
# every scenario once in turn, so that each scenario is measured at several
# moments of a shared machine's drifting speed. The table gives medians; the
# ratios between scenarios are taken within each round, then their median.
#
# Needs: target/release/waf (cargo build --release -p waf-cli), python3, and
# Debian's nginx, libnginx-mod-http-modsecurity and wrk (installed here with
# apt-get when missing and running as root). CRS from $CRS (../shared/crs),
# the request generator from the peers beside it ($PEERS, ../shared/peers).
# Everything listens on 127.0.0.1 only; all processes are stopped on exit.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=corpus/serve-setup.sh
. "$here/serve-setup.sh"
secs="${1:-10}"
ROUNDS="${ROUNDS:-3}"
CONNS="${CONNS:-32}"
# nginx's workers (www-data when started as root) write request bodies to
# temporary files under here.
chmod 0755 "$work"

need=()
command -v nginx >/dev/null || need+=(nginx)
[ -e /usr/lib/nginx/modules/ngx_http_modsecurity_module.so ] || need+=(libnginx-mod-http-modsecurity)
command -v wrk >/dev/null || need+=(wrk)
need_debian "${need[@]}"
need_waf
ports_free $(seq 19000 19010)

"$here/crs-config.sh" "$CRS" 1 > "$work/crs-pl1.conf"
: > "$work/empty.conf"

# The wrk script: cycles through the corpus, bodies and headers included.
benign_requests

nginx_conf() { # NAME PORT BODY
  local module=
  [ "$1" = modsec ] && module=/usr/lib/nginx/modules/ngx_http_modsecurity_module.so
  [ "$1" = wafmod ] && module=$root/target/release/ngx_http_waf_module.so
  nginx_conf_in "$work/$1" 2 warn 4096 "$module" "  client_max_body_size 16m;
  upstream app { server 127.0.0.1:19000; keepalive 64; }
  server {
    listen 127.0.0.1:$2;
    $3
  }"
}
nginx_conf backend 19000 'location / { return 200 "ok\n"; }'
nginx_conf plain 19001 'location / { proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection ""; }'
nginx_conf modsec 19002 "modsecurity on; modsecurity_rules_file $work/crs-pl1.conf; location / { proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection \"\"; }"
# (e) our nginx module (connectors/nginx), when it builds (Debian's nginx-dev).
wafmod=0
if "$root/connectors/nginx/build.sh" > "$work/module-build.log" 2>&1; then
  wafmod=1
  nginx_conf wafmod 19005 "waf on; waf_rules_file $work/crs-pl1.conf; location / { proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection \"\"; }"
fi

nginx -p "$work/backend" -c "$work/backend/nginx.conf" -g 'daemon off;' & pids+=($!)
nginx -p "$work/plain" -c "$work/plain/nginx.conf" -g 'daemon off;' & pids+=($!); plain_pid=$!
nginx -p "$work/modsec" -c "$work/modsec/nginx.conf" -g 'daemon off;' & pids+=($!); modsec_pid=$!
if [ "$wafmod" = 1 ]; then
  nginx -p "$work/wafmod" -c "$work/wafmod/nginx.conf" -g 'daemon off;' & pids+=($!); wafmod_pid=$!
fi
"$WAF" serve -c "$work/empty.conf" --listen 127.0.0.1:19003 --upstream http://127.0.0.1:19000 \
  --error-log "$work/waf-empty.log" 2>>"$work/waf-empty.out" & pids+=($!); empty_pid=$!
"$WAF" serve -c "$work/crs-pl1.conf" --listen 127.0.0.1:19004 --upstream http://127.0.0.1:19000 \
  --error-log "$work/waf-crs.log" 2>>"$work/waf-crs.out" & pids+=($!); crs_pid=$!

# Wait (bounded) until every port answers.
haproxy_ok=0
if command -v haproxy >/dev/null || install_debian haproxy; then
  haproxy_ok=1
  cat > "$work/haproxy-plain.cfg" <<CFG
global
    log stderr format raw local0 warning
defaults
    mode http
    timeout client 30s
    timeout connect 5s
    timeout server 30s
frontend web
    bind 127.0.0.1:19006
    default_backend app
backend app
    server app 127.0.0.1:19000
CFG
  haproxy -f "$work/haproxy-plain.cfg" -db > "$work/haproxy-plain.out" 2>&1 & pids+=($!); haproxy_plain_pid=$!
  sed 's/^\( *tune.bufsize\) .*/\1 65536/' "$root/connectors/haproxy/haproxy.cfg" > "$work/haproxy-agent.cfg"
  "$WAF" spoa -c "$work/crs-pl1.conf" --listen 127.0.0.1:19008 --error-log "$work/spoa.log" \
    2>"$work/spoa.out" & pids+=($!); spoa_pid=$!
  coraza=0
  if coraza_bin="$("$root/tools/coraza-spoa/build.sh" 2>"$work/coraza-build.log")"; then
    coraza=1
    "$coraza_bin" -listen 127.0.0.1:19010 -rules "$work/crs-pl1.conf" -log "$work/coraza.log" \
      2>"$work/coraza.out" & pids+=($!); coraza_pid=$!
  fi
  sleep 2
  WAF_LISTEN=127.0.0.1:19007 WAF_UPSTREAM=127.0.0.1:19000 WAF_AGENT=127.0.0.1:19008 \
    WAF_SPOE_CONF="$root/connectors/haproxy/spoe-waf.conf" \
    haproxy -f "$work/haproxy-agent.cfg" -db > "$work/haproxy-spoa.out" 2>&1 & pids+=($!); haproxy_spoa_pid=$!
  if [ "$coraza" = 1 ]; then
    for _ in $(seq 1 300); do
      grep -q listening "$work/coraza.out" 2>/dev/null && break
      sleep 0.1
    done
    WAF_LISTEN=127.0.0.1:19009 WAF_UPSTREAM=127.0.0.1:19000 WAF_AGENT=127.0.0.1:19010 \
      WAF_SPOE_CONF="$root/connectors/haproxy/spoe-waf.conf" \
      haproxy -f "$work/haproxy-agent.cfg" -db > "$work/haproxy-coraza.out" 2>&1 & pids+=($!); haproxy_coraza_pid=$!
  fi
  sleep 3
fi
for port in 19000 19001 19002 19003 19004 $( [ "$wafmod" = 1 ] && echo 19005 ) $( [ "$haproxy_ok" = 1 ] && echo 19006 19007 ) $( [ "${coraza:-0}" = 1 ] && echo 19009 ); do
  wait_http "http://127.0.0.1:$port/"
done

# CPU seconds (utime + stime) of a process and its children, and peak RSS (KiB).
# $1: one pid or several (space-separated); their children count too.
cpu_of() { local total=0 u s; for p in $1 $(pgrep -P "${1// /,}" || true); do
  read -r u s < <(cpu_ticks "$p"); total=$((total + u + s)); done
  echo "$total"; }
rss_of() { local total=0; for p in $1 $(pgrep -P "${1// /,}" || true); do
  total=$((total + $(awk '/VmHWM/ {print $2}' "/proc/$p/status"))); done; echo "$total"; }
hz=$(getconf CLK_TCK)

# One timed run of one scenario: appends a line to $work/runs.tsv
# (round, label, req/s, p50 ms, p99 ms, non-2xx, CPU s, peak RSS MiB).
run() { # ROUND LABEL PORT PID
  local before after
  # A short warm-up, then the timed run.
  wrk -t1 -c8 -d2s -s "$work/requests.lua" "http://127.0.0.1:$3" >/dev/null 2>&1 || true
  before=$(cpu_of "$4")
  wrk -t2 -c"$CONNS" -d"${secs}s" --latency -s "$work/requests.lua" "http://127.0.0.1:$3" > "$work/run.wrk" 2>&1
  after=$(cpu_of "$4")
  python3 - "$1" "$2" "$work/run.wrk" "$(( (after - before) ))" "$hz" "$(rss_of "$4")" >> "$work/runs.tsv" <<'PY'
import re, sys
rnd, label, path, ticks, hz, rss = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
t = open(path).read()
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", t).group(1))
def lat(p):
    m = re.search(r"\s%s%%\s+([\d.]+)(us|ms|s)" % p, t)
    v, u = float(m.group(1)), m.group(2)
    return v / 1000 if u == "us" else v * 1000 if u == "s" else v
non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", t)
print("\t".join(map(str, [rnd, label, rps, lat(50), lat(99), non2xx.group(1) if non2xx else 0, ticks / hz, rss / 1024])))
PY
}

# The scenarios, in the order of each round: label, port, pids.
scenarios=("(a) nginx, no WAF|19001|$plain_pid"
           "(b) nginx + ModSecurity 3 + CRS|19002|$modsec_pid"
           "(c) waf serve, no rules|19003|$empty_pid"
           "(d) waf serve + CRS|19004|$crs_pid")
[ "$wafmod" = 1 ] && scenarios+=("(e) nginx + waf module + CRS|19005|$wafmod_pid")
if [ "$haproxy_ok" = 1 ]; then
  scenarios+=("(f) HAProxy, no WAF|19006|$haproxy_plain_pid"
              "(g) HAProxy + waf spoa + CRS|19007|$haproxy_spoa_pid $spoa_pid")
  [ "$coraza" = 1 ] && scenarios+=("(h) HAProxy + Coraza agent + CRS|19009|$haproxy_coraza_pid $coraza_pid")
fi

echo "waf serve load, $(nproc) cores, wrk -t2 -c$CONNS -d${secs}s, 1000 benign requests cycled, CRS PL1,"
echo "$ROUNDS round(s), each running every scenario once in turn"
echo
: > "$work/runs.tsv"
for r in $(seq 1 "$ROUNDS"); do
  for sc in "${scenarios[@]}"; do
    IFS='|' read -r label port pid <<< "$sc"
    run "$r" "$label" "$port" "$pid"
  done
done
[ "$wafmod" = 1 ] || echo "((e) nginx + waf module: not built: $work/module-build.log)"
[ "$haproxy_ok" = 1 ] && [ "${coraza:-0}" = 0 ] && echo "((h) Coraza agent: not built: $work/coraza-build.log)"
# The table (medians over the rounds; p50/p99 of the median round) and the
# ratios the issue asks about, paired within each round: the machine's
# speed drifts from minute to minute, and a ratio of two runs made a
# minute apart measures that drift too.
python3 - "$work/runs.tsv" "$secs" <<'PY'
import collections, statistics, sys
secs = float(sys.argv[2])
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    rnd, label, rps, p50, p99, non2xx, cpu, rss = line.rstrip("\n").split("\t")
    runs[label].append((int(rnd), float(rps), float(p50), float(p99), int(non2xx), float(cpu), float(rss)))
print("| proxy | req/s (median) | min-max | p50 ms | p99 ms | non-2xx | CPU s | CPU us/req | peak RSS MiB |")
print("|---|---|---|---|---|---|---|---|---|")
for label, rs in runs.items():
    med = sorted(rs, key=lambda x: x[1])[len(rs) // 2]
    print("| %s | %.0f | %.0f-%.0f | %.2f | %.2f | %d | %.1f | %.0f | %.0f |" % (
        label, statistics.median(x[1] for x in rs), min(x[1] for x in rs), max(x[1] for x in rs),
        med[2], med[3], sum(x[4] for x in rs), statistics.mean(x[5] for x in rs),
        statistics.median(x[5] / (x[1] * secs) * 1e6 for x in rs), max(x[6] for x in rs)))
def paired(a, b):
    ra = {x[0]: x[1] for x in runs.get(a, [])}
    rb = {x[0]: x[1] for x in runs.get(b, [])}
    return [ra[r] / rb[r] for r in sorted(ra) if r in rb and rb[r] > 0]
print()
for a, b, goal in [("(d) waf serve + CRS", "(b) nginx + ModSecurity 3 + CRS", "goal >= 10x"),
                   ("(d) waf serve + CRS", "(c) waf serve, no rules", "goal >= 0.70"),
                   ("(e) nginx + waf module + CRS", "(b) nginx + ModSecurity 3 + CRS", ""),
                   ("(g) HAProxy + waf spoa + CRS", "(h) HAProxy + Coraza agent + CRS", "")]:
    r = paired(a, b)
    if r:
        print("%s / %s: median %.2f (per round: %s) %s" % (
            a[:3], b[:3], statistics.median(r), ", ".join("%.2f" % x for x in r), goal))
PY
echo "(CPU s: the proxy's processes only; backend and wrk share the same cores. Logs: $work)"
