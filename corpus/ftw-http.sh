#!/usr/bin/env bash
# CRS's regression suite over real HTTP, run by go-ftw (CRS's own test runner)
# against
#   (1) waf serve,
#   (2) nginx + libnginx-mod-http-modsecurity (ModSecurity v3, the peer deployment), and
#   (3) nginx + our module (connectors/nginx, built by its build.sh; when nginx-dev is there),
#   (4) HAProxy (Debian's 2.6) + `waf spoa` (connectors/haproxy; when haproxy is there:
#       request phases only, so CRS's response-rule tests fail by design),
#   (5) HAProxy + the Coraza SPOA agent (tools/coraza-spoa, the peer agent;
#       with go-ftw only),
# each in front of albedo (CRS's test backend), with the same configuration
# text (`waf test ftw --print-server-config`: CRS's test settings, go-ftw's
# marker rule 999999, CRS). go-ftw reads each server's error log between its
# marker requests. Prints one line per server and a table.
#
#   corpus/ftw-http.sh [--include REGEX]
#
# Exits 1 when waf serve's pass rate (with its overrides) is under 99.5%.
# Without root or nginx (WAF_ONLY=1), only waf serve runs.
#
# go-ftw v2 and albedo are built from the Go module proxy by tools/ftw/build.sh
# (pinned in tools/ftw/go.mod). Where they cannot be built (no go command, no
# proxy), or with FTW_RUNNER=waf, the same servers run under our own
# implementation of go-ftw's protocol instead (`waf test ftw --http`, with
# `waf test backend` as albedo).
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
# shellcheck source=corpus/serve-setup.sh
. "$here/serve-setup.sh"
extra=("$@")
# nginx's workers (www-data when started as root) write request bodies to
# temporary files under here.
chmod 0755 "$work"

peer="${WAF_ONLY:-0}"; [ "$peer" = 1 ] && peer=0 || peer=1
need=()
command -v nginx >/dev/null || need+=(nginx)
[ -e /usr/lib/nginx/modules/ngx_http_modsecurity_module.so ] || need+=(libnginx-mod-http-modsecurity)
if [ "$peer" = 1 ] && [ "${#need[@]}" -gt 0 ]; then
  install_debian "${need[@]}" \
    || { echo "ftw-http.sh: SKIP nginx + ModSecurity: cannot install ${need[*]} (Debian packages)" >&2; peer=0; }
fi
need_waf

"$WAF" test ftw --crs "$CRS" --print-server-config > "$work/crs-test.conf"

# The runner: go-ftw and albedo when they build, else our own.
runner="${FTW_RUNNER:-go-ftw}"
if [ "$runner" = go-ftw ]; then
  if tools="$("$root/tools/ftw/build.sh" 2>"$work/ftw-tools-build.log")"; then
    echo "ftw-http.sh: runner go-ftw $(grep 'coreruleset/go-ftw' "$root/tools/ftw/go.mod" | awk '{print $2}'), backend albedo $(grep 'coreruleset/albedo' "$root/tools/ftw/go.mod" | awk '{print $2}')"
  else
    echo "ftw-http.sh: go-ftw and albedo do not build here ($work/ftw-tools-build.log): running waf test ftw --http and waf test backend instead" >&2
    runner=waf
  fi
fi

