#!/usr/bin/env bash
# Print the peers' CRS configuration (the exact text both peer harnesses load)
# for a CRS directory and a paranoia level, so that our engine runs the same
# directives:
#
#   corpus/crs-config.sh [CRS_DIR [PL]] > /tmp/crs-pl1.conf
#   waf eval -c /tmp/crs-pl1.conf --corpus reqs.jsonl --out ours.jsonl
#
# CRS_DIR defaults to ../shared/crs (beside this repo), PL to 1. The text is
# `configTemplate` of ../shared/peers/coraza/main.go (read from there at run
# time, never copied into this repo) with @CRS@ replaced by the absolute CRS
# path and @PL@ by the paranoia level; it is byte-identical to
# `coraza-peer --crs CRS_DIR --pl PL --dump-config` when CRS_DIR is given as an
# absolute path. PEERS=/path/to/peers overrides where the peers are.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
peers="${PEERS:-$here/../../shared/peers}"
crs="${1:-$here/../../shared/crs}"
pl="${2:-1}"
main_go="$peers/coraza/main.go"

if [[ ! -f "$main_go" ]]; then
  echo "crs-config.sh: $main_go not found (set PEERS=/path/to/shared/peers)" >&2
  exit 2
fi
if [[ ! -f "$crs/crs-setup.conf.example" || ! -d "$crs/rules" ]]; then
  echo "crs-config.sh: $crs is not a CRS directory (crs-setup.conf.example, rules/)" >&2
  exit 2
fi
if ! [[ "$pl" =~ ^[1-4]$ ]]; then
  echo "crs-config.sh: paranoia level must be 1..4, got '$pl'" >&2
  exit 2
fi
crs="$(cd "$crs" && pwd)"

python3 - "$main_go" "$crs" "$pl" <<'EOF'
import re, sys
src = open(sys.argv[1], encoding="utf-8").read()
m = re.search(r"^const configTemplate = `(.*?)`", src, re.S | re.M)
if not m:
    sys.exit("crs-config.sh: configTemplate not found in " + sys.argv[1])
sys.stdout.write(m.group(1).replace("@CRS@", sys.argv[2]).replace("@PL@", sys.argv[3]))
EOF
