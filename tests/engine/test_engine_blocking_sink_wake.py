"""A blocking sink's thread parks between inputs and its queues wake it (no polling every millisecond)."""

from __future__ import annotations

import logging
import threading
from typing import Any

from jetlet import config
from jetlet._execution import execution_service
from jetlet._execution.execution_service import ExecutionTracker, TaskletExecutionService
from jetlet._execution.inbound import InboundStream, WatermarkCoalescer
from jetlet._execution.outbound import OutboundCollector
from jetlet._execution.processor_tasklet import ProcessorTasklet
from jetlet._execution.queues import DONE_ITEM, SpscQueue
from jetlet.core import Inbox, Outbox, Processor, ProcessorContext, RoutingPolicy
from jetlet.testing import wait_until


def _context() -> ProcessorContext:
    return ProcessorContext(
        job_id=1,
        job_name="test",
        vertex_name="v",
        member_count=1,
        local_parallelism=1,
        total_parallelism=1,
        partition_count=271,
        processing_guarantee=config.ProcessingGuarantee.NONE,
        job_arguments={},
        logger=logging.getLogger("test"),
        member_index=0,
        global_processor_index=0,
        local_processor_index=0,
    )


class _BlockingCollector(Processor):
    """A non-cooperative sink that keeps what it gets."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def is_cooperative(self) -> bool:
        return False

    def process(self, ordinal: int, inbox: Inbox) -> None:
        self.seen.extend(inbox.take_all())


def _tasklet(processor: Processor, source: SpscQueue, output: SpscQueue | None) -> ProcessorTasklet:
    collectors = [OutboundCollector([output], RoutingPolicy.UNICAST)] if output is not None else []
    streams = [InboundStream(0, 0, [source], WatermarkCoalescer(1), 0)]
    return ProcessorTasklet("p#0", processor, _context(), Outbox(len(collectors)), streams, collectors)


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


def test_given_a_set_wake_when_backing_off_then_the_park_ends_at_once_and_clears_it() -> None:
    wake = threading.Event()
    backoff = execution_service._Backoff(wake, max_park=3600.0)  # a park that would outlast the test
    for _ in range(execution_service._SPIN_PASSES + execution_service._YIELD_PASSES):
        backoff.idle()  # spins and sleep(0): no park yet
    for _ in range(20):  # parks, doubling up to the longest
        wake.set()
        backoff.idle()
        assert not wake.is_set()


def test_given_a_blocking_sink_in_the_service_when_fed_batch_by_batch_then_each_is_taken_then_ends() -> None:
    service = TaskletExecutionService()
    source = SpscQueue(16)
    sink = _BlockingCollector()
    tracker = ExecutionTracker("sink")
    try:
        service.submit([_tasklet(sink, source, None)], tracker)
        for n in range(1, 6):  # each batch after the sink has gone idle (parked) on the one before
            assert source.offer_batch([n]) == 1
            wait_until(lambda n=n: sink.seen == list(range(1, n + 1)), f"batch {n} taken")
        source.offer_control(DONE_ITEM)
        tracker.future.result(timeout=10)
    finally:
        service.shutdown()
    assert sink.seen == [1, 2, 3, 4, 5]
