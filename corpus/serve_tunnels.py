#!/usr/bin/env python3
"""WebSocket tunnels through `waf serve`: what each open one costs.

Serves a WebSocket echo application (the RFC 6455 handshake, then every byte
sent back) on --app-port, opens --n tunnels through the proxy on
--proxy-port (each: a browser-like handshake, then one masked frame echoed),
keeps them all open, and prints the proxy's RSS (pid --pid) before and with
all of them open. A first round, closed before measuring, warms the engine's
per-thread caches, which a fresh process grows on its first requests; both
rounds are reported. Exits 1 unless every tunnel opened and echoed and the
second round stayed under --max-kib-per-tunnel. Loopback only; used by
corpus/serve-tunnels.sh.
"""
import argparse
import asyncio
import base64
import hashlib

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
KEY = b"MDEyMzQ1Njc4OWFiY2RlZg=="


async def app(reader, writer):
    head = await reader.readuntil(b"\r\n\r\n")
    key = next(
        (l.split(b":", 1)[1].strip() for l in head.split(b"\r\n") if l.lower().startswith(b"sec-websocket-key:")),
        b"",
    )
    accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
    writer.write(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n"
    )
    await writer.drain()
    while True:
        data = await reader.read(4096)
        if not data:
            break
        writer.write(data)
        await writer.drain()
    writer.close()


async def tunnel(port, i, open_ones):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"GET /chat?n=%d HTTP/1.1\r\nHost: example.com\r\nUser-Agent: Mozilla/5.0\r\nAccept: */*\r\n"
        b"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
        b"Sec-WebSocket-Key: " % i + KEY + b"\r\n\r\n"
    )
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    expected = base64.b64encode(hashlib.sha1(KEY + GUID).digest())
    mask = b"abcd"
    frame = b"\x81\x84" + mask + bytes(x ^ y for x, y in zip(b"ping", mask))
    writer.write(frame)
    await writer.drain()
    back = await asyncio.wait_for(reader.readexactly(len(frame)), 10)
    open_ones.append(writer)
    return head.startswith(b"HTTP/1.1 101") and expected in head and back == frame


def rss(pid):
    with open("/proc/%d/status" % pid) as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS")) / 1024


async def round_of(n, port):
    open_ones, ok = [], 0
    for start in range(0, n, 200):
        done = await asyncio.gather(*(tunnel(port, i, open_ones) for i in range(start, min(n, start + 200))))
        ok += sum(done)
    return open_ones, ok


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--proxy-port", type=int, required=True)
    p.add_argument("--app-port", type=int, required=True)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--max-kib-per-tunnel", type=float, default=16)
    a = p.parse_args()
    failed = False
    server = await asyncio.start_server(app, "127.0.0.1", a.app_port, backlog=4096)
    for label in ("first round (engine caches warming)", "second round"):
        before = rss(a.pid)
        open_ones, ok = await round_of(a.n, a.proxy_port)
        await asyncio.sleep(1)
        with_all = rss(a.pid)
        per_tunnel = (with_all - before) * 1024 / a.n
        print(
            "%s: %d of %d tunnels open and echoing; RSS %.1f -> %.1f MiB (%.1f KiB per tunnel)"
            % (label, ok, a.n, before, with_all, per_tunnel)
        )
        failed |= ok != a.n
        if label == "second round" and per_tunnel > a.max_kib_per_tunnel:
            print("over %.0f KiB per tunnel" % a.max_kib_per_tunnel)
            failed = True
        for w in open_ones:
            w.close()
        await asyncio.sleep(2)
    print("after the clients closed: RSS %.1f MiB" % rss(a.pid))
    server.close()
    return 1 if failed else 0


raise SystemExit(asyncio.run(main()))
