#!/usr/bin/env bash
# The fast-path figures of docs/performance.md: waf bench on the peers'
# corpora at PL1 and PL4 (with and without the cross-transaction cache, and
# against the naive interpreter), the HAR corpus, body sizes 1 KB..1 MB, and
# two threads. Run ../shared/peers/run_all.sh (STEPS="bench summary") just
# before or after, on the same machine, for the peers' side.
#
#   corpus/bench.sh [OUT_DIR]     (default /tmp/waf-bench)
#
# Needs: target/release/waf (cargo build --release -p waf-cli), python3, the
# peers' corpora in $CORPUS (default /tmp/peers-corpus: benign.jsonl,
# crs_attacks.jsonl, made by run_all.sh's corpus step), CRS in $CRS.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$here/.."
out="${1:-/tmp/waf-bench}"
CRS="${CRS:-$root/../shared/crs}"
CORPUS="${CORPUS:-/tmp/peers-corpus}"
HAR="${HAR:-$root/../shared/corpus/har}"
WAF="${WAF:-$root/target/release/waf}"
mkdir -p "$out"
"$here/crs-config.sh" "$CRS" 1 > "$out/crs-pl1.conf"
"$here/crs-config.sh" "$CRS" 4 > "$out/crs-pl4.conf"
b() { local name=$1; shift; echo "== $name" >&2; "$WAF" bench --json "$@" > "$out/$name.json"; }
# Headline runs alone (a naive run interleaved request by request evicts the
# CPU caches the fast path relies on); then each again with --compare naive
# for the same-process ratio and the decision check.
for pl in 1 4; do
  b "benign-pl$pl" -c "$out/crs-pl$pl.conf" --corpus "$CORPUS/benign.jsonl" --passes 3
  b "benign-pl$pl-noxcache" -c "$out/crs-pl$pl.conf" --corpus "$CORPUS/benign.jsonl" --passes 3 --no-xcache
  b "benign-pl$pl-vs-naive" -c "$out/crs-pl$pl.conf" --corpus "$CORPUS/benign.jsonl" --passes 3 --compare naive
  b "attacks-pl$pl" -c "$out/crs-pl$pl.conf" --corpus "$CORPUS/crs_attacks.jsonl" --passes 2
  b "attacks-pl$pl-vs-naive" -c "$out/crs-pl$pl.conf" --corpus "$CORPUS/crs_attacks.jsonl" --passes 2 --compare naive
done
b benign-pl1-2threads -c "$out/crs-pl1.conf" --corpus "$CORPUS/benign.jsonl" --passes 3 --threads 2
b har-pl1 -c "$out/crs-pl1.conf" --corpus "$HAR"/*.har --passes 3
b har-pl1-vs-naive -c "$out/crs-pl1.conf" --corpus "$HAR"/*.har --passes 3 --compare naive
# Body sizes: one urlencoded POST of each size, limits raised so the whole
# body is parsed and inspected.
printf 'SecRequestBodyNoFilesLimit 13107200\nSecArgumentsLimit 1000000\n' > "$out/bodies.conf"
python3 - "$out" <<'PY'
import json, random, sys
random.seed(7)
words = "alpha beta gamma delta report name value city paris order item quantity price note hello world".split()
for kb in [1, 4, 16, 64, 256, 1024]:
    parts, size, i = [], 0, 0
    while size < kb * 1024:
        p = "field%d=%s" % (i, "+".join(random.choice(words) for _ in range(random.randint(1, 6))))
        parts.append(p); size += len(p) + 1; i += 1
    body = "&".join(parts)[: kb * 1024]
    req = {"id": "urlenc-%dk" % kb, "method": "POST", "uri": "/submit", "version": "HTTP/1.1",
           "headers": [["Host", "example.com"], ["Content-Type", "application/x-www-form-urlencoded"],
                       ["Content-Length", str(len(body))]], "body": body}
    open("%s/body-%dk.jsonl" % (sys.argv[1], kb), "w").write(json.dumps(req) + "\n")
PY
for kb in 1 4 16 64 256 1024; do
  b "body-${kb}k" -c "$out/crs-pl1.conf" -c "$out/bodies.conf" --corpus "$out/body-${kb}k.jsonl" --passes 3 --compare naive
done
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
print("%-22s %9s %9s %9s %9s %9s %8s %7s %6s %s" % ("run", "req/s", "p50 us", "p99 us", "p99.9", "max", "load ms", "xcache", "memo", "naive p50 / decisions differ"))
for name in sorted(os.listdir(out)):
    if not name.endswith(".json"):
        continue
    d = json.load(open(os.path.join(out, name)))
    l = d["latency_us"]
    xc = d["xcache_hit_ratio"]
    nv = d.get("naive")
    naive = "%.1f / %d" % (nv["latency_us"]["p50"], d["disagreements"]) if nv else ""
    print("%-22s %9.0f %9.1f %9.1f %9.1f %9.1f %8.0f %7s %6.2f %s" % (
        name[:-5], d["throughput_rps"], l["p50"], l["p99"], l["p99.9"], l["max"], d["rule_load_ms"],
        "-" if xc is None else "%.2f" % xc, d["memo_hit_ratio"], naive))
PY
