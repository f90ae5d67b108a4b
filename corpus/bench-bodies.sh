#!/usr/bin/env bash
# Large bodies, ours against the peers in one run: a 16 KB and a 64 KB JSON
# API body (p50 over repeated passes, with and without our cross-transaction
# cache), and one urlencoded form with a single 140 KB value measured as the
# first request of a fresh process and transaction (no warm-up, one pass),
# and warm.
#
#   corpus/bench-bodies.sh [OUT_DIR]     (default /tmp/waf-bench-bodies)
#
# Every engine loads the same text: the peers' generated CRS PL1
# configuration (`modsec-peer --dump-config`, byte-identical to
# corpus/crs-config.sh) with the body limits raised so the whole body is
# parsed and inspected (the peers' default 128 KiB no-files limit would
# reject the 140 KB form). Needs target/release/waf and the peers built by
# ../shared/peers/run_all.sh (STEPS=build) in $BIN (default /tmp/peers-bin).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$here/.."
out="${1:-/tmp/waf-bench-bodies}"
CRS="${CRS:-$root/../shared/crs}"
BIN="${BIN:-/tmp/peers-bin}"
WAF="${WAF:-$root/target/release/waf}"
mkdir -p "$out"
"$BIN/modsec-peer" --crs "$CRS" --pl 1 --dump-config > "$out/crs-pl1-bodies.conf"
printf '\nSecRequestBodyNoFilesLimit 13107200\nSecArgumentsLimit 1000000\n' >> "$out/crs-pl1-bodies.conf"

python3 - "$out" <<'PY'
import json, random, sys
out = sys.argv[1]
random.seed(11)
words = "alpha beta gamma delta report name value city paris order item quantity price note hello world".split()
def request(rid, ctype, body):
    return {"id": rid, "method": "POST", "uri": "/api/items", "version": "HTTP/1.1",
            "headers": [["Host", "example.com"], ["Content-Type", ctype],
                        ["Content-Length", str(len(body))]], "body": body}
for kb in (16, 64):
    items, size = [], 2
    while size < kb * 1024:
        it = {"id": len(items), "name": " ".join(random.choice(words) for _ in range(3)),
              "tags": [random.choice(words) for _ in range(3)], "price": random.randint(1, 999),
              "note": " ".join(random.choice(words) for _ in range(8))}
        items.append(it)
        size += len(json.dumps(it)) + 1
    body = json.dumps({"items": items})
    with open("%s/json-%dk.jsonl" % (out, kb), "w") as f:
        f.write(json.dumps(request("json-%dk" % kb, "application/json", body)) + "\n")
value = "+".join(random.choice(words) for _ in range(30000))[: 140 * 1024]
body = "comment=" + value
with open("%s/form-140k.jsonl" % out, "w") as f:
    f.write(json.dumps(request("form-140k", "application/x-www-form-urlencoded", body)) + "\n")
PY

conf="$out/crs-pl1-bodies.conf"
peer() { # NAME CORPUS PASSES WARMUP
  "$BIN/modsec-peer" --config "$conf" --in "$out/$2.jsonl" --bench "$3" --warmup "$4" --label modsec | tail -1 > "$out/$1-$2-modsec.json"
  GOMAXPROCS=1 "$BIN/coraza-peer" --config "$conf" --in "$out/$2.jsonl" --bench "$3" --warmup "$4" --label coraza | tail -1 > "$out/$1-$2-coraza.json"
}
ours() { # NAME CORPUS PASSES WARMUP [FLAGS...]
  local name=$1 corpus=$2 passes=$3 warmup=$4
  shift 4
  "$WAF" bench --json -c "$conf" --corpus "$out/$corpus.jsonl" --passes "$passes" --warmup "$warmup" "$@" > "$out/$name-$corpus-waf.json"
}
for c in json-16k json-64k; do
  peer warm "$c" 20 2
  ours warm "$c" 20 2
  ours nocache "$c" 20 2 --no-xcache
done
peer cold form-140k 1 0
ours cold form-140k 1 0
peer warm form-140k 5 1
ours warm form-140k 5 1

python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
def p50(path):
    d = json.load(open(path))
    return d["latency_us"]["p50"] if "latency_us" in d else d["p50_us"]
print("%-24s %12s %12s %12s %14s" % ("run", "ModSecurity", "Coraza", "waf", "waf no xcache"))
for run, c in [("warm", "json-16k"), ("warm", "json-64k"), ("cold", "form-140k"), ("warm", "form-140k")]:
    f = lambda e: os.path.join(out, "%s-%s-%s.json" % (run, c, e))
    nc = os.path.join(out, "nocache-%s-waf.json" % c)
    cells = [p50(f("modsec")), p50(f("coraza")), p50(f("waf"))]
    print("%-24s %10.0f us %10.0f us %10.1f us %12s" % (
        "%s %s p50" % (c, run), *cells, "%.1f us" % p50(nc) if os.path.exists(nc) else "-"))
PY
