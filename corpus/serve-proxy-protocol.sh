#!/usr/bin/env bash
# `waf serve` behind a TCP load balancer that speaks the PROXY protocol:
# HAProxy (Debian's) in `mode tcp` forwarding to two `proxy_protocol`
# listeners of waf serve + CRS PL1, one plain (HAProxy's `send-proxy-v2`
# and `send-proxy`, versions 2 and 1) and one TLS (passed through:
# HAProxy never sees inside it). curl connects to HAProxy from chosen
# loopback addresses (127.0.0.8, 127.0.0.9), so the client the PROXY
# header names differs from the peer waf serve sees (HAProxy, 127.0.0.1).
# Checks that a rule on REMOTE_ADDR sees the header's client (a 403 for
# 127.0.0.9, a 200 for 127.0.0.8) over each path, that CRS blocks an
# attack over it, that the access log records the header's client, that a
# connection without a header is closed unanswered and logged once, and
# that HAProxy's health checks (a LOCAL header, then a close) are not
# errors. Exits
# non-zero if any check fails.
#
#   corpus/serve-proxy-protocol.sh
#
# Needs target/release/waf, curl, openssl and Debian's haproxy (installed
# when run as root). CRS from $CRS (../shared/crs). Loopback only;
# everything is stopped on exit.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=corpus/serve-setup.sh
. "$here/serve-setup.sh"
need_waf
command -v haproxy >/dev/null || need_debian haproxy

openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost \
  -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
{
  echo "SecRule REMOTE_ADDR \"@ipMatch 127.0.0.9\" \"id:10001,phase:1,deny,status:403,log,msg:'client named by the PROXY header'\""
  "$here/crs-config.sh" "$CRS" 1
} > "$work/rules.conf"
cat > "$work/waf.yaml" <<YAML
listeners:
  - listen: 127.0.0.1:19741
    proxy_protocol: true
  - listen: 127.0.0.1:19742
    proxy_protocol: true
    tls: { cert: cert.pem, key: key.pem }
admin: 127.0.0.1:19749
error_log: error.log
access_log: access.json
upstreams:
  app: http://127.0.0.1:19740
sites:
  - name: app
    upstream: app
    rules: [rules.conf]
YAML
cat > "$work/haproxy.cfg" <<CFG
global
    log stderr format raw local0 warning
defaults
    mode tcp
    log global
    timeout client 30s
    timeout connect 5s
    timeout server 30s
frontend v2
    bind 127.0.0.1:19743
    default_backend waf-v2
frontend v1
    bind 127.0.0.1:19744
    default_backend waf-v1
frontend tls
    bind 127.0.0.1:19745
    default_backend waf-tls
# Its health checks send a PROXY header too (a version 2 LOCAL: the
# balancer's own connection), then close.
backend waf-v2
    server waf 127.0.0.1:19741 send-proxy-v2 check inter 200
backend waf-v1
    server waf 127.0.0.1:19741 send-proxy
backend waf-tls
    server waf 127.0.0.1:19742 send-proxy-v2
CFG
"$WAF" test backend --listen 127.0.0.1:19740 2>"$work/backend.out" & pids+=($!)
"$WAF" serve --config "$work/waf.yaml" 2>"$work/serve.out" & pids+=($!)
wait_http http://127.0.0.1:19749/healthz
haproxy -f "$work/haproxy.cfg" -db > "$work/haproxy.out" 2>&1 & pids+=($!)
# Through HAProxy from 127.0.0.7 (not an address the checks count).
for _ in $(seq 1 300); do
  curl -s -o /dev/null --interface 127.0.0.7 http://127.0.0.1:19743/ && break
  sleep 0.1
done

failed=0
check() { # WHAT WANT GOT
  if [ "$3" = "$2" ]; then echo "ok: $1: $3"; else echo "FAILED: $1: want \"$2\", got \"$3\""; failed=1; fi
}
status() { # FROM URL: the status curl gets connecting from address FROM
  curl -sk -o /dev/null -w '%{http_code}' --max-time 5 --interface "$1" "$2" || true
}
for path in "v2 http://127.0.0.1:19743" "v1 http://127.0.0.1:19744" "tls https://127.0.0.1:19745"; do
  name="${path%% *}" url="${path#* }"
  check "$name: a client the rules ban" 403 "$(status 127.0.0.9 "$url/")"
  check "$name: another client" 200 "$(status 127.0.0.8 "$url/")"
  check "$name: CRS on an attack" 403 "$(status 127.0.0.8 "$url/?q=%3Cscript%3Ealert(1)%3C/script%3E")"
done
# Connecting past the balancer: no header, no answer.
check "no PROXY header: closed unanswered" "000" "$(status 127.0.0.8 http://127.0.0.1:19741/)"
sleep 1
check "access log: requests from 127.0.0.8 (the header's client)" 6 \
  "$(grep -c '"client_ip":"127.0.0.8"' "$work/access.json" || true)"
check "access log: requests from 127.0.0.9" 3 \
  "$(grep -c '"client_ip":"127.0.0.9"' "$work/access.json" || true)"
check "access log: requests from HAProxy's own address" 0 \
  "$(grep -c '"client_ip":"127.0.0.1"' "$work/access.json" || true)"
check "error log: the connection without a header, once" 1 \
  "$(grep -c 'PROXY protocol header refused' "$work/error.log" || true)"
check "metrics: refused PROXY headers" 1 \
  "$(admin_metric http://127.0.0.1:19749 waf_proxy_protocol_failures_total)"
[ "$failed" = 0 ] || { echo "logs: $work"; exit 1; }
echo "waf serve behind HAProxy's PROXY protocol (v1, v2, TLS passed through) + CRS PL1: all checks passed"
