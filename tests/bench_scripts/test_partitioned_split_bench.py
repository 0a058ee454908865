"""``bench/partitioned_split_bench.py``: the split it times routes every event by its key's stable hash."""

from __future__ import annotations

import re
from collections.abc import Callable
from types import ModuleType

import pytest


def test_the_split_is_checked_and_timed_per_item(load_bench: Callable[[str], ModuleType]) -> None:
    line = load_bench("partitioned_split_bench").main(["--rounds", "1"])
    match = re.fullmatch(r"partitioned split: (\d+\.\d) ns per item \(best of 1\)", line)
    assert match is not None and float(match.group(1)) > 0


def test_a_split_that_misroutes_an_event_is_refused(
    load_bench: Callable[[str], ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = load_bench("partitioned_split_bench")
    honest = bench.outbound.OutboundCollector._split_partitioned

    def swapped(self: object, batch: list[object]) -> list[tuple[int, list[object]]]:
        return [(1 - target, share) for target, share in honest(self, batch)]

    monkeypatch.setattr(bench.outbound.OutboundCollector, "_split_partitioned", swapped)
    with pytest.raises(AssertionError, match="routed an event away from its key's partition"):
        bench.main(["--rounds", "1"])
