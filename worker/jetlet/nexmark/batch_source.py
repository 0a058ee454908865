"""NEXMark bids as :class:`~jetlet.batches.ColumnBatch` es: the fast generator, vectorised, as a source.

:func:`bid_batch` computes the bids among a sequence of event numbers by the rules of
:mod:`~jetlet.nexmark.fast_generator` (the same tables, the same formulas), for all of them at once
with numpy: ``n % 50 >= 4`` picks the bids, ``a = (lo + rotation_a[hi]) % 65536`` and
``b = (lo + rotation_b[hi]) % 65536`` index the tables (``auction`` and ``price`` at ``a``,
``bidder`` at ``b``), and ``date_time = base_time + n * 1000 // rate``. So the batch of numbers
``ns`` holds exactly the bids that ``fast_events(ns, config)`` makes, in the same order, as columns
``auction, bidder, price, date_time`` (int64) with ``date_time`` the timestamp column. Persons and
auctions are skipped: the record-batch queries (1, 2 and 5) read bids only.

:func:`batch_nexmark_source` is the distributed source: processor ``i`` of ``p`` walks the numbers
``i, i + p, ...`` with a :class:`~jetlet.core.processors.sources.StridedCursor`, taking
``batch_events`` numbers (by default :data:`BATCH_EVENTS`) per batch, one batch per fill, and
emitting each batch with its highest ``date_time`` as its native timestamp (so
``with_native_timestamps(lag)`` puts one watermark per batch, from the timestamp column). A
snapshot saves the cursor, which only ever stands at a batch boundary (a fill emits a whole
batch, and the source builder emits all of a fill before it saves); a restore
resumes after the last batch emitted, with any new number of processors, as the row source does.
The engine counts a batch as its rows (bids); the user counter :data:`EVENTS_METRIC` counts the
event numbers, persons and auctions included, as the row source's ``emittedCount`` does.

>>> from jetlet.nexmark.fast_generator import FastConfig, fast_events
>>> config = FastConfig(rate=1000)
>>> batch = bid_batch(range(0, 100), config)
>>> len(batch), batch.names
(92, ['auction', 'bidder', 'price', 'date_time'])
>>> bid_rows(fast_events(range(0, 100), config)) == batch.rows()
True
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from jetlet.batches import ColumnBatch
from jetlet.core import processor as proc
from jetlet.core.processors.sources import SlicePosition, StridedCursor
from jetlet.metrics import user_metrics
from jetlet.nexmark import fast_generator as fg
from jetlet.nexmark.model import Bid
from jetlet.pipeline import SourceBuilder, StreamSource
from jetlet.pipeline.source_builder import TimestampedSourceBuffer

BATCH_EVENTS = 8192
"""Event numbers per batch by default (about 7,500 of them bids).

