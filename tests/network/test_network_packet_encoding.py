"""A distributed edge's packet is encoded once, whole: one pickle per frame, none per item (issue 20).

Each shuffled item used to be packed and pickled on its own (9-16 µs per event for
encode plus decode); the sender tasklet now pickles each packet, with all of its
chunks, in one call, and the receiver decodes each frame with one ``pickle.loads``.
These tests count the encodings, bound the bytes on the wire, keep the order of
data, watermarks and barriers, split a chunk over the frame limit into frames
within it, and refuse a payload of the wrong shape.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import pytest

from jetlet import _pickling
from jetlet._execution import queues, snapshots
from jetlet._network import serialization
from jetlet._network import tasklets as remote
from jetlet._network.frames import MessageType
from jetlet.core import watermark as wm
from jetlet.nexmark import model

CHUNK = 1024
NO_BUFFERS = bytes(4)
"""The table of a payload without out-of-band buffers (a count of 0), before its pickle."""


def _bids(count: int, start: int = 0) -> list[tuple[int, model.Bid]]:
    """``(timestamp, bid)`` items, as NEXMark's shuffled edges carry them."""
    return [
        (1000 + i, model.Bid(i % 97, i, 100 + i, 1000 + i, f"extra-{i}")) for i in range(start, start + count)
    ]


def _sender(send: remote.Send, limit: int = remote.FlowSettings().max_frame_bytes) -> remote.SenderTasklet:
    settings = remote.FlowSettings(  # packs every call: what is queued, no buffer timeout
        packet_size_limit=4 * CHUNK, initial_window=1_000_000, max_frame_bytes=limit, buffer_timeout_millis=0
    )
    return remote.SenderTasklet(7, 3, 0, 1, send, settings)


def _drain(sender: remote.SenderTasklet) -> None:
    for _ in range(10_000):
        if sender.call().is_done:
            return
    raise AssertionError("the sender did not finish")


def _received(payloads: list[bytes]) -> dict[int, list[Any]]:
    """What each producer sent, in order: data items, ``("wm", t)``, ``("barrier", id)``, ``"done"``."""
    out: dict[int, list[Any]] = {}
    for payload in payloads:
        packet = remote.decode_message(MessageType.DATA, payload)
        assert isinstance(packet, remote.Packet)
        for producer, _consumer, kind, data in packet.chunks:
            elements = out.setdefault(producer, [])
            if kind == remote.DATA:
                elements += data
            elif kind == remote.WATERMARK:
                elements.append(("wm", data))
            elif kind == remote.BARRIER:
                elements.append(("barrier", data[0]))
            else:
                elements.append("done")
    return out


