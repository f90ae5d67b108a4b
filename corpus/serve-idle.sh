#!/usr/bin/env bash
# 10,000 idle client connections against `waf serve` + CRS: opened at once,
# never sending a byte (header timeout HEADER_TIMEOUT, default 45 s, longer
# than opening them all takes). Prints the proxy's RSS before, with all of them open,
# and after its header timeout closed them; and checks a normal request is
# still answered while they are open. Memory per idle connection must stay
# small and be given back.
#
#   corpus/serve-idle.sh [CONNECTIONS]      (default 10000)
#
# Exits 1 unless the request made meanwhile is answered, the header timeout
# closes every connection, and the RSS they add stays under
# MAX_KIB_PER_CONNECTION (default 16) each.
#
# Needs target/release/waf, python3, curl. CRS from $CRS (../shared/crs).
# Loopback only; everything is stopped on exit.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=corpus/serve-setup.sh
. "$here/serve-setup.sh"
n="${1:-10000}"
HEADER_TIMEOUT="${HEADER_TIMEOUT:-45}"
MAX_KIB_PER_CONNECTION="${MAX_KIB_PER_CONNECTION:-16}"
ulimit -n $(( n + 1024 )) 2>/dev/null || { echo "serve-idle.sh: cannot raise the open-file limit to $(( n + 1024 ))" >&2; exit 2; }
need_waf

"$here/crs-config.sh" "$CRS" 1 > "$work/rules.conf"
"$WAF" test backend --listen 127.0.0.1:19400 2>"$work/backend.out" & pids+=($!)
# A manifest, for a header timeout longer than opening every connection takes.
cat > "$work/waf.yaml" <<YAML
listen: 127.0.0.1:19401
admin: 127.0.0.1:19402
error_log: waf.log
timeouts: { header: $HEADER_TIMEOUT }
upstreams: { app: "http://127.0.0.1:19400" }
sites: [ { name: all, upstream: app, rules: [rules.conf] } ]
YAML
"$WAF" serve --config "$work/waf.yaml" 2>"$work/serve.out" & pids+=($!); serve_pid=$!
wait_http http://127.0.0.1:19401/ http://127.0.0.1:19402/healthz
wait_memory_settled http://127.0.0.1:19402
rss() { rss_mib "$serve_pid"; }
curl -s -o /dev/null "http://127.0.0.1:19401/?warm=1"
# The rules' dense DFAs are built in the background once the proxy answers
# (about half a second for CRS): "before" is the proxy after that.
sleep 3
before=$(rss)

python3 - "$n" "$serve_pid" "$HEADER_TIMEOUT" "$before" "$MAX_KIB_PER_CONNECTION" <<'PY'
import socket, subprocess, sys, time
n, pid, header_timeout = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
before, max_kib = float(sys.argv[4]), float(sys.argv[5])
def rss():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
# Connect all at once, non-blocking (a blocking loop waits out every
# retransmitted SYN one by one), and wait (bounded) until each is connected.
import errno, selectors
sel = selectors.DefaultSelector()
socks = []
t0 = time.time()
for i in range(n):
    if i % 1000 == 999:
        # Paced: a burst larger than the accept queue gets SYN cookies, and
        # the client then believes in connections the server never accepted.
        time.sleep(0.05)
    s = socket.socket()
    s.setblocking(False)
    err = s.connect_ex(("127.0.0.1", 19401))
    if err not in (0, errno.EINPROGRESS):
        sys.exit(f"connect {i}: {errno.errorcode.get(err, err)}")
    socks.append(s)
    sel.register(s, selectors.EVENT_WRITE)
pending = n
while pending and time.time() - t0 < 60:
    for key, _ in sel.select(timeout=1):
        sel.unregister(key.fileobj)
        if key.fileobj.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
            sys.exit("a connection failed")
        pending -= 1
if pending:
    sys.exit(f"{pending} connections not established within 60 s")
opened = time.time() - t0
time.sleep(1)
held = rss()
# A real request is still served while they are all open.
code = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-m", "5",
                       "http://127.0.0.1:19401/?q=still-served"], capture_output=True, text=True).stdout
per_conn = (held - before) * 1024 / n
print(f"opened {n} idle connections in {opened:.1f} s; RSS with all open: {held:.1f} MiB "
      f"({per_conn:.1f} KiB each); a request meanwhile: HTTP {code}")
if per_conn > max_kib:
    print(f"over {max_kib} KiB per idle connection")
    sys.exit(1)
if opened >= header_timeout:
    print(f"opening took longer than the header timeout ({header_timeout} s): raise HEADER_TIMEOUT")
    sys.exit(1)
# The header timeout closes them: wait past it, then look at each socket
# without blocking (EOF or a reset: closed; nothing to read: open).
time.sleep(max(0.0, header_timeout + 3 - (time.time() - t0)))
closed = 0
for s in socks:
    s.setblocking(False)
    try:
        if s.recv(1) == b"":
            closed += 1
    except BlockingIOError:
        pass
    except OSError:
        closed += 1
    s.close()
print(f"closed by the proxy's header timeout: {closed} of {n}")
sys.exit(0 if code == "200" and closed == n else 1)
PY
sleep 2
after=$(rss)
echo "RSS: before $before MiB, after the timeout closed them $after MiB"
