"""``bench/snapshot_store_bench.py``: both ways of storing lent states give the barrier's states back."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest


def test_both_modes_store_every_state_and_are_timed_each_round(
    load_bench: Callable[[str], ModuleType],
) -> None:
    bench = load_bench("snapshot_store_bench")
    # when 300 states are stored twice each way (measure checks each mode's chunks read back to the states)
    times = bench.measure(300, 2, partitions=7)
    # then each mode has a positive time per state for each round
    assert set(times) == {"pickle each", "copy, pickle groups"}
    assert all(len(values) == 2 and all(v > 0 for v in values) for values in times.values())


def test_a_mode_that_loses_a_state_fails_the_check(
    load_bench: Callable[[str], ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = load_bench("snapshot_store_bench")
    honest = bench.pickle_each
    # given a baseline that leaves the first state out of its chunks
    monkeypatch.setattr(bench, "pickle_each", lambda states, n: honest(dict(list(states.items())[1:]), n))
    # then measuring refuses its result
    with pytest.raises(AssertionError, match="pickle each: the stored states read back differ"):
        bench.measure(50, 1, partitions=7)
