#!/usr/bin/env bash
# Compressed request bodies through every front end that runs phase 2 on
# them, with CRS PL1: `waf serve`, nginx + our module (connectors/nginx,
# over the C ABI) and HAProxy + `waf spoa` (connectors/haproxy, when
# HAProxy can be installed), and nginx + ModSecurity v3 beside them for
# comparison.
# Applications inflate `Content-Encoding: gzip`/`deflate` bodies, so a WAF
# that reads the compressed bytes lets an attack inside one through. Checks,
# for ours:
#   an XSS in a gzip form body                    -> 403
#   the same in zlib-wrapped deflate              -> 403
#   a benign gzip form body                       -> 200
#   a gzip body cut short                         -> 400
#   a `br` body (cannot be decoded)               -> 415
#   19 KB of deflate inflating to 20 MB (a bomb)  -> 413 (SecRequestBodyNoFilesLimit 131072, Reject)
#   `Content-Encoding: gzip` and no body          -> 200
# HAProxy's shipped rules answer every refusal of the agent with 403 (the
# agent's 400/415/413 are in `txn.waf.status`), so its column expects 403
# where the others differ. Prints ModSecurity's answers (not checked: it
# reads the compressed bytes). CRS forbids the `Content-Encoding` request header (920450) unless
# a site allows it; here it is allowed, as for a site that takes compressed
# bodies. Exit 0 when every check holds, 1 otherwise.
#
#   corpus/compressed-bodies.sh
#
# Needs target/release/waf, Debian's nginx, nginx-dev, and haproxy and
# libnginx-mod-http-modsecurity (installed with apt-get when missing and
# running as root; without HAProxy or the ModSecurity module their columns
# are skipped).
# Loopback only.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=corpus/serve-setup.sh
. "$here/serve-setup.sh"
need_waf
command -v nginx >/dev/null || need_debian nginx
on_exit() {
  if [ -f "$work/nginx.pid" ]; then kill "$(cat "$work/nginx.pid")" 2>/dev/null || true; fi
}
"$root/connectors/nginx/build.sh" > "$work/build.log" 2>&1 || { tail "$work/build.log" >&2; exit 1; }
modsec=/usr/lib/nginx/modules/ngx_http_modsecurity_module.so
[ -e "$modsec" ] || install_debian libnginx-mod-http-modsecurity || true
rules_conf "$work/crs.conf"
# CRS forbids the `Content-Encoding` request header by default (920450's
# restricted_headers_basic); a site that takes compressed bodies lifts that,
# as crs-setup.conf.example shows: its default list without it.
allowed="/proxy/ /lock-token/ /content-range/ /if/ /x-http-method-override/ /x-http-method/ /x-method-override/ /x-middleware-subrequest/ /expect/"
sed -i "/^Include .*rules\/\*\.conf/i SecAction \"id:900250,phase:1,pass,nolog,setvar:'tx.restricted_headers_basic=$allowed'\"" "$work/crs.conf"
grep -q '^SecAction "id:900250' "$work/crs.conf" || { echo "$script: no rules Include in $work/crs.conf" >&2; exit 1; }
proxy='location / { proxy_pass http://127.0.0.1:19700; }'
servers="  client_max_body_size 1m;
  server { listen 127.0.0.1:19702; waf on; waf_rules_file $work/crs.conf; $proxy }"
modules="$root/target/release/ngx_http_waf_module.so"
if [ -e "$modsec" ]; then
  modules+=" $modsec"
  servers+="
  server { listen 127.0.0.1:19703; modsecurity on; modsecurity_rules_file $work/crs.conf; $proxy }"
fi
nginx_conf_in "$work" 1 info 64 "$modules" "$servers"

"$WAF" test backend --listen 127.0.0.1:19700 2>"$work/backend.out" & pids+=($!)
"$WAF" serve -c "$work/crs.conf" --listen 127.0.0.1:19701 --upstream http://127.0.0.1:19700 \
  --error-log "$work/serve.log" 2>"$work/serve.out" & pids+=($!)
