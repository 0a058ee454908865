"""Framing: the byte stream of one member-to-member connection cut into typed frames.

Every frame is a 6-byte header and a payload::

    +----------------------+---------+------+-------------------+
    | length (4 bytes, BE) | version | type | payload (length)  |
    +----------------------+---------+------+-------------------+

``length`` counts the payload only. ``version`` is :data:`PROTOCOL_VERSION`;
``type`` is a :class:`MessageType`. The payload is opaque here: handshake
frames carry small msgpack maps, data frames carry what
:mod:`~jetlet._network.serialization` wrote, and nothing in this module ever
decodes it.

:class:`FrameDecoder` is sans-IO: the transport feeds it whatever bytes the
socket produced (a frame may arrive split at any byte, or many frames at once)
and gets back the complete frames. It checks each header as soon as its six
bytes are there, so a wrong version, an unknown type or a length above
``max_frame_size`` raises :class:`ProtocolError` before any of that frame's
payload is buffered; after an error the decoder refuses further input. When the
peer closes, :meth:`FrameDecoder.at_eof` tells whether it stopped in the middle
of a frame.
"""

from __future__ import annotations

import enum
import struct
from typing import NamedTuple

PROTOCOL_VERSION = 1
"""Version byte of every frame; a peer speaking another version is refused."""

DEFAULT_MAX_FRAME_SIZE = 64 * 1024 * 1024
"""Largest payload accepted from an authenticated peer, in bytes."""

_HEADER = struct.Struct(">IBB")
HEADER_SIZE = _HEADER.size


class ProtocolError(Exception):
    """The peer broke the wire protocol; the connection cannot continue."""


class MessageType(enum.IntEnum):
    """What a frame carries."""

    HELLO = 1
    """Handshake, dialer to acceptor: who I am and my nonce."""
    CHALLENGE = 2
    """Handshake, acceptor to dialer: who I am and my nonce."""
    AUTH = 3
    """Handshake, dialer to acceptor: my proof that I hold the secret."""
    AUTH_OK = 4
    """Handshake, acceptor to dialer: accepted, and my proof that I hold the secret."""
    AUTH_REFUSED = 5
    """Handshake refused; the payload is a short UTF-8 reason. The connection closes."""
    DATA = 6
    """Items of a distributed edge (a packet)."""
    FLOW_ACK = 7
    """Flow control: how far senders may go."""
    CONTROL = 8
    """Job and cluster control messages."""
    HEARTBEAT = 9
    """Membership liveness."""


_KNOWN_TYPES = frozenset(int(t) for t in MessageType)


class Frame(NamedTuple):
    """One decoded frame."""

    msg_type: MessageType
    payload: bytes


def encode_frame(msg_type: MessageType, payload: bytes = b"") -> bytes:
    """The bytes of one frame.

    >>> encode_frame(MessageType.HEARTBEAT, b"hi")
    b'\\x00\\x00\\x00\\x02\\x01\\thi'
    """
    return _HEADER.pack(len(payload), PROTOCOL_VERSION, msg_type) + payload


class FrameDecoder:
    """Incremental decoder of a frame stream (see the module docstring)."""

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        """Largest payload accepted; may be raised once the peer is trusted."""
        self._buffer = bytearray()
        self._failed: ProtocolError | None = None
        self._closed = False

    @property
    def buffered(self) -> int:
        """Bytes received that do not form a complete frame yet."""
        return len(self._buffer)

    def feed(self, data: bytes | bytearray | memoryview) -> list[Frame]:
        """Take the next bytes of the stream; return the frames they complete, in order.

        Raises :class:`ProtocolError` on a bad header (and for every call after that).
        """
        if self._failed is not None:
            raise ProtocolError(f"the stream is broken: {self._failed}")
        if self._closed:
            raise ProtocolError("data after the end of the stream")
        self._buffer += data
        try:
            return self._take_frames()
        except ProtocolError as exc:
            self._failed = exc
            self._buffer.clear()
            raise

    def at_eof(self) -> bool:
        """Note that the peer closed the stream; True when it closed in the middle of a frame."""
        self._closed = True
        return bool(self._buffer)

    def _take_frames(self) -> list[Frame]:
        frames: list[Frame] = []
        buffer = self._buffer
        offset = 0
        end = len(buffer)
        while end - offset >= HEADER_SIZE:
            length, version, msg_type = _HEADER.unpack_from(buffer, offset)
            self._check_header(length, version, msg_type)
            frame_end = offset + HEADER_SIZE + length
            if frame_end > end:
                break
            frames.append(Frame(MessageType(msg_type), bytes(buffer[offset + HEADER_SIZE : frame_end])))
            offset = frame_end
        del buffer[:offset]
        return frames

    def _check_header(self, length: int, version: int, msg_type: int) -> None:
        if version != PROTOCOL_VERSION:
            raise ProtocolError(f"wrong protocol version {version}: this member speaks {PROTOCOL_VERSION}")
        if msg_type not in _KNOWN_TYPES:
            raise ProtocolError(f"unknown message type {msg_type}")
        if length > self.max_frame_size:
            raise ProtocolError(f"frame of {length} bytes exceeds the limit of {self.max_frame_size} bytes")
