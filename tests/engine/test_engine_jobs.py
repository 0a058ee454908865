"""Jobs on the embedded instance: results, failure, cancellation, timeout, the Job handle and metrics."""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

import jetlet
from jetlet import word_count
from jetlet.core import DAG, Edge, processors
from jetlet.testing import wait_until

_DEADLINE_S = 10.0


def _blocking_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("jetlet-blocking-")]


def _assert_everything_stopped(jet: jetlet.EmbeddedInstance) -> None:
    assert jet.service.tasklet_counts() == [0] * jet.config.cooperative_thread_count
    wait_until(lambda: not _blocking_threads(), "the blocking threads end")


class _Endless(jetlet.Processor):
    """A source that emits 0, 1, 2, ... forever and records that it was closed."""

    def __init__(self, closed: list[str], name: str, cooperative: bool = True) -> None:
        self._closed = closed
        self._name = name
        self._cooperative = cooperative
        self._numbers: Iterator[int] = itertools.count()

    def is_cooperative(self) -> bool:
        return self._cooperative

    def complete(self) -> bool:
        self.outbox.offer_batch(list(itertools.islice(self._numbers, self.outbox.room())))
        return False

    def close(self) -> None:
        self._closed.append(self._name)


def _endless_dag(closed: list[str], seen: list[Any]) -> DAG:
    dag = DAG()
    cooperative = dag.new_vertex("endless", lambda: _Endless(closed, "endless"), 1)
    blocking = dag.new_vertex("endless-blocking", lambda: _Endless(closed, "endless-blocking", False), 1)
    sink = dag.new_vertex("sink", processors.batch_callback_sink_p(seen.extend), 1)
    dag.edge(Edge.between(cooperative, sink))
    dag.edge(Edge.from_vertex(blocking).to(sink, 1))
    return dag


# -- results ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("local_parallelism", "threads"), [(1, 1), (4, 1), (1, 2), (4, 2)], ids=["lp1", "lp4", "lp1-2t", "lp4-2t"]
)
def test_given_text_when_the_word_count_dag_runs_then_counts_equal_counter(
    local_parallelism: int, threads: int
) -> None:
    lines = word_count.bundled_text().splitlines() * 5
    expected = Counter(word for line in lines for word in word_count.tokenize(line))
    out: list[tuple[str, int]] = []
    with jetlet.embedded(cooperative_thread_count=threads) as jet:
        jet.new_job(word_count.word_count_dag(lines, out, local_parallelism)).join(_DEADLINE_S)
    assert len(out) == len(expected)
    assert dict(out) == expected


def test_given_a_filtering_dag_when_run_then_metrics_count_what_each_processor_got_and_emitted() -> None:
    # Given 10 000 numbers, a filter keeping the multiples of 3 on two processors, and a sink
    out: list[int] = []
    dag = DAG()
    source = dag.new_vertex("source", processors.source_from_iterable(range(10_000)))
    keep = dag.new_vertex("keep", processors.filter_p(lambda n: n % 3 == 0), 2)
    sink = dag.new_vertex("sink", processors.list_sink_p(out), 1)
    dag.edge(Edge.between(source, keep))
    dag.edge(Edge.between(keep, sink))
    with jetlet.embedded() as jet:
        job = jet.new_job(dag)
        job.join(_DEADLINE_S)
        metrics = job.metrics()
    kept = len([n for n in range(10_000) if n % 3 == 0])
    assert sorted(out) == [n for n in range(10_000) if n % 3 == 0]
    assert set(metrics) == {"source#0", "keep#0", "keep#1", "sink#0"}
    assert metrics["source#0"]["emittedCount"] == 10_000
    assert metrics["source#0"]["receivedCount"] == 0
    assert metrics["keep#0"]["receivedCount"] + metrics["keep#1"]["receivedCount"] == 10_000
    assert metrics["keep#0"]["emittedCount"] + metrics["keep#1"]["emittedCount"] == kept
    assert metrics["sink#0"]["receivedCount"] == kept
    assert metrics["sink#0"]["emittedCount"] == 0


_SLOW_CALL_S = 0.2


class _OneSlowCall(jetlet.Processor):
    """A cooperative pass-through whose first call with input blocks its thread for ``_SLOW_CALL_S``."""

    def __init__(self) -> None:
        self._slept = False

    def process(self, ordinal: int, inbox: jetlet.Inbox) -> None:
        if not self._slept:
            self._slept = True
            time.sleep(_SLOW_CALL_S)
        while inbox and self.outbox.offer(inbox.peek()):
            inbox.remove()


