"""Record batches on network edges: columns as out-of-band buffers, decoded without a copy (issue 20).

A :class:`~jetlet.batches.ColumnBatch` in a packet reduces each plain-dtype
column to a dtype name and a buffer that the packet carries after its pickle;
the receiver's columns are views of the frame's payload. These tests round-trip
batches of every kind of column, mix them with row items, watermarks and
barriers in one packet, and refuse payloads whose buffer table or buffers do
not make the batch they claim, with an error that names the problem; a member
that gets such a frame from a trusted peer logs it and keeps the link and the
packets around it.
"""

from __future__ import annotations

import pickle
import socket
import struct
import threading
from typing import Any

import numpy as np
import pytest

from jetlet._execution import snapshots
from jetlet._network import frames, handshake, serialization
from jetlet._network import tasklets as remote
from jetlet._network.frames import MessageType
from jetlet._network.transport import Transport
from jetlet.batches import ColumnBatch, column_batch
from jetlet.core import watermark as wm
from jetlet.testing import wait_until

ROWS = 1024
SECRET = "test-cluster-secret"
DEADLINE_S = 10.0


def _batch(rows: int = ROWS, start: int = 0) -> ColumnBatch:
    numbers = np.arange(start, start + rows, dtype=np.int64)
    return ColumnBatch(
        {
            "auction": numbers % 97,
            "price": (numbers * 7).astype(np.float64) / 3,
            "paid": numbers % 2 == 0,
            "when": numbers.astype("datetime64[ms]"),
            "channel": np.array([f"ch-{i % 5}" for i in range(rows)]),
            "extra": np.array([f"x{i}" for i in range(rows)], dtype=object),
            "date_time": 1000 + numbers,
        },
        "date_time",
    )


def _round_trip(chunks: list[tuple[int, int, int, Any]]) -> tuple[bytes, remote.Packet]:
    [packet] = remote.bounded_packets(7, 3, 1, chunks, 1 << 24)
    assert packet.encoded is not None
    decoded = remote.decode_message(MessageType.DATA, packet.encoded)
    assert isinstance(decoded, remote.Packet)
    return packet.encoded, decoded


def test_given_a_batch_when_sent_then_its_columns_travel_out_of_band_and_arrive_as_views_of_the_frame() -> (
    None
):
    batch = _batch()
    # when a packet with the batch is encoded and decoded
    payload, packet = _round_trip([(0, 1, remote.DATA, [batch])])
    [(_p, _c, kind, [received])] = packet.chunks
    # then the same rows, dtypes and timestamp column arrive
    assert kind == remote.DATA and isinstance(received, ColumnBatch)
    assert received.names == batch.names and received.timestamp == "date_time"
    assert [v.dtype for v in received.columns.values()] == [v.dtype for v in batch.columns.values()]
    assert received.rows() == batch.rows()
    # and the six plain-dtype columns were out-of-band buffers (the object column was pickled)
    assert struct.unpack_from(">qII", payload) == (7, 3, 1)  # its route: job, edge, source member
    (count,) = struct.unpack_from(">I", payload, 16)
    assert count == 6
    plain_bytes = sum(v.nbytes for name, v in batch.columns.items() if name != "extra")
    assert sum(struct.unpack_from(f">{count}Q", payload, 20)) == plain_bytes
    # and they are read-only views of the payload, not copies
    for name in ("auction", "price", "paid", "when", "channel", "date_time"):
        column = received[name]
        assert not column.flags.owndata and not column.flags.writeable
        assert np.shares_memory(column, np.frombuffer(payload, dtype=np.uint8))


