"""Background work gives way to busy cooperative threads (jetlet._execution.gil_yield).

A member's snapshot store yields between groups of work while a cooperative
thread of its process is busy, up to a bound per yield. Checked here: the
workers say when they are busy and when they stop (also when their job ends,
or the store would wait on every group for ever after), a yield returns at
once when no worker is busy, and after its bound when one never goes idle.
"""

from __future__ import annotations

import threading
import time

import pytest

from jetlet._execution import gil_yield
from jetlet._execution.execution_service import ExecutionTracker, TaskletExecutionService
from jetlet._execution.progress import ProgressState, Tasklet
from jetlet.testing import wait_until


class _Busy(Tasklet):
    """Makes progress on every call until ``release`` is set."""

    def __init__(self, release: threading.Event) -> None:
        self.name = "busy"
        self._release = release

    def call(self) -> ProgressState:
        sum(range(200))  # a little work
        return ProgressState.of(True, self._release.is_set())


def test_a_worker_is_busy_while_its_tasklet_makes_progress_and_idle_once_the_job_ended() -> None:
    service = TaskletExecutionService(cooperative_thread_count=2)
    release = threading.Event()

    def busy_workers() -> int:  # this service's, not other tests' in the same process
        return sum(worker in gil_yield._busy for worker in service.workers)

    try:
        assert busy_workers() == 0
        tracker = ExecutionTracker("busy")
        service.submit([_Busy(release)], tracker)
        wait_until(lambda: busy_workers() == 1, "a worker says it is busy")
        release.set()
        tracker.future.result(10)
        wait_until(lambda: busy_workers() == 0, "the workers say they are idle again")
    finally:
        release.set()
        service.shutdown()
    assert busy_workers() == 0


def test_a_pacer_yields_once_enough_entries_were_done_once_a_call(monkeypatch: pytest.MonkeyPatch) -> None:
    yields: list[int] = []

    def counted(at_most_s: float) -> float:
        yields.append(1)
        return time.monotonic()

    monkeypatch.setattr(gil_yield, "yield_to_processing", counted)
    pacer = gil_yield.Pacer()
    for _ in range(10 * gil_yield.ENTRIES_PER_YIELD):
        pacer.done(1)
    assert len(yields) == 10
    pacer.done(3 * gil_yield.ENTRIES_PER_YIELD)  # a big group: one yield after it
    assert len(yields) == 11


def test_a_yield_returns_at_once_when_no_worker_is_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_sleep(seconds: float) -> None:
        raise AssertionError(f"slept {seconds} s with no worker busy")

    monkeypatch.setattr(gil_yield, "_busy", set())
    monkeypatch.setattr(gil_yield.time, "sleep", no_sleep)
    gil_yield.yield_to_processing()


def test_a_yield_waits_while_a_worker_is_busy_and_gives_up_after_its_bound() -> None:
    worker = object()
    gil_yield.busy(worker)
    try:
        # given a worker that is never idle, then the yield still returns, after its bound
        started = time.monotonic()
        gil_yield.yield_to_processing()
        assert time.monotonic() - started >= gil_yield.MAX_YIELD_S
    finally:
        gil_yield.idle(worker)


def test_a_pacer_waits_in_all_no_longer_than_its_budget_or_its_work_while_a_worker_is_always_busy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gil_yield, "WAIT_BUDGET_S", 0.02)  # a short budget, so that the work's share binds
    worker = object()
    gil_yield.busy(worker)
    try:
        pacer = gil_yield.Pacer()
        started = time.monotonic()
        for _ in range(200):
            sum(range(2_000))  # a little work between groups
            pacer.done(gil_yield.ENTRIES_PER_YIELD)
        worked = time.monotonic() - started - pacer.waited_s
        # then it gave way (it waited), but in all no longer than its budget or its work's share
        # (the last sleep may overshoot)
        assert pacer.waited_s > 0
        assert pacer.waited_s <= max(0.02, gil_yield.MAX_WAIT_SHARE * worked) + 0.1
        assert pacer.waited_s <= 200 * gil_yield.MAX_YIELD_S + 0.1
    finally:
        gil_yield.idle(worker)