def test_given_one_slow_call_when_run_then_that_processor_s_longest_call_shows_it_and_no_other() -> None:
    # Given 10 000 numbers through a fast map and a processor whose first call takes 0.2 s
    out: list[int] = []
    dag = DAG()
    source = dag.new_vertex("source", processors.source_from_iterable(range(10_000)))
    fast = dag.new_vertex("fast", processors.map_p(lambda n: n + 1), 1)
    slow = dag.new_vertex("slow", _OneSlowCall, 1)
    sink = dag.new_vertex("sink", processors.list_sink_p(out), 1)
    dag.edge(Edge.between(source, fast))
    dag.edge(Edge.between(fast, slow))
    dag.edge(Edge.between(slow, sink))
    # When it runs
    with jetlet.embedded() as jet:
        started = time.perf_counter()
        job = jet.new_job(dag)
        job.join(_DEADLINE_S)
        wall_micros = (time.perf_counter() - started) * 1e6
        metrics = job.metrics()
    # Then the slow call is the slow processor's longest, and counts as busy time; the others' are shorter
    assert sorted(out) == list(range(1, 10_001))
    slow_metrics = metrics["slow#0"]
    assert _SLOW_CALL_S * 1e6 <= slow_metrics["longestCallMicros"] <= slow_metrics["busyTimeMicros"]
    assert slow_metrics["busyTimeMicros"] <= wall_micros
    for name in ("source#0", "fast#0", "sink#0"):
        assert metrics[name]["longestCallMicros"] < _SLOW_CALL_S * 1e6, name
        assert 0 < metrics[name]["busyTimeMicros"] <= wall_micros, name


# -- failure ---------------------------------------------------------------------


def _fail_on_5000(n: int) -> int:
    if n == 5000:
        raise ValueError("the user's function failed on 5000")
    return n


_RAISE_LINE = _fail_on_5000.__code__.co_firstlineno + 2


def test_given_a_user_function_that_raises_when_joined_then_the_error_names_its_file_and_line() -> None:
    # Given an endless source feeding a map whose function raises, beside an endless blocking source
    closed: list[str] = []
    seen: list[Any] = []
    dag = _endless_dag(closed, seen)
    failing = dag.new_vertex("failing-map", processors.map_p(_fail_on_5000), 1)
    dag.edge(Edge.from_vertex("endless", 1).to(failing))
    dag.edge(Edge.between(failing, dag.new_vertex("discard", processors.noop_p(), 1)))

    with jetlet.embedded(cooperative_thread_count=2) as jet:
        job = jet.new_job(dag)
        # When the job is joined
        with pytest.raises(jetlet.JobFailedError) as failure:
            job.join(_DEADLINE_S)
        # Then every tasklet stopped, the endless sources were closed and the job failed
        _assert_everything_stopped(jet)
        assert sorted(closed) == ["endless", "endless-blocking"]
        assert job.status is jetlet.JobStatus.FAILED

    # And the error names the failing function's file and line, with the original cause
    text = str(failure.value)
    assert "the user's function failed on 5000" in text
    assert f'File "{__file__}", line {_RAISE_LINE}, in _fail_on_5000' in text
    assert isinstance(failure.value.__cause__, ValueError)
    assert "failing-map#0" in text
    assert failure.value.remote_traceback.rstrip() in text


def test_given_a_processor_that_fails_in_init_when_joined_then_the_job_fails() -> None:
    class _BadInit(jetlet.Processor):
        def init(self, outbox: jetlet.Outbox, context: jetlet.ProcessorContext) -> None:
            raise RuntimeError("cannot start")

    dag = DAG()
    dag.edge(Edge.between(dag.new_vertex("bad", _BadInit, 1), dag.new_vertex("sink", processors.noop_p(), 1)))
    with jetlet.embedded() as jet:
        job = jet.new_job(dag)
        with pytest.raises(jetlet.JobFailedError, match="cannot start"):
            job.join(_DEADLINE_S)
        _assert_everything_stopped(jet)


# -- cancellation and timeout ----------------------------------------------------


