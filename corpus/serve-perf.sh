#!/usr/bin/env bash
# Where `waf serve`'s CPU goes under load, without rules and with CRS PL1,
# in one run: for each, wrk (-t2 -c32) sends the benign corpus of
# serve-load.sh (the peers' gen_benign.py, seed 1) for 8 s while the
# proxy's CPU time and context switches are read from /proc, then for 12 s
# while `perf record` samples the proxy (software cpu-clock at 2,999 Hz:
# no hardware counters needed). Prints, per request and per scenario: the
# user and system CPU, the voluntary and involuntary context switches of
# all the proxy's threads, and the sampled CPU by where it was spent (the
# engine, the kernel, libc's memory copies, the allocator, hyper and http,
# tokio, the proxy's own code), with the difference between the two.
#
#   corpus/serve-perf.sh [ROUNDS]
#
# ROUNDS (default 1) repeats the /proc measurement. The sampled split is
# perf's (its own overhead slows the proxy by 10-30 %: compare the
# scenarios, not these figures with serve-load.sh's). $WAF defaults to
# target/release/waf (its symbol table is enough; a build with
# `CARGO_PROFILE_RELEASE_DEBUG=line-tables-only` gives perf's reports
# inlined frames too). Needs perf (Debian's linux-perf), nginx, wrk and
# python3; run as root or with kernel.perf_event_paranoid <= 1. Loopback
# only; everything is stopped on exit.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=corpus/serve-setup.sh
. "$here/serve-setup.sh"
rounds="${1:-1}"
for tool in perf nginx wrk python3; do
  command -v "$tool" >/dev/null || { echo "$script: needs $tool (Debian packages linux-perf, nginx, wrk)" >&2; exit 2; }
done
need_waf
"$here/crs-config.sh" "$CRS" 1 > "$work/crs.conf"
: > "$work/none.conf"
benign_requests
nginx_conf_in "$work/backend" 1 warn 4096 "" \
  '  server { listen 127.0.0.1:19770; location / { return 200 "ok\n"; } }'
nginx -p "$work/backend" -c "$work/backend/nginx.conf" -g 'daemon off;' & pids+=($!)
declare -A pid port=([none]=19771 [crs]=19772)
for r in none crs; do
  "$WAF" serve -c "$work/$r.conf" --listen "127.0.0.1:${port[$r]}" --upstream http://127.0.0.1:19770 \
    --error-log "$work/$r.log" 2>"$work/$r.out" & pids+=($!); pid[$r]=$!
done
wait_http "http://127.0.0.1:${port[none]}/" "http://127.0.0.1:${port[crs]}/"
tick="$(getconf CLK_TCK)"
# switches PID: voluntary and involuntary context switches of all its threads.
switches() { cat /proc/"$1"/task/*/status | awk '/^voluntary/ {v += $2} /^nonvoluntary/ {n += $2} END {print v, n}'; }
for ((k = 1; k <= rounds; k++)); do
  for r in none crs; do
    read -r v0 n0 < <(switches "${pid[$r]}"); read -r u0 s0 < <(cpu_ticks "${pid[$r]}")
    out="$(wrk -t2 -c32 -d8s -s "$work/requests.lua" "http://127.0.0.1:${port[$r]}/")"
    read -r v1 n1 < <(switches "${pid[$r]}"); read -r u1 s1 < <(cpu_ticks "${pid[$r]}")
    wrk_figures "$out"
    python3 -c "n = $requests; print('round $k $r: $rps req/s; per request: user %.1f us, system %.1f us, %.2f voluntary and %.2f involuntary context switches' % (($u1 - $u0) / $tick * 1e6 / n, ($s1 - $s0) / $tick * 1e6 / n, ($v1 - $v0) / n, ($n1 - $n0) / n))"
  done
done
for r in none crs; do
  wrk -t2 -c32 -d12s -s "$work/requests.lua" "http://127.0.0.1:${port[$r]}/" > "$work/wrk-$r.txt" &
  w=$!
  sleep 1
  perf record -q -e cpu-clock -F 2999 -p "${pid[$r]}" -o "$work/perf-$r.data" -- sleep 10
  wait "$w"
  # The requests of the 10 s sampled, at the run's mean rate.
  awk '/Requests\/sec/ {print $2 * 10}' "$work/wrk-$r.txt" > "$work/requests-$r"
  perf report -q -i "$work/perf-$r.data" --no-children --sort sym -g none -F sample,sym 2>/dev/null > "$work/report-$r.txt"
done
python3 - "$work" <<'PY'
import re, sys
work = sys.argv[1]
# Where a sampled function belongs, by its symbol (first match wins).
groups = [
    ("engine", r"waf_engine|waf_compiler|regex_automata|aho_corasick|memchr::|libinjection"),
    ("allocator", r"malloc|free|unlink_chunk|realloc|_int_"),
    ("libc memory copies", r"__mem(move|cpy|set|cmp)"),
    ("proxy (waf_serve)", r"waf_serve"),
    ("hyper, http, bytes", r"hyper|http::|httparse|bytes::|h2::|http_body"),
    ("tokio, futures", r"tokio|futures|mio::"),
]
split = {}
for r in ("none", "crs"):
    requests = float(open(f"{work}/requests-{r}").read())
    us = {}
    for line in open(f"{work}/report-{r}.txt"):
        m = re.match(r"\s*(\d+)\s+\[(.)\]\s+(.*)", line)
        if not m:
            continue
        samples, kind, sym = int(m.group(1)), m.group(2), m.group(3)
        group = "kernel" if kind == "k" else next((g for g, p in groups if re.search(p, sym)), "other")
        us[group] = us.get(group, 0.0) + samples / 2999 / requests * 1e6
    split[r] = us
names = sorted(set(split["none"]) | set(split["crs"]), key=lambda g: -split["crs"].get(g, 0))
print("sampled CPU per request (us): no rules, CRS, difference")
for g in names + ["total"]:
    a = sum(split["none"].values()) if g == "total" else split["none"].get(g, 0)
    b = sum(split["crs"].values()) if g == "total" else split["crs"].get(g, 0)
    print(f"  {g:20s} {a:6.1f} {b:6.1f} {b - a:+6.1f}")
PY
