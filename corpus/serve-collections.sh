#!/usr/bin/env bash
# Persistent collections under a flood of distinct keys: `waf serve` runs a
# per-client counter (`initcol:ip=%{REQUEST_HEADERS.X-Client}`,
# `setvar:ip.hits=+1`, 429 past 50 hits) while wrk sends SECONDS (default
# 30) of requests, each with a random X-Client (as a botnet, or one client
# rotating a header, would): far more records than the store's 64 MiB (COLLECTION_MEMORY) hold.
# Prints the store's metrics and the proxy's RSS before and after, then
# checks that one client is still counted (its 51st request is 429).
#
#   corpus/serve-collections.sh [SECONDS]
#
# COLLECTION_MEMORY (MiB, default 64) is passed as --collection-memory.
# REDIS=1 shares the collections through a redis-server of its own
# (Debian's, on loopback) with a second instance: the steady client's
# requests are then spread over both, and the exchanges must all succeed.
#
# Exits 1 if a request failed, the store is over its limit or evicted
# nothing, the RSS grew by more than MAX_GROWTH_MIB (default 128), or the
# counter did not block. Needs target/release/waf, curl and Debian's wrk
# (installed with apt-get when missing and running as root). Loopback only;
# everything is stopped on exit.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=corpus/serve-setup.sh
. "$here/serve-setup.sh"
secs="${1:-30}"
MAX_GROWTH_MIB="${MAX_GROWTH_MIB:-128}"
COLLECTION_MEMORY="${COLLECTION_MEMORY:-64}"
REDIS="${REDIS:-}"
need_waf
command -v wrk >/dev/null || need_debian wrk
shared=()
if [ -n "$REDIS" ]; then
  command -v redis-server >/dev/null || need_debian redis-server
  redis-server --port 19413 --bind 127.0.0.1 --save "" --appendonly no >"$work/redis.out" 2>&1 & pids+=($!)
  shared=(--collection-redis redis://127.0.0.1:19413)
fi

cat > "$work/rules.conf" <<'RULES'
SecRuleEngine On
SecAction "id:1,phase:1,pass,nolog,initcol:ip=%{REQUEST_HEADERS.X-Client}"
SecAction "id:2,phase:1,pass,nolog,setvar:ip.hits=+1"
SecRule IP:hits "@gt 50" "id:3,phase:1,deny,status:429,log,msg:'too many requests'"
RULES
cat > "$work/random.lua" <<'LUA'
-- A new X-Client for each request, from a sequence of each thread's own.
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("id", threads)
end
function init(args)
  math.randomseed(os.time() * 1000 + id)
end
request = function()
  return wrk.format("GET", "/", { ["X-Client"] = string.format("c%d-%d", math.random(1, 2^30), math.random(1, 2^30)) })
end
LUA
"$WAF" test backend --listen 127.0.0.1:19410 2>"$work/backend.out" & pids+=($!)
"$WAF" serve -c "$work/rules.conf" --listen 127.0.0.1:19411 --upstream http://127.0.0.1:19410 \
  --admin 127.0.0.1:19412 --error-log "$work/waf.log" --collection-memory "$COLLECTION_MEMORY" \
  "${shared[@]}" 2>"$work/serve.out" & pids+=($!); serve_pid=$!
second=http://127.0.0.1:19411/
if [ -n "$REDIS" ]; then
  "$WAF" serve -c "$work/rules.conf" --listen 127.0.0.1:19414 --upstream http://127.0.0.1:19410 \
    --error-log "$work/waf2.log" "${shared[@]}" 2>"$work/serve2.out" & pids+=($!)
  second=http://127.0.0.1:19414/
fi
wait_http http://127.0.0.1:19411/ http://127.0.0.1:19412/healthz "$second"
wait_memory_settled http://127.0.0.1:19412
rss() { rss_mib "$serve_pid"; }
metric() { admin_metric http://127.0.0.1:19412 "$1"; }
before=$(rss)
out="$(wrk -t2 -c32 -d"${secs}s" -s "$work/random.lua" http://127.0.0.1:19411/)"
echo "$out" | grep -E "requests in|Requests/sec|Non-2xx|Socket errors" || true
after=$(rss)
records=$(metric waf_collection_records)
bytes=$(metric waf_collection_bytes)
evicted=$(metric waf_collection_evictions_total)
refused=$(metric waf_collection_refused_writes_total)
echo "store: $records records, $bytes bytes, $evicted evicted, $refused refused writes"
echo "RSS: $before -> $after MiB"
redis_failures=0
if [ -n "$REDIS" ]; then
  sleep 1
  redis_failures=$(metric waf_collection_redis_failures_total)
  echo "Redis: $(metric waf_collection_redis_exchanges_total) exchanges, $redis_failures failed, $(metric waf_collection_redis_records_total) records sent or brought back; up: $(metric waf_collection_redis_up); keys in Redis: $(redis-cli -p 19413 dbsize), $(redis-cli -p 19413 info memory | grep '^used_memory_human' | tr -d '\r')"
fi
# One client, counted through all that: 50 requests pass, the 51st is 429
# (with REDIS, 25 to each instance, then the 51st to the first).
codes=""
for i in $(seq 1 51); do
  at=http://127.0.0.1:19411/
  if [ -n "$REDIS" ] && [ "$i" -gt 25 ] && [ "$i" -le 50 ]; then at="$second"; fi
  if [ -n "$REDIS" ] && { [ "$i" = 26 ] || [ "$i" = 51 ]; }; then sleep 0.5; fi
  codes="$codes $(curl -s -o /dev/null -w '%{http_code}' -H 'X-Client: steady' "$at")"
done
last="${codes##* }"
passed=$(echo "$codes" | tr ' ' '\n' | grep -c '^200$' || true)
echo "one client: $passed of the first 50 requests passed, the 51st: $last"
python3 - "$out" "$before" "$after" "$bytes" "$evicted" "$MAX_GROWTH_MIB" "$passed" "$last" "$COLLECTION_MEMORY" "$redis_failures" <<'PY'
import sys
out, before, after, stored, evicted, limit, passed, last, mib, redis_failures = sys.argv[1:]
fail = []
if float(redis_failures) != 0:
    fail.append("%s exchanges with Redis failed" % redis_failures)
if "Non-2xx" in out or "Socket errors" in out:
    fail.append("requests failed")
if float(stored) > int(mib) * 2**20:
    fail.append("the store holds %s bytes, over %s MiB" % (stored, mib))
if float(evicted) == 0:
    fail.append("nothing was evicted: the flood did not reach the limit (run longer)")
if float(after) - float(before) > float(limit):
    fail.append("RSS grew by %.1f MiB, over %s" % (float(after) - float(before), limit))
if passed != "50" or last != "429":
    fail.append("the counter of one client did not block its 51st request")
for f in fail:
    print("serve-collections.sh: " + f, file=sys.stderr)
sys.exit(1 if fail else 0)
PY
echo "persistent collections: bounded under a flood of keys, and still counting"
