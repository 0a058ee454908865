"""The partitioned split of one chunk: CPU per item of routing 1,024 NEXMark events to two consumers.

What a producer pays per item on a partitioned edge between members (each member's consumer of an
auction id, as Q4 keyed its whole input before stop 35): the key function (the pipeline's
``(timestamp, item)`` key, as the planner builds it, over winning bids' input: auctions as
``(id, fields)``, bids as four-field tuples, keyed by their first field),
the partition and the share. Every split is checked to route each event where
``stable_hash`` of its key says. Compare two trees with ``PYTHONPATH=<tree>/worker``.

Run: ``python bench/partitioned_split_bench.py [--rounds 7]``.
"""

from __future__ import annotations

import argparse
import operator
import sys
import timeit
from collections.abc import Sequence

from jetlet._execution import outbound, queues
from jetlet._planner import transforms
from jetlet.core import edge, partitioning
from jetlet.nexmark import fast_generator, partial_winners
from jetlet.nexmark.model import Person

AUCTION_ID = operator.itemgetter(0)
"""The auction id of winning bids' input: its first field."""


def main(argv: Sequence[str] = ()) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(list(argv))
    events = fast_generator.fast_events(range(100_000, 101_024), fast_generator.FastConfig())
    batch = [
        (event.date_time, partial_winners.auction_or_bid(event))
        for event in events
        if type(event) is not Person
    ]
    table = [p % 2 for p in range(partitioning.DEFAULT_PARTITION_COUNT)]
    key = transforms._event_key(AUCTION_ID)
    collector = outbound.OutboundCollector(
        [queues.SpscQueue(1 << 30), queues.SpscQueue(1 << 30)], edge.RoutingPolicy.PARTITIONED, key,
        target_of_partition=table,
    )  # fmt: skip
    expected: list[list[object]] = [[], []]
    for element in batch:
        expected[table[partitioning.stable_hash(AUCTION_ID(element[1])) % len(table)]].append(element)
    if collector._split(batch) != [(t, share) for t, share in enumerate(expected) if share]:
        raise AssertionError("the split routed an event away from its key's partition")
    best = min(timeit.repeat(lambda: collector._split(batch), number=200, repeat=args.rounds))
    return f"partitioned split: {best / 200 / len(batch) * 1e9:.1f} ns per item (best of {args.rounds})"


if __name__ == "__main__":
    print(main(sys.argv[1:]))
