"""Frames bounded in bytes by the sender: packets of large items are split, an item too large fails the job.

The receiver drops a connection that announces a frame over its limit, which
with 200 KB items once cut two members apart (issue 15 item 6). The sender
tasklet now serializes each packet and splits it until every frame fits.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from jetlet._execution import queues
from jetlet._network import tasklets as remote
from jetlet._network.frames import MessageType
from jetlet._network.transport import Transport
from jetlet.testing import wait_until

LIMIT = 1024 * 1024
ITEM = 200 * 1000
DEADLINE_S = 30.0


def _sender(
    items: list[Any], send: remote.Send, limit: int = LIMIT, packet_items: int = 4096
) -> remote.SenderTasklet:
    settings = remote.FlowSettings(  # packs every call: what is queued, no buffer timeout
        packet_size_limit=packet_items, initial_window=100_000, max_frame_bytes=limit, buffer_timeout_millis=0
    )
    sender = remote.SenderTasklet(7, 3, 0, 1, send, settings)
    for producer in range(2):
        queue = queues.SpscQueue(1024)
        queue.offer_batch(items[producer::2])
        queue.offer_control(queues.DONE_ITEM)
        sender.add_queue(producer, 0, queue)
    return sender


def _drain(sender: remote.SenderTasklet) -> None:
    for _ in range(1000):
        if sender.call().is_done:
            return
    raise AssertionError("the sender did not finish")


def test_given_large_items_when_sent_then_every_frame_fits_the_limit_and_the_items_arrive_in_order() -> None:
    # given 40 items of 200 KB: one packet of all would be 8 MB, over the 1 MiB limit
    items = [bytes([i]) * ITEM for i in range(40)]
    sent: list[tuple[MessageType, bytes]] = []
    sender = _sender(items, lambda member, message: sent.append(remote.encode_message(message)))
    # when the sender drains its queues
    _drain(sender)
    # then it sent several frames, none over the limit, which decode to the items in order
    assert len(sent) > 8 and max(len(payload) for _, payload in sent) <= LIMIT
    received: dict[int, list[bytes]] = {0: [], 1: []}
    for msg_type, payload in sent:
        packet = remote.decode_message(msg_type, payload)
        assert isinstance(packet, remote.Packet)
        for producer, _consumer, kind, data in packet.chunks:
            if kind == remote.DATA:
                received[producer] += data
    assert received == {0: items[0::2], 1: items[1::2]}
    assert sender.sent_items == 40 and sender.sent_packets == len(sent)


def test_given_small_items_then_one_packet_is_serialized_once_and_not_split() -> None:
    messages: list[object] = []
    sender = _sender(list(range(1000)), lambda member, message: messages.append(message))
    _drain(sender)
    data_packets = [m for m in messages if isinstance(m, remote.Packet) and m.encoded is not None]
    assert len(data_packets) == len(messages) >= 1
    assert remote.encode_message(data_packets[0]) == (MessageType.DATA, data_packets[0].encoded)


def test_given_an_item_larger_than_the_limit_then_the_sender_fails_naming_its_size_and_the_limit() -> None:
    sender = _sender([b"x" * 10, b"y" * (LIMIT + 1)], lambda member, message: None)
    with pytest.raises(remote.FrameTooLargeError, match=r"1,048,58\d bytes.*\(1,048,576 bytes\)"):
        _drain(sender)


class _Receiver:
    def __init__(self) -> None:
        self.items: list[bytes] = []
        self.changed = threading.Condition()
        self.lost: list[str] = []

    def on_message(self, peer: str, msg_type: MessageType, payload: bytes) -> None:
        packet = remote.decode_message(msg_type, payload)
        assert isinstance(packet, remote.Packet)
        with self.changed:
            self.items += [item for *_, kind, data in packet.chunks if kind == remote.DATA for item in data]
            self.changed.notify_all()

    def on_peer_lost(self, peer: str) -> None:
        with self.changed:
            self.lost.append(peer)
            self.changed.notify_all()


@pytest.fixture
def pair() -> Iterator[tuple[Transport, Transport, _Receiver]]:
    receiver = _Receiver()
    a = Transport("a", "secret", lambda *_: None, lambda _: None, max_frame_size=LIMIT)
    b = Transport("b", "secret", receiver.on_message, receiver.on_peer_lost, max_frame_size=LIMIT)
    try:
        a.start()
        a.connect("b", *b.start())
        yield a, b, receiver
    finally:
        a.close()
        b.close()


def test_given_two_transports_with_a_frame_limit_then_large_items_cross_without_dropping_the_link(
    pair: tuple[Transport, Transport, _Receiver],
) -> None:
    a, _b, receiver = pair
    items = [bytes([i]) * ITEM for i in range(40)]

    def send(member: int, message: object) -> None:
        a.send("b", *remote.encode_message(message))

    _drain(_sender(items, send))
    wait_until(
        lambda: len(receiver.items) == 40 or receiver.lost, "all items crossed", DEADLINE_S, receiver.changed
    )
    assert receiver.lost == [] and a.is_connected("b")
    assert sorted(receiver.items) == sorted(items)
