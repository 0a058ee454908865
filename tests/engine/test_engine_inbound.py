"""Inbound streams and the watermark coalescer: how a consumer reads its queues."""

from __future__ import annotations

from jetlet._execution.inbound import InboundStream, WatermarkCoalescer
from jetlet._execution.queues import DONE_ITEM, SpscQueue
from jetlet.core import IDLE_MESSAGE, Inbox, Watermark


def test_given_three_inputs_when_each_reports_a_watermark_then_the_coalesced_one_is_their_minimum() -> None:
    coalescer = WatermarkCoalescer(3)
    assert coalescer.observe(0, Watermark(10)) is None
    assert coalescer.observe(1, Watermark(5)) is None
    assert coalescer.observe(2, Watermark(7)) == Watermark(5)
    assert coalescer.observe(1, Watermark(20)) == Watermark(7)
    assert coalescer.observe(2, Watermark(30)) == Watermark(10)


def test_given_a_coalesced_watermark_when_an_input_reports_an_older_one_then_nothing_moves_back() -> None:
    coalescer = WatermarkCoalescer(1)
    assert coalescer.observe(0, Watermark(10)) == Watermark(10)
    assert coalescer.observe(0, Watermark(3)) is None
    assert coalescer.last_emitted == 10


def test_given_an_idle_input_when_the_others_advance_then_it_does_not_hold_the_watermark_back() -> None:
    coalescer = WatermarkCoalescer(2)
    assert coalescer.observe(0, IDLE_MESSAGE) is None  # input 1 has no watermark yet
    assert coalescer.observe(1, Watermark(42)) == Watermark(42)
    assert coalescer.observe(0, Watermark(50)) is None  # back from idle: min(50, 42) already emitted
    assert coalescer.observe(1, Watermark(60)) == Watermark(50)


def test_given_a_done_input_when_the_others_advance_then_it_is_excluded() -> None:
    coalescer = WatermarkCoalescer(2)
    coalescer.observe(0, Watermark(1))
    assert coalescer.observe(1, Watermark(100)) == Watermark(1)
    assert coalescer.queue_done(0) == Watermark(100)
    assert coalescer.queue_done(1) is None


def test_given_several_inputs_when_all_become_idle_then_the_idle_message_is_forwarded_once() -> None:
    coalescer = WatermarkCoalescer(2)
    assert coalescer.observe(0, IDLE_MESSAGE) is None
    assert coalescer.observe(1, IDLE_MESSAGE) is IDLE_MESSAGE
    assert coalescer.observe(1, IDLE_MESSAGE) is None
    assert coalescer.observe(0, Watermark(5)) == Watermark(5)


def test_given_two_producer_queues_when_drained_then_batches_arrive_round_robin_up_to_the_limit() -> None:
    queues = [SpscQueue(100), SpscQueue(100)]
    queues[0].offer_batch([1, 2])
    queues[0].offer_batch([3])
    queues[1].offer_batch([10, 20])
    stream = InboundStream(0, 0, queues, WatermarkCoalescer(2), 0)
    inbox = Inbox()
    assert stream.drain_to(inbox, limit=3) == (True, None)
    assert list(inbox) == [1, 2, 10, 20]
    assert stream.drain_to(inbox, limit=100) == (True, None)
    assert list(inbox) == [1, 2, 10, 20, 3]
    assert stream.drain_to(inbox, limit=100) == (False, None)


def test_given_a_watermark_behind_data_when_drained_then_reading_stops_at_the_advanced_watermark() -> None:
    queue = SpscQueue(100)
    queue.offer_batch([1, 2])
    queue.offer_control(Watermark(7))
    queue.offer_batch([3])
    stream = InboundStream(0, 0, [queue], WatermarkCoalescer(1), 0)
    inbox = Inbox()
    assert stream.drain_to(inbox, limit=100) == (True, Watermark(7))
    assert list(inbox) == [1, 2]


def test_given_every_producer_sent_done_when_drained_then_the_stream_is_done() -> None:
    queues = [SpscQueue(10), SpscQueue(10)]
    queues[0].offer_batch(["a"])
    queues[0].offer_control(DONE_ITEM)
    stream = InboundStream(0, 0, queues, WatermarkCoalescer(2), 0)
    inbox = Inbox()
    stream.drain_to(inbox, limit=100)
    assert not stream.is_done
    queues[1].offer_control(DONE_ITEM)
    stream.drain_to(inbox, limit=100)
    assert stream.is_done
    assert list(inbox) == ["a"]


def test_given_a_watermark_held_back_by_inputs_that_finish_without_one_then_it_is_released() -> None:
    # Given three inputs: the first brings watermark 100 and finishes while the others have none yet
    coalescer = WatermarkCoalescer(3)
    assert coalescer.observe(0, Watermark(100)) is None
    assert coalescer.queue_done(0) is None
    assert coalescer.queue_done(1) is None
    # When the last one finishes without ever sending a watermark
    released = coalescer.queue_done(2)
    # Then the held-back watermark comes out (nothing can arrive late any more)
    assert released == Watermark(100)
