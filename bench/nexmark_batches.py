"""NEXMark Q1, Q2 and Q5 on the record-batch path next to the row path: events per CPU-second, one member.

A thin entry: the logic is in :mod:`jetlet.nexmark.bench.batches`. Run
``python bench/nexmark_batches.py`` (3 interleaved rounds of 5 s per query and path on a local
cluster of one member process); ``--help`` for the flags.
"""

from __future__ import annotations

import sys

from jetlet.nexmark.bench import batches

if __name__ == "__main__":
    sys.exit(batches.main(sys.argv[1:]))