def test_given_rows_batches_and_controls_in_one_packet_then_all_arrive_in_order() -> None:
    rows = [(1000 + i, ("bid", i, i * 1.5)) for i in range(300)]
    first, second = _batch(10), _batch(ROWS, start=10).filter(np.arange(ROWS) % 3 == 0)
    chunks: list[tuple[int, int, int, Any]] = [
        (0, 0, remote.DATA, rows),
        (1, 0, remote.DATA, [first, ("row", np.arange(4)), second]),
        (0, 0, remote.WATERMARK, wm.Watermark(1200)),
        (1, 0, remote.BARRIER, snapshots.SnapshotBarrier(5)),
        (1, 0, remote.DATA, []),
        (0, 0, remote.DONE, None),
    ]
    # when they travel in one packet
    _payload, packet = _round_trip(chunks)
    # then every chunk arrives in order, rows equal, batches equal row for row
    assert [(p, c, kind) for p, c, kind, _ in packet.chunks] == [(p, c, kind) for p, c, kind, _ in chunks]
    assert packet.chunks[0][3] == rows
    got_first, (tag, array), got_second = packet.chunks[1][3]
    assert got_first.rows() == first.rows() and got_second.rows() == second.rows()
    assert tag == "row" and array.tolist() == [0, 1, 2, 3]
    assert packet.chunks[2][3] == wm.Watermark(1200) and packet.chunks[3][3] == snapshots.SnapshotBarrier(5)


def test_given_a_packet_over_the_frame_limit_then_its_batches_are_split_over_frames() -> None:
    batches = [_batch(ROWS, start=i * ROWS) for i in range(8)]
    one = len(remote.bounded_packets(1, 2, 0, [(0, 0, remote.DATA, batches[:1])], 1 << 24)[0].encoded or b"")
    # when eight batches go out with room for about three per frame
    packets = remote.bounded_packets(1, 2, 0, [(0, 0, remote.DATA, batches)], 3 * one + 100)
    # then every frame fits, and the batches arrive whole and in order
    assert len(packets) > 1 and all(len(p.encoded or b"") <= 3 * one + 100 for p in packets)
    received = [batch for p in packets for batch in remote._decode_packet(p.encoded or b"").chunks[0][3]]
    assert [b.rows() for b in received] == [b.rows() for b in batches]


class _Forged:
    """Pickles as a ColumnBatch built from ``parts`` (names, dtypes, buffers, timestamp), right or not."""

    def __init__(self, *parts: Any) -> None:
        self.parts = parts

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return (column_batch._from_buffers, self.parts)


_ROUTE = struct.pack(">qII", 1, 2, 0)
"""A DATA payload's route: job 1, edge 2, from member 0."""


def _payload(item: Any, table: list[int] | None = None, cut: int = 0) -> bytes:
    """A DATA payload carrying ``item``; ``table`` replaces the buffer lengths, ``cut`` drops end bytes."""
    buffers: list[pickle.PickleBuffer] = []
    pickled = pickle.dumps([(0, 0, remote.DATA, [item])], protocol=5, buffer_callback=buffers.append)
    raws = [bytes(b.raw()) for b in buffers]
    lengths = [len(raw) for raw in raws] if table is None else table
    table_bytes = struct.pack(f">I{len(lengths)}Q", len(lengths), *lengths)
    payload = _ROUTE + table_bytes + pickled + b"".join(raws)
    return payload[: len(payload) - cut]


