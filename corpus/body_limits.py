#!/usr/bin/env python3
"""The request-body limit matrix: our engine, libmodsecurity 3.0.9 and
Coraza on the same configurations and requests.

For each body processor (urlencoded, JSON, XML, multipart with a file part, multipart with text fields only), each
`SecRequestBodyLimitAction` (Reject, ProcessPartial) and each body size
(under both limits; over `SecRequestBodyNoFilesLimit` but under
`SecRequestBodyLimit`; over both), one request carries an attack marker at
the very end of its body. A WAF that silently skips the body lets it
through (status 200, rule 1 not matched): that is the bypass to look for.

    python3 corpus/body_limits.py [--waf target/release/waf] [--bin /tmp/peers-bin] [--out DIR]

Prints a Markdown table: per engine, the status and the rules matched
(1 = the attack marker, 2 = REQBODY_ERROR, 3 = INBOUND_DATA_ERROR). An
engine whose binary is missing is shown as "-".
"""

import argparse
import json
import os
import subprocess
import sys

import decisions

LIMIT = 65536        # SecRequestBodyLimit
NOFILES = 16384      # SecRequestBodyNoFilesLimit
MARK = "zzattackmarkerzz"

RULES = """SecRuleEngine On
SecRequestBodyAccess On
SecRequestBodyLimit {limit}
SecRequestBodyNoFilesLimit {nofiles}
SecRequestBodyLimitAction {action}
SecArgumentsLimit 100000
SecRule REQUEST_HEADERS:Content-Type "@rx ^application/json" "id:100,phase:1,pass,nolog,ctl:requestBodyProcessor=JSON"
SecRule REQUEST_HEADERS:Content-Type "@rx ^(?:application|text)/xml" "id:101,phase:1,pass,nolog,ctl:requestBodyProcessor=XML"
SecRule ARGS|XML:/*|FILES|MULTIPART_PART_HEADERS "@contains {mark}" "id:1,phase:2,deny,status:403,log"
SecRule REQBODY_ERROR "!@eq 0" "id:2,phase:2,pass,log"
SecRule INBOUND_DATA_ERROR "!@eq 0" "id:3,phase:2,pass,log"
"""


def pad_text(n):
    words = "alpha beta gamma delta report name value city paris order".split()
    out, i = [], 0
    size = 0
    while size < n:
        w = words[i % len(words)]
        out.append(w)
        size += len(w) + 1
        i += 1
    return " ".join(out)[:n]


def body(kind, size):
    """A body of about `size` bytes of `kind` with MARK at its end."""
    if kind == "urlencoded":
        filler = pad_text(max(0, size - 40)).replace(" ", "+")
        return "application/x-www-form-urlencoded", "a=" + filler + "&b=" + MARK
    if kind == "json":
        filler = pad_text(max(0, size - 40))
        return "application/json", json.dumps({"a": filler, "b": MARK})
    if kind == "xml":
        filler = pad_text(max(0, size - 60))
        return "application/xml", "<r><a>%s</a><b>%s</b></r>" % (filler, MARK)
    if kind == "multipart":
        # A file part (counts towards SecRequestBodyLimit only) and a text
        # field after it with the marker.
        b = "----wafboundary"
        filler = pad_text(max(0, size - 300))
        parts = [
            "--%s\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a.txt\"\r\n"
            "Content-Type: text/plain\r\n\r\n%s\r\n" % (b, filler),
            "--%s\r\nContent-Disposition: form-data; name=\"b\"\r\n\r\n%s\r\n" % (b, MARK),
            "--%s--\r\n" % b,
        ]
        return "multipart/form-data; boundary=%s" % b, "".join(parts)
    if kind == "multipart-fields":
        # Text fields only: every byte counts towards the no-files limit.
        b = "----wafboundary"
        filler = pad_text(max(0, size - 250))
        parts = [
            "--%s\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n%s\r\n" % (b, filler),
            "--%s\r\nContent-Disposition: form-data; name=\"b\"\r\n\r\n%s\r\n" % (b, MARK),
            "--%s--\r\n" % b,
        ]
        return "multipart/form-data; boundary=%s" % b, "".join(parts)
    raise ValueError(kind)


SIZES = [
    ("under both", 1024),
    ("over no-files", 32 * 1024),
    ("over both", 128 * 1024),
]
KINDS = ["urlencoded", "json", "xml", "multipart", "multipart-fields"]
ACTIONS = ["Reject", "ProcessPartial"]


def run_engine(name, cmd, out_path):
    try:
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        print("%s failed: %s" % (name, e), file=sys.stderr)
        return {}
    return decisions.load(out_path)


def cell(d):
    if not d:
        return "-"
    # `matched_ids`: the rules that log (the peers report only those).
    ids = sorted(set(d.get("matched_ids") or []))
    return "%s %s" % (d.get("status"), ",".join(map(str, ids)) or "none")


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--waf", default=os.path.join(here, "..", "target", "release", "waf"))
    ap.add_argument("--bin", default="/tmp/peers-bin")
    ap.add_argument("--out", default="/tmp/waf-body-limits")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)

    reqs = []
    for kind in KINDS:
        for label, size in SIZES:
            ctype, b = body(kind, size)
            reqs.append({"id": "%s|%s|%d" % (kind, label, len(b)), "method": "POST", "uri": "/submit",
                         "version": "HTTP/1.1",
                         "headers": [["Host", "example.com"], ["Content-Type", ctype],
                                     ["Content-Length", str(len(b))]],
                         "body": b})
    corpus = os.path.join(a.out, "requests.jsonl")
    with open(corpus, "w") as f:
        for r in reqs:
            f.write(json.dumps(r) + "\n")

    results = {}
    for action in ACTIONS:
        conf = os.path.join(a.out, "limits-%s.conf" % action)
        with open(conf, "w") as f:
            f.write(RULES.format(limit=LIMIT, nofiles=NOFILES, action=action, mark=MARK))
        engines = [
            ("waf", [a.waf, "eval", "-c", conf, "--corpus", corpus, "--out"]),
            ("ModSecurity 3.0.9", [os.path.join(a.bin, "modsec-peer"), "--config", conf, "--in", corpus, "--out"]),
            ("Coraza 3.8.1", [os.path.join(a.bin, "coraza-peer"), "--config", conf, "--in", corpus, "--out"]),
        ]
        for name, cmd in engines:
            out_path = os.path.join(a.out, "%s-%s.jsonl" % (name.split()[0].lower(), action))
            if os.path.exists(out_path):
                os.remove(out_path)
            if not os.path.exists(cmd[0]):
                results[(name, action)] = {}
                continue
            results[(name, action)] = run_engine(name, cmd + [out_path], out_path)

    names = ["waf", "ModSecurity 3.0.9", "Coraza 3.8.1"]
    print("SecRequestBodyLimit %d, SecRequestBodyNoFilesLimit %d; the attack marker is at the end of every body." % (LIMIT, NOFILES))
    print("Cells: status, then the rules matched (1 attack marker, 2 REQBODY_ERROR, 3 INBOUND_DATA_ERROR).\n")
    print("| processor | body | action | " + " | ".join(names) + " |")
    print("|---|---|---|" + "---|" * len(names))
    for r in reqs:
        kind, label, n = r["id"].split("|")
        for action in ACTIONS:
            cells = [cell(results[(e, action)].get(r["id"])) for e in names]
            print("| %s | %s (%s B) | %s | %s |" % (kind, label, n, action, " | ".join(cells)))


if __name__ == "__main__":
    main()
