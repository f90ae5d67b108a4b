#!/usr/bin/env bash
# 10,000 idle client connections against `waf serve` + CRS: opened at once,
# never sending a byte. Prints the proxy's RSS before, with all of them open,
# and after its header timeout closed them; and checks a normal request is
# still answered while they are open. Memory per idle connection must stay
# small and be given back.
#
#   corpus/serve-idle.sh [CONNECTIONS]      (default 10000)
#
# Needs target/release/waf, python3, curl. CRS from $CRS (../shared/crs).
# Loopback only; everything is stopped on exit.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$here/.."
n="${1:-10000}"
CRS="${CRS:-$root/../shared/crs}"
WAF="${WAF:-$root/target/release/waf}"
work="$(mktemp -d /tmp/waf-serve-idle.XXXXXX)"
pids=()
cleanup() { for p in "${pids[@]:-}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
ulimit -n $(( n + 1024 )) 2>/dev/null || { echo "serve-idle.sh: cannot raise the open-file limit to $(( n + 1024 ))" >&2; exit 2; }
[ -x "$WAF" ] || { echo "serve-idle.sh: build $WAF first (cargo build --release -p waf-cli)" >&2; exit 2; }

"$here/crs-config.sh" "$CRS" 1 > "$work/rules.conf"
"$WAF" test backend --listen 127.0.0.1:19400 2>"$work/backend.out" & pids+=($!)
"$WAF" serve -c "$work/rules.conf" --listen 127.0.0.1:19401 --upstream http://127.0.0.1:19400 \
  --error-log "$work/waf.log" 2>"$work/serve.out" & pids+=($!); serve_pid=$!
for _ in $(seq 1 300); do curl -s -o /dev/null http://127.0.0.1:19401/ && break; sleep 0.1; done
rss() { awk '/VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$serve_pid/status"; }
curl -s -o /dev/null "http://127.0.0.1:19401/?warm=1"
before=$(rss)

python3 - "$n" "$serve_pid" <<'PY'
import socket, subprocess, sys, time
n, pid = int(sys.argv[1]), sys.argv[2]
def rss():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
socks = []
t0 = time.time()
for i in range(n):
    s = socket.socket()
    s.settimeout(5)
    s.connect(("127.0.0.1", 19401))
    socks.append(s)
opened = time.time() - t0
time.sleep(1)
held = rss()
# A real request is still served while they are all open.
code = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-m", "5",
                       "http://127.0.0.1:19401/?q=still-served"], capture_output=True, text=True).stdout
print(f"opened {n} idle connections in {opened:.1f} s; RSS with all open: {held:.1f} MiB; "
      f"a request meanwhile: HTTP {code}")
# The header timeout (10 s) closes them: wait, bounded, for every one to see EOF.
deadline = time.time() + 30
closed = 0
for s in socks:
    try:
        s.settimeout(max(0.1, deadline - time.time()))
        if s.recv(1) == b"":
            closed += 1
    except OSError:
        pass
    s.close()
print(f"closed by the proxy's header timeout: {closed} of {n}")
sys.exit(0 if code == "200" and closed == n else 1)
PY
sleep 2
after=$(rss)
echo "RSS: before $before MiB, after the timeout closed them $after MiB"
