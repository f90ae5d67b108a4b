#!/usr/bin/env bash
# Same-run A/B comparison of two `waf` binaries (e.g. before and after a
# refactor): `waf bench` on one corpus and configuration, the two binaries
# alternated ROUNDS times so that the machine's drift hits both alike
# (which runs first alternates too).
# Prints each run's p50 and throughput, then the medians and the ratio.
#
#   corpus/bench-ab.sh OLD_WAF NEW_WAF CORPUS [ROUNDS]
#
# Configuration: CRS at paranoia level $PL (default 1) from $CRS (default
# ../shared/crs), as `corpus/crs-config.sh` prints it. $BENCH_ARGS is
# passed to both (e.g. BENCH_ARGS="--evict-kib 4096" for cold caches).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
old="$1"; new="$2"; corpus="$3"; rounds="${4:-5}"
CRS="${CRS:-$here/../../shared/crs}"
PL="${PL:-1}"
conf="$(mktemp)"; trap 'rm -f "$conf"' EXIT
"$here/crs-config.sh" "$CRS" "$PL" > "$conf"
runs=()
for ((r = 1; r <= rounds; r++)); do
  # Which binary runs first alternates between rounds (see serve-ab.sh).
  order="old new"
  [ $((r % 2)) = 0 ] && order="new old"
  for which in $order; do
    bin=$old; [ "$which" = new ] && bin=$new
    # shellcheck disable=SC2086 # BENCH_ARGS is a list of arguments
    json="$("$bin" bench --json -c "$conf" --corpus "$corpus" --passes 3 --warmup 1 ${BENCH_ARGS:-} 2>/dev/null)"
    runs+=("$which $(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["latency_us"]["p50"], d["throughput_rps"])' "$json")")
    echo "round $r $which: p50 ${runs[-1]#* }" >&2
  done
done
printf '%s\n' "${runs[@]}" | python3 -c '
import statistics, sys
rows = [l.split() for l in sys.stdin if l.strip()]
med = {w: (statistics.median(float(r[1]) for r in rows if r[0] == w),
           statistics.median(float(r[2]) for r in rows if r[0] == w)) for w in ("old", "new")}
for w in ("old", "new"):
    print(f"{w}: median p50 {med[w][0]:.1f} us, median throughput {med[w][1]:.0f} req/s")
tput = med["new"][1] / med["old"][1]
p50 = med["new"][0] / med["old"][0]
print(f"new/old throughput: {tput:.3f}; p50 new/old: {p50:.3f}")
'