@pytest.fixture
def counted_dumps(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Every call of the pickler the sender uses, recorded (with the size it returned)."""
    calls: list[int] = []
    real = _pickling.dumps

    def dumps(value: Any, buffers: list[pickle.PickleBuffer] | None = None) -> bytes:
        encoded = real(value, buffers)
        calls.append(len(encoded))
        return encoded

    monkeypatch.setattr(_pickling, "dumps", dumps)
    yield calls


def test_given_chunks_of_items_when_sent_then_each_packet_is_pickled_once_and_no_item_alone(
    counted_dumps: list[int],
) -> None:
    # given two producers' queues with 4 chunks of 1,024 NEXMark bids each
    payloads: list[bytes] = []
    sender = _sender(lambda member, message: payloads.append(remote.encode_message(message)[1]))
    items = {producer: _bids(4 * CHUNK, start=producer * 10 * CHUNK) for producer in range(2)}
    for producer in range(2):
        queue = queues.SpscQueue(1 << 16)
        for start in range(0, 4 * CHUNK, CHUNK):
            queue.offer_batch(items[producer][start : start + CHUNK])
        queue.offer_control(queues.DONE_ITEM)
        sender.add_queue(producer, 0, queue)
    # when the sender drains them
    _drain(sender)
    # then there was one pickle per frame sent (the whole packet), not one per item or chunk
    assert len(counted_dumps) == len(payloads) == sender.sent_packets
    assert len(payloads) <= 4  # 8,192 items in packets of up to 4,096 (and the done markers)
    assert sender.sent_items == 8 * CHUNK
    # and the items arrive equal, in order
    assert _received(payloads) == {p: [*items[p], "done"] for p in range(2)}


def test_given_a_chunk_of_bids_then_its_frame_costs_less_than_40_bytes_an_item() -> None:
    # given 1,024 (timestamp, bid) items: a pickle per item would repeat the class name in each
    items = _bids(CHUNK)
    single = sum(len(pickle.dumps(item, protocol=5)) for item in items)
    # when encoded as one packet
    packet = remote.bounded_packets(1, 2, 0, [(0, 1, remote.DATA, items)], 1 << 20)
    # then one frame carries it, in well under the bytes of the items pickled one by one
    assert len(packet) == 1 and packet[0].encoded is not None
    assert len(packet[0].encoded) < 40 * CHUNK < single
    assert remote.decode_message(MessageType.DATA, packet[0].encoded) == remote.Packet(
        1, 2, 0, [(0, 1, remote.DATA, items)]
    )


def test_given_watermarks_and_barriers_between_chunks_then_they_arrive_in_order_with_the_items() -> None:
    # given one queue holding data, a watermark, a barrier, more data, then done
    payloads: list[bytes] = []
    sender = _sender(lambda member, message: payloads.append(remote.encode_message(message)[1]))
    first, second = _bids(300), _bids(200, start=300)
    queue = queues.SpscQueue(1 << 16)
    queue.offer_batch(first)
    queue.offer_control(wm.Watermark(1299))
    queue.offer_control(snapshots.SnapshotBarrier(5, False))
    queue.offer_batch(second)
    queue.offer_control(queues.DONE_ITEM)
    sender.add_queue(0, 0, queue)
    # when sent and decoded
    _drain(sender)
    # then the control items sit exactly where they were between the items
    assert _received(payloads) == {0: [*first, ("wm", 1299), ("barrier", 5), *second, "done"]}


def test_given_a_chunk_over_the_frame_limit_then_it_is_split_into_frames_within_the_limit(
    counted_dumps: list[int],
) -> None:
    # given 4,096 bids in one chunk, about 120 KB as one packet, and a frame limit of 16 KiB
    limit = 16 * 1024
    items = _bids(4 * CHUNK)
    payloads: list[bytes] = []
    sender = _sender(lambda member, message: payloads.append(remote.encode_message(message)[1]), limit)
    queue = queues.SpscQueue(1 << 16)
    queue.offer_batch(items)
    queue.offer_control(queues.DONE_ITEM)
    sender.add_queue(0, 0, queue)
    # when sent
    _drain(sender)
    # then every frame fits, the items arrive in order, and the chunk was cut in one step
    # (its parts encoded once each, plus at most one more cut of a part that came out too big)
    assert len(payloads) >= 8 and max(map(len, payloads)) <= limit
    assert _received(payloads) == {0: [*items, "done"]}
    assert len(counted_dumps) <= 2 * len(payloads) + 1


@pytest.mark.parametrize(
    "payload",
    [
        NO_BUFFERS + b"not a pickle",
        NO_BUFFERS + pickle.dumps([1, 2, 3], protocol=5),
        NO_BUFFERS + pickle.dumps((1, 2, 0, "chunks"), protocol=5),
        NO_BUFFERS + pickle.dumps((1, 2, 0, [(0, 0, remote.DATA, "items")]), protocol=5),
        NO_BUFFERS + pickle.dumps((1, 2, 0, [(0, 0)]), protocol=5),
    ],
    ids=["garbage", "a list", "chunks not a list", "items not a list", "short chunk"],
)
def test_given_a_data_payload_of_the_wrong_shape_then_decoding_raises_a_serialization_error(
    payload: bytes,
) -> None:
    with pytest.raises(serialization.SerializationError, match="corrupt data packet"):
        remote.decode_message(MessageType.DATA, payload)


def test_given_an_ack_then_it_round_trips_without_pickles() -> None:
    ack = remote.Ack(1, 2, 3, 400, 5000)
    msg_type, payload = remote.encode_message(ack)
    assert msg_type is MessageType.FLOW_ACK and remote.decode_message(msg_type, payload) == ack
    with pytest.raises(serialization.SerializationError):
        remote.decode_message(MessageType.FLOW_ACK, serialization.dumps([model.Bid(1, 2, 3, 4, "x")]))


def test_given_items_only_cloudpickle_can_carry_then_the_packet_is_encoded_once_by_it(
    counted_dumps: list[int],
) -> None:
    # given items of a class that exists only in this function (the C pickler cannot name it)
    class Local:
        def __init__(self, value: int) -> None:
            self.value = value

    items = [(i, Local(i)) for i in range(500)]
    # when the chunk is encoded
    packets = remote.bounded_packets(1, 2, 0, [(0, 0, remote.DATA, items)], 1 << 20)
    # then one encoding carried it, and the receiver gets equal items back
    assert len(packets) == len(counted_dumps) == 1 and packets[0].encoded is not None
    packet = remote.decode_message(MessageType.DATA, packets[0].encoded)
    assert isinstance(packet, remote.Packet)
    assert [(ts, item.value) for ts, item in packet.chunks[0][3]] == [(i, i) for i in range(500)]
