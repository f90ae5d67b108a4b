#!/usr/bin/env python3
"""A wrk Lua script that cycles through a JSONL request corpus (method, URI,
headers and body of each request), for the load scripts.

    python3 corpus/wrk_requests.py requests.jsonl > requests.lua
    wrk -s requests.lua http://127.0.0.1:8080
"""
import json
import sys


def lua(s):
    # Printable ASCII as is, anything else as a 3-digit decimal escape.
    return '"' + "".join(chr(b) if 32 <= b < 127 and b not in (34, 92) else "\\%03d" % b
                         for b in s.encode()) + '"'


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: wrk_requests.py REQUESTS.jsonl > requests.lua")
    out = ["requests = {}"]
    for line in open(sys.argv[1]):
        r = json.loads(line)
        hs = ", ".join("[%s] = %s" % (lua(k), lua(v)) for k, v in r["headers"]
                       if k.lower() != "content-length")
        body = lua(r["body"]) if r.get("body") is not None else "nil"
        out.append("requests[#requests + 1] = wrk.format(%s, %s, {%s}, %s)" % (
            lua(r["method"]), lua(r["uri"]), hs, body))
    out.append("local i = 0")
    out.append("request = function() i = i % #requests + 1; return requests[i] end")
    print("\n".join(out))


if __name__ == "__main__":
    main()
