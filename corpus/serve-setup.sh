# Sourced (not run) by the scripts that start servers on loopback and drive
# them (serve-*.sh, ftw-http.sh, nginx-reload.sh, compressed-bodies.sh):
# what each of them set up
# the same way, in one place.
#
#   set -euo pipefail
#   here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
#   . "$here/serve-setup.sh"
#
# Sets:
#   script  the script's file name, for its messages
#   root    the repository
#   CRS     the CRS checkout ($CRS, else ../shared/crs), absolute when it exists
#   WAF     the waf binary ($WAF, else target/release/waf)
#   work    a new directory /tmp/waf-NAME.XXXXXX for the run's files and logs
#   pids    the processes to stop on exit: append with `& pids+=($!)`
# On exit, every process in `pids` is killed and waited for, then the
# script's own `on_exit` function runs if it defines one.

script="$(basename "$0")"
root="$(cd "$here/.." && pwd)"
CRS="${CRS:-$root/../shared/crs}"
if [ -d "$CRS" ]; then CRS="$(cd "$CRS" && pwd)"; fi
WAF="${WAF:-$root/target/release/waf}"
work="$(mktemp -d "/tmp/waf-${script%.sh}.XXXXXX")"
pids=()
cleanup() {
  for p in "${pids[@]:-}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if declare -F on_exit >/dev/null; then on_exit; fi
}
trap cleanup EXIT

# install_debian PKG...: installs the Debian packages when running as root;
# false otherwise, or when apt-get fails (the caller says what then).
install_debian() {
  [ "$#" -gt 0 ] || return 0
  [ "$(id -u)" = 0 ] && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >/dev/null
}

# need_debian PKG...: install_debian, or exit 2 naming what to install.
need_debian() {
  install_debian "$@" || { echo "$script: install $* (Debian packages)" >&2; exit 2; }
}

# need_waf: exit 2 unless $WAF is built.
need_waf() {
  [ -x "$WAF" ] || { echo "$script: build $WAF first (cargo build --release -p waf-cli)" >&2; exit 2; }
}