A batch's cost is mostly fixed (a dozen numpy calls here; a pass of the cooperative worker, a queue
hop and a call of each stage in the engine), so the rows per batch set the rate: on one member, Q1
ran at 8.2 M events per CPU-second with 1,024 numbers per batch and 43.9 M with 8,192 (medians of
three interleaved rounds, bench/RESULTS.md). 8,192 is DataFusion's default batch size (Spark's
Arrow batches hold 10,000 rows); a batch is 256 KB of columns.
"""
EVENTS_METRIC = "nexmarkEvents"
"""The source's user counter of the event numbers it made batches of (bids or not): the events."""
COLUMNS = ("auction", "bidder", "price", "date_time")
"""The columns of a bid batch, in order; ``date_time`` is the timestamp column."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Arrays:
    auctions: np.ndarray[Any, Any]
    people: np.ndarray[Any, Any]
    prices: np.ndarray[Any, Any]
    rotation_a: np.ndarray[Any, Any]
    rotation_b: np.ndarray[Any, Any]


@functools.lru_cache(maxsize=4)
def _arrays(keys: int) -> _Arrays:
    tables = fg._tables(keys)  # the very tables of the row generator, as arrays
    block = fg.BLOCK
    return _Arrays(
        np.array(tables.auctions[:block], dtype=np.int64),
        np.array(tables.people[:block], dtype=np.int64),
        np.array(tables.prices[:block], dtype=np.int64),
        np.array(tables.rotation_a, dtype=np.int64),
        np.array(tables.rotation_b, dtype=np.int64),
    )


@functools.lru_cache(maxsize=256)
def _bid_offsets(start_kind: int, step: int, length: int) -> np.ndarray[Any, Any]:
    """The positions ``i < length`` of a range ``start, start + step, ...`` whose number is a bid.

    Whether ``start + step * i`` is a bid depends only on ``start % 50`` and ``step``: a source's
    ranges take a handful of these, so their offsets are computed once (no ``%`` per batch).
    """
    kinds = (start_kind + step * np.arange(length, dtype=np.int64)) % fg.PROPORTION_DENOMINATOR
    offsets = np.flatnonzero(kinds >= fg.FIRST_BID_KIND).astype(np.int64)
    offsets.flags.writeable = False
    return offsets


def bid_batch(numbers: Sequence[int], config: fg.FastConfig) -> ColumnBatch:
    """The bids among event ``numbers`` (in their order) as one batch; see the module doc."""
    ascending = False
    if isinstance(numbers, range) and numbers.step > 0:
        ascending = True
        offsets = _bid_offsets(numbers.start % fg.PROPORTION_DENOMINATOR, numbers.step, len(numbers))
        ns = numbers.start + numbers.step * offsets
    else:
        ns = np.asarray(numbers, dtype=np.int64)
        ns = ns[ns % fg.PROPORTION_DENOMINATOR >= fg.FIRST_BID_KIND]
    arrays = _arrays(config.keys)
    low = ns & fg.MASK
    if ascending and len(ns) and int(ns[0]) >> fg.BLOCK_BITS == int(ns[-1]) >> fg.BLOCK_BITS:
        # an ascending run within one block of 65,536 numbers has one rotation
        high = (int(ns[0]) >> fg.BLOCK_BITS) & fg.MASK
        a = (low + int(arrays.rotation_a[high])) & fg.MASK
        b = (low + int(arrays.rotation_b[high])) & fg.MASK
    else:
        highs = (ns >> fg.BLOCK_BITS) & fg.MASK
        a = (low + arrays.rotation_a[highs]) & fg.MASK
        b = (low + arrays.rotation_b[highs]) & fg.MASK
    columns = {
        "auction": arrays.auctions[a],
        "bidder": arrays.people[b],
        "price": arrays.prices[a],
        "date_time": config.base_time + ns * 1000 // config.rate,
    }
    return ColumnBatch.unchecked(columns, "date_time")


def bid_rows(events: Sequence[Any]) -> list[tuple[int, int, int, int]]:
    """The row-path counterpart of a bid batch: ``(auction, bidder, price, date_time)`` of each bid."""
    return [(e.auction, e.bidder, e.price, e.date_time) for e in events if type(e) is Bid]


@dataclasses.dataclass(slots=True)
class _Slice:
    """One processor's position in its slice of the stream."""

    config: fg.FastConfig
    cursor: StridedCursor
    count: int | None
    batch_events: int


def _fill(state: _Slice, buffer: TimestampedSourceBuffer[Any]) -> None:
    stop = state.count if state.count is not None else 1 << 62
    numbers = state.cursor.take(state.batch_events, stop)
    if not numbers:  # exhausted: return at once (cooperative; the worker backs off by itself)
        return
    batch = bid_batch(numbers, state.config)
    if len(batch):  # a cursor's numbers ascend, and so do their times: the last is the highest
        buffer.add(batch, int(batch["date_time"][-1]))
    user_metrics.counter(EVENTS_METRIC).inc(len(numbers))


def _snapshot(state: _Slice) -> SlicePosition:
    return state.cursor.position()


def _restore(state: _Slice, saved: list[SlicePosition]) -> None:
    state.cursor.restore(saved, "batch-nexmark")


def batch_nexmark_source(
    config: fg.FastConfig,
    count: int | None = None,
    *,
    local_parallelism: int = 1,
    batch_events: int = BATCH_EVENTS,
) -> StreamSource[ColumnBatch]:
    """A timestamped stream of bid batches of the fast generator's events ``0 .. count - 1``.

    ``count`` bounds the event numbers (unbounded when None; the stream then stays silent, as the
    row source does); ``local_parallelism`` processors per member share the numbers, each taking
    ``batch_events`` of its numbers per batch. Use ``with_native_timestamps(lag)``: each batch's
    timestamp is its highest ``date_time``.

    >>> batch_nexmark_source(fg.FastConfig(), 10_000).name
    'batch-nexmark'
    """
    if count is not None and count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    if isinstance(batch_events, bool) or not isinstance(batch_events, int) or batch_events < 1:
        raise ValueError(f"batch_events must be an int >= 1, got {batch_events!r}")

    def create(context: proc.ProcessorContext) -> _Slice:
        cursor = StridedCursor(context.global_processor_index, context.total_parallelism)
        return _Slice(config, cursor, count, batch_events)

    return (
        SourceBuilder.timestamped_stream("batch-nexmark", create)
        .fill_buffer_fn(_fill)
        .create_snapshot_fn(_snapshot)
        .restore_snapshot_fn(_restore)
        .distributed(local_parallelism)
        .cooperative()  # a fill only computes: it runs beside the query, no GIL hand-off per fill
        .build()
    )
