#!/usr/bin/env bash
# `waf spoa`'s persistent collections, through HAProxy (Debian's, with the
# shipped connectors/haproxy/haproxy.cfg and spoe-waf.conf) in front of
# `waf test backend`. The agents run a per-client counter
# (`initcol:ip=%{REQUEST_HEADERS.X-Client}`, `setvar:ip.hits=+1`, deny past
# 5 hits; HAProxy's rules answer a deny with 403):
#   (1) kept across a restart: one agent with --collection-file; a client's
#       3 requests, the agent stopped (SIGTERM) and started again, its next
#       2 pass and its 6th is refused; another client still passes;
#   (2) shared through Redis: two agents with --collection-redis (a
#       redis-server of its own, Debian's, on loopback), each behind its own
#       HAProxy; a client's 3 requests through the first and 2 through the
#       second pass, its 6th is refused by either; the exchanges all succeed.
# Each check fails when the collections are kept apart (an agent starting
# empty, or two agents counting alone: the 6th request would pass).
#
#   corpus/spoa-collections.sh
#
# Needs target/release/waf (WAF overrides), curl, Debian's haproxy and
# redis-server (installed with apt-get when missing and running as root).
# Loopback only; everything is stopped on exit.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=corpus/serve-setup.sh
. "$here/serve-setup.sh"
need_waf
command -v haproxy >/dev/null || need_debian haproxy
command -v redis-server >/dev/null || need_debian redis-server

cat > "$work/rules.conf" <<'RULES'
SecRuleEngine On
SecAction "id:1,phase:1,pass,nolog,initcol:ip=%{REQUEST_HEADERS.X-Client}"
SecAction "id:2,phase:1,pass,nolog,setvar:ip.hits=+1"
SecRule IP:hits "@gt 5" "id:3,phase:1,deny,status:429,log,msg:'too many requests'"
RULES

# agent NAME PORT FLAGS...: starts `waf spoa` on PORT; its pid in $agent_pid.
agent() {
  local name="$1" port="$2"
  shift 2
  "$WAF" spoa -c "$work/rules.conf" --listen "127.0.0.1:$port" --error-log "$work/$name.log" \
    "$@" 2>>"$work/$name.out" & pids+=($!)
  agent_pid=$!
}

# haproxy_for NAME LISTEN AGENT: HAProxy on LISTEN with the agent at AGENT.
haproxy_for() {
  WAF_LISTEN="$2" WAF_UPSTREAM=127.0.0.1:19420 WAF_AGENT="$3" \
    WAF_SPOE_CONF="$root/connectors/haproxy/spoe-waf.conf" \
    haproxy -f "$root/connectors/haproxy/haproxy.cfg" -db > "$work/$1.out" 2>&1 & pids+=($!)
}

# ready URL: a request of a client of its own passes at URL (the agent is
# up and HAProxy reaches it) within 30 s; else the logs and exit 1.
ready() {
  for _ in $(seq 1 300); do
    if [ "$(curl -s -o /dev/null -w '%{http_code}' -H "X-Client: probe-$RANDOM$RANDOM" "$1")" = 200 ]; then
      return 0
    fi
    sleep 0.1
  done
  echo "$script: no request passes at $1" >&2
  tail -n 20 "$work"/*.out "$work"/*.log >&2 || true
  exit 1
}

"$WAF" test backend --listen 127.0.0.1:19420 2>"$work/backend.out" & pids+=($!)

echo "(1) one agent, --collection-file, restarted"
agent file 19421 --collection-file "$work/collections"
haproxy_for haproxy-file 127.0.0.1:19422 127.0.0.1:19421
ready http://127.0.0.1:19422/
before="$(codes steady http://127.0.0.1:19422/ 3)"
kill -TERM "$agent_pid"
wait "$agent_pid" 2>/dev/null || true
agent file 19421 --collection-file "$work/collections"
ready http://127.0.0.1:19422/
after="$(codes steady http://127.0.0.1:19422/ 3)"
check "a client's 3 requests, the agent restarted, its next 3" "$before| $after" "200 200 200 | 200 200 403 "
check "another client after the restart" "$(codes other http://127.0.0.1:19422/ 1)" "200 "
grep -h "persistent collections" "$work/file.log" | sed 's/^/  log: /'

echo "(2) two agents sharing through Redis, each behind its own HAProxy"
redis-server --port 19423 --bind 127.0.0.1 --save "" --appendonly no >"$work/redis.out" 2>&1 & pids+=($!)
agent shared1 19424 --collection-redis redis://127.0.0.1:19423
agent shared2 19425 --collection-redis redis://127.0.0.1:19423
haproxy_for haproxy-shared1 127.0.0.1:19426 127.0.0.1:19424
haproxy_for haproxy-shared2 127.0.0.1:19427 127.0.0.1:19425
ready http://127.0.0.1:19426/
ready http://127.0.0.1:19427/
# An exchange every 100 ms: 0.5 s lets each agent send and bring back.
first="$(codes spread http://127.0.0.1:19426/ 3)"
sleep 0.5
second="$(codes spread http://127.0.0.1:19427/ 2)"
sleep 0.5
sixth="$(codes spread http://127.0.0.1:19426/ 1)$(codes spread http://127.0.0.1:19427/ 1)"
check "a client's 3 requests through the first, 2 through the second, then one through each" \
  "$first| $second| $sixth" "200 200 200 | 200 200 | 403 403 "
check "keys in Redis (probes and clients)" "$(redis-cli -p 19423 --scan --pattern 'waf:*spread*' | wc -l)" "1"
grep -h "persistent collections" "$work"/shared*.log | sed 's/^/  log: /' || true
no_redis_failure "$work"/shared*.log
checks_done "waf spoa: persistent collections kept across a restart and shared through Redis"
