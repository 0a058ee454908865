"""The tasklet execution service: cooperative workers, work stealing by hand-off, blocking threads."""

from __future__ import annotations

import threading
import time

import psutil

import jetlet
from jetlet._execution.execution_service import ExecutionTracker, TaskletExecutionService
from jetlet._execution.progress import ProgressState, Tasklet
from jetlet.core import DAG, Edge, processors
from jetlet.testing import wait_until

_DEADLINE_S = 10.0


class _Instrumented(Tasklet):
    """Records the threads that call it and whether two calls ever overlapped.

    It finishes after ``calls`` calls, or, when ``calls`` is None, once ``release`` is set.
    """

    def __init__(self, name: str, release: threading.Event, calls: int | None) -> None:
        self.name = name
        self._release = release
        self._calls_left = calls
        self.threads: set[int] = set()
        self.calls = 0
        self.overlaps = 0
        self._in_call = False

    def call(self) -> ProgressState:
        if self._in_call:
            self.overlaps += 1
        self._in_call = True
        self.threads.add(threading.get_ident())
        self.calls += 1
        time.sleep(0)  # invite a thread switch in the middle of the call
        self._in_call = False
        if self._calls_left is not None:
            self._calls_left -= 1
            return ProgressState.of(True, self._calls_left <= 0)
        return ProgressState.of(True, self._release.is_set())


def test_given_a_worker_runs_dry_then_it_steals_and_no_tasklet_ever_runs_on_two_threads_at_once() -> None:
    # Given two workers with three tasklets each: the second worker's three finish quickly
    service = TaskletExecutionService(cooperative_thread_count=2)
    release = threading.Event()
    try:
        tasklets = [_Instrumented(f"t{i}", release, None if i % 2 == 0 else 50 + 10 * i) for i in range(6)]
        tracker = ExecutionTracker("steal")
        service.submit(tasklets, tracker)
        assert service.tasklet_counts() == [3, 3]

        # When the quick ones are done
        wait_until(lambda: all(t.calls >= 50 + 10 * i for i, t in enumerate(tasklets) if i % 2), "quick done")
        wait_until(lambda: service.tasklet_counts() == [2, 1], "a tasklet was handed over")

        # Then one long tasklet moved to the idle worker and was called on both threads, never at once
        assert service.steals == 1
        moved = [t for t in tasklets if len(t.threads) == 2]
        assert len(moved) == 1
        calls_after_move = moved[0].calls
        wait_until(lambda: moved[0].calls > calls_after_move + 10, "the moved tasklet runs on")
        release.set()
        tracker.future.result(_DEADLINE_S)
        assert [t.overlaps for t in tasklets] == [0] * 6
        assert service.tasklet_counts() == [0, 0]
    finally:
        release.set()
        service.shutdown()


def test_given_one_cooperative_thread_when_tasklets_run_then_all_run_on_that_one_thread() -> None:
    service = TaskletExecutionService(cooperative_thread_count=1)
    release = threading.Event()
    try:
        tasklets = [_Instrumented(f"t{i}", release, 20) for i in range(4)]
        tracker = ExecutionTracker("one")
        service.submit(tasklets, tracker)
        tracker.future.result(_DEADLINE_S)
        threads = set().union(*(t.threads for t in tasklets))
        assert threads == {service.workers[0].thread.ident}
        assert [t.calls for t in tasklets] == [20] * 4
    finally:
        service.shutdown()


def test_given_a_non_cooperative_processor_when_run_then_it_gets_a_dedicated_thread() -> None:
    # Given a cooperative source and a blocking sink that records its thread
    sink_threads: set[str] = set()
    source_threads: set[str] = set()

    def generate(context: jetlet.ProcessorContext) -> list[int]:
        source_threads.add(threading.current_thread().name)
        return list(range(100))

    dag = DAG()
    source = dag.new_vertex("source", processors.source_from_generator(generate))
    sink = dag.new_vertex(
        "slow-sink",
        processors.callback_sink_p(lambda _: sink_threads.add(threading.current_thread().name), False),
        2,
    )
    dag.edge(Edge.between(source, sink))

    # When the job runs on two cooperative threads
    with jetlet.embedded(cooperative_thread_count=2) as jet:
        jet.new_job(dag).join(_DEADLINE_S)

    # Then the sink ran on its own threads and the source on a cooperative worker
    assert sink_threads <= {"jetlet-blocking-slow-sink#0", "jetlet-blocking-slow-sink#1"}
    assert sink_threads
    assert len(source_threads) == 1
    assert next(iter(source_threads)).startswith("jetlet-cooperative-")


def test_given_a_job_with_nothing_to_do_when_it_waits_then_the_workers_back_off_instead_of_spinning() -> None:
    # Given a source that never emits and never finishes
    stop = threading.Event()

    class _Silent(jetlet.Processor):
        def complete(self) -> bool:
            return stop.is_set()

    dag = DAG()
    silent = dag.new_vertex("silent", _Silent, 1)
    dag.edge(Edge.between(silent, dag.new_vertex("sink", processors.noop_p(), 1)))
    with jetlet.embedded(cooperative_thread_count=2) as jet:
        job = jet.new_job(dag)
        process = psutil.Process()
        # When the process is observed for a while
        cpu_before, wall_before = sum(process.cpu_times()[:2]), time.monotonic()
        stop.wait(0.5)
        cpu_used, wall = sum(process.cpu_times()[:2]) - cpu_before, time.monotonic() - wall_before
        stop.set()
        job.join(_DEADLINE_S)
    # Then the idle workers used well under one core
    assert cpu_used < 0.5 * wall
