"""NEXMark queries 1, 2 and 5 on the record-batch path: stages over bid batches (numpy columns).

Each takes the stage of bid :class:`~jetlet.batches.ColumnBatch` es that
:func:`~jetlet.nexmark.batch_source.batch_nexmark_source` produced (after
``with_native_timestamps``) and gives the same results as its row query in
:mod:`jetlet.nexmark.queries` over the same events, in the batch form:

* Q1: bid batches with the price in euro cents (``price * 89 // 100``, as the row query);
* Q2: batches of ``auction, price`` of the bids on every ``auction_skip``-th auction;
* Q5: ``(window end, [(auction, bids), ...] best first)`` per sliding window — exactly the row
  query's items: bids per auction by :meth:`~jetlet.pipeline.StreamStage.aggregate_batch_windows`,
  then :func:`~jetlet.batches.windows.top_k` of each window (ties: the higher auction id).

:func:`rows` turns the batches of Q1 and Q2 into the row query's tuples, for comparing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

from jetlet.batches import ColumnBatch
from jetlet.batches.windows import top_k
from jetlet.datamodel import WindowResult
from jetlet.nexmark.generator import DEFAULT_CONFIG
from jetlet.nexmark.queries import DOLLAR_TO_EURO_DENOMINATOR, DOLLAR_TO_EURO_NUMERATOR, HotItems
from jetlet.pipeline import StreamStage, WindowDefinition


def currency_conversion(batch: ColumnBatch) -> ColumnBatch:
    """Query 1's step: the batch with ``price`` in euro cents."""
    return batch.with_columns(price=batch["price"] * DOLLAR_TO_EURO_NUMERATOR // DOLLAR_TO_EURO_DENOMINATOR)


def q1_currency_conversion(bids: StreamStage[ColumnBatch]) -> StreamStage[ColumnBatch]:
    """Query 1: every bid, its price converted from dollars to euros."""
    return bids.map_batches(currency_conversion).set_name("nexmark-batch-q1-currency-conversion")


def _on_skip(auction_skip: int, batch: ColumnBatch) -> Any:
    return batch["auction"] % auction_skip == 0


def _auction_price(batch: ColumnBatch) -> ColumnBatch:
    return batch.select("auction", "price")


def q2_selection(
    bids: StreamStage[ColumnBatch], auction_skip: int = DEFAULT_CONFIG.auction_skip
) -> StreamStage[ColumnBatch]:
    """Query 2: ``auction, price`` of the bids on auctions whose id is a multiple of ``auction_skip``.

    The two columns are taken first (sharing the arrays), so the filter copies two columns, not four.
    """
    projected = bids.map_batches(_auction_price)
    selected = projected.filter_batches(functools.partial(_on_skip, auction_skip))
    return selected.set_name("nexmark-batch-q2-selection")


def _hot_items(top: int, window: WindowResult[ColumnBatch]) -> HotItems:
    return (window.end, top_k(window.result, "count", top))


def q5_hot_items(
    bids: StreamStage[ColumnBatch], window_ms: int = 10_000, slide_ms: int = 1_000, top: int = 1
) -> StreamStage[HotItems]:
    """Query 5: per sliding window, the ``top`` auctions by bids, as the row query's items."""
    counts = bids.aggregate_batch_windows(WindowDefinition.sliding(window_ms, slide_ms), "auction")
    hot: StreamStage[HotItems] = counts.map(functools.partial(_hot_items, top))
    return hot.set_name("nexmark-batch-q5-hot-items")


def rows(batches: Iterable[ColumnBatch]) -> list[tuple[Any, ...]]:
    """The rows of ``batches`` as tuples, in order (for comparing with a row query's items)."""
    return [row for batch in batches for row in batch.rows()]


BATCH_QUERIES: dict[str, Callable[[StreamStage[ColumnBatch]], StreamStage[Any]]] = {
    "q1": q1_currency_conversion,
    "q2": q2_selection,
    "q5": q5_hot_items,
}
"""The record-batch queries by short name, with their default parameters."""
