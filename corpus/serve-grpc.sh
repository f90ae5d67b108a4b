#!/usr/bin/env bash
# gRPC through `waf serve` + CRS PL1: a real grpc-go server (the health
# service; tools/grpc-check) behind an `h2c://` upstream, and a real
# grpc-go client calling it through the proxy. Checks that a call passes
# (SERVING), that a status the server sends in its trailers reaches the
# client (NotFound for an unknown service), that a call the WAF blocks
# reaches the client as PermissionDenied (HTTP 403), and that `grpc` health
# checks ask the server's health service (a SERVING service's server in,
# an unknown service's out, with the gRPC status in the error log). Exits
# non-zero if any check fails.
#
#   corpus/serve-grpc.sh
#
# Needs target/release/waf, go (tools/grpc-check is built from the Go
# module proxy at the versions its go.sum pins) and curl. CRS from $CRS
# (../shared/crs). Loopback only; everything is stopped on exit.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=corpus/serve-setup.sh
. "$here/serve-setup.sh"
need_waf
grpc="$("$root/tools/grpc-check/build.sh")"

# CRS allows the request content types of crs-setup's list; gRPC's is
# added as a deployment would (rule 900220's variable, set before CRS).
{
  echo "SecAction \"id:900220,phase:1,pass,nolog,setvar:'tx.allowed_request_content_type=|application/x-www-form-urlencoded| |multipart/form-data| |text/xml| |application/xml| |application/soap+xml| |application/json| |application/grpc|'\""
  "$here/crs-config.sh" "$CRS" 1
} > "$work/rules.conf"
cat > "$work/waf.yaml" <<YAML
listen: 127.0.0.1:19721
admin: 127.0.0.1:19722
error_log: error.log
access_log: access.json
upstreams:
  cart: h2c://127.0.0.1:19720
  other: h2c://127.0.0.1:19720
health_checks:
  cart: { grpc: shop.Cart, interval: 0.2 }
  other: { grpc: other.Svc, interval: 0.2, fails: 1 }
sites:
  - name: other
    when: 'http.host eq "other.example"'
    upstream: other
    rules: [rules.conf]
  - name: grpc
    upstream: cart
    rules: [rules.conf]
    custom:
      - name: closed-host
        when: 'http.host eq "closed.example"'
        action: block
YAML
"$grpc" serve 127.0.0.1:19720 2>"$work/grpc.out" & pids+=($!)
"$WAF" serve --config "$work/waf.yaml" 2>"$work/serve.out" & pids+=($!)
wait_http http://127.0.0.1:19722/healthz

failed=0
check() { # WHAT WANT GOT
  if [ "$3" = "$2" ]; then echo "ok: $1: $3"; else echo "FAILED: $1: want \"$2\", got \"$3\""; failed=1; fi
}
check "direct call" "SERVING" "$("$grpc" call 127.0.0.1:19720 shop.Cart)"
check "through the WAF" "SERVING" "$("$grpc" call localhost:19721 shop.Cart)"
check "status in the trailers" "error NotFound: unknown service" "$("$grpc" call localhost:19721 other.Svc)"
blocked="$("$grpc" call localhost:19721 shop.Cart closed.example)"
case "$blocked" in
  "error PermissionDenied: "*"403"*) check "blocked by the WAF" "PermissionDenied (403)" "PermissionDenied (403)" ;;
  *) check "blocked by the WAF" "error PermissionDenied: ... 403 ..." "$blocked" ;;
esac
sleep 0.5
calls="$(grep -c '"proto":"HTTP/2.0".*"upstream":"h2c://127.0.0.1:19720/"' "$work/access.json" || true)"
check "HTTP/2 calls sent to the h2c upstream (access log)" "2" "$calls"
# grpc-go's health service, asked by the health checks: shop.Cart is
# SERVING, other.Svc unknown (gRPC status 5).
metric() { curl -s http://127.0.0.1:19722/metrics | awk -v m="$1" -v up="$2" '$1 == m "{upstream=\"" up "\",server=\"h2c://127.0.0.1:19720/\"}" {print $2}'; }
check "gRPC health check of a SERVING service" "1 0" "$(metric waf_upstream_server_healthy cart) $(metric waf_upstream_health_check_failures_total cart)"
check "gRPC health check of an unknown service" "0" "$(metric waf_upstream_server_healthy other)"
check "why, in the error log" "1" "$(grep -c 'upstream other server h2c://127.0.0.1:19720/ failed 1 health checks in a row.*gRPC status 5: unknown service \[grpc "other.Svc"\]' "$work/error.log" || true)"
[ "$failed" = 0 ] || { echo "logs: $work"; exit 1; }
echo "gRPC through waf serve + CRS PL1: all checks passed"
