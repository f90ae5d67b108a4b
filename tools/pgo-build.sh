#!/usr/bin/env bash
# Builds the `waf` binary with profile-guided optimization (PGO), the build
# to deploy: the same code as `cargo build --release -p waf-cli`, laid out
# and inlined by the compiler after a training run (hot paths together,
# cold ones apart: fewer instruction-cache misses, better branch layout).
# Measured with corpus/serve-ab.sh on CRS PL1 (docs/performance.md):
# 8 % less CPU per request through `waf serve` with CRS, 9 % without rules.
#
#   [CRS=../shared/crs] tools/pgo-build.sh
#
# Leaves the binary in target/pgo/release/waf (and the profile in
# target/pgo/merged-HASH.profdata). Steps:
#   1. an instrumented build (target/pgo-gen);
#   2. training on traffic unlike the load tests' (corpus/gen_benign.py,
#      seed 7, not seed 1): `waf bench` on CRS PL1, the CRS regression
#      suite in process (attacks, every phase), and `waf serve` with CRS
#      in front of `waf test backend` (corpus/send_requests.py over
#      loopback);
#   3. the profiles merged with the toolchain's llvm-profdata (the
#      `llvm-tools` rustup component, added when missing);
#   4. the optimized build (target/pgo).
# Needs the toolchain's llvm-profdata, python3 and CRS. Loopback only.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../corpus" && pwd)"
# shellcheck source=corpus/serve-setup.sh
. "$here/serve-setup.sh"
[ -d "$CRS/rules" ] || { echo "pgo-build.sh: no CRS at $CRS (set CRS)" >&2; exit 2; }
cd "$root"

host="$(rustc -vV | awk '/^host:/ {print $2}')"
profdata="$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata"
if [ ! -x "$profdata" ]; then
  rustup component add llvm-tools >/dev/null 2>&1 || rustup component add llvm-tools-preview >/dev/null 2>&1 || true
fi
[ -x "$profdata" ] || { echo "pgo-build.sh: no $profdata (rustup component add llvm-tools)" >&2; exit 2; }

out="$root/target/pgo"
raw="$out/raw"
rm -rf "$raw"
mkdir -p "$raw"

echo "pgo-build.sh: 1/4 instrumented build" >&2
RUSTFLAGS="-Cprofile-generate=$raw" CARGO_TARGET_DIR="$root/target/pgo-gen" \
  cargo build --release -p waf-cli
gen="$root/target/pgo-gen/release/waf"

echo "pgo-build.sh: 2/4 training" >&2
"$root/corpus/crs-config.sh" "$CRS" 1 > "$work/crs.conf"
python3 "$root/corpus/gen_benign.py" --n 2000 --seed 7 --out "$work/benign.jsonl" >/dev/null
"$gen" bench "$work/crs.conf" --corpus "$work/benign.jsonl" --passes 2 --top 0 >/dev/null
"$gen" test ftw "$CRS/tests/regression/tests" --crs "$CRS" >"$work/ftw.out" 2>&1 || true
# `waf serve` with CRS in front of the test backend (an empty 200).
backend=$((20000 + RANDOM % 20000))
listen=$((backend + 1))
"$gen" test backend --listen "127.0.0.1:$backend" 2>"$work/backend.out" & pids+=($!)
"$gen" serve -c "$work/crs.conf" --listen "127.0.0.1:$listen" \
  --upstream "http://127.0.0.1:$backend" --error-log "$work/error.log" 2>"$work/serve.out" &
serve=$!
wait_http "http://127.0.0.1:$listen/"
python3 "$root/corpus/send_requests.py" "$work/benign.jsonl" "$listen" 2 >/dev/null
# A clean stop writes the server's profile.
kill -TERM "$serve"
wait "$serve" || true

echo "pgo-build.sh: 3/4 merging $(ls "$raw" | wc -l) profiles" >&2
"$profdata" merge -o "$work/merged.profdata" "$raw"
# Named by its content: cargo rebuilds what the flags name, so a new
# profile at the same path would leave the last build in place.
profile="$out/merged-$(sha256sum "$work/merged.profdata" | cut -c1-16).profdata"
rm -f "$out"/merged-*.profdata
mv "$work/merged.profdata" "$profile"

echo "pgo-build.sh: 4/4 optimized build" >&2
RUSTFLAGS="-Cprofile-use=$profile -Cllvm-args=-pgo-warn-missing-function=false" \
  CARGO_TARGET_DIR="$out" cargo build --release -p waf-cli
echo "pgo-build.sh: $out/release/waf" >&2
