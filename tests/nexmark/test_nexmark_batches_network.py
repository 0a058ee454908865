"""Record batches crossing members: NEXMark Q1 and Q2 batches rebalanced over two member processes.

The batches travel as out-of-band column buffers (protocol 3, :mod:`jetlet._network.tasklets`);
the results must be plain Python's over the same events, and items must have crossed.
"""

from __future__ import annotations

import collections

from jetlet.local_cluster import local_cluster
from jetlet.nexmark import batch_queries
from jetlet.nexmark.batch_source import batch_nexmark_source, bid_rows
from jetlet.nexmark.fast_generator import FastConfig, fast_events
from jetlet.nexmark.queries import DOLLAR_TO_EURO_DENOMINATOR as DENOMINATOR
from jetlet.nexmark.queries import DOLLAR_TO_EURO_NUMERATOR as NUMERATOR
from jetlet.pipeline import Pipeline, Sinks
from jetlet.testing import wait_until

COUNT = 100_000
CONFIG = FastConfig(rate=100_000, keys=2_000)
SKIP = 7
DEADLINE_S = 120


def test_batch_queries_1_and_2_with_batches_rebalanced_over_two_members_give_plain_pythons_results() -> None:
    # given bid batches from a source on each of two members, spread round-robin over both
    p = Pipeline()
    bids = p.read_from(batch_nexmark_source(CONFIG, COUNT)).with_native_timestamps(0).rebalance()
    batch_queries.q1_currency_conversion(bids).write_to(Sinks.list("q1"))
    batch_queries.q2_selection(bids, SKIP).write_to(Sinks.list("q2"))
    all_bids = bid_rows(fast_events(range(COUNT), CONFIG))
    expected_q1 = [(a, b, price * NUMERATOR // DENOMINATOR, t) for a, b, price, t in all_bids]
    expected_q2 = [(auction, price) for auction, _bidder, price, _when in all_bids if auction % SKIP == 0]
    with local_cluster(2) as client:
        # when the job ran until every bid came out of Q1 (the source then stays silent, unbounded)
        job = client.new_job(p)
        wait_until(
            lambda: sum(map(len, client.get_list("q1"))) >= len(all_bids) or job.future.done(),
            "every bid through Q1",
            DEADLINE_S,
        )
        # then both queries' rows are plain Python's (as multisets: the members interleave)
        assert collections.Counter(batch_queries.rows(client.get_list("q1"))) == collections.Counter(
            expected_q1
        )
        assert collections.Counter(batch_queries.rows(client.get_list("q2"))) == collections.Counter(
            expected_q2
        )
        # and batches crossed the data connection
        assert sum(v.get("distributedItemsIn", 0) for v in job.metrics().values()) > 0
        job.cancel()
    assert len(expected_q1) == len(all_bids) > 0 and expected_q2
