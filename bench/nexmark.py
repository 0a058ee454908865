"""NEXMark throughput and tail latency of jetlet next to the plain-Python loop, PySpark and Bytewax.

A thin entry: the logic is in :mod:`jetlet.nexmark.bench` (so ``jetlet bench nexmark`` works from
an install); see :mod:`jetlet.nexmark.bench.harness` for the flags and the order of a run.
Run: ``python bench/nexmark.py --help``; a one-minute smoke run: ``python bench/nexmark.py --quick``
(a full run updates ``bench/RESULTS.md``; a quick one prints, and writes only where ``--out`` says).
Throughput runs in interleaved rounds (``--repeats N``): medians, spreads, ratios paired by round
and CPU-seconds per event; the paired table alone, printed only:
``python bench/nexmark.py --mode throughput --members 1,2 --repeats 5 --peers plain --no-report``.
"""

from __future__ import annotations

import sys

from jetlet.nexmark.bench import harness

if __name__ == "__main__":
    sys.exit(harness.main(sys.argv[1:], prog="python bench/nexmark.py", checkout_defaults=True))
