"""Framing: encode/decode, a stream split anywhere, and every kind of bad input as a ProtocolError."""

from __future__ import annotations

import struct

import pytest

from jetlet._network.frames import (
    HEADER_SIZE,
    PROTOCOL_VERSION,
    Frame,
    FrameDecoder,
    MessageType,
    ProtocolError,
    encode_frame,
)

FRAMES = [
    Frame(MessageType.HELLO, b"\x81\xa6member\xa1a"),
    Frame(MessageType.DATA, b""),
    Frame(MessageType.DATA, bytes(range(256)) * 4),
    Frame(MessageType.FLOW_ACK, b"\x00"),
    Frame(MessageType.HEARTBEAT, b"beat"),
]
STREAM = b"".join(encode_frame(f.msg_type, f.payload) for f in FRAMES)


def _header(length: int, version: int = PROTOCOL_VERSION, msg_type: int = MessageType.DATA) -> bytes:
    return struct.pack(">IBB", length, version, msg_type)


@pytest.mark.parametrize("msg_type", list(MessageType))
def test_given_each_message_type_when_encoded_then_header_and_payload_decode_back(
    msg_type: MessageType,
) -> None:
    encoded = encode_frame(msg_type, b"payload")
    assert encoded == _header(7, msg_type=msg_type) + b"payload"
    assert FrameDecoder().feed(encoded) == [Frame(msg_type, b"payload")]


def test_given_a_stream_split_at_every_byte_boundary_when_fed_then_the_same_frames_come_out() -> None:
    for split in range(len(STREAM) + 1):
        decoder = FrameDecoder()
        assert decoder.feed(STREAM[:split]) + decoder.feed(STREAM[split:]) == FRAMES, split
        assert decoder.buffered == 0


def test_given_a_stream_fed_byte_by_byte_when_decoded_then_frames_arrive_as_soon_as_complete() -> None:
    decoder = FrameDecoder()
    out: list[Frame] = []
    completions = []
    for index in range(len(STREAM)):
        produced = decoder.feed(STREAM[index : index + 1])
        if produced:
            completions.append(index + 1)
        out += produced
    assert out == FRAMES
    ends, position = [], 0
    for frame in FRAMES:
        position += HEADER_SIZE + len(frame.payload)
        ends.append(position)
    assert completions == ends


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (_header(1, version=PROTOCOL_VERSION + 1) + b"x", f"wrong protocol version {PROTOCOL_VERSION + 1}"),
        (_header(1, version=0), "wrong protocol version 0"),
        (_header(1, msg_type=200) + b"x", "unknown message type 200"),
        (_header(1, msg_type=0) + b"x", "unknown message type 0"),
        (_header(1001), "frame of 1001 bytes exceeds the limit of 1000 bytes"),
        (encode_frame(MessageType.DATA, b"ok") + _header(2**32 - 1), "exceeds the limit"),
    ],
)
def test_given_a_bad_header_when_fed_then_protocol_error_and_the_decoder_stays_broken(
    data: bytes, message: str
) -> None:
    decoder = FrameDecoder(max_frame_size=1000)
    with pytest.raises(ProtocolError, match=message):
        decoder.feed(data)
    with pytest.raises(ProtocolError, match="broken"):
        decoder.feed(encode_frame(MessageType.DATA, b"fine"))


def test_given_an_oversized_header_when_only_the_header_arrived_then_it_is_refused_before_the_payload() -> (
    None
):
    decoder = FrameDecoder(max_frame_size=10)
    assert decoder.feed(_header(11)[:5]) == []
    with pytest.raises(ProtocolError, match="exceeds"):
        decoder.feed(_header(11)[5:])


def test_given_a_frame_of_exactly_the_limit_when_fed_then_accepted() -> None:
    assert FrameDecoder(max_frame_size=10).feed(encode_frame(MessageType.DATA, b"x" * 10)) == [
        Frame(MessageType.DATA, b"x" * 10)
    ]


@pytest.mark.parametrize("cut", [1, HEADER_SIZE - 1, HEADER_SIZE, HEADER_SIZE + 3])
def test_given_a_peer_that_closes_mid_frame_when_eof_then_detected(cut: int) -> None:
    decoder = FrameDecoder()
    frame = encode_frame(MessageType.DATA, b"0123456789")
    assert decoder.feed(frame + frame[:cut]) == [Frame(MessageType.DATA, b"0123456789")]
    assert decoder.at_eof() is True
    with pytest.raises(ProtocolError, match="after the end"):
        decoder.feed(b"more")


def test_given_a_peer_that_closes_between_frames_when_eof_then_clean() -> None:
    decoder = FrameDecoder()
    decoder.feed(STREAM)
    assert decoder.at_eof() is False
