"""NEXMark-style "hot items": the auctions with the most bids in the last 10 s, sliding by 1 s.

A streaming pipeline: bids (with event timestamps, slightly out of order)
are counted per auction in a sliding window of 10 s advancing every 1 s
(frames + combine, as Jet does it), then each window's top 3 auctions are
picked with ``top_n``. The bid stream here is synthetic and finite (one
minute of event time, produced as fast as the job takes it) so the example
ends by itself; a real source would be infinite.

Run it with ``python examples/hot_items.py``, or submit it to a cluster with
``jetlet submit examples/hot_items.py`` and read the windows with
``jetlet get-list hot-items``.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from typing import Any

import jetlet
from jetlet.aggregate import counting, top_n
from jetlet.pipeline import Pipeline, Sinks, Sources, WindowDefinition

BIDS_PER_SECOND = 2_000
SECONDS = 60
AUCTIONS = 500


def bids(context: Any) -> Iterator[tuple[int, int, int]]:
    """``(timestamp_ms, auction, price)``: a few hot auctions get most bids; up to 200 ms out of order."""
    if context.global_processor_index != 0:
        return
    rng = random.Random(7)
    for sequence in range(BIDS_PER_SECOND * SECONDS):
        timestamp = sequence * 1000 // BIDS_PER_SECOND + rng.randrange(0, 200)
        auction = int(rng.paretovariate(1.2)) % AUCTIONS
        yield (timestamp, auction, rng.randrange(1, 1000))


def build_pipeline() -> Pipeline:
    p = Pipeline()
    (
        p.read_from(Sources.stream_from_generator(bids, name="bids"))
        .with_timestamps(lambda bid: bid[0], allowed_lag=500)
        .grouping_key(lambda bid: bid[1])
        .window(WindowDefinition.sliding(10_000, 1_000))
        .aggregate(counting())
        .window(WindowDefinition.tumbling(1_000))
        .aggregate(top_n(3, lambda result: result.result))
        .write_to(Sinks.list("hot-items"))
    )
    return p


def main() -> int:
    with jetlet.embedded() as jet:
        jet.new_job(build_pipeline()).join()
        windows = sorted(jet.get_list("hot-items"), key=lambda w: w.start)
    steady = [w for w in windows if w.start <= SECONDS * 1000]  # after that the stream has ended
    for window in steady[-5:]:
        leaders = ", ".join(f"auction {r.key} ({r.result} bids)" for r in window.result)
        print(f"bids in the 10 s before {window.start / 1000:5.1f} s: {leaders}")
    print(f"\n{len(windows)} one-second steps of the sliding window")
    return 0 if windows else 1


if __name__ == "__main__":
    sys.exit(main())
