#!/usr/bin/env bash
# The nginx module's persistent collections (connectors/nginx, Debian's
# nginx) in front of `waf test backend`. The rules run a per-client counter
# (`initcol:ip=%{REQUEST_HEADERS.X-Client}`, `setvar:ip.hits=+1`, 429 past 5
# hits) at server level; locations /a and /b add a rule each, so that each
# compiles a ruleset of its own. Two nginx servers (one worker each) share
# through Redis (`waf_collection_redis`, a redis-server of its own,
# Debian's, on loopback):
#   (1) one store for the configuration: a client's requests to /a and /b
#       of one server count together;
#   (2) shared: 2 requests to /a and 1 to /b of the first server, 2 to the
#       second pass; the 6th is refused by either;
#   (3) a reload (`nginx -s reload`: new workers, empty stores) of the first
#       forgets nothing: its new worker fetches the client's count from
#       Redis after its first request there, and refuses the next;
#   (4) `nginx -t` refuses a URL that is not Redis's.
# Each of (1)-(3) fails with the collections kept apart (per location,
# per server, or per worker).
#
#   corpus/nginx-collections.sh
#
# Needs Debian's nginx, nginx-dev (the module is built with
# connectors/nginx/build.sh) and redis-server, installed with apt-get when
# missing and running as root; target/release/waf for the backend.
# Loopback only; everything is stopped on exit.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=corpus/serve-setup.sh
. "$here/serve-setup.sh"
need_waf
command -v nginx >/dev/null || need_debian nginx
command -v redis-server >/dev/null || need_debian redis-server
# The nginx servers run as daemons (a reload needs the master): stopped by pid.
on_exit() {
  for d in "$work"/one "$work"/two; do
    if [ -f "$d/nginx.pid" ]; then kill "$(cat "$d/nginx.pid")" 2>/dev/null || true; fi
  done
}
"$root/connectors/nginx/build.sh" > "$work/build.log" 2>&1 || { tail "$work/build.log" >&2; exit 1; }
module="$root/target/release/ngx_http_waf_module.so"

"$WAF" test backend --listen 127.0.0.1:19430 2>"$work/backend.out" & pids+=($!)
redis-server --port 19431 --bind 127.0.0.1 --save "" --appendonly no >"$work/redis.out" 2>&1 & pids+=($!)

# server DIR PORT [REDIS_URL]: an nginx configuration in DIR.
server() {
  local redis=""
  if [ -n "${3:-}" ]; then redis="  waf_collection_redis $3;"; fi
  nginx_conf_in "$1" 1 info 256 "$module" \
"$redis
  upstream app { server 127.0.0.1:19430; }
  server {
    listen 127.0.0.1:$2;
    waf on;
    waf_rules 'SecRuleEngine On';
    waf_rules 'SecAction \"id:1,phase:1,pass,nolog,initcol:ip=%{REQUEST_HEADERS.X-Client}\"';
    waf_rules 'SecAction \"id:2,phase:1,pass,nolog,setvar:ip.hits=+1\"';
    waf_rules 'SecRule IP:hits \"@gt 5\" \"id:3,phase:1,deny,status:429,log\"';
    location /a { waf_rules 'SecAction \"id:10,phase:1,pass,nolog\"'; proxy_pass http://app; }
    location /b { waf_rules 'SecAction \"id:11,phase:1,pass,nolog\"'; proxy_pass http://app; }
  }"
}

server "$work/one" 19432 redis://127.0.0.1:19431
server "$work/two" 19433 redis://127.0.0.1:19431
nginx -p "$work/one" -c "$work/one/nginx.conf" 2>"$work/one.out"
nginx -p "$work/two" -c "$work/two/nginx.conf" 2>"$work/two.out"
wait_http http://127.0.0.1:19432/a http://127.0.0.1:19433/a
one=http://127.0.0.1:19432
two=http://127.0.0.1:19433

echo "(1) one store for the configuration's rulesets"
check "a client's 3 requests to /a, then 3 to /b, of one server" \
  "$(codes local "$one/a" 3)| $(codes local "$one/b" 3)" "200 200 200 | 200 200 429 "

echo "(2) two servers sharing through Redis"
# An exchange every 100 ms: 0.5 s lets each worker send and bring back.
first="$(codes spread "$one/a" 2)$(codes spread "$one/b" 1)"
sleep 0.5
second="$(codes spread "$two/a" 2)"
sleep 0.5
sixth="$(codes spread "$one/b" 1)$(codes spread "$two/b" 1)"
check "a client's 3 requests to the first, 2 to the second, then one to each" \
  "$first| $second| $sixth" "200 200 200 | 200 200 | 429 429 "

echo "(3) a reload of the first server"
master=$(cat "$work/one/nginx.pid")
before="$(pgrep -P "$master" | tr '\n' ' ')"
nginx -p "$work/one" -c "$work/one/nginx.conf" -s reload 2>>"$work/one.out"
for _ in $(seq 1 300); do
  now="$(pgrep -P "$master" | tr '\n' ' ')"
  if [ -n "$now" ] && [ "$now" != "$before" ]; then
    gone=1
    for w in $before; do case " $now " in *" $w "*) gone=0;; esac; done
    [ "$gone" = 1 ] && break
  fi
  sleep 0.1
done
wait_http "$one/a"
after="$(codes spread "$one/a" 1)"
sleep 0.5
check "the client's next request after the new worker's first exchange" "$(codes spread "$one/a" 1)" "429 "
echo "  (its first request to the new worker: $after, counted there before the fetch)"

echo "(4) nginx -t and a URL that is not Redis's"
server "$work/bad" 19434 http://127.0.0.1:19431
if nginx -t -p "$work/bad" -c "$work/bad/nginx.conf" > "$work/bad.out" 2>&1; then
  check "nginx -t with waf_collection_redis http://..." "accepted" "refused"
else
  check "nginx -t with waf_collection_redis http://..." "refused" "refused"
  grep -h "waf_collection_redis" "$work/bad.out" | sed 's/^/  /'
fi

grep -h "persistent collections" "$work"/one/logs/error.log "$work"/two/logs/error.log | sed 's/^/  log: /' || true
no_redis_failure "$work"/one/logs/error.log "$work"/two/logs/error.log
checks_done "nginx module: persistent collections shared by the locations, the servers and across a reload"
