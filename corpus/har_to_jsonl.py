#!/usr/bin/env python3
"""Convert HAR files (browser / proxy captures) into the peers' request JSONL.

    python3 corpus/har_to_jsonl.py ../shared/corpus/har/*.har --out /tmp/har.jsonl

Output: one JSON object per request in the format of ../shared/peers/README.md
section 4 (`id`, `method`, `uri`, `version`, `headers`, `body` / `body_b64`),
plus the informational fields `file` and `url` (ignored by the engines).
A one-line summary (files, requests, skipped with reasons, fixes applied) goes
to stderr.  Standard library only.

How HAR fields become a request (and the quirks of real HAR files handled):

* The file is read as bytes and decoded as UTF-8 with an optional BOM
  (`mitmproxy-with-bom.har`); a file that is not valid JSON or has no
  `log.entries` list is skipped as a whole (reason `bad-file`).
* `uri` is the request-target exactly as on the request line, never the
  absolute URL: the HTTP/2 `:path` pseudo-header when present; else the
  request line that some WebPageTest exports leave among the headers (a
  "header" named `GET /path?query` whose value is the rest of the line after
  the first `:`); else the path + `?query` of `request.url` as recorded
  (not re-encoded, fragment dropped).
* `version` is normalised to the `HTTP/x.y` form both peers expect (Coraza
  takes it as is, ModSecurity gets it without `HTTP/` and re-adds the prefix,
  so both see REQUEST_PROTOCOL `HTTP/x.y`): `h2`, `http/2.0`, `HTTP/2`, `2.0`
  -> `HTTP/2.0`; `h3`, `HTTP/3` -> `HTTP/3.0`; `1.1`, `http/1.1` ->
  `HTTP/1.1`; `1.0` -> `HTTP/1.0`.  Missing or junk values (`""`, Chrome's
  `unknown`, WebPageTest's `me:` / `od:` / `ori` left over from mis-parsed
  `:method:` / `:authority:` lines) are inferred: the embedded request line's
  version; else `HTTP/2.0` when the request has pseudo-headers, the junk is
  a WebPageTest pseudo-header fragment, or the response says HTTP/2; else the
  response's version; else `HTTP/1.1`.  All are in CRS's default
  `tx.allowed_http_versions`.
* Headers keep their recorded order and case.  Pseudo-headers: `:authority`
  becomes `Host` (at its position, unless a `Host` header exists too);
  `:method`, `:path`, `:scheme` (and any other `:name`) are dropped.  Headers
  with an empty name and request-line pseudo-headers are dropped; a missing
  value is `""`.  For HTTP/2 and HTTP/3, several `cookie` headers (browsers
  split cookies into separate h2 fields) are joined into one with `"; "` at
  the position of the first, as RFC 9113 section 8.2.3 requires before a request
  reaches an HTTP/1.1 context (this is also what nginx and Apache do).
* A request with no `Host` / `:authority` at all (Chrome "provisional
  headers", WebPageTest h2 exports) gets `Host` from the URL authority
  appended: every real HTTP/1.1 / h2 request carries one.
* `request.cookies` duplicates the `Cookie` header and is ignored, except when
  the request has no `Cookie` header at all: then a `Cookie` header is built
  from it (`name=value; ...`).
* Body: `postData.text` (base64-decoded first when `postData.encoding` is
  `base64`); when there is no `text` but `postData.params`, the body is rebuilt
  (`application/x-www-form-urlencoded`: `name=value&...`, names/values
  written as recorded; `multipart/form-data`: parts with the boundary of the
  Content-Type header).  Text that is valid for the wire as UTF-8 is written
  as `body`; text that is a byte string decoded as Latin-1 by the exporter
  (binary bodies, e.g. protobuf from mitmproxy) is re-encoded to those bytes
  and written as `body_b64`.  When the headers say `Content-Encoding: gzip`
  or `deflate` but the recorded text is the decoded payload (exporters store
  it decoded), it is compressed again so the engines see an opaque compressed
  body as on the wire (`br` cannot be re-encoded with the standard library:
  the decoded body is kept and the `Content-Encoding` header dropped).
* `Content-Length` is added (after the last header) when there is a body and
  none is given, and corrected when the given one differs from the body
  length (e.g. the re-compressed body).  When the HAR records a
  Content-Length but no body (many exporters drop bodies), the request is
  kept with its headers and no body (counted as `body-not-recorded`).
* Bodies larger than `--max-body` bytes (default 16 MiB) are skipped
  (`body-too-large`); requests without any recorded header (cache hits in
  Safari/Insomnia exports) are skipped (`no-headers`), as are entries without
  a usable method/URL (`no-url`, `bad-entry`).

Request ids are `<file stem>:<entry index>`.
"""
import argparse
import base64
import collections
import gzip
import json
import os
import re
import sys
import urllib.parse
import zlib

TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
REQUEST_LINE = re.compile(r"^([A-Z]+) (\S+) (HTTP/\d(?:\.\d)?)$")
WPT_JUNK = {"me:", "od:", "ori", "th:", "ty:", "st:", "eme", "ath"}


class Skip(Exception):
    pass


def norm_version(v):
    """Returns the HTTP/x.y form of a recognised version string, else None."""
    s = (v or "").strip().lower()
    if s.startswith("http/"):
        s = s[5:]
    table = {
        "h2": "HTTP/2.0", "h2c": "HTTP/2.0", "2": "HTTP/2.0", "2.0": "HTTP/2.0",
        "h3": "HTTP/3.0", "3": "HTTP/3.0", "3.0": "HTTP/3.0",
        "1.1": "HTTP/1.1", "1.0": "HTTP/1.0", "0.9": "HTTP/0.9",
    }
    if s.startswith("h3-"):  # draft QUIC versions, e.g. h3-29
        return "HTTP/3.0"
    return table.get(s)


def text_of(x):
    if x is None:
        return ""
    if isinstance(x, str):
        return x
    if isinstance(x, (int, float, bool)):
        return json.dumps(x)
    return str(x)


def url_target(url):
    """path + ?query of an absolute URL, as recorded (no re-encoding)."""
    u = url
    i = u.find("#")
    if i >= 0:
        u = u[:i]
    m = re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/?]*", u)
    if m:
        rest = u[m.end():]
    elif u.startswith("/") or u == "*":
        rest = u
    else:
        return None
    if not rest:
        return "/"
    if rest.startswith("?"):
        return "/" + rest
    return rest


def url_authority(url):
    m = re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://([^/?#]*)", url)
    if not m:
        return None
    auth = m.group(1)
    if "@" in auth:
        auth = auth.rsplit("@", 1)[1]
    scheme = url.split(":", 1)[0].lower()
    if (scheme == "http" and auth.endswith(":80")) or (scheme == "https" and auth.endswith(":443")):
        auth = auth.rsplit(":", 1)[0]
    return auth or None


def looks_latin1_bytes(t):
    return all(ord(c) < 256 for c in t)


def body_from_postdata(pd, content_type, stats):
    """Returns the body bytes recorded in postData, or None when none is recorded."""
    if not isinstance(pd, dict):
        return None
    text = pd.get("text")
    if isinstance(text, str) and text != "":
        if text_of(pd.get("encoding")).lower() == "base64":
            try:
                return base64.b64decode(text, validate=False)
            except (ValueError, TypeError):
                stats["bad-base64-kept-as-text"] += 1
        # Text: exporters store either a UTF-8-decoded body, or (for bytes that
        # are not UTF-8) the bytes decoded as Latin-1.  Binary-looking text
        # made only of code points < 256 with C0/C1 control characters is
        # taken as such a byte string.
        binary = any((ord(c) < 32 and c not in "\t\r\n") or 0x7F <= ord(c) < 0xA0 for c in text)
        if binary and looks_latin1_bytes(text):
            stats["binary-body"] += 1
            return text.encode("latin-1")
        return text.encode("utf-8", "surrogatepass")
    params = pd.get("params")
    if isinstance(params, list) and params:
        ct = (content_type or text_of(pd.get("mimeType"))).lower()
        if "multipart/form-data" in ct:
            m = re.search(r'boundary="?([^";]+)"?', content_type or text_of(pd.get("mimeType")), re.I)
            if not m:
                stats["params-without-boundary"] += 1
                return None
            b = m.group(1)
            out = []
            for p in params:
                if not isinstance(p, dict):
                    continue
                disp = 'form-data; name="%s"' % text_of(p.get("name"))
                if p.get("fileName") is not None:
                    disp += '; filename="%s"' % text_of(p.get("fileName"))
                out.append("--%s\r\nContent-Disposition: %s\r\n" % (b, disp))
                if p.get("contentType"):
                    out.append("Content-Type: %s\r\n" % text_of(p.get("contentType")))
                out.append("\r\n%s\r\n" % text_of(p.get("value")))
            out.append("--%s--\r\n" % b)
            stats["body-from-params"] += 1
            return "".join(out).encode("utf-8")
        stats["body-from-params"] += 1
        return "&".join(
            "%s=%s" % (text_of(p.get("name")), text_of(p.get("value")))
            for p in params if isinstance(p, dict)).encode("utf-8")
    return None


