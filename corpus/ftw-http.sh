#!/usr/bin/env bash
# CRS's regression suite over real HTTP, as go-ftw runs it, against
#   (1) waf serve,
#   (2) nginx + libnginx-mod-http-modsecurity (ModSecurity v3, the peer deployment), and
#   (3) nginx + our module (connectors/nginx, built by its build.sh; when nginx-dev is there),
#   (4) HAProxy (Debian's 2.6) + `waf spoa` (connectors/haproxy; when haproxy is there:
#       request phases only, so CRS's response-rule tests fail by design),
# each in front of CRS's test backend (albedo's behaviour: `waf test backend`),
# with the same configuration text (`waf test ftw --print-server-config`:
# CRS's test settings, go-ftw's marker rule 999999, CRS). Each stage's log
# lines are read from the server's error log between go-ftw's marker requests
# (`waf test ftw --http`). Prints one line per server and a table.
#
#   corpus/ftw-http.sh [--include REGEX]
#
# Exits 1 when waf serve's pass rate (with its overrides) is under 99.5%.
# Without root or nginx (WAF_ONLY=1), only waf serve runs.
#
# go-ftw and albedo themselves are Go modules; where the Go module proxy
# serves them (`go install github.com/coreruleset/go-ftw/v2@latest`) the same
# setup runs with them instead; here the proxy refuses both (403).
#
# Overrides: CRS's own tests/regression/nginx-overrides.yaml for nginx (what
# CRS's CI uses for that platform), corpus/ftw-overrides/waf-serve.yaml for
# waf serve (where hyper, its HTTP front end, answers before the WAF, each
# with its reason). Pass rates are also given without overrides.
#
# Needs target/release/waf, python3, and Debian's nginx and
# libnginx-mod-http-modsecurity (installed with apt-get when missing and
# running as root). CRS from $CRS (../shared/crs). Loopback only; every
# process is stopped on exit; bounded waits.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$here/.."
CRS="${CRS:-$root/../shared/crs}"
WAF="${WAF:-$root/target/release/waf}"
extra=("$@")
work="$(mktemp -d /tmp/waf-ftw-http.XXXXXX)"
# nginx's workers (www-data when started as root) write request bodies to
# temporary files under here.
chmod 0755 "$work"
pids=()
cleanup() { for p in "${pids[@]:-}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

peer="${WAF_ONLY:-0}"; [ "$peer" = 1 ] && peer=0 || peer=1
need=()
command -v nginx >/dev/null || need+=(nginx)
[ -e /usr/lib/nginx/modules/ngx_http_modsecurity_module.so ] || need+=(libnginx-mod-http-modsecurity)
if [ "$peer" = 1 ] && [ "${#need[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >/dev/null; then
    :
  else
    echo "ftw-http.sh: SKIP nginx + ModSecurity: cannot install ${need[*]} (Debian packages)" >&2; peer=0
  fi
fi
[ -x "$WAF" ] || { echo "ftw-http.sh: build $WAF first (cargo build --release -p waf-cli)" >&2; exit 2; }

"$WAF" test ftw --crs "$CRS" --print-server-config > "$work/crs-test.conf"

# nginx_conf NAME PORT MODULE_SO WAF_DIRECTIVES: an nginx in $work/NAME with
# one WAF module in front of the test backend, logging at level info.
nginx_conf() {
  mkdir -p "$work/$1/logs" && chmod 0777 "$work/$1"
  cat > "$work/$1/nginx.conf" <<CONF
load_module $3;
worker_processes 1;
pid $work/$1/nginx.pid;
error_log $work/$1/logs/error.log info;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $work/$1; proxy_temp_path $work/$1; fastcgi_temp_path $work/$1;
  uwsgi_temp_path $work/$1; scgi_temp_path $work/$1;
  client_max_body_size 16m;
  server {
    listen 127.0.0.1:$2;
    $4
    location / { proxy_pass http://127.0.0.1:19200; proxy_set_header Host \$host; }
  }
}
CONF
}

# Our nginx module, when it can be built.
ours=0
if [ "$peer" = 1 ] && "$here/../connectors/nginx/build.sh" > "$work/module-build.log" 2>&1; then
  ours=1
  nginx_conf nginx-waf 19203 "$root/target/release/ngx_http_waf_module.so" \
    "waf on; waf_rules_file $work/crs-test.conf;"
elif [ "$peer" = 1 ]; then
  echo "ftw-http.sh: SKIP nginx + waf module: connectors/nginx/build.sh failed ($work/module-build.log)" >&2
fi
nginx_conf nginx 19202 /usr/lib/nginx/modules/ngx_http_modsecurity_module.so \
  "modsecurity on; modsecurity_rules_file $work/crs-test.conf;"

"$WAF" test backend --listen 127.0.0.1:19200 2>"$work/backend.out" & pids+=($!)
"$WAF" serve -c "$work/crs-test.conf" --listen 127.0.0.1:19201 --upstream http://127.0.0.1:19200 \
  --error-log "$work/waf.log" 2>"$work/waf.out" & pids+=($!)
spoa=0
if [ "$peer" = 1 ] && { command -v haproxy >/dev/null || { [ "$(id -u)" = 0 ] && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends haproxy >/dev/null; }; }; then
  spoa=1
fi
ports=(19200 19201)
if [ "$peer" = 1 ]; then
  nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" -g 'daemon off;' 2>"$work/nginx.out" & pids+=($!)
  ports+=(19202)
fi
if [ "$ours" = 1 ]; then
  nginx -p "$work/nginx-waf" -c "$work/nginx-waf/nginx.conf" -g 'daemon off;' 2>"$work/nginx-waf.out" & pids+=($!)
  ports+=(19203)
fi
if [ "$spoa" = 1 ]; then
  "$WAF" spoa -c "$work/crs-test.conf" --listen 127.0.0.1:19204 --error-log "$work/spoa.log" 2>"$work/spoa.out" & pids+=($!)
  sleep 2
  WAF_LISTEN=127.0.0.1:19205 WAF_UPSTREAM=127.0.0.1:19200 WAF_AGENT=127.0.0.1:19204 \
    WAF_SPOE_CONF="$root/connectors/haproxy/spoe-waf.conf" \
    haproxy -f "$root/connectors/haproxy/haproxy.cfg" -db > "$work/haproxy.out" 2>&1 & pids+=($!)
  ports+=(19205)
fi
for port in "${ports[@]}"; do
  ok=0
  for _ in $(seq 1 300); do
    if curl -s -o /dev/null "http://127.0.0.1:$port/"; then ok=1; break; fi
    sleep 0.1
  done
  [ "$ok" = 1 ] || { echo "ftw-http.sh: nothing answers on port $port" >&2; cat "$work"/*.out >&2; exit 1; }
done

status=0
run() { # NAME PORT LOG OVERRIDES MIN_PASS_RATE
  local t0 t1
  t0=$(date +%s.%N)
  "$WAF" test ftw --crs "$CRS" --http "127.0.0.1:$2" --error-log "$3" --min-pass-rate 0 \
    --json "$work/$1-raw.json" "${extra[@]}" > "$work/$1-raw.txt" 2>&1 || true
  if [ "$4" = - ]; then
    cp "$work/$1-raw.txt" "$work/$1.txt"
  else
    "$WAF" test ftw --crs "$CRS" --http "127.0.0.1:$2" --error-log "$3" --min-pass-rate "$5" \
      --overrides "$4" --json "$work/$1.json" "${extra[@]}" > "$work/$1.txt" 2>&1 || status=1
  fi
  t1=$(date +%s.%N)
  printf '%s: %s | %s (without overrides: %s)  [%.0f s]\n' "$1" \
    "$(tail -1 "$work/$1.txt")" "$(grep '^pass rate' "$work/$1.txt")" \
    "$(tail -1 "$work/$1-raw.txt")" "$(echo "$t1 - $t0" | bc)"
}
run waf-serve 19201 "$work/waf.log" "$here/ftw-overrides/waf-serve.yaml" 99.5
if [ "$peer" = 1 ]; then
  run nginx-modsecurity 19202 "$work/nginx/logs/error.log" "$CRS/tests/regression/nginx-overrides.yaml" 0
fi
if [ "$ours" = 1 ]; then
  # nginx's front-end overrides (CRS's nginx file without the libmodsecurity ones).
  run nginx-waf-module 19203 "$work/nginx-waf/logs/error.log" "$here/ftw-overrides/nginx-waf-module.yaml" 0
fi
if [ "$spoa" = 1 ]; then
  # No overrides: the failures are HAProxy's front end and the response
  # phases SPOE does not offload (rules 950000 and up), counted here.
  run haproxy-waf-spoa 19205 "$work/spoa.log" - 0
  echo "  haproxy-waf-spoa failures on response rules (>= 950000, not run through SPOA by design): $(grep '^FAIL' "$work/haproxy-waf-spoa.txt" | awk '{ if (substr($2, 1, 6) >= 950000) n++ } END { print n + 0 }')"
fi
echo "failures: grep ^FAIL $work/*.txt; JSON reports beside them"
trap - EXIT; cleanup
exit "$status"
