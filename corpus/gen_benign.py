#!/usr/bin/env python3
"""Generate benign, browser-like HTTP requests as request JSONL.

The corpus that `waf bench`, `waf profile`, `waf suggest --verify` and
`waf eval` need when no capture of real traffic is at hand: page loads,
static assets, XHR API calls, urlencoded form posts and JSON API posts, with
the header sets browsers send (User-Agent, Accept*, Sec-Fetch-*, cookies,
Referer). Deterministic for a seed; Python 3 standard library only.

  python3 corpus/gen_benign.py --n 1000 --seed 1 --out /tmp/benign.jsonl

The format is documented in docs/formats.md. Every request is one a WAF
should let through at paranoia level 1: words, numbers and ordinary
punctuation, no payloads.
"""
import argparse
import json
import random
import urllib.parse

HOSTS = ["www.example.com", "shop.example.org", "app.example.net"]
USER_AGENTS = [
    "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
]
LANGS = ["en-US,en;q=0.9", "fr-FR,fr;q=0.8,en;q=0.5", "de-DE,de;q=0.9,en;q=0.6"]
WORDS = ("garden table lamp blue coffee winter travel guide kitchen chair book "
         "music summer light paper green camera phone river market city").split()
SECTIONS = ["products", "articles", "help", "account", "category", "blog"]
ASSETS = [("css", "text/css,*/*;q=0.1", "style"), ("js", "*/*", "script"),
          ("png", "image/avif,image/webp,*/*", "image"), ("woff2", "*/*", "font")]


def words(rng, lo=1, hi=3):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def cookie(rng):
    return "; ".join([
        "session=%032x" % rng.getrandbits(128),
        "theme=%s" % rng.choice(["light", "dark"]),
        "consent=%d" % rng.randint(0, 1),
    ])


def base_headers(rng, host, accept, dest, mode, site="same-origin"):
    h = [
        ["Host", host],
        ["User-Agent", rng.choice(USER_AGENTS)],
        ["Accept", accept],
        ["Accept-Language", rng.choice(LANGS)],
        ["Accept-Encoding", "gzip, deflate, br"],
        ["Sec-Fetch-Dest", dest],
        ["Sec-Fetch-Mode", mode],
        ["Sec-Fetch-Site", site],
    ]
    if rng.random() < 0.8:
        h.append(["Cookie", cookie(rng)])
    if site != "none":
        h.append(["Referer", "https://%s/%s/" % (host, rng.choice(SECTIONS))])
    return h


def page(rng, host):
    path = "/%s/%d" % (rng.choice(SECTIONS), rng.randint(1, 99999))
    if rng.random() < 0.4:
        path += "?" + urllib.parse.urlencode({"q": words(rng), "page": rng.randint(1, 20)})
    h = base_headers(rng, host, "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
                     "document", "navigate", rng.choice(["none", "same-origin"]))
    h.append(["Upgrade-Insecure-Requests", "1"])
    return "GET", path, h, None


def asset(rng, host):
    ext, accept, dest = rng.choice(ASSETS)
    path = "/static/%s/%s-%x.%s" % (ext, rng.choice(WORDS), rng.getrandbits(32), ext)
    return "GET", path, base_headers(rng, host, accept, dest, "no-cors"), None


def api_get(rng, host):
    path = "/api/v1/%s/%d" % (rng.choice(SECTIONS), rng.randint(1, 99999))
    if rng.random() < 0.5:
        path += "?" + urllib.parse.urlencode({"limit": rng.choice([10, 20, 50]), "sort": rng.choice(["date", "name"])})
    h = base_headers(rng, host, "application/json, text/plain, */*", "empty", "cors")
    h.append(["X-Requested-With", "XMLHttpRequest"])
    return "GET", path, h, None


def form_post(rng, host):
    fields = {
        "name": words(rng, 1, 2).title(),
        "email": "%s.%s@example.com" % (rng.choice(WORDS), rng.choice(WORDS)),
        "message": words(rng, 3, 12).capitalize() + ".",
        "quantity": str(rng.randint(1, 9)),
    }
    body = urllib.parse.urlencode(fields)
    h = base_headers(rng, host, "text/html,application/xhtml+xml,*/*;q=0.8", "document", "navigate")
    h += [["Content-Type", "application/x-www-form-urlencoded"], ["Content-Length", str(len(body))],
          ["Origin", "https://" + host]]
    return "POST", "/%s/submit" % rng.choice(["contact", "order", "feedback"]), h, body


def json_post(rng, host):
    doc = {
        "item": rng.randint(1, 99999),
        "title": words(rng, 2, 4),
        "tags": [rng.choice(WORDS) for _ in range(rng.randint(0, 3))],
        "options": {"gift": rng.random() < 0.3, "count": rng.randint(1, 5)},
    }
    body = json.dumps(doc)
    h = base_headers(rng, host, "application/json", "empty", "cors")
    h += [["Content-Type", "application/json"], ["Content-Length", str(len(body))],
          ["Origin", "https://" + host]]
    return "POST", "/api/v1/%s" % rng.choice(["cart", "reviews", "events"]), h, body


KINDS = [(page, 35), (asset, 25), (api_get, 20), (form_post, 10), (json_post, 10)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000, help="number of requests (default 1000)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", required=True, help="JSONL file to write")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    makers = [k for k, w in KINDS for _ in range(w)]
    with open(args.out, "w", encoding="utf-8") as f:
        for i in range(args.n):
            method, uri, headers, body = rng.choice(makers)(rng, rng.choice(HOSTS))
            rec = {"id": "benign-%05d" % i, "method": method, "uri": uri,
                   "version": "HTTP/1.1", "headers": headers}
            if body is not None:
                rec["body"] = body
            f.write(json.dumps(rec) + "\n")
    print("wrote %d requests to %s" % (args.n, args.out))


if __name__ == "__main__":
    main()