# nginx_conf NAME PORT MODULE_SO WAF_DIRECTIVES: an nginx in $work/NAME with
# one WAF module in front of the test backend, logging at level info.
nginx_conf() {
  nginx_conf_in "$work/$1" 1 info 1024 "$3" "  client_max_body_size 16m;
  server {
    listen 127.0.0.1:$2;
    $4
    location / { proxy_pass http://127.0.0.1:19200; proxy_set_header Host \$host; }
  }"
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

if [ "$runner" = go-ftw ]; then
  "$tools/albedo" --bind 127.0.0.1 --port 19200 >"$work/backend.out" 2>&1 & pids+=($!)
else
  "$WAF" test backend --listen 127.0.0.1:19200 2>"$work/backend.out" & pids+=($!)
fi
"$WAF" serve -c "$work/crs-test.conf" --listen 127.0.0.1:19201 --upstream http://127.0.0.1:19200 \
  --error-log "$work/waf.log" 2>"$work/waf.out" & pids+=($!)
spoa=0
if [ "$peer" = 1 ] && { command -v haproxy >/dev/null || install_debian haproxy; }; then
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
# (5) The peer agent: HAProxy + the Coraza SPOA agent (tools/coraza-spoa,
# the same SPOE message and HAProxy rules; tune.bufsize 65536, the largest
# frame its SPOP library accepts), when Go builds it.
coraza=0
if [ "$spoa" = 1 ] && [ "$runner" = go-ftw ] \
  && coraza_bin="$("$root/tools/coraza-spoa/build.sh" 2>"$work/coraza-build.log")"; then
  coraza=1
  "$coraza_bin" -listen 127.0.0.1:19206 -rules "$work/crs-test.conf" -log "$work/coraza.log" \
    2>"$work/coraza.out" & pids+=($!)
  for _ in $(seq 1 300); do
    grep -q listening "$work/coraza.out" 2>/dev/null && break
    sleep 0.1
  done
  sed 's/^\( *tune.bufsize\) .*/\1 65536/' "$root/connectors/haproxy/haproxy.cfg" > "$work/haproxy-coraza.cfg"
  WAF_LISTEN=127.0.0.1:19207 WAF_UPSTREAM=127.0.0.1:19200 WAF_AGENT=127.0.0.1:19206 \
    WAF_SPOE_CONF="$root/connectors/haproxy/spoe-waf.conf" \
    haproxy -f "$work/haproxy-coraza.cfg" -db > "$work/haproxy-coraza.out" 2>&1 & pids+=($!)
  ports+=(19207)
fi
for port in "${ports[@]}"; do wait_http "http://127.0.0.1:$port/"; done

# Tests go-ftw retries once (see ftw below), as `RULE-TEST|...`.
retry_once="$(python3 - "$CRS/tests/regression/tests" <<'PY'
import os, re, sys
ids = []
for d, _, files in os.walk(sys.argv[1]):
    for f in sorted(files):
        if not f.endswith((".yaml", ".yml")):
            continue
        rule = test = None
        for line in open(os.path.join(d, f), encoding="utf-8", errors="replace"):
            m = re.match(r"rule_id:\s*(\d+)", line)
            if m:
                rule = m.group(1)
            m = re.match(r"\s*-\s*test_id:\s*(\d+)", line)
            if m:
                test = m.group(1)
            if re.match(r"\s*retry_once:\s*true", line) and rule and test:
                ids.append(f"{rule}-{test}")
print("|".join(sorted(set(ids))))
PY
)"
status=0
# ftw NAME PORT LOG OVERRIDES JSON: one pass of the suite; a summary line out.
ftw() {
  local over=()
  [ "$4" = - ] || over=(--overrides "$4")
  if [ "$runner" = go-ftw ]; then
    local include=()
    [ "${#extra[@]}" -ge 2 ] && [ "${extra[0]}" = --include ] && include=(-i "${extra[1]}")
    cat > "$work/$1.ftw.yaml" <<FTW
logfile: $3
logmarkerheadername: X-CRS-Test
testoverride:
  input:
    dest_addr: 127.0.0.1
    port: $2
FTW
    # go-ftw ends the whole run, reporting nothing, when a `retry_once` test
    # fails twice (CRS's 959100 and 980170 tests, whose response phases a
    # SPOA agent never sees): those run one by one after the others, and
    # one that ends its run that way counts as failed.
    local exclude=() one
    [ -n "$retry_once" ] && exclude=(-e "^($retry_once)\$")
    goftw() { (cd "$work" && "$tools/go-ftw" run --config "$work/$1.ftw.yaml" \
      -d "$CRS/tests/regression/tests" "${over[@]}" -o json "${@:2}") || true; }
    goftw "$1" "${include[@]}" "${exclude[@]}" -f "$5" > "$5.log" 2>&1
    rm -f "$5".once.*
    for one in ${retry_once//|/ }; do
      if [ "${#include[@]}" = 2 ] && ! echo "$one" | grep -Eq -- "${include[1]}"; then continue; fi
      goftw "$1" -i "^$one\$" -f "$5.once.$one" >> "$5.log" 2>&1
    done
    python3 - "$5" <<'PY'
import glob, json, sys
def result(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    try:
        return json.JSONDecoder().raw_decode(text[text.index("{"):])[0]
    except ValueError:
        return None
r = result(sys.argv[1])
if r is None:
    print("no result (see " + sys.argv[1] + ".log)"); sys.exit(0)
ok, bad = list(r.get("success") or []), list(r.get("failed") or [])
for path in sorted(glob.glob(sys.argv[1] + ".once.*")):
    one = path.rsplit(".once.", 1)[1]
    o = result(path)
    if o is None or one in (o.get("failed") or []):
        bad.append(one)
    elif one in (o.get("success") or []):
        ok.append(one)
with open(sys.argv[1] + ".failed", "w") as f:
    for t in sorted(bad):
        print("FAIL " + t, file=f)
print(f"pass rate {100.0 * len(ok) / max(len(ok) + len(bad), 1):.2f}% ({len(ok)}/{len(ok) + len(bad)}, go-ftw)")
PY
  else
    "$WAF" test ftw --crs "$CRS" --http "127.0.0.1:$2" --error-log "$3" --min-pass-rate 0 \
      "${over[@]}" --json "$5" "${extra[@]}" > "$5.log" 2>&1 || true
    grep '^FAIL' "$5.log" > "$5.failed" || true
    echo "$(grep '^pass rate' "$5.log") (waf test ftw --http)"
  fi
}
run() { # NAME PORT LOG OVERRIDES MIN_PASS_RATE
  local t0 t1 with without
  t0=$(date +%s.%N)
  without="$(ftw "$1-raw" "$2" "$3" - "$work/$1-raw.json")"
  if [ "$4" = - ]; then
    with="$without"; cp "$work/$1-raw.json.failed" "$work/$1.json.failed" 2>/dev/null || true
  else
    with="$(ftw "$1" "$2" "$3" "$4" "$work/$1.json")"
  fi
  t1=$(date +%s.%N)
  printf '%s: %s (without overrides: %s)  [%.0f s]\n' "$1" "$with" "$without" "$(echo "$t1 - $t0" | bc)"
  local rate
  rate="$(echo "$with" | sed -n 's/^pass rate:\{0,1\} \([0-9.]*\)%.*/\1/p')"
  if [ -z "$rate" ] || [ "$(echo "$rate < $5" | bc)" = 1 ]; then
    echo "  $1: under $5%" >&2; [ "$5" = 0 ] || status=1
  fi
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
  echo "  haproxy-waf-spoa failures on response rules (>= 950000, not run through SPOA by design): $(awk '{ if (substr($2, 1, 6) >= 950000) n++ } END { print n + 0 }' "$work/haproxy-waf-spoa.json.failed" 2>/dev/null || echo 0)"
fi
if [ "$coraza" = 1 ]; then
  run haproxy-coraza-spoa 19207 "$work/coraza.log" - 0
  echo "  haproxy-coraza-spoa failures on response rules (>= 950000): $(awk '{ if (substr($2, 1, 6) >= 950000) n++ } END { print n + 0 }' "$work/haproxy-coraza-spoa.json.failed" 2>/dev/null || echo 0)"
fi
echo "failures: $work/*.json.failed; reports and runner output beside them"
trap - EXIT; cleanup
exit "$status"
