"""What a snapshot barrier costs the processing thread per touched key: pickles against cheap copies.

Issue 20 item 4. The processing thread's CPU time (``time.thread_time``) is measured around the
steps of one snapshot, on one processor, with no engine around it, in interleaved rounds (medians);
every mode is measured in the same run, against the same states:

* **keyed state** (NEXMark query 3's: one ``SellerState`` per seller id, each holding an auction that
  waits for its seller in a list): ``--keys`` states saved at a barrier, then one more auction for
  every key before the member has stored the snapshot (the worst case: every state is changed while
  still lent). Per touched key, the barrier's cost plus the extra time of processing
  those bids compared with processing them with no snapshot pending:

  - ``pickle at barrier``: every state pickled at the barrier, as the engine does with values it
    cannot keep (the behaviour the issue measured);
  - ``lent, no copy_fn``: lent to the snapshot, each pickled by the processor before its first change;
  - ``lent, copy_fn``: lent, each copied by ``copy_fn`` before its first change (the store thread
    pickles the copies).

  Each lent mode also shows what the barrier alone costs per key (the processor lends its states as
  one snapshot entry; the store thread makes an entry per key).

* **aggregation accumulators** (a keyed ``aggregate`` of ``to_list`` with 5 items per key, and of
  ``averaging``): the barrier's cost per key with the operation's ``copy_fn`` (the copies are
  pickled by the store thread) and without it (each accumulator pickled at the barrier).

Each timed step starts after a full garbage collection, with the young generation's threshold a
member sets while jobs run. The results are checked: every mode's snapshot, frozen and read back,
equals the states at the barrier.
Run: ``python bench/snapshot_copy_bench.py [--keys N] [--rounds N]`` (prints a table).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from jetlet.aggregate import AggregateOperation, operations
from jetlet.core import Inbox, Outbox, snapshot_writer
from jetlet.core.processors import aggregation, stateful
from jetlet.nexmark import joins
from jetlet.nexmark.model import Auction
from jetlet.testing import make_context

Entries = list[tuple[Any, Any]]


def _drain(bucket: Entries) -> Entries:
    """What the processor tasklet does with the entries a processor offered (ProcessorTasklet)."""
    freeze, lent, copied = snapshot_writer.freeze, snapshot_writer.Lent, snapshot_writer.Copied
    return [(k, v if type(v) is lent or type(v) is copied else freeze(v)) for k, v in bucket]


def _auction(i: int, seller: int | None = None) -> Auction:
    """Auction ``i`` of seller ``seller`` (by default ``i``)."""
    return Auction(
        i,
        f"item-{i}",
        f"description of item {i}",
        100,
        200,
        1_000 + i,
        61_000 + i,
        i if seller is None else seller,
        i % 7,
        "",
    )


def _primed(keys: int, copy_fn: Callable[[Any], Any] | None) -> stateful.StatefulP:
    processor = stateful.StatefulP(
        stateful.FLAT_MAP, joins.seller_id, joins.SellerState, joins.join_seller, False, copy_fn=copy_fn
    )
    processor.init(Outbox(1, capacity=keys * 3), make_context("local-item-suggestion"))
    processor.process(0, Inbox([_auction(i) for i in range(keys)]))
    return processor


def _process(processor: stateful.StatefulP, items: list[Any]) -> float:
    processor.init(Outbox(1, capacity=len(items) + 1), make_context("local-item-suggestion"))
    gc.collect()
    started = time.thread_time()
    processor.process(0, Inbox(items))
    return time.thread_time() - started


def _barrier(processor: Any) -> tuple[float, Entries]:
    outbox = Outbox(1, capacity=10**9)
    processor.init(outbox, make_context("local-item-suggestion"))
    gc.collect()
    started = time.thread_time()
    assert processor.save_to_snapshot()
    saved = _drain(outbox.snapshot_bucket)
    return time.thread_time() - started, saved


def _stored(saved: Entries) -> dict[Any, Any]:
    return {k: snapshot_writer.read_back(v) for k, v in snapshot_writer.settle_lent(saved)}


def _keyed_round(keys: int) -> dict[str, float]:
    """Seconds per touched key of each mode, in one round."""
    bids = [_auction(keys + i, seller=i) for i in range(keys)]  # one more auction waiting for each seller
    expected = {i: [joins.SellerState(None, [_auction(i)]), 0] for i in range(keys)}
    out: dict[str, float] = {}
    quiet = _process(_primed(keys, None), bids)  # no snapshot pending: the baseline

    processor = _primed(keys, None)
    gc.collect()
    started = time.thread_time()
    frozen = [(k, snapshot_writer.freeze(v)) for k, v in processor._states.items()]
    barrier = time.thread_time() - started
    out["pickle at barrier"] = (barrier + _process(processor, bids) - quiet) / keys
    _check(frozen, expected)

    for mode, copy_fn in (("lent, no copy_fn", None), ("lent, copy_fn", joins.copy_seller_state)):
        processor = _primed(keys, copy_fn)
        barrier, saved = _barrier(processor)
        out[mode] = (barrier + _process(processor, bids) - quiet) / keys
        out[f"{mode}: the barrier alone"] = barrier / keys
        assert _stored(saved) == expected, f"{mode}: the snapshot is not the state at the barrier"
    return out


def _check(frozen: Entries, expected: dict[Any, Any]) -> None:
    assert {k: snapshot_writer.thaw(v) for k, v in frozen} == expected


def _aggregation_round(keys: int) -> dict[str, float]:
    out: dict[str, float] = {}
    items = [(k, v) for v in range(5) for k in range(keys)]
    for name, op in (("to_list", operations.to_list()), ("averaging", operations.averaging())):
        for copies in (False, True):
            used: AggregateOperation[Any, Any] = op if copies else dataclasses.replace(op, copy_fn=None)
            mapped = operations.mapping(_value, used)
            processor = aggregation.aggregate_by_key_p(_key, mapped)()
            processor.init(Outbox(1, capacity=len(items) + 1), make_context("aggregate"))
            processor.process(0, Inbox(list(items)))
            barrier, saved = _barrier(processor)
            out[f"{name}, {'copy_fn' if copies else 'no copy_fn'}"] = barrier / keys
            stored = _stored(saved)
            assert len(stored) == keys
    return out


def _key(item: tuple[int, int]) -> int:
    return item[0]


def _value(item: tuple[int, int]) -> int:
    return item[1]


def _medians(rounds: list[dict[str, float]]) -> dict[str, tuple[float, float, float]]:
    return {
        mode: (
            statistics.median(r[mode] for r in rounds),
            min(r[mode] for r in rounds),
            max(r[mode] for r in rounds),
        )
        for mode in rounds[0]
    }


def _table(title: str, medians: dict[str, tuple[float, float, float]], baseline: str) -> str:
    lines = [
        f"{title}",
        "",
        "| mode | µs per key (median) | min-max | vs " + baseline + " |",
        "|---|---|---|---|",
    ]
    base = medians[baseline][0]
    for mode, (median, low, high) in medians.items():
        lines.append(
            f"| {mode} | {median * 1e6:.2f} | {low * 1e6:.2f}-{high * 1e6:.2f} | {median / base:.2f}x |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=20_000, help="keyed states (default 20,000)")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
    args = parser.parse_args(argv)
    gc.set_threshold(50_000, *gc.get_threshold()[1:])  # as while jobs run (jetlet._execution.gc_policy)
    keyed, aggregated = [], []
    for _ in range(args.rounds):
        keyed.append(_keyed_round(args.keys))
        aggregated.append(_aggregation_round(args.keys))
    print(
        f"{args.keys} keys, {args.rounds} rounds, Python {sys.version.split()[0]}, processing thread CPU time"
    )
    print()
    print(_table("Keyed state, every key touched after the barrier:", _medians(keyed), "pickle at barrier"))
    print()
    print(_table("Aggregation accumulators, at the barrier:", _medians(aggregated), "to_list, no copy_fn"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
