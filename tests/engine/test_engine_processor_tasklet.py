"""The processor tasklet: its state machine, input priorities and backpressure, driven by hand."""

from __future__ import annotations

import logging
from typing import Any

from jetlet import config
from jetlet._execution.inbound import InboundStream, WatermarkCoalescer
from jetlet._execution.outbound import OutboundCollector
from jetlet._execution.processor_tasklet import ProcessorTasklet
from jetlet._execution.progress import ProgressState
from jetlet._execution.queues import DONE_ITEM, SpscQueue
from jetlet.core import Inbox, Outbox, Processor, ProcessorContext, RoutingPolicy

_CALL_LIMIT = 10_000


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


class _Recorder(Processor):
    """Passes items through and records (ordinal, item) and the callbacks it got."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, Any]] = []
        self.events: list[str] = []

    def process(self, ordinal: int, inbox: Inbox) -> None:
        while inbox and self.outbox.has_room():
            item = inbox.remove()
            self.seen.append((ordinal, item))
            self.outbox.offer(item)

    def complete_edge(self, ordinal: int) -> bool:
        self.events.append(f"complete_edge {ordinal}")
        return True

    def complete(self) -> bool:
        self.events.append("complete")
        return self.outbox.offer("end")

    def close(self) -> None:
        self.events.append("close")


def _tasklet(
    processor: Processor, streams: list[InboundStream], output: SpscQueue | None
) -> ProcessorTasklet:
    collectors = [OutboundCollector([output], RoutingPolicy.UNICAST)] if output is not None else []
    tasklet = ProcessorTasklet("p#0", processor, _context(), Outbox(len(collectors)), streams, collectors)
    tasklet.init()
    return tasklet


def _run_until_done(tasklet: ProcessorTasklet, between_calls: Any = None) -> list[ProgressState]:
    states = []
    for _ in range(_CALL_LIMIT):
        state = tasklet.call()
        states.append(state)
        if state.is_done:
            return states
        if between_calls is not None:
            between_calls()
    raise AssertionError(f"{tasklet} not done after {_CALL_LIMIT} calls")


def _elements(queue: SpscQueue) -> list[Any]:
    out: list[Any] = []
    while (element := queue.poll()) is not None:
        out.extend(element if type(element) is list else [element])
    return out


def test_given_a_finished_input_when_run_then_complete_is_called_and_done_is_sent_downstream() -> None:
    source = SpscQueue(100)
    source.offer_batch([1, 2, 3])
    source.offer_control(DONE_ITEM)
    output = SpscQueue(100)
    recorder = _Recorder()
    tasklet = _tasklet(recorder, [InboundStream(0, 0, [source], WatermarkCoalescer(1), 0)], output)

    states = _run_until_done(tasklet)

    assert states[-1] is ProgressState.DONE
    assert tasklet.call() is ProgressState.WAS_ALREADY_DONE
    assert _elements(output) == [1, 2, 3, "end", DONE_ITEM]
    assert recorder.events == ["complete_edge 0", "complete", "close"]
    assert tasklet.received_count == 3
    assert tasklet.emitted_count == 4


def test_given_a_processor_without_inputs_when_run_then_it_goes_straight_to_complete() -> None:
    output = SpscQueue(100)
    recorder = _Recorder()
    tasklet = _tasklet(recorder, [], output)
    _run_until_done(tasklet)
    assert _elements(output) == ["end", DONE_ITEM]
    assert recorder.events == ["complete", "close"]


def test_given_two_inputs_when_priorities_differ_then_the_lower_priority_value_is_consumed_first() -> None:
    # Given ordinal 0 with priority 5 and ordinal 1 with priority 1, both with data ready
    late, early = SpscQueue(100), SpscQueue(100)
    for start in range(0, 6, 2):
        late.offer_batch([f"late{start}", f"late{start + 1}"])
        early.offer_batch([f"early{start}", f"early{start + 1}"])
    coalescer = WatermarkCoalescer(2)
    streams = [InboundStream(0, 5, [late], coalescer, 0), InboundStream(1, 1, [early], coalescer, 1)]
    recorder = _Recorder()
    tasklet = _tasklet(recorder, streams, SpscQueue(100))

    # When the early input finishes only after some calls, and the late one is done from the start
    late.offer_control(DONE_ITEM)
    for _ in range(20):
        tasklet.call()
    assert recorder.seen == [(1, f"early{i}") for i in range(6)]
    early.offer_control(DONE_ITEM)
    _run_until_done(tasklet)

    # Then every item of priority 1 came before any item of priority 5
    assert recorder.seen == [(1, f"early{i}") for i in range(6)] + [(0, f"late{i}") for i in range(6)]


def test_given_a_full_output_queue_when_called_then_the_processor_is_not_called_until_there_is_room() -> None:
    source = SpscQueue(10_000)
    source.offer_batch(list(range(3000)))
    source.offer_control(DONE_ITEM)
    output = SpscQueue(capacity=5)
    recorder = _Recorder()
    tasklet = _tasklet(recorder, [InboundStream(0, 0, [source], WatermarkCoalescer(1), 0)], output)

    received: list[Any] = []
    for _ in range(20):
        tasklet.call()
    # Then with nobody reading, at most one outbox bucket beyond the queue's capacity was processed
    assert output.size() <= output.capacity
    assert len(recorder.seen) <= output.capacity + Outbox(1).capacity()

    # When the consumer drains between calls, everything arrives in order
    _run_until_done(tasklet, lambda: received.extend(_elements(output)))
    received.extend(_elements(output))
    assert received == [*range(3000), "end", DONE_ITEM]
    assert output.high_water_mark <= output.capacity
