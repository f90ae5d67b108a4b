#!/usr/bin/env python3
"""Bounded output of `waf lint` on corrupted rule files.

Takes the CRS rule files, corrupts each copy in one of several ways (byte
flips, truncation, inserted binary or printable garbage, a deleted range,
duplicated lines, quotes or backslashes removed or added), runs `waf lint` on
it, and checks that the output (stdout + stderr) stays under a limit and that
lint exits 0 or 1 (never a crash). Deterministic for a seed.

  corpus/lint-fuzz.py --waf target/release/waf --crs ../shared/crs [--n 1000] [--seed 1] [--max-bytes 102400]

Prints the largest outputs and a summary; exits 1 if any case breaks a rule.
"""
import argparse
import glob
import os
import random
import subprocess
import sys
import tempfile


def corrupt(rng, data):
    kind = rng.choice(["flip", "truncate", "binary", "garbage", "delete", "dup", "quotes", "mixed"])
    b = bytearray(data)
    n = len(b)
    if kind == "flip":
        for _ in range(rng.randint(1, 64)):
            i = rng.randrange(n)
            b[i] = rng.randrange(256)
    elif kind == "truncate":
        b = b[: rng.randrange(n)]
    elif kind == "binary":
        i = rng.randrange(n)
        b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8192)))
    elif kind == "garbage":
        i = rng.randrange(n)
        alphabet = b"\"'\\ \t\n:;,|!@#$%^&*()[]{}<>/?=+-_~`abcXYZ0123456789"
        b[i:i] = bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 20000)))
    elif kind == "delete":
        i = rng.randrange(n)
        del b[i : i + rng.randint(1, 4096)]
    elif kind == "dup":
        lines = bytes(b).split(b"\n")
        i = rng.randrange(len(lines))
        lines[i:i] = [lines[i]] * rng.randint(2, 2000)
        b = bytearray(b"\n".join(lines))
    elif kind == "quotes":
        ch = rng.choice([b'"', b"'", b"\\"])
        positions = [i for i, c in enumerate(b) if c == ch[0]]
        for i in sorted(rng.sample(positions, min(len(positions), rng.randint(1, 50))), reverse=True):
            if rng.random() < 0.5:
                del b[i]
            else:
                b[i:i] = ch
    else:  # mixed
        for _ in range(3):
            kind2, b = corrupt(rng, bytes(b))
    return kind, bytes(b)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--waf", required=True)
    ap.add_argument("--crs", required=True)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-bytes", type=int, default=100 * 1024)
    ap.add_argument("--timeout", type=float, default=30.0)
    args = ap.parse_args()
    files = sorted(glob.glob(os.path.join(args.crs, "rules", "*.conf")))
    if not files:
        sys.exit(f"no rule files under {args.crs}/rules")
    rng = random.Random(args.seed)
    sizes, bad = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for case in range(args.n):
            src = rng.choice(files)
            with open(src, "rb") as f:
                kind, data = corrupt(rng, f.read())
            path = os.path.join(tmp, os.path.basename(src))
            with open(path, "wb") as f:
                f.write(data)
            try:
                p = subprocess.run([args.waf, "lint", "--color", "never", path],
                                   capture_output=True, timeout=args.timeout)
            except subprocess.TimeoutExpired:
                bad.append(f"case {case} ({kind}, {os.path.basename(src)}): timed out")
                continue
            size = len(p.stdout) + len(p.stderr)
            sizes.append((size, case, kind, os.path.basename(src)))
            if p.returncode not in (0, 1):
                bad.append(f"case {case} ({kind}, {os.path.basename(src)}): exit {p.returncode}: {p.stderr[-500:]!r}")
            if size > args.max_bytes:
                bad.append(f"case {case} ({kind}, {os.path.basename(src)}): {size} bytes of output")
    sizes.sort(reverse=True)
    print(f"{len(sizes)} corruptions linted (seed {args.seed}); largest outputs:")
    for size, case, kind, name in sizes[:5]:
        print(f"  {size:>8} bytes  case {case} ({kind}, {name})")
    if sizes:
        print(f"median output {sorted(s for s, *_ in sizes)[len(sizes) // 2]} bytes, max {sizes[0][0]} bytes (limit {args.max_bytes})")
    for line in bad:
        print("FAIL", line)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