def test_given_an_endless_job_when_cancelled_then_every_tasklet_stops_and_join_raises_cancelled() -> None:
    closed: list[str] = []
    seen: list[Any] = []
    with jetlet.embedded(cooperative_thread_count=2) as jet:
        job = jet.new_job(_endless_dag(closed, seen))
        wait_until(lambda: len(seen) > 10_000, "the endless job produces")
        assert not job.status.is_terminal

        job.cancel()

        with pytest.raises(jetlet.JobCancelledError):
            job.join(_DEADLINE_S)
        assert job.status is jetlet.JobStatus.FAILED  # Jet reports a cancelled job as FAILED
        assert sorted(closed) == ["endless", "endless-blocking"]
        _assert_everything_stopped(jet)
        job.cancel()  # cancelling a finished job changes nothing
        assert job.status is jetlet.JobStatus.FAILED


def test_given_a_timeout_when_an_endless_job_runs_past_it_then_the_job_is_cancelled() -> None:
    closed: list[str] = []
    seen: list[Any] = []
    with jetlet.embedded() as jet:
        started = time.monotonic()
        job = jet.new_job(_endless_dag(closed, seen), jetlet.JobConfig(timeout_millis=200))
        with pytest.raises(jetlet.JobCancelledError, match="timeout"):
            job.join(_DEADLINE_S)
        assert time.monotonic() - started >= 0.2
        assert job.status is jetlet.JobStatus.FAILED
        _assert_everything_stopped(jet)


# -- the Job handle --------------------------------------------------------------


def _small_dag(out: list[int]) -> DAG:
    dag = DAG()
    source = dag.new_vertex("source", processors.source_from_iterable(range(100)))
    dag.edge(Edge.between(source, dag.new_vertex("sink", processors.list_sink_p(out), 1)))
    return dag


def test_given_a_submitted_job_then_it_has_an_id_a_name_a_submission_time_and_ends_completed() -> None:
    out: list[int] = []
    with jetlet.embedded() as jet:
        before = int(time.time() * 1000)
        unnamed = jet.new_job(_small_dag(out))
        named = jet.new_job(_small_dag(out), jetlet.JobConfig(name="numbers"))
        after = int(time.time() * 1000)
        unnamed.join(_DEADLINE_S)
        named.join(_DEADLINE_S)
        assert isinstance(unnamed.id, int)
        assert unnamed.id != named.id
        assert unnamed.name == unnamed.id_string
        assert named.name == "numbers"
        assert before <= unnamed.submission_time <= after
        assert unnamed.status is named.status is jetlet.JobStatus.COMPLETED
        assert jet.get_job("numbers") is named
        assert jet.get_job(unnamed.id) is unnamed
    assert sorted(out) == sorted([*range(100), *range(100)])


def test_given_a_running_job_when_joined_with_a_short_timeout_then_timeout_error_is_raised() -> None:
    closed: list[str] = []
    seen: list[Any] = []
    with jetlet.embedded() as jet:
        job = jet.new_job(_endless_dag(closed, seen))
        with pytest.raises(TimeoutError):
            job.join(timeout=0.05)
        assert job.status is jetlet.JobStatus.RUNNING
        job.cancel()
        with pytest.raises(jetlet.JobCancelledError):
            job.join(_DEADLINE_S)


def test_given_a_job_when_awaited_in_asyncio_then_it_completes_or_raises_its_failure() -> None:
    out: list[int] = []

    async def run(job: jetlet.Job) -> None:
        await job

    with jetlet.embedded() as jet:
        asyncio.run(asyncio.wait_for(run(jet.new_job(_small_dag(out))), _DEADLINE_S))
        assert sorted(out) == list(range(100))

        failing = DAG()
        source = failing.new_vertex("source", processors.source_from_iterable(range(10_000)))
        failing.edge(Edge.between(source, failing.new_vertex("map", processors.map_p(_fail_on_5000), 1)))
        with pytest.raises(jetlet.JobFailedError, match="failed on 5000"):
            asyncio.run(asyncio.wait_for(run(jet.new_job(failing)), _DEADLINE_S))


def test_given_a_job_then_its_future_is_a_concurrent_future_that_resolves_when_it_ends() -> None:
    out: list[int] = []
    with jetlet.embedded() as jet:
        job = jet.new_job(_small_dag(out))
        assert isinstance(job.future, concurrent.futures.Future)
        done, _ = concurrent.futures.wait([job.future], timeout=_DEADLINE_S)
        assert done == {job.future}
        assert job.future.result() is None
        assert job.status is jetlet.JobStatus.COMPLETED
