"""A blocking sink's thread parks between inputs and its queues wake it (no polling every millisecond)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from jetlet._execution import execution_service
from jetlet._execution.execution_service import ExecutionTracker, TaskletExecutionService
from jetlet._execution.inbound import InboundStream, WatermarkCoalescer
from jetlet._execution.outbound import OutboundCollector
from jetlet._execution.processor_tasklet import ProcessorTasklet
from jetlet._execution.queues import DONE_ITEM, SpscQueue
from jetlet.core import Inbox, Outbox, Processor, RoutingPolicy
from jetlet.testing import make_context, wait_until


class _BlockingCollector(Processor):
    """A non-cooperative sink that keeps what it gets and counts its idle calls."""

    def __init__(self) -> None:
        self.seen: list[Any] = []
        self.idle_calls = 0

    def is_cooperative(self) -> bool:
        return False

    def process(self, ordinal: int, inbox: Inbox) -> None:
        self.seen.extend(inbox.take_all())

    def try_process(self) -> bool:
        self.idle_calls += 1
        return True


def _tasklet(processor: Processor, source: SpscQueue, output: SpscQueue | None) -> ProcessorTasklet:
    collectors = [OutboundCollector([output], RoutingPolicy.UNICAST)] if output is not None else []
    streams = [InboundStream(0, 0, [source], WatermarkCoalescer(1), 0)]
    return ProcessorTasklet("p#0", processor, make_context(), Outbox(len(collectors)), streams, collectors)


def test_given_a_sink_when_input_arrives_then_its_wake_event_is_set() -> None:
    source = SpscQueue(16)
    wake = threading.Event()
    assert _tasklet(_BlockingCollector(), source, None).wake_on_input(wake) is True
    source.offer_batch([1, 2])
    assert wake.is_set()
    wake.clear()
    source.offer_control(DONE_ITEM)
    assert wake.is_set()


def test_given_a_tasklet_with_output_then_it_keeps_polling_and_input_sets_nothing() -> None:
    source = SpscQueue(16)
    wake = threading.Event()
    assert _tasklet(_BlockingCollector(), source, SpscQueue(16)).wake_on_input(wake) is False
    source.offer_batch([1])
    assert not wake.is_set()


def test_given_a_set_wake_when_backing_off_then_no_park_waits_for_its_length() -> None:
    wake = threading.Event()
    backoff = execution_service._Backoff(wake)
    for _ in range(execution_service._SPIN_PASSES + execution_service._YIELD_PASSES):
        backoff.idle(max_park=3600.0)  # spins and sleep(0): no park yet
    for _ in range(24):  # parks, doubling up to the longest (about 10 s each without the wake)
        wake.set()
        started = time.monotonic()
        backoff.idle(max_park=3600.0)
        assert time.monotonic() - started < 1.0
        assert not wake.is_set()


def test_given_a_blocking_sink_in_the_service_when_idle_then_it_parks_long_and_takes_each_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parks: list[str] = []
    park = execution_service._park_for_input
    idle = execution_service._Backoff.idle

    def recording_park(wake: Any) -> None:
        parks.append(threading.current_thread().name)
        park(wake)

    def recording_idle(backoff: Any, max_park: float = execution_service._MAX_PARK_S) -> None:
        if threading.current_thread().name in parks:
            backoffs.append(max_park)
        idle(backoff, max_park)

    backoffs: list[float] = []
    monkeypatch.setattr(execution_service, "_park_for_input", recording_park)
    monkeypatch.setattr(execution_service._Backoff, "idle", recording_idle)
    service = TaskletExecutionService(cooperative_thread_count=1)
    source = SpscQueue(16)
    sink = _BlockingCollector()
    tracker = ExecutionTracker("sink")
    try:
        service.submit([_tasklet(sink, source, None)], tracker)
        for n in range(1, 4):  # each batch after the sink has gone idle on the one before
            idle_before = sink.idle_calls
            wait_until(lambda before=idle_before: sink.idle_calls > before + 8, "the sink idles")
            assert source.offer_batch([n]) == 1
            wait_until(lambda n=n: sink.seen == list(range(1, n + 1)), f"batch {n} taken")
        waiting_backoffs = list(backoffs)  # (its end, below, is not input alone)
        source.offer_control(DONE_ITEM)
        tracker.future.result(timeout=10)
    finally:
        service.shutdown()
    assert sink.seen == [1, 2, 3]
    # while it waited for input alone it parked at once until its queue woke it, never through
    # the spins, yields and short parks of a backoff
    assert parks and waiting_backoffs == []


def test_given_a_sink_when_its_inputs_end_or_it_has_outputs_then_it_no_longer_waits_for_input_alone() -> None:
    source = SpscQueue(16)
    sink = _tasklet(_BlockingCollector(), source, None)
    sink.init()
    assert sink.waits_for_input_alone()  # taking input, no snapshots: only input can give it work
    source.offer_control(DONE_ITEM)
    for _ in range(10):  # bounded: the done marker ends its input, then it completes
        if sink.call().is_done:
            break
        assert not sink.waits_for_input_alone()
