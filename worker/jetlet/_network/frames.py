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

Authenticated frames. After the handshake, on a connection without TLS, every
frame carries a 16-byte tag after its payload (``length`` still counts the
payload only)::

    tag = HMAC-SHA256(key, sequence (8 bytes, BE) | header | payload)[:16]

``key`` is the sending direction's key, derived from the handshake (see
:meth:`jetlet._network.handshake.Handshake.frame_keys`), so it is fresh for
every connection and differs per direction; ``sequence`` counts the frames
sent in that direction since the handshake, from 0, and is never sent: both
ends count. A frame injected, replayed, dropped, reordered, truncated or
altered by anyone without the key fails its tag (a dropped or reordered frame
shifts the sequence of the frames after it). :class:`FrameSealer` computes the
tags of the outgoing frames; :meth:`FrameDecoder.authenticate` makes the
decoder expect and check them, raising :class:`AuthenticationError` before
the payload leaves the decoder, so a frame that fails is never seen by
anything that deserializes. Under TLS the channel already authenticates
every byte and no tags are sent.

The decoder hands out one frame at a time (:meth:`FrameDecoder.next_frame`)
so that its owner can switch it to authenticated frames right after the last
handshake frame, even when the peer's first authenticated frames arrived in
the same read; :meth:`FrameDecoder.feed` is the convenience that takes bytes
and returns every frame they complete.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import struct
from typing import NamedTuple

PROTOCOL_VERSION = 5
"""Version byte of every frame; a peer speaking another version is refused.

5: a ``ROWS`` chunk may hold groups of plain values (tuples, numbers, strings) as they are
(:mod:`jetlet._network.rows`), which a version-4 member would rebuild wrongly. 4: a ``DATA``
payload starts with its route (job, edge, source member) as fixed-size integers, so the network
thread routes it without unpickling and the receiver tasklet decodes the rest. 3: a ``DATA``
payload is a table of out-of-band buffers, one pickle of the whole packet and those buffers
(record batches' columns; see :mod:`jetlet._network.tasklets`). 2: one pickle of the whole packet.
1: msgpack with a pickle per item."""

DEFAULT_MAX_FRAME_SIZE = 64 * 1024 * 1024
"""Largest payload accepted from an authenticated peer, in bytes."""

_HEADER = struct.Struct(">IBB")
HEADER_SIZE = _HEADER.size

TAG_SIZE = 16
"""Bytes of the authentication tag that follows each frame's payload after the handshake (without TLS)."""

_SEQUENCE = struct.Struct(">Q")


class ProtocolError(Exception):
    """The peer broke the wire protocol; the connection cannot continue."""


