"""A distributed edge's sender holds a partial packet for at most its buffer timeout (Flink's).

A packet costs a member a fixed amount beyond its items (encoding, a frame, waking the network
thread, GIL hand-offs at both ends), so a sender sends once its queues hold three quarters of what
they can (or the flow-control window's worth), or once the first item waiting has waited
``buffer_timeout_millis``; a control item (a watermark, a barrier, the done marker) sends at once
what is queued before it, and 0 sends on every call. These tests
drive one sender with a clock of their own; the real edges between member processes run with the
default in every distributed test of tests/cluster.
"""

from __future__ import annotations

from typing import Any

import pytest

from jetlet import config
from jetlet._cluster import settings
from jetlet._execution import queues
from jetlet._network import tasklets as remote
from jetlet.core import watermark as wm


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _sender(
    timeout_ms: int = 5, window: int = 100_000
) -> tuple[remote.SenderTasklet, list[remote.Packet], queues.SpscQueue, _Clock]:
    sent: list[remote.Packet] = []
    clock = _Clock()
    flow = remote.FlowSettings(initial_window=window, buffer_timeout_millis=timeout_ms)
    sender = remote.SenderTasklet(7, 3, 0, 1, lambda _m, message: sent.append(message), flow, clock)  # type: ignore[arg-type]
    queue = queues.SpscQueue(64, "out")  # three quarters: 48 items
    sender.add_queue(0, 0, queue)
    return sender, sent, queue, clock


def _items(packets: list[remote.Packet]) -> list[Any]:
    return [
        item for packet in packets for chunk in packet.chunks if chunk[2] == remote.DATA for item in chunk[3]
    ]


def test_a_partial_packet_waits_for_the_timeout_then_goes_whole() -> None:
    sender, sent, queue, clock = _sender(timeout_ms=5)
    queue.offer_batch(list(range(10)))
    # when called before the timeout, nothing is sent, and more items join the wait
    assert not sender.call().made_progress and sent == []
    clock.now += 0.004
    queue.offer_batch(list(range(10, 20)))
    assert not sender.call().made_progress and sent == []
    # then once the first item has waited 5 ms, all of them go in one packet
    clock.now += 0.0015
    assert sender.call().made_progress
    assert len(sent) == 1 and _items(sent) == list(range(20))
    # and the next item starts a new wait
    queue.offer_batch([20])
    assert not sender.call().made_progress and len(sent) == 1


def test_three_quarters_of_the_queues_or_the_windows_room_go_at_once() -> None:
    sender, sent, queue, _clock = _sender(timeout_ms=5)
    queue.offer_batch(list(range(47)))
    assert not sender.call().made_progress
    queue.offer_batch([47])
    assert sender.call().made_progress and _items(sent) == list(range(48))
    # a window smaller than that: waiting would not let the packet grow, so it goes at once
    small, small_sent, small_queue, _ = _sender(timeout_ms=5, window=10)
    small_queue.offer_batch(list(range(20)))
    assert small.call().made_progress and _items(small_sent) == list(range(10))


def test_what_the_window_held_back_goes_on_the_next_call_without_waiting_again() -> None:
    sender, sent, queue, _clock = _sender(timeout_ms=5, window=10)
    queue.offer_batch(list(range(20)))
    assert sender.call().made_progress and _items(sent) == list(range(10))
    # when the receiver's ack makes room, the ten held back go at once: they have waited already
    sender.on_ack(remote.Ack(7, 3, 1, 10, 100))
    assert sender.call().made_progress and _items(sent) == list(range(20))
    # and a new item after that waits again
    queue.offer_batch([20])
    assert not sender.call().made_progress and len(sent) == 2


def test_a_control_item_sends_at_once_the_data_queued_before_it() -> None:
    sender, sent, queue, clock = _sender(timeout_ms=5)
    queue.offer_control(wm.Watermark(7))
    assert sender.call().made_progress
    assert [chunk[2:] for packet in sent for chunk in packet.chunks] == [(remote.WATERMARK, 7)]
    # data alone waits for the timeout
    queue.offer_batch([1, 2])
    assert not sender.call().made_progress and len(sent) == 1
    # a watermark behind it is what the receiver waits for (a window to close, a key to expire):
    # the data and the watermark go at once, before the timeout
    queue.offer_control(wm.Watermark(8))
    assert sender.call().made_progress
    assert [chunk[2:] for chunk in sent[1].chunks] == [(remote.DATA, [1, 2]), (remote.WATERMARK, 8)]
    # and so does the done marker, with data queued after the last watermark
    queue.offer_batch([3])
    assert not sender.call().made_progress and len(sent) == 2
    queue.offer_control(queues.DONE_ITEM)
    assert sender.call().is_done
    assert [chunk[2] for chunk in sent[2].chunks] == [remote.DATA, remote.DONE]
    assert clock.now == 100.0  # no time passed: nothing went by the timeout


def test_a_control_item_taken_leaves_the_next_data_to_wait_again() -> None:
    sender, sent, queue, clock = _sender(timeout_ms=5)
    queue.offer_batch([1])
    queue.offer_control(wm.Watermark(1))
    assert sender.call().made_progress and len(sent) == 1
    assert not queue.holds_control()
    queue.offer_batch([2])
    assert not sender.call().made_progress and len(sent) == 1
    clock.now += 0.0055
    assert sender.call().made_progress and _items(sent) == [1, 2]


def test_without_a_buffer_timeout_every_call_sends_what_is_queued() -> None:
    sender, sent, queue, _clock = _sender(timeout_ms=0)
    for batch in ([1], [2, 3]):
        queue.offer_batch(batch)
        assert sender.call().made_progress
    assert [_items([packet]) for packet in sent] == [[1], [2, 3]]


def test_a_negative_buffer_timeout_is_refused_naming_the_field_and_a_member_setting_carries_it() -> None:
    with pytest.raises(ValueError, match="buffer_timeout_millis"):
        config.EdgeConfig(buffer_timeout_millis=-1)
    with pytest.raises(ValueError, match=r"FlowSettings\.buffer_timeout_millis must be an int >= 0, got -1"):
        remote.FlowSettings(buffer_timeout_millis=-1)
    with pytest.raises(settings.SettingsError, match="buffer_timeout_millis"):
        settings.load({"buffer_timeout_millis": "-3"})
    loaded = settings.load({"buffer_timeout_millis": "9"}).instance_config()
    assert loaded.default_edge_config.buffer_timeout_millis == 9
    assert config.EdgeConfig().buffer_timeout_millis == settings.MemberSettings().buffer_timeout_millis == 10
