"""Queues and network senders bounded in bytes as well as items (issue 15 item 7: 200 KB items filled GBs).

A queue holds at most its ``max_bytes`` (estimated per batch), but an empty
one always takes one item; a sender keeps at most ``max_in_flight_bytes``
beyond what its receiver took in. Small items are bounded by item counts as
before.
"""

from __future__ import annotations

from typing import Any

from jetlet._execution import queues, sizing
from jetlet._network import tasklets as remote

ITEM = 200_000
MB = 1_000_000


def test_an_item_is_estimated_with_its_parts() -> None:
    assert sizing.item_bytes(b"x" * ITEM) > ITEM
    assert sizing.item_bytes(("key", b"x" * ITEM)) > ITEM
    assert sizing.item_bytes({"payload": "y" * ITEM}) > ITEM
    assert sizing.item_bytes([b"z" * 1000] * 100) > 100 * 1000
    assert sizing.item_bytes(7) < 100


def test_a_queue_takes_large_items_only_up_to_its_bytes() -> None:
    queue = queues.SpscQueue(1024, "large", max_bytes=MB)
    items = [b"x" * ITEM for _ in range(100)]

    taken = queue.offer_batch(items)

    assert 1 <= taken <= MB // ITEM and queue.queued_bytes() <= MB
    assert queue.offer_batch(items[taken:]) == 0  # full in bytes, far from full in items
    assert queue.poll() is not None  # the consumer takes the batch
    assert queue.offer_batch(items[taken:]) == taken  # and there is room again


def test_an_empty_queue_takes_one_item_larger_than_its_bytes() -> None:
    queue = queues.SpscQueue(1024, "huge", max_bytes=MB)

    assert queue.offer_batch([b"x" * (3 * MB), b"y" * (3 * MB)]) == 1
    assert queue.offer_batch([b"y" * (3 * MB)]) == 0


def test_small_items_meet_the_item_bound_first() -> None:
    queue = queues.SpscQueue(1024, "small", max_bytes=MB)

    assert queue.offer_batch(list(range(5000))) == 1024


def _sender(max_in_flight_bytes: int) -> tuple[remote.SenderTasklet, list[Any], queues.SpscQueue]:
    sent: list[Any] = []
    settings = remote.FlowSettings(  # packs every call: what is queued, no buffer timeout
        packet_size_limit=4096, initial_window=100_000, max_frame_bytes=64 * MB, buffer_timeout_millis=0
    )
    sender = remote.SenderTasklet(7, 3, 0, 1, lambda member, message: sent.append(message), settings)
    sender.max_in_flight_bytes = max_in_flight_bytes
    queue = queues.SpscQueue(1024, "out")
    queue.offer_batch([b"x" * ITEM for _ in range(200)])
    sender.add_queue(0, 0, queue)
    return sender, sent, queue


def _items(packets: list[Any]) -> int:
    return sum(len(payload) for p in packets for _, _, kind, payload in p.chunks if kind == remote.DATA)


def test_a_sender_keeps_its_bytes_in_flight_under_its_bound_until_the_receiver_takes_them_in() -> None:
    sender, sent, _ = _sender(MB)

    sender.call()
    first = _items(sent)
    sender.call()

    assert 1 <= first <= MB // ITEM and _items(sent) == first  # nothing more until an ack
    assert sender.in_flight_bytes() <= MB + ITEM
    sender.on_ack(remote.Ack(7, 3, 1, first, 100_000))
    sender.call()
    assert _items(sent) > first


def test_a_sender_without_a_bound_sends_what_the_window_allows() -> None:
    sender, sent, _ = _sender(0)

    sender.call()

    assert _items(sent) == 200


def test_light_items_go_by_the_item_bound_and_heavier_ones_start_the_byte_count() -> None:
    queue = queues.SpscQueue(1024, "mixed", max_bytes=MB)
    assert queue.offer_batch(list(range(10))) == 10  # light: a full queue of ints is far below 1 MB

    taken = queue.offer_batch([b"x" * ITEM for _ in range(100)])  # heavier: weighed, counted

    assert 1 <= taken <= MB // ITEM and queue.queued_bytes() <= MB
    assert queue.queued_bytes() >= taken * ITEM  # the light items queued before count too
