"""Decision files (JSONL, one decision per request, as `waf eval --out`
and the peers' `--out` write them), read by request id."""

import collections
import json
import os


def load(path):
    """The decisions of `path` by request id, in file order; an absent file
    has none."""
    out = collections.OrderedDict()
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            if line.strip():
                d = json.loads(line)
                out[d["id"]] = d
    return out