# wait_http URL...: each URL answers (any status) within $wait_http_secs
# seconds (default 30); else the servers' output ($work/*.out) and exit 1.
wait_http() {
  local url ok
  for url in "$@"; do
    ok=0
    for _ in $(seq 1 $((${wait_http_secs:-30} * 10))); do
      if curl -s -o /dev/null "$url"; then ok=1; break; fi
      sleep 0.1
    done
    if [ "$ok" != 1 ]; then
      echo "$script: nothing answers at $url" >&2
      cat "$work"/*.out >&2 2>/dev/null || true
      exit 1
    fi
  done
}

# ports_free PORT...: exits when something already listens on one of the
# loopback ports: a leftover server there would answer in place of the one
# the script starts (whose bind then fails), and the figures would be its.
ports_free() {
  local port
  for port in "$@"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$script: something already listens on 127.0.0.1:$port; stop it first" >&2
      exit 1
    fi
  done
}

# rss_mib PID: the process's resident memory (VmRSS), in MiB.
rss_mib() {
  awk '/VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$1/status"
}

# cpu_ticks PID: the process's user and system CPU time so far (all its
# threads), in clock ticks (`getconf CLK_TCK` a second), space-separated.
cpu_ticks() {
  awk '{print $14, $15}' "/proc/$1/stat"
}

# admin_metric ADMIN NAME: the value of metric NAME (a sample without
# labels) on ADMIN's /metrics (http://host:port), empty when absent.
admin_metric() {
  curl -s "$1/metrics" | awk -v m="$2" '$1 == m {print $2}'
}

# wait_memory_settled ADMIN: waits (up to 30 s) for the proxy's first
# memory trim after its start (`waf_memory_trims_total` on ADMIN's
# /metrics, serve/src/memory.rs): it lowers the RSS, so a measurement of
# memory takes its baseline after it.
wait_memory_settled() {
  local n
  for _ in $(seq 1 300); do
    n=$(admin_metric "$1" waf_memory_trims_total)
    if [ "${n:-0}" -ge 1 ] 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "$script: no memory trim within 30 s of the start (another allocator?): measuring anyway" >&2
}

# benign_requests: $work/benign.jsonl, the 1,000 benign requests the load
# scripts send (seed 1, bodies included), and $work/requests.lua, the wrk
# script that cycles through them. The generator is the peers' (issue 11
# names it): $PEERS/corpus/gen_benign.py, PEERS defaulting to the peers
# beside $CRS (../shared/peers), the one the in-process comparisons with
# Coraza and ModSecurity use too. GEN_BENIGN=FILE picks another
# (corpus/gen_benign.py, ours, the load scripts' corpus until 2026-12-07,
# which has smaller requests). Without the peers' generator the scripts
# stop rather than measure another corpus under the same name.
benign_requests() {
  local gen="${GEN_BENIGN:-${PEERS:-$(dirname "$CRS")/peers}/corpus/gen_benign.py}"
  if [ ! -f "$gen" ]; then
    echo "$script: no benign request generator at $gen (set PEERS to ../shared/peers, or GEN_BENIGN=corpus/gen_benign.py)" >&2
    exit 2
  fi
  python3 "$gen" --n 1000 --seed 1 --out "$work/benign.jsonl" >/dev/null
  python3 "$here/wrk_requests.py" "$work/benign.jsonl" > "$work/requests.lua"
}

# rules_conf FILE: the rules to run, into FILE: a copy of $RULES when it is
# given, else CRS at paranoia level 1 (crs-config.sh).
rules_conf() {
  if [ -n "${RULES:-}" ]; then
    cp "$RULES" "$1"
  else
    "$here/crs-config.sh" "$CRS" 1 > "$1"
  fi
}

# nginx_conf_in DIR WORKERS LOG_LEVEL CONNECTIONS MODULES HTTP: writes
# DIR/nginx.conf for an nginx run with `-p DIR`: the `load_module` lines of
# MODULES (space-separated .so paths, may be empty), WORKERS worker
# processes, its pid file and error log (LOG_LEVEL) in DIR, CONNECTIONS per
# worker, no access log, temporary files in DIR (made writable for the
# workers' user), and HTTP inside the `http` block (servers, upstreams).
nginx_conf_in() {
  local dir=$1 m
  mkdir -p "$dir/logs" && chmod 0777 "$dir"
  {
    for m in $5; do echo "load_module $m;"; done
    cat <<CONF
worker_processes $2;
pid $dir/nginx.pid;
error_log $dir/logs/error.log $3;
events { worker_connections $4; }
http {
  access_log off;
  client_body_temp_path $dir; proxy_temp_path $dir; fastcgi_temp_path $dir;
  uwsgi_temp_path $dir; scgi_temp_path $dir;
$6
}
CONF
  } > "$dir/nginx.conf"
}

# wrk_figures REPORT: reads wrk's report (its text) into `requests` (the
# count it completed) and `rps` (its requests per second).
wrk_figures() {
  requests=$(awk '/requests in/ {print $1}' <<< "$1")
  rps=$(awk '/Requests\/sec/ {print $2}' <<< "$1")
}

# wrk_stop PID FILE: interrupts the wrk run PID (SIGINT: it prints its
# report), waits for it, and reads its report FILE into `requests` and
# `rps` (see wrk_figures), `non2xx` (0 when wrk printed none) and `sockerr`
# (wrk's "Socket errors" line, or "none").
wrk_stop() {
  kill -INT "$1"; wait "$1" 2>/dev/null || true
  wrk_figures "$(cat "$2")"
  non2xx=$(awk -F': ' '/Non-2xx/ {print $2}' "$2"); non2xx="${non2xx:-0}"
  sockerr=$(awk '/Socket errors/ {print}' "$2"); sockerr="${sockerr:-none}"
}

# codes CLIENT URL N: the statuses of N requests with `X-Client: CLIENT` at
# URL, each followed by a space (the persistent-collection scripts count
# clients by that header).
codes() {
  for _ in $(seq 1 "$3"); do
    printf '%s ' "$(curl -s -o /dev/null -w '%{http_code}' -H "X-Client: $1" "$2")"
  done
}

# check WHAT GOT WANT: prints "ok" or "FAILED" for WHAT; a failure is
# counted in `failed` (the script exits 1 at its end when it is not 0).
failed=0
check() {
  if [ "$2" = "$3" ]; then
    echo "  ok: $1: $2"
  else
    echo "  FAILED: $1: $2 (want $3)"
    failed=$((failed + 1))
  fi
}

# no_redis_failure LOG...: a failed check when one of the logs says that an
# exchange with Redis failed (`persistent collections: Redis at ...`).
no_redis_failure() {
  if grep -q "Redis at" "$@"; then
    echo "  FAILED: an exchange with Redis failed"
    failed=$((failed + 1))
  fi
}

# checks_done MESSAGE: exit 1 when a check failed (the logs stay in
# $work), else print MESSAGE.
checks_done() {
  if [ "$failed" != 0 ]; then
    echo "$script: $failed check(s) failed (logs in $work)" >&2
    exit 1
  fi
  echo "$1"
}
