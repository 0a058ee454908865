"""Chunks of records travel as rows of their fields (``__jetlet_fields__``), not one pickle reduce each.

A NEXMark ``Bid`` pickled as an object costs the sender a Python ``__reduce__`` and a REDUCE
per item; as a tuple of its fields it pickles several times faster. These tests check that such
chunks (bare records, ``(timestamp, record)`` events, several classes mixed, plain tuples beside
them) come back equal and in order, that anything else is left to the pickler, and that packets of
NEXMark events and of winning bids' input are carried as rows end to end.
"""

from __future__ import annotations

import dataclasses
import pickle
import struct
from typing import Any

import pytest

from jetlet._network import rows, serialization
from jetlet._network import tasklets as remote
from jetlet._network.frames import MessageType
from jetlet.nexmark import fast_generator, model, partial_winners


@dataclasses.dataclass(frozen=True)
class Single:
    __jetlet_fields__ = ("value",)
    value: str


@dataclasses.dataclass
class Unmarked:
    value: int


def _events(count: int) -> list[Any]:
    return fast_generator.fast_events(range(count), fast_generator.FastConfig(base_time=0))


def test_given_mixed_timestamped_events_then_rows_round_trip_in_order() -> None:
    # given people, auctions and bids interleaved, as (timestamp, event) pairs
    items = [(event.date_time, event) for event in _events(500)]
    # when encoded as rows and decoded after a pickle round trip
    encoded = rows.encode(items)
    assert encoded is not None
    timestamps, classes, groups = encoded
    decoded = rows.decode(pickle.loads(pickle.dumps(encoded, protocol=5)))
    # then every item is back, equal and in its place, and each class was written once per chunk
    assert decoded == items
    assert [type(item[1]) for item in decoded] == [type(item[1]) for item in items]
    assert timestamps == [ts for ts, _ in items] and classes is not None
    assert sorted(kind.__name__ for kind, _ in groups) == ["Auction", "Bid", "Person"]


def test_given_bare_records_of_one_class_then_no_class_indexes_are_sent() -> None:
    records = [Single(f"v{i}") for i in range(10)]
    encoded = rows.encode(records)
    assert encoded == (None, None, [(Single, [(f"v{i}",) for i in range(10)])])
    assert rows.decode(encoded) == records


def test_given_pairs_of_plain_tuples_then_the_tuples_travel_as_they_are_beside_the_timestamps() -> None:
    items = [(10 + i, (i, f"s{i}", None)) for i in range(5)]
    encoded = rows.encode(items)
    assert encoded == ([10, 11, 12, 13, 14], None, [(tuple, [item for _, item in items])])
    assert rows.decode(pickle.loads(pickle.dumps(encoded, protocol=5))) == items


def test_given_plain_tuples_mixed_with_records_and_plain_values_then_each_class_is_a_group_in_order() -> None:
    # given tuples (one holding a record the pickler writes as it is), records and an int, mixed
    items: list[Any] = [
        (1, (7, Single("in a tuple"))),
        (2, Single("a")),
        (3, (8, 9)),
        (4, 5),
        (5, Single("b")),
    ]
    # when encoded, pickled and decoded
    encoded = rows.encode(items)
    assert encoded is not None
    timestamps, classes, groups = encoded
    decoded = rows.decode(pickle.loads(pickle.dumps(encoded, protocol=5)))
    # then everything is back in order; the record went as its fields, the plain values as they are
    assert decoded == items
    assert timestamps == [1, 2, 3, 4, 5] and classes == [0, 1, 0, 2, 1]
    assert groups == [(tuple, [(7, Single("in a tuple")), (8, 9)]), (Single, [("a",), ("b",)]), (int, [5])]