nginx -p "$work" -c "$work/nginx.conf" 2>"$work/nginx.out"
wait_http http://127.0.0.1:19700/ http://127.0.0.1:19701/ http://127.0.0.1:19702/
haproxy_ok=0
if command -v haproxy >/dev/null || install_debian haproxy; then
  haproxy_ok=1
  "$WAF" spoa -c "$work/crs.conf" --listen 127.0.0.1:19704 --error-log "$work/spoa.log" \
    2>"$work/spoa.out" & pids+=($!)
  WAF_LISTEN=127.0.0.1:19705 WAF_UPSTREAM=127.0.0.1:19700 WAF_AGENT=127.0.0.1:19704 \
    WAF_SPOE_CONF="$root/connectors/haproxy/spoe-waf.conf" \
    haproxy -f "$root/connectors/haproxy/haproxy.cfg" -db > "$work/haproxy.out" 2>&1 & pids+=($!)
  wait_http http://127.0.0.1:19705/
fi

python3 - "$work" <<'PY'
import gzip, sys, zlib
w = sys.argv[1]
xss = b"name=alice&comment=<script>alert(document.cookie)</script>"
open(f"{w}/xss.gz", "wb").write(gzip.compress(xss, mtime=0))
open(f"{w}/xss.zlib", "wb").write(zlib.compress(xss))
open(f"{w}/benign.gz", "wb").write(gzip.compress(b"name=alice&comment=see+you+tomorrow", mtime=0))
open(f"{w}/cut.gz", "wb").write(gzip.compress(xss, mtime=0)[:30])
open(f"{w}/br", "wb").write(b"\x1b\x0b\x00\xf8\xa5\x5b\x32")
open(f"{w}/bomb.zlib", "wb").write(zlib.compress(b"a=" + b"A" * 20_000_000, 9))
PY

# status PORT CODING FILE: the status of a form POST of FILE (none: no body).
status() {
  local data=()
  [ "$3" != none ] && data=(--data-binary "@$work/$3")
  curl -s -o /dev/null -w '%{http_code}' --max-time 20 -X POST \
    -H 'Host: app.example' -H 'Content-Type: application/x-www-form-urlencoded' -H "Content-Encoding: $2" \
    "${data[@]}" "http://127.0.0.1:$1/form" || echo 000
}

failed=0
printf '| body | expected | waf serve | nginx + waf module | HAProxy + waf spoa (expected) | nginx + ModSecurity |\n|---|---|---|---|---|---|\n'
while read -r what coding file want want_haproxy; do
  serve=$(status 19701 "$coding" "$file")
  module=$(status 19702 "$coding" "$file")
  for got in "$serve" "$module"; do [ "$got" = "$want" ] || failed=$((failed + 1)); done
  agent=-
  if [ "$haproxy_ok" = 1 ]; then
    agent=$(status 19705 "$coding" "$file")
    [ "$agent" = "$want_haproxy" ] || failed=$((failed + 1))
  fi
  peer=-
  [ -e "$modsec" ] && peer=$(status 19703 "$coding" "$file")
  printf '| %s | %s | %s | %s | %s (%s) | %s |\n' "${what//_/ }" "$want" "$serve" "$module" \
    "$agent" "$want_haproxy" "$peer"
done <<'CASES'
XSS_in_gzip gzip xss.gz 403 403
XSS_in_zlib_deflate deflate xss.zlib 403 403
benign_gzip gzip benign.gz 200 200
gzip_cut_short gzip cut.gz 400 403
br br br 415 403
deflate_bomb_19_KB_to_20_MB deflate bomb.zlib 413 403
gzip_header_no_body gzip none 200 200
CASES
ours="waf serve and nginx + waf module$([ "$haproxy_ok" = 1 ] && echo " and HAProxy + waf spoa")"
if [ "$failed" = 0 ]; then
  echo "ok: compressed request bodies, $ours: every answer as expected"
else
  echo "FAILED: $failed answers of $ours not as expected (logs: $work)" >&2
  exit 1
fi
