"""The store thread's CPU per lent state: a pickle each, or copies pickled a group at a time.

Issue 20, Q4's latency with snapshots. A member stores its part of a snapshot on a thread of its own,
which shares the GIL with the processing thread: whatever it computes is taken from the processing
thread when the member is busy. For ``--keys`` of NEXMark query 3's states (one ``SellerState``
per seller id, with ``copy_fn``), none changed since the barrier, the store thread's CPU time
(``time.thread_time``, after a full collection) is measured for

* ``pickle each`` (the baseline, snapshot chunk format 1): every state claimed and pickled on its own,
  then each partition's list of pickles pickled again into its chunk;
* ``copy, pickle groups`` (format 2, what the member does now): every state copied by its ``copy_fn``
  and claimed (:func:`jetlet.core.snapshot_writer.settle_lent`), then each partition's copies
  pickled together into its chunk (:func:`jetlet._cluster.snapshot_data.chunks_of`).

Both in interleaved rounds, medians and spreads. Each mode's chunks, read back, must give the states
at the barrier. Run: ``python bench/snapshot_store_bench.py [--keys N] [--rounds N]``.
"""

from __future__ import annotations

import argparse
import gc
import pickle
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from jetlet._cluster import snapshot_data
from jetlet.config import DEFAULT_PARTITION_COUNT
from jetlet.core import snapshot_keys, snapshot_writer
from jetlet.nexmark import joins
from snapshot_copy_bench import _primed

Chunks = list[bytes]


def pickle_each(states: dict[Any, Any], partitions: int) -> Chunks:
    """Format 1: claim and pickle each state, then pickle each partition's pickles into a chunk."""
    unclaimed = dict(states)
    split: dict[int | None, list[tuple[Any, bytes]]] = {}
    for key in states:
        frozen = snapshot_writer.freeze(unclaimed[key])
        unclaimed.pop(key)
        split.setdefault(snapshot_keys.partition_or_broadcast(key, partitions), []).append((key, frozen))
    return [pickle.dumps(part, protocol=5) for part in split.values()]


def copy_pickle_groups(states: dict[Any, Any], copy: Callable[[Any], Any], partitions: int) -> Chunks:
    """Format 2: what a member's store thread does with lent states (settle, then chunks)."""
    loan = snapshot_writer.Loan(states, copy)
    settled = snapshot_writer.settle_lent([(None, snapshot_writer.Lent(loan))])
    by_partition, broadcast, _ = snapshot_data.chunks_of({"local-item-suggestion": settled}, partitions, ())
    return [chunk for chunks in by_partition.values() for _, chunk in chunks] + [c for _, c in broadcast]


def _read_back_format_1(chunks: Chunks) -> dict[Any, Any]:
    return {key: snapshot_writer.thaw(value) for chunk in chunks for key, value in pickle.loads(chunk)}


def _read_back_format_2(chunks: Chunks) -> dict[Any, Any]:
    return {key: value for chunk in chunks for key, value in snapshot_data.decode(chunk, "bench")}


def _timed(step: Callable[[], Chunks]) -> tuple[float, Chunks]:
    gc.collect()
    started = time.thread_time()
    chunks = step()
    return time.thread_time() - started, chunks


def measure(keys: int, rounds: int, partitions: int = DEFAULT_PARTITION_COUNT) -> dict[str, list[float]]:
    """Per mode, the store thread's CPU seconds per state in each round; checks every mode's result."""
    processor = _primed(keys, joins.copy_seller_state)
    states = processor._states
    copy = processor._copy_slot
    expected = {key: snapshot_writer.thaw(snapshot_writer.freeze(slot)) for key, slot in states.items()}
    modes: dict[str, tuple[Callable[[], Chunks], Callable[[Chunks], dict[Any, Any]]]] = {
        "pickle each": (lambda: pickle_each(states, partitions), _read_back_format_1),
        "copy, pickle groups": (lambda: copy_pickle_groups(states, copy, partitions), _read_back_format_2),
    }
    times: dict[str, list[float]] = {mode: [] for mode in modes}
    for _ in range(rounds):
        for mode, (step, read_back) in modes.items():
            seconds, chunks = _timed(step)
            if read_back(chunks) != expected:
                raise AssertionError(f"{mode}: the stored states read back differ from the barrier's")
            times[mode].append(seconds / keys)
    return times


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python bench/snapshot_store_bench.py", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--keys", type=int, default=10_000, help="lent states (default 10,000, as Q4 holds)")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
    args = parser.parse_args(argv)
    times = measure(args.keys, args.rounds)
    baseline = statistics.median(times["pickle each"])
    print(f"# store thread CPU per lent state, {args.keys:,} Q4 states, {args.rounds} interleaved rounds")
    print(f"# {sys.version.split()[0]}; median (min-max) µs per state; ratio to 'pickle each'")
    for mode, values in times.items():
        median = statistics.median(values)
        print(
            f"{mode:>22}  {median * 1e6:6.2f} µs  ({min(values) * 1e6:.2f}-{max(values) * 1e6:.2f})"
            f"  {median / baseline:.2f}  ({median * args.keys * 1e3:.0f} ms for all)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