class AuthenticationError(ProtocolError):
    """A frame failed its authentication tag: injected, replayed, reordered or altered on the way."""


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
    b'\\x00\\x00\\x00\\x02\\x05\\thi'
    """
    return _HEADER.pack(len(payload), PROTOCOL_VERSION, msg_type) + payload


class _FrameMac:
    """HMAC-SHA256 of ``sequence | frame`` cut to :data:`TAG_SIZE`, with the keyed pads hashed once.

    The same function as ``hmac.new(key, sequence | frame, "sha256").digest()[:16]`` (RFC 2104),
    written out with copies of the two pre-keyed ``hashlib`` states: per frame that is six calls
    into C instead of the ``hmac`` module's Python-level copy, half the cost for small frames.
    """

    def __init__(self, key: bytes) -> None:
        if len(key) < 16:
            raise ValueError("a frame key must be at least 16 bytes")
        block = (hashlib.sha256(key).digest() if len(key) > 64 else key).ljust(64, b"\0")
        self._inner = hashlib.sha256(bytes(b ^ 0x36 for b in block))
        self._outer = hashlib.sha256(bytes(b ^ 0x5C for b in block))

    def tag(self, sequence: int, header: bytes | bytearray, payload: bytes) -> bytes:
        inner = self._inner.copy()
        inner.update(_SEQUENCE.pack(sequence))
        inner.update(header)
        inner.update(payload)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()[:TAG_SIZE]


class FrameSealer:
    """Computes the tag of each outgoing frame of one direction of one connection (see the module doc).

    >>> sealer = FrameSealer(bytes(32))
    >>> len(sealer.seal(encode_frame(MessageType.HEARTBEAT, b"hi")))
    16
    """

    def __init__(self, key: bytes) -> None:
        self._mac = _FrameMac(key)
        self.sequence = 0
        """Frames sealed so far (the sequence number of the next one)."""

    def seal(self, frame: bytes) -> bytes:
        """The tag of ``frame`` (its header and payload, as :func:`encode_frame` wrote them)."""
        tag = self._mac.tag(self.sequence, b"", frame)
        self.sequence += 1
        return tag


class FrameDecoder:
    """Incremental decoder of a frame stream (see the module docstring)."""

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        """Largest payload accepted; may be raised once the peer is trusted."""
        self._buffer = bytearray()
        self._offset = 0
        self._failed: ProtocolError | None = None
        self._closed = False
        self._mac: _FrameMac | None = None
        self._sequence = 0

    @property
    def buffered(self) -> int:
        """Bytes received that do not form a complete frame yet."""
        return len(self._buffer) - self._offset

    @property
    def tag_size(self) -> int:
        """Bytes of tag after each payload: :data:`TAG_SIZE` once authenticating, else 0."""
        return TAG_SIZE if self._mac is not None else 0

    @property
    def authenticated_frames(self) -> int:
        """Frames that passed their tag since :meth:`authenticate`."""
        return self._sequence

    def authenticate(self, key: bytes) -> None:
        """From the next frame on, expect a tag after each payload and check it with ``key``."""
        self._mac = _FrameMac(key)
        self._sequence = 0

    def feed(self, data: bytes | bytearray | memoryview) -> list[Frame]:
        """Take the next bytes of the stream; return the frames they complete, in order.

        Raises :class:`ProtocolError` on a bad header or a failed tag (and for every call after that).
        """
        self.receive(data)
        received: list[Frame] = []
        while (frame := self.next_frame()) is not None:
            received.append(frame)
        return received

    def receive(self, data: bytes | bytearray | memoryview) -> None:
        """Buffer the next bytes of the stream; :meth:`next_frame` takes the frames out."""
        if self._failed is not None:
            raise ProtocolError(f"the stream is broken: {self._failed}")
        if self._closed:
            raise ProtocolError("data after the end of the stream")
        if self._offset:
            del self._buffer[: self._offset]
            self._offset = 0
        self._buffer += data

    def next_frame(self) -> Frame | None:
        """The next complete frame, or None until more bytes arrive. Raises :class:`ProtocolError`."""
        if self._failed is not None:
            raise ProtocolError(f"the stream is broken: {self._failed}")
        try:
            return self._take_frame()
        except ProtocolError as exc:
            self._failed = exc
            self._buffer.clear()
            self._offset = 0
            raise

    def at_eof(self) -> bool:
        """Note that the peer closed the stream; True when it closed in the middle of a frame."""
        self._closed = True
        return self.buffered > 0

    def _take_frame(self) -> Frame | None:
        buffer = self._buffer
        offset = self._offset
        if len(buffer) - offset < HEADER_SIZE:
            return None
        length, version, msg_type = _HEADER.unpack_from(buffer, offset)
        self._check_header(length, version, msg_type)
        payload_end = offset + HEADER_SIZE + length
        frame_end = payload_end + self.tag_size
        if frame_end > len(buffer):
            return None
        with memoryview(buffer) as view:  # one copy of the payload (a bytearray slice would make two)
            payload = bytes(view[offset + HEADER_SIZE : payload_end])
        if self._mac is not None:
            tag = self._mac.tag(self._sequence, buffer[offset : offset + HEADER_SIZE], payload)
            if not hmac.compare_digest(tag, buffer[payload_end:frame_end]):
                name = MessageType(msg_type).name
                raise AuthenticationError(
                    f"frame {self._sequence} after the handshake ({name}, {length} bytes) "
                    "failed authentication: injected, replayed, reordered or altered"
                )
            self._sequence += 1
        self._offset = frame_end
        return Frame(MessageType(msg_type), payload)

    def _check_header(self, length: int, version: int, msg_type: int) -> None:
        if version != PROTOCOL_VERSION:
            raise ProtocolError(f"wrong protocol version {version}: this member speaks {PROTOCOL_VERSION}")
        if msg_type not in _KNOWN_TYPES:
            raise ProtocolError(f"unknown message type {msg_type}")
        if length > self.max_frame_size:
            raise ProtocolError(f"frame of {length} bytes exceeds the limit of {self.max_frame_size} bytes")
