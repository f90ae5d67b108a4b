#!/usr/bin/env python3
"""Three-way comparison of decisions: ours vs Coraza vs ModSecurity.

    python3 corpus/three_way.py OUT_DIR CORPUS_NAME [PL] [--corpus REQS.jsonl] [--show N]

Reads OUT_DIR/{ours,coraza,modsec}_CORPUS_NAME_plPL.jsonl (as written by
corpus/run.sh) and prints

1. every request we interrupt that *both* peers let through (the benign
   acceptance criterion: there must be none), with the request (from
   --corpus) and our matched ids, so the rule and its cause can be found;
2. every request where the three engines do not agree (interrupted flag or
   matched-id set), grouped into classes: which side is alone, and the ids
   that differ. Each class lists its request ids.

Exit status 1 when (1) is not empty, else 0.
"""
import argparse
import collections
import json
import sys

from decisions import load


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("corpus_name")
    ap.add_argument("pl", nargs="?", default="1")
    ap.add_argument("--corpus", help="the request corpus, to print the requests of (1)")
    ap.add_argument("--show", type=int, default=20, help="request ids listed per class")
    x = ap.parse_args()
    path = lambda e: "%s/%s_%s_pl%s.jsonl" % (x.out_dir, e, x.corpus_name, x.pl)
    O, C, M = load(path("ours")), load(path("coraza")), load(path("modsec"))
    reqs = {}
    if x.corpus:
        with open(x.corpus) as f:
            for n, line in enumerate(f, 1):
                if line.strip():
                    d = json.loads(line)
                    reqs[str(d.get("id", n))] = d

    ours_only = [i for i, o in O.items() if o["interrupted"] and i in C and i in M
                 and not C[i]["interrupted"] and not M[i]["interrupted"]]
    print("requests: %d; interrupted: ours %d, coraza %d, modsec %d" % (
        len(O), sum(o["interrupted"] for o in O.values()),
        sum(c["interrupted"] for c in C.values()), sum(m["interrupted"] for m in M.values())))
    print("interrupted by us, let through by both peers: %d" % len(ours_only))
    for i in ours_only:
        print("  %s rule %s matched %s" % (i, O[i].get("rule_id"), O[i]["matched_ids"]))
        if i in reqs:
            r = dict(reqs[i])
            for k in ("body", "body_b64"):
                if k in r and len(r[k]) > 400:
                    r[k] = r[k][:400] + "..."
            print("    request: %s" % json.dumps(r)[:2000])

    classes = collections.defaultdict(list)
    for i, o in O.items():
        if i not in C or i not in M:
            continue
        c, m = C[i], M[i]
        so, sc, sm = set(o["matched_ids"]), set(c["matched_ids"]), set(m["matched_ids"])
        io, ic, im = o["interrupted"], c["interrupted"], m["interrupted"]
        if so == sc == sm and io == ic == im:
            continue
        if sc == sm and ic == im:
            who = "ours alone"
        elif so == sm and io == im:
            who = "coraza alone (ours = modsec)"
        elif so == sc and io == ic:
            who = "modsec alone (ours = coraza)"
        else:
            who = "all three differ"
        key = (who, "int O/C/M=%d%d%d" % (io, ic, im),
               "ours-coraza %s" % sorted(so - sc), "coraza-ours %s" % sorted(sc - so),
               "ours-modsec %s" % sorted(so - sm), "modsec-ours %s" % sorted(sm - so))
        classes[key].append(i)
    print("disagreement classes: %d (%d requests)" % (len(classes), sum(map(len, classes.values()))))
    for key, ids in sorted(classes.items(), key=lambda kv: (kv[0][0], -len(kv[1]))):
        print("  [%d] %s" % (len(ids), "; ".join(key)))
        print("      %s%s" % (" ".join(ids[:x.show]), " ..." if len(ids) > x.show else ""))
    return 1 if ours_only else 0


if __name__ == "__main__":
    sys.exit(main())