def _buffer(data: bytes) -> pickle.PickleBuffer:
    return pickle.PickleBuffer(bytearray(data))


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        (b"\x00\x00", "no route"),
        (_ROUTE + b"\x00\x00", "no buffer table"),
        (
            _ROUTE + struct.pack(">I", 1_000_000) + b"x" * 64,
            "a table of 1,000,000 out-of-band buffers does not fit",
        ),
        (_payload(_batch(8), table=[64] * 6 + [1 << 40]), "out-of-band buffers of .* bytes do not fit"),
        (
            _payload(_Forged(["a"], ["<i8"], [_buffer(bytes(12))], None)),
            "column 'a' of 12 bytes is not a whole number of <i8",
        ),
        (
            _payload(_Forged(["a"], ["|O"], [_buffer(bytes(16))], None)),
            "column 'a' cannot be made of bytes as \\|O",
        ),
        (_payload(_Forged(["a"], ["no-such-dtype"], [_buffer(bytes(8))], None)), "no dtype 'no-such-dtype'"),
        (
            _payload(_Forged(["a", "b"], ["<i8", "<i4"], [_buffer(bytes(16)), _buffer(bytes(12))], None)),
            r"columns \['a', 'b'\] differ in length",
        ),
        (
            _payload(_Forged(["a", "b"], ["<i8"], [_buffer(bytes(16))], None)),
            "2 column names, 1 dtypes and 1 buffers",
        ),
        (_payload(_Forged(["a"], ["<i8"], [_buffer(bytes(16))], "t")), "no timestamp column 't'"),
        (_payload(_Forged(["a"], [None], [[1, 2]], None)), "column 'a' is not a one-dimensional array"),
        (_payload(_batch(8), table=[64] * 5), "not enough out-of-band buffers"),
    ],
    ids=[
        "no route",
        "no table",
        "table too long",
        "buffers too long",
        "partial value",
        "object dtype",
        "unknown dtype",
        "unequal lengths",
        "missing dtype",
        "no timestamp column",
        "not an array",
        "missing buffer",
    ],
)
def test_given_a_malformed_batch_payload_then_decoding_raises_an_error_naming_the_problem(
    payload: bytes, problem: str
) -> None:
    with pytest.raises(serialization.SerializationError, match=f"corrupt data packet.*{problem}"):
        remote.decode_message(MessageType.DATA, payload)


def test_a_batch_pickles_with_every_protocol_to_the_same_rows() -> None:
    batch = _batch(50)
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        restored = pickle.loads(pickle.dumps(batch, protocol=protocol))
        assert restored.rows() == batch.rows() and restored.timestamp == batch.timestamp


def test_given_a_malformed_batch_frame_from_a_trusted_peer_then_the_member_logs_it_and_keeps_the_link(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # given a member whose data frames go to the real packet decoder, and a trusted peer
    received: list[remote.Packet | remote.Ack] = []
    arrived = threading.Condition()

    def on_message(peer: str, msg_type: MessageType, payload: bytes) -> None:
        message = remote.decode_message(msg_type, payload)
        with arrived:
            received.append(message)
            arrived.notify_all()

    member = Transport("b", SECRET, on_message, lambda peer: None)
    address = member.start("127.0.0.1", 0)
    try:
        with socket.create_connection(address, timeout=DEADLINE_S) as sock:
            sealer = _authenticate(sock, "a", "b")
            wait_until(lambda: member.peers() == ["a"], "the peer is trusted", DEADLINE_S)
            # when it sends a batch, a payload whose column is not a whole number of int64s, a batch
            good = [
                p.encoded or b"" for p in remote.bounded_packets(1, 2, 0, [(0, 0, 0, [_batch(50)])], 1 << 20)
            ]
            bad = _payload(_Forged(["a"], ["<i8"], [_buffer(bytes(12))], None))
            for payload in (good[0], bad, good[0]):
                frame = frames.encode_frame(MessageType.DATA, payload)
                sock.sendall(frame + sealer.seal(frame))
            wait_until(lambda: len(received) == 2, "both good packets", DEADLINE_S, arrived)
            # then both good batches arrived, the bad frame was logged naming its problem, the link is up
            assert all(isinstance(packet, remote.Packet) for packet in received)
            assert [p.chunks[0][3][0].rows() for p in received if isinstance(p, remote.Packet)] == [
                _batch(50).rows()
            ] * 2
            assert "not a whole number of <i8" in caplog.text
            assert member.peers() == ["a"]
    finally:
        member.close()


def _authenticate(sock: socket.socket, name: str, peer: str) -> frames.FrameSealer:
    """A real handshake over a raw socket, as member ``name``; the sealer of its frames."""
    shake = handshake.Handshake(handshake.Role.INITIATOR, name, SECRET.encode(), expected_peer=peer)
    decoder = frames.FrameDecoder()
    outgoing = shake.start()
    while not shake.is_done:
        sock.sendall(b"".join(frames.encode_frame(t, p) for t, p in outgoing))
        outgoing = []
        for frame in decoder.feed(sock.recv(65536)):
            outgoing += shake.receive(frame.msg_type, frame.payload)
    return frames.FrameSealer(shake.frame_keys()[0])
