"""The stall of ``bench/fault_tolerance_bench.py``: replayed items are no progress, a terminal snapshot's are.

The graceful-leave benchmark compares SIGTERM with SIGKILL by this figure, so
it is checked here on sink notes made up for the two cases.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable
from types import ModuleType


def _notes(
    out: pathlib.Path, execution: int, member: int, started: float, notes: list[tuple[float, int]]
) -> None:
    (out / f"start-{execution}-{member}.json").write_text(json.dumps({"time": started}))
    lines = "".join(f"{stamp} {seq}\n" for stamp, seq in notes)
    (out / f"{execution}-{member}.progress").write_text(lines)


def test_after_a_crash_the_replay_counts_as_stall(
    tmp_path: pathlib.Path, load_bench: Callable[[str], ModuleType]
) -> None:
    ft = load_bench("fault_tolerance_bench")
    _notes(tmp_path, 1, 0, 0.0, [(9.0, 900), (9.9, 990), (10.0, 1000)])  # killed at 10.05
    # the new execution starts at 10.3 and replays 700..1000 before it gets further
    _notes(tmp_path, 2, 0, 10.3, [(10.4, 700), (10.8, 1000), (11.1, 1010), (11.2, 1020)])

    assert abs(ft._stall(tmp_path, 10.05) - 1.1) < 1e-9


def test_during_a_graceful_leave_the_old_execution_is_progress(
    tmp_path: pathlib.Path, load_bench: Callable[[str], ModuleType]
) -> None:
    ft = load_bench("fault_tolerance_bench")
    # signalled at 10.0; the old execution goes on until 10.2, the new one continues at 10.5
    _notes(tmp_path, 1, 0, 0.0, [(9.9, 990), (10.1, 1010), (10.2, 1020)])
    _notes(tmp_path, 2, 1, 10.3, [(10.5, 1030), (10.6, 1040)])

    assert abs(ft._stall(tmp_path, 10.0) - 0.3) < 1e-9


def test_no_stall_is_measured_before_the_new_execution_makes_progress(
    tmp_path: pathlib.Path, load_bench: Callable[[str], ModuleType]
) -> None:
    ft = load_bench("fault_tolerance_bench")
    _notes(tmp_path, 1, 0, 0.0, [(9.9, 990)])
    _notes(tmp_path, 2, 0, 10.3, [(10.4, 700)])  # still replaying

    assert ft._stall(tmp_path, 10.0) is None
