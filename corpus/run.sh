#!/usr/bin/env bash
# Build the peers and our `waf`, build the three corpora, record decisions of
# the three engines with the peers' CRS configuration, and compare ours with
# each peer (see corpus/README.md and corpus/RESULTS.md).
#
#   corpus/run.sh                       # everything, PL1
#   PL=4 corpus/run.sh                  # another paranoia level
#   STEPS="decisions compare" corpus/run.sh
#
# Everything generated goes outside the repo: peer binaries in $BIN
# (/tmp/peers-bin), corpora in $CORPUS (/tmp/peers-corpus), decisions and
# comparisons in $OUT (/tmp/corpus-out), our build in $CARGO_TARGET_DIR
# (/tmp/target-corpus).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
SHARED="${SHARED:-$(cd "$REPO/../shared" && pwd)}"
PEERS="$SHARED/peers"
CRS="${CRS:-$SHARED/crs}"
PL="${PL:-1}"
BIN="${BIN:-/tmp/peers-bin}"
CORPUS="${CORPUS:-/tmp/peers-corpus}"
OUT="${OUT:-/tmp/corpus-out}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/tmp/target-corpus}"
WAF="$CARGO_TARGET_DIR/release/waf"
STEPS="${STEPS:-build corpus decisions compare}"
CORPORA="benign har crs_attacks"
mkdir -p "$BIN" "$CORPUS" "$OUT"
has() { [[ " $STEPS " == *" $1 "* ]]; }

if has build; then
  (cd "$PEERS/coraza" && go build -trimpath -o "$BIN/coraza-peer" .)
  g++ -O2 -std=c++17 -Wall -o "$BIN/modsec-peer" "$PEERS/modsec/main.cc" $(pkg-config --cflags --libs modsecurity)
  (cd "$REPO" && cargo build --release -p waf-cli)
fi

if has corpus; then
  python3 "$PEERS/corpus/gen_benign.py" --n 2000 --seed 1 --out "$CORPUS/benign.jsonl"
  python3 "$HERE/har_to_jsonl.py" "$SHARED"/corpus/har/*.har --out "$CORPUS/har.jsonl"
  python3 "$PEERS/corpus/ftw_to_jsonl.py" --crs "$CRS" --out "$CORPUS/crs_attacks.jsonl"
fi

if has decisions; then
  "$HERE/crs-config.sh" "$CRS" "$PL" > "$OUT/crs-pl$PL.conf"
  for e in coraza modsec; do
    diff <("$BIN/$e-peer" --crs "$(cd "$CRS" && pwd)" --pl "$PL" --dump-config) "$OUT/crs-pl$PL.conf" >/dev/null \
      || { echo "run.sh: $e-peer --dump-config differs from crs-config.sh" >&2; exit 1; }
  done
  for c in $CORPORA; do
    "$BIN/coraza-peer" --crs "$CRS" --pl "$PL" --in "$CORPUS/$c.jsonl" --out "$OUT/coraza_${c}_pl$PL.jsonl"
    "$BIN/modsec-peer" --crs "$CRS" --pl "$PL" --in "$CORPUS/$c.jsonl" --out "$OUT/modsec_${c}_pl$PL.jsonl"
    "$WAF" eval -c "$OUT/crs-pl$PL.conf" --corpus "$CORPUS/$c.jsonl" --out "$OUT/ours_${c}_pl$PL.jsonl"
  done
fi

status=0
if has compare; then
  for c in $CORPORA; do
    extra=()
    [[ $c == crs_attacks ]] && extra=(--corpus "$CORPUS/$c.jsonl")
    for p in coraza modsec; do
      echo "=== $c PL$PL: ours vs $p"
      python3 "$PEERS/compare.py" "$OUT/ours_${c}_pl$PL.jsonl" "$OUT/${p}_${c}_pl$PL.jsonl" \
        --names "ours,$p" "${extra[@]}" --examples 10 | tee "$OUT/compare_${c}_ours_${p}_pl$PL.txt"
    done
    echo "=== $c PL$PL: coraza vs modsec"
    python3 "$PEERS/compare.py" "$OUT/coraza_${c}_pl$PL.jsonl" "$OUT/modsec_${c}_pl$PL.jsonl" \
      --names coraza,modsec "${extra[@]}" | tee "$OUT/compare_${c}_coraza_modsec_pl$PL.txt"
    echo "=== $c PL$PL: requests we interrupt that both peers let through"
    python3 "$HERE/three_way.py" "$OUT" "$c" "$PL" --corpus "$CORPUS/$c.jsonl" || status=1
  done
fi
# 1 when we interrupt a request that both peers let through (on any corpus).
exit $status
