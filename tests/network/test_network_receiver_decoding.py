"""A packet is routed by its first bytes on the network thread and decoded by its receiver tasklet.

The network thread reads only a ``DATA`` payload's route (job, edge, source member) and hands the
payload to the receiver tasklet of that edge and source, which decodes it on the cooperative
thread (Jet's ``ReceiverTasklet`` does the same). A payload that does not decode fails that
tasklet, and so the job with an error naming the problem, where the network thread used to log
the error and drop the packet's items while the job went on. The same path between real member
processes is exercised by every distributed job of tests/cluster.
"""

from __future__ import annotations

import pickle
import struct
from typing import Any

import pytest

from jetlet._execution import queues
from jetlet._network import serialization
from jetlet._network import tasklets as remote
from jetlet.core import watermark as wm
from jetlet.nexmark import fast_generator


def _links(acks: list[object]) -> tuple[remote.RemoteLinks, queues.SpscQueue]:
    links = remote.RemoteLinks(job_id=9, member_index=1, send=lambda member, message: acks.append(message))
    queue = links.inbound_queue(edge_id=4, source_member=0, producer=2, consumer=1, capacity=4096, name="in")
    return links, queue


def _drain(queue: queues.SpscQueue) -> list[Any]:
    out: list[Any] = []
    while (element := queue.poll()) is not None:
        out.extend(element) if type(element) is list else out.append(element)
    return out


def test_a_payload_is_routed_by_its_first_bytes_and_its_receiver_decodes_it_in_order() -> None:
    events = fast_generator.fast_events(range(300), fast_generator.FastConfig())
    items = [(1000 + i, event) for i, event in enumerate(events)]
    chunks = [
        (2, 1, remote.DATA, items[:200]),
        (2, 1, remote.WATERMARK, 1150),
        (2, 1, remote.DATA, items[200:]),
    ]
    [packet] = remote.bounded_packets(9, 4, 0, chunks, 1 << 20)
    payload = packet.encoded
    assert payload is not None
    # the route is read without decoding anything else
    assert remote.packet_route(payload) == (9, 4, 0)
    links, queue = _links([])
    [receiver] = links.receivers.values()
    # when the network thread hands it over, nothing is decoded yet
    links.deliver_payload(4, 0, payload)
    assert queue.poll() is None and receiver.received_bytes == len(payload)
    # then the receiver's call decodes it: the items and the watermark, in order, equal to what was sent
    assert receiver.call().made_progress
    assert _drain(queue) == [*items[:200], wm.Watermark(1150), *items[200:]]
    assert receiver.received_items == 300


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"\x00\x00\x00", "no buffer table"),
        (remote._NO_BUFFERS + b"not a pickle", "UnpicklingError"),
        (remote._NO_BUFFERS + pickle.dumps((2, 1, remote.DATA, [1])), "its chunks are not a list"),
        (
            remote._NO_BUFFERS + pickle.dumps([(2, 1, remote.DATA, "x")]),
            r"a chunk is not \(p, c, kind, payload\)",
        ),
    ],
    ids=["cut short", "not a pickle", "not a list", "a bad chunk"],
)
def test_a_payload_that_does_not_decode_fails_its_receiver_naming_the_problem(
    body: bytes, problem: str
) -> None:
    links, _queue = _links([])
    [receiver] = links.receivers.values()
    good = remote.bounded_packets(9, 4, 0, [(2, 1, remote.DATA, [1, 2, 3])], 1 << 20)[0].encoded
    assert good is not None
    links.deliver_payload(4, 0, good)
    links.deliver_payload(4, 0, struct.pack(">qII", 9, 4, 0) + body)
    # the bad one raises in the receiver's call: the job fails, naming the problem
    with pytest.raises(serialization.SerializationError, match=f"corrupt data packet.*{problem}"):
        receiver.call()


def test_a_payload_too_short_for_a_route_or_for_an_edge_that_sends_nothing_here_is_refused() -> None:
    with pytest.raises(serialization.SerializationError, match="corrupt data packet: 7 bytes, no route"):
        remote.packet_route(b"\x00" * 7)
    links, _queue = _links([])
    with pytest.raises(
        ValueError, match="a packet for edge 5 from member 0, which sends nothing to this member"
    ):
        links.deliver_payload(5, 0, b"")
