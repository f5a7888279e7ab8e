"""How a peer of `baton bench` reports: one JSON line on stdout, the last
line it prints, which the bench parses (apps/bench/bench.cpp: run_peer)."""

import json
import os
import sys

import torch


def report(**fields):
    """Prints `fields` with the allocator setting and torch's version as one JSON line."""
    fields["glibc_tunables"] = os.environ.get("GLIBC_TUNABLES", "")
    fields["torch"] = torch.__version__
    print(json.dumps(fields), flush=True)


def fail(message):
    """Exits 2 with `message` on stderr (the bench shows the log's tail)."""
    print("%s: %s" % (os.path.basename(sys.argv[0]), message), file=sys.stderr, flush=True)
    raise SystemExit(2)