def test_given_winning_bids_input_then_a_packet_of_it_goes_as_rows_and_arrives_equal() -> None:
    # given NEXMark auctions and bids as winning bids take them: (id, fields) and four-field bids
    items = [
        (e.date_time, partial_winners.auction_or_bid(e))
        for e in _events(600)
        if not isinstance(e, model.Person)
    ]
    assert {len(item) for _, item in items} == {2, 4}
    # when sent as one packet
    packet = remote.bounded_packets(3, 4, 0, [(0, 1, remote.DATA, items)], 1 << 20)[0]
    assert packet.encoded is not None
    pickled, buffers = remote._split_buffers(packet.encoded)
    # then it went as rows, and every item came back equal, in order
    assert [chunk[2] for chunk in pickle.loads(pickled, buffers=buffers)] == [remote.ROWS]
    decoded = remote.decode_message(MessageType.DATA, packet.encoded)
    assert decoded == remote.Packet(3, 4, 0, [(0, 1, remote.DATA, items)])


@pytest.mark.parametrize(
    "items",
    [
        [Unmarked(1), Unmarked(2)],
        [(1, Single("a")), (2, Unmarked(2))],
        [(1, Single("a")), (2, Single("b"), 3)],
        [(1, Single("a")), [2, Single("b")]],
        [1, 2, 3],
        [("a", 1), ("b", 2)],
        [(1, (2, 3)), (2, Unmarked(2))],
    ],
    ids=[
        "unmarked class",
        "one unmarked among them",
        "a triple",
        "a list",
        "ints",
        "plain pairs",
        "a tuple and an unmarked",
    ],
)
def test_given_items_that_are_not_all_records_then_they_are_left_to_the_pickler(items: list[Any]) -> None:
    assert rows.encode(items) is None
    packet = remote.bounded_packets(1, 2, 0, [(0, 0, remote.DATA, items)], 1 << 20)[0]
    assert packet.encoded is not None
    decoded = remote.decode_message(MessageType.DATA, packet.encoded)
    assert decoded == remote.Packet(1, 2, 0, [(0, 0, remote.DATA, items)])


def test_given_a_packet_of_nexmark_events_then_its_data_goes_as_rows_and_arrives_merged_per_pair() -> None:
    # given two consecutive chunks of one producer and consumer, then a watermark
    events = [(event.date_time, event) for event in _events(600)]
    chunks = [
        (0, 1, remote.DATA, events[:300]),
        (0, 1, remote.DATA, events[300:]),
        (0, 1, remote.WATERMARK, 7),
    ]
    # when encoded and decoded
    packet = remote.bounded_packets(3, 4, 0, chunks, 1 << 20)[0]
    assert packet.encoded is not None
    pickled, buffers = remote._split_buffers(packet.encoded)
    wire = pickle.loads(pickled, buffers=buffers)
    decoded = remote.decode_message(MessageType.DATA, packet.encoded)
    # then the data went as one rows chunk, and came back as one data chunk with every event
    assert [chunk[2] for chunk in wire] == [remote.ROWS, remote.WATERMARK]
    assert decoded == remote.Packet(3, 4, 0, [(0, 1, remote.DATA, events), (0, 1, remote.WATERMARK, 7)])
    assert all(type(event) in (model.Person, model.Auction, model.Bid) for _, event in decoded.chunks[0][3])


@pytest.mark.parametrize(
    "bad",
    [
        (None, [0, 1], [(Single, [("a",)])]),
        (None, None, [(Single, [("a",)]), (Single, [("b",)])]),
        ([1, 2], None, [(Single, [("a",)])]),
        (None, [0, 0], [(Single, [("a",)]), (Single, [("b",)])]),
        (None, None, [(Single, [("a", "b")])]),
        ([1], None, [(tuple, ["not a tuple"])]),
        (None, None, [(int, [1, "2"])]),
    ],
    ids=[
        "more indexes than records",
        "groups without indexes",
        "timestamps left over",
        "an index too often",
        "too many fields",
        "a tuple group holding a string",
        "an int group holding a string",
    ],
)
def test_given_rows_that_do_not_fit_together_then_the_packet_is_refused(bad: rows.Rows) -> None:
    with pytest.raises((ValueError, TypeError)):
        rows.decode(bad)
    route = struct.pack(">qII", 1, 2, 0)
    payload = route + remote._NO_BUFFERS + pickle.dumps([(0, 0, remote.ROWS, bad)], protocol=5)
    with pytest.raises(serialization.SerializationError, match="corrupt data packet: a rows chunk"):
        remote.decode_message(MessageType.DATA, payload)
