#!/usr/bin/env python3
"""Sends a request corpus (the peers' JSONL format) to a server over one
keep-alive connection, one request at a time, PASSES times; prints how many
were sent and how many were answered with a status of 300 or more.

    corpus/send_requests.py CORPUS.jsonl PORT [PASSES]

A fixed, ordered stream of requests, for measurements that count work
per request (corpus/serve-callgrind.sh) rather than time it.
"""
import http.client
import json
import sys


def main():
    path, port = sys.argv[1], int(sys.argv[2])
    passes = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    reqs = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    sent = refused = 0
    for _ in range(passes):
        for r in reqs:
            body = r.get("body")
            if isinstance(body, str):
                body = body.encode()
            conn.putrequest(r.get("method", "GET"), r["uri"], skip_host=True,
                            skip_accept_encoding=True)
            for k, v in r.get("headers", []):
                if k.lower() != "content-length":
                    conn.putheader(k, v)
            if body:
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body)
            resp = conn.getresponse()
            resp.read()
            sent += 1
            refused += resp.status >= 300
    print(f"sent {sent}, status >= 300: {refused}")


if __name__ == "__main__":
    main()