def is_compressed(data, enc):
    if enc == "gzip":
        return data[:2] == b"\x1f\x8b"
    if enc == "deflate":
        try:
            zlib.decompress(data)
            return True
        except zlib.error:
            try:
                zlib.decompress(data, -15)
                return True
            except zlib.error:
                return False
    return False


def convert_entry(entry, ident, fname, stats, max_body):
    if not isinstance(entry, dict) or not isinstance(entry.get("request"), dict):
        raise Skip("bad-entry")
    r = entry["request"]
    url = text_of(r.get("url")).strip()
    method = text_of(r.get("method")).strip() or "GET"
    raw_headers = r.get("headers")
    if not isinstance(raw_headers, list):
        raw_headers = []

    pseudo = {}
    line_version = None
    line_target = None
    headers = []
    for h in raw_headers:
        if not isinstance(h, dict):
            stats["bad-header-dropped"] += 1
            continue
        name = text_of(h.get("name"))
        value = text_of(h.get("value"))
        if name.strip() == "":
            stats["empty-name-header-dropped"] += 1
            continue
        if name.startswith(":"):
            pseudo.setdefault(name.lower(), value)
            if name.lower() == ":authority":
                headers.append(["\0authority", value])  # placeholder, resolved below
            continue
        if not TOKEN.match(name):
            m = REQUEST_LINE.match((name + ":" + value).strip())
            if m and line_target is None:
                line_target, line_version = m.group(2), m.group(3)
                stats["request-line-header"] += 1
            else:
                stats["invalid-name-header-dropped"] += 1
            continue
        headers.append([name, value.replace("\r", " ").replace("\n", " ")])

    if not headers and not pseudo and line_target is None:
        raise Skip("no-headers")

    # uri
    uri = pseudo.get(":path") or line_target
    if not uri:
        if not url:
            raise Skip("no-url")
        uri = url_target(url)
        if uri is None:
            raise Skip("no-url")
    if ":method" in pseudo and pseudo[":method"].strip():
        method = pseudo[":method"].strip()

    # version
    raw_v = text_of(r.get("httpVersion"))
    version = norm_version(raw_v)
    if version is None:
        resp_v = norm_version(text_of((entry.get("response") or {}).get("httpVersion"))) \
            if isinstance(entry.get("response"), dict) else None
        if line_version:
            version = norm_version(line_version) or "HTTP/1.1"
        elif pseudo or raw_v.strip().lower() in WPT_JUNK or resp_v in ("HTTP/2.0", "HTTP/3.0"):
            version = resp_v if resp_v in ("HTTP/2.0", "HTTP/3.0") else "HTTP/2.0"
        elif resp_v:
            version = resp_v
        else:
            version = "HTTP/1.1"
        stats["version-inferred"] += 1
    h2 = version in ("HTTP/2.0", "HTTP/3.0")

    # :authority -> Host (only when there is no Host header already)
    has_host = any(n.lower() == "host" for n, _ in headers)
    fixed = []
    for n, v in headers:
        if n == "\0authority":
            if not has_host:
                fixed.append(["Host", v])
                has_host = True
            continue
        fixed.append([n, v])
    headers = fixed
    if not has_host:
        auth = url_authority(url)
        if auth:
            headers.append(["Host", auth])
            stats["host-added"] += 1

    # cookies: join h2/h3 cookie fields; build a Cookie header from request.cookies if none
    cookie_idx = [i for i, (n, _) in enumerate(headers) if n.lower() == "cookie"]
    if h2 and len(cookie_idx) > 1:
        joined = "; ".join(headers[i][1] for i in cookie_idx)
        first = cookie_idx[0]
        headers[first][1] = joined
        headers = [hv for i, hv in enumerate(headers) if i == first or i not in cookie_idx]
        stats["cookie-fields-joined"] += 1
    elif not cookie_idx and isinstance(r.get("cookies"), list) and r["cookies"]:
        parts = ["%s=%s" % (text_of(c.get("name")), text_of(c.get("value")))
                 for c in r["cookies"] if isinstance(c, dict) and text_of(c.get("name"))]
        if parts:
            headers.append(["Cookie", "; ".join(parts)])
            stats["cookie-header-from-cookies"] += 1

    # body
    ct = next((v for n, v in headers if n.lower() == "content-type"), None)
    body = body_from_postdata(r.get("postData"), ct, stats)
    cl_idx = [i for i, (n, _) in enumerate(headers) if n.lower() == "content-length"]
    if body is not None and len(body) == 0:
        body = None
    if body is not None:
        ce_idx = [i for i, (n, _) in enumerate(headers) if n.lower() == "content-encoding"]
        if ce_idx:
            enc = headers[ce_idx[-1]][1].strip().lower()
            if enc in ("gzip", "x-gzip", "deflate") and not is_compressed(body, "deflate" if enc == "deflate" else "gzip"):
                body = gzip.compress(body, mtime=0) if enc != "deflate" else zlib.compress(body)
                stats["body-recompressed"] += 1
            elif enc not in ("identity", "gzip", "x-gzip", "deflate"):
                headers = [hv for i, hv in enumerate(headers) if i not in ce_idx]
                stats["content-encoding-dropped"] += 1
        if len(body) > max_body:
            raise Skip("body-too-large")
        if not cl_idx:
            headers.append(["Content-Length", str(len(body))])
            stats["content-length-added"] += 1
        else:
            for i in cl_idx:
                if headers[i][1].strip() != str(len(body)):
                    headers[i][1] = str(len(body))
                    stats["content-length-corrected"] += 1
    else:
        for i in cl_idx:
            if headers[i][1].strip() not in ("", "0"):
                stats["body-not-recorded"] += 1
                break

    out = collections.OrderedDict()
    out["id"] = ident
    out["method"] = method
    out["uri"] = uri
    out["version"] = version
    out["headers"] = headers
    if body is not None:
        try:
            out["body"] = body.decode("utf-8")
        except UnicodeDecodeError:
            out["body_b64"] = base64.b64encode(body).decode("ascii")
    out["file"] = fname
    out["url"] = url
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("har", nargs="+", help="HAR files")
    ap.add_argument("--out", default="-", help="output JSONL (default: stdout)")
    ap.add_argument("--max-body", type=int, default=16 << 20,
                    help="skip requests whose body is larger (bytes, default 16 MiB)")
    x = ap.parse_args()

    stats = collections.Counter()
    skipped = collections.Counter()
    files = bad_files = requests = 0
    out = sys.stdout if x.out == "-" else open(x.out, "w", encoding="utf-8")
    try:
        for path in x.har:
            fname = os.path.basename(path)
            stem = fname[:-4] if fname.lower().endswith(".har") else fname
            try:
                with open(path, "rb") as f:
                    raw = f.read()
                doc = json.loads(raw.decode("utf-8-sig"))
                entries = doc.get("log", {}).get("entries") if isinstance(doc, dict) else None
                if not isinstance(entries, list):
                    raise TypeError("no log.entries list")
            except (OSError, UnicodeDecodeError, ValueError, AttributeError, TypeError) as e:
                bad_files += 1
                skipped["bad-file"] += 1
                print("har_to_jsonl: %s: skipped: %s" % (path, e), file=sys.stderr)
                continue
            if raw.startswith(b"\xef\xbb\xbf"):
                stats["bom"] += 1
            files += 1
            for i, entry in enumerate(entries):
                try:
                    req = convert_entry(entry, "%s:%d" % (stem, i), fname, stats, x.max_body)
                except Skip as s:
                    skipped[str(s)] += 1
                    continue
                out.write(json.dumps(req, ensure_ascii=False) + "\n")
                requests += 1
    finally:
        if out is not sys.stdout:
            out.close()

    def fmt(c):
        return ", ".join("%s %d" % kv for kv in sorted(c.items())) or "none"

    print("har_to_jsonl: %d files (%d unreadable), %d requests written, %d skipped (%s); fixes: %s" % (
        files + bad_files, bad_files, requests, sum(skipped.values()), fmt(skipped), fmt(stats)), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
