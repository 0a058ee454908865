"""One authenticated TCP connection per pair of members, on an asyncio loop of its own thread.

A :class:`Transport` is a member's whole network presence. :meth:`Transport.start`
starts a thread named ``jetlet-network-<member>`` running an asyncio loop and
binds the listening socket; :meth:`Transport.connect` dials a peer. Each
connection is an :class:`asyncio.Protocol` (:class:`_Connection`) that feeds
the bytes it reads to a :class:`~jetlet._network.frames.FrameDecoder` and the
frames to a :class:`~jetlet._network.handshake.Handshake` until the peer has
proved it holds the cluster secret. Until then the decoder accepts only
handshake-sized frames and nothing is deserialized with anything but plain
msgpack; a peer that fails (wrong secret, malformed or out-of-order messages, a
replayed nonce, no answer within ``handshake_timeout_s``) gets ``AUTH_REFUSED``,
is logged and counted (:attr:`Transport.refused_handshakes`), and is
disconnected. Once trusted, every frame goes to ``on_message(peer, type,
payload)`` on the loop thread; the payload stays bytes (the caller decodes it,
with pickles allowed since the peer is trusted).

Every frame after the handshake is authenticated. With ``server_ssl`` and
``client_ssl`` (the member's TLS settings) every connection is TLS, and the
data port speaks nothing else: a plain-TCP peer fails the TLS handshake before
a single frame is read. Without TLS each direction of each connection seals
its frames with a key derived from that connection's handshake and a
sequence number (:class:`~jetlet._network.frames.FrameSealer`; the keys come
from :meth:`~jetlet._network.handshake.Handshake.frame_keys`), and the
decoder checks every tag before it hands the frame on. The switch happens
exactly after the last handshake frame of each direction: the decoder is read
one frame at a time so that frames behind ``AUTH``/``AUTH_OK`` in the same read
are already checked. A frame that fails its tag (a relay appending, replaying
or changing frames) closes the connection before anything is deserialized;
it is counted (:attr:`Transport.rejected_frames`) and logged (one line,
then at most one per :data:`LOG_INTERVAL_S` for the same kind of event with
the count of the ones not logged). Refused handshakes are logged the same way.

Sending. :meth:`Transport.send` may be called from any thread and never
blocks: it encodes the frame in the caller's thread and, for a ``DATA`` frame
(a packet of a distributed edge) when nothing is queued for the peer, writes
it to the socket itself (a *direct write*: plain TCP with sealed frames only,
not TLS, whose channel the loop owns). Control frames (membership, heartbeats,
job control, flow-control acks) always go through the loop, as every frame
did before: when two members dial each other at once and both connections
get trusted, what is written on the one let go is lost, and the loop's
ordering keeps that window to what it flushed before the swap; a direct
writer would widen it. (With every frame written directly, the Kubernetes
suite's three-member start left one member not ready in two of three full
runs; that window is the likeliest cause, not a proven one.) Waking
the loop thread for every frame cost each member a GIL hand-off per packet
(the loop thread takes the GIL for its callback, and again after each socket
call it makes): on two members on two cores those hand-offs slowed the
processing thread's own work. What the socket does not take at once, and
every frame sent while something is queued, goes to the peer's queue and,
unless a flush is already scheduled, a flush is scheduled on the loop (one
``call_soon_threadsafe`` per burst, not per frame). The flush writes
everything queued with one ``write``; while the socket's buffer is above its
high-water mark the flush waits for ``resume_writing``. A per-peer lock
orders sealing and writing on both paths, so frames to one peer arrive in
the order they were sent (one connection, sealed in that order); a direct
write happens only while neither the queue nor the asyncio transport holds
anything, and a connection's socket is never written directly once its
``connection_lost`` ran (the socket is closed only after that).

One connection per pair. Every edge of every job shares the connection. When
two members dial each other at once, the connection dialed by the member with
the smaller name is kept: an acceptor whose name is smaller and which is
itself dialing (or connected by its own dial to) the HELLO's sender refuses
the new connection as a duplicate before any data flows, and the dialer then
waits for the other connection to finish. A member about to dial a peer whose
own dial it has accepted (its HELLO read, the handshake not done) waits for
that connection instead, and dials only if it fails: otherwise both would be
authenticated, each member would write on the one it trusted first, and the
frames written on the one closed next would be lost (a control call then
waits for its timeout). Should both connections still get authenticated,
both members keep the one dialed by the smaller name and close the other; a
new connection dialed in the same direction replaces the old one (the peer
re-dialed after losing it) and counts as a loss of the old one (below).

Losing a peer. When the active connection to a peer closes (EOF, error, a
protocol violation after trust), its queue is discarded and
``on_peer_lost(peer)`` is called on the loop thread. A peer that re-dials while
its old connection is still open here lost its end of it, so frames written on
it may be gone: ``on_peer_lost(peer)`` is called too (once the new connection
is in place, so the peer is reachable again at once), and calls waiting on the
old connection fail instead of waiting out their timeout; the replaced
connection's own closing is not reported again. :meth:`Transport.close` closes the server and every
connection, stops the loop and joins the thread; it does not call
``on_peer_lost``.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import dataclasses
import logging
import os
import ssl
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from jetlet._network import frames, handshake
from jetlet._network.frames import MessageType
from jetlet._network.handshake import Role

_log = logging.getLogger(__name__)

_T = TypeVar("_T")

OnMessage = Callable[[str, MessageType, bytes], None]
"""``on_message(peer_name, msg_type, payload)``, called on the loop thread."""
OnPeerLost = Callable[[str], None]
"""``on_peer_lost(peer_name)``, called on the loop thread."""

DEFAULT_HANDSHAKE_TIMEOUT_S = 10.0
"""A peer must complete the handshake within this many seconds."""

LOG_INTERVAL_S = 10.0
"""At most one log line per this many seconds per kind of refused peer (bad handshakes, bad frames)."""

_CLOSE_TIMEOUT_S = 5.0
_DUPLICATE = "duplicate connection"
_HANDSHAKE_TYPES = frozenset(
    {
        MessageType.HELLO,
        MessageType.CHALLENGE,
        MessageType.AUTH,
        MessageType.AUTH_OK,
        MessageType.AUTH_REFUSED,
    }
)


class _LogLimiter:
    """One log line per kind of event, then at most one every ``interval_s`` with the count left out."""

    def __init__(
        self, interval_s: float = LOG_INTERVAL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._interval_s = interval_s
        self._clock = clock
        self._next: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def admit(self, kind: str) -> int | None:
        """None when this event is not to be logged; else how many of its kind were not logged before it."""
        now = self._clock()
        if now < self._next.get(kind, 0.0):
            self._suppressed[kind] = self._suppressed.get(kind, 0) + 1
            return None
        self._next[kind] = now + self._interval_s
        return self._suppressed.pop(kind, 0)


def _suppressed_note(count: int) -> str:
    return f" ({count} more like it since the last such line)" if count else ""


class PeerUnavailableError(ConnectionError):
    """There is no authenticated connection to that member."""


class _DuplicateConnection(Exception):
    """The peer refused our dial because a connection between us already exists or is being made."""


@dataclasses.dataclass
class PeerCounters:
    """Traffic with one peer since this transport started (frames after the handshake)."""

    bytes_in: int = 0
    bytes_out: int = 0
    frames_in: int = 0
    frames_out: int = 0
    frames_out_direct: int = 0
    """Frames the sending thread wrote to the socket itself (part of ``frames_out``)."""


class _Peer:
    """A trusted peer: its active connection and its queue of encoded frames."""

    def __init__(self, name: str, counters: PeerCounters) -> None:
        self.name = name
        self.counters = counters
        self.connection: _Connection | None = None
        self.outbox: collections.deque[bytes] = collections.deque()
        self.flush_scheduled = False
        self.lock = threading.Lock()
        """Held while frames are sealed and written, by the loop's flush and by direct writes."""
        self.unsent = b""
        """Sealed bytes a direct write left (the socket took part of them); the next flush writes them
        before anything queued, on the connection they belong to only."""
        self.unsent_on: _Connection | None = None


class _Connection(asyncio.Protocol):
    """One TCP connection: handshake first, then frames to the owning transport."""

    def __init__(self, owner: Transport, role: Role, expected_peer: str | None = None) -> None:
        self.owner = owner
        self.role = role
        self.handshake = handshake.Handshake(
            role,
            owner.member_name,
            owner._secret,
            expected_peer=expected_peer,
            nonces=owner._nonces if role is Role.ACCEPTOR else None,
        )
        self.decoder = frames.FrameDecoder(handshake.MAX_HANDSHAKE_PAYLOAD)
        self.sealer: frames.FrameSealer | None = None
        """Tags outgoing frames once trusted; stays None under TLS (the channel authenticates)."""
        self.tls = False
        self.transport: asyncio.Transport | None = None
        self.peer: _Peer | None = None
        self.remote = "?"
        self.paused = False
        self.direct_fd: int | None = None
        """The socket's descriptor once frames may be written to it directly (trusted, plain TCP);
        None again from ``connection_lost`` on, under the peer's lock."""
        loop = owner._require_loop()
        self.authenticated: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()
        self._timer: asyncio.TimerHandle | None = None

    @property
    def is_closing(self) -> bool:
        return self.transport is None or self.transport.is_closing()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peername = transport.get_extra_info("peername")
        self.remote = f"{peername[0]}:{peername[1]}" if peername else "?"
        self.tls = transport.get_extra_info("ssl_object") is not None
        self.owner._connections.add(self)
        loop = self.owner._require_loop()
        self._timer = loop.call_later(self.owner.handshake_timeout_s, self._on_handshake_timeout)
        self._write_all(self.handshake.start())

    def data_received(self, data: bytes) -> None:
        decoder = self.decoder
        try:
            decoder.receive(data)
            # One frame at a time: the handshake's last frame switches the decoder to checking tags.
            while not self.is_closing:
                frame = decoder.next_frame()
                if frame is None:
                    return
                if self.handshake.is_done:
                    self.owner._deliver(self, frame)
                else:
                    self._handshake_step(frame)
        except frames.ProtocolError as exc:
            self._on_protocol_error(exc)

    def eof_received(self) -> bool | None:
        if self.decoder.at_eof():
            self._on_protocol_error(
                frames.ProtocolError(
                    f"the peer closed the connection mid-frame ({self.decoder.buffered} bytes)"
                )
            )
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None:
            with self.peer.lock:  # no direct write is under way, and none starts: the socket closes next
                self.direct_fd = None
        if self._timer is not None:
            self._timer.cancel()
        if not self.authenticated.done():
            self.authenticated.set_exception(
                ConnectionError(f"connection to {self.remote} closed during handshake")
            )
            self.authenticated.exception()
        self.owner._on_connection_lost(self)
        if not self.closed.done():
            self.closed.set_result(None)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.peer is not None and self.peer.connection is self:
            self.owner._flush(self.peer)

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def describe(self) -> str:
        who = self.handshake.peer_name
        return f"{self.remote} (claims to be member {who!r})" if who else self.remote

    def _write_all(self, messages: handshake.Outgoing) -> None:
        for msg_type, payload in messages:
            self.write(frames.encode_frame(msg_type, payload))

    def _handshake_step(self, frame: frames.Frame) -> None:
        try:
            if frame.msg_type is MessageType.AUTH_REFUSED and frame.payload == _DUPLICATE.encode():
                raise self.handshake.refused(_DUPLICATE)
            replies = self.handshake.receive(frame.msg_type, frame.payload)
            if frame.msg_type is MessageType.HELLO and self.owner._is_duplicate(self.handshake.peer_name):
                raise self.handshake.refused(_DUPLICATE)
        except handshake.HandshakeError as exc:
            self._refuse(exc, by_peer=frame.msg_type is MessageType.AUTH_REFUSED)
            return
        if not self.handshake.is_done:
            self._write_all(replies)
            return
        # Trusted. The keys and the peer's registration come before our last handshake message goes
        # out (the peer may use the connection the moment it reads it); frames queued for the peer
        # follow that message.
        if self._timer is not None:
            self._timer.cancel()
        if not self.tls:
            send_key, receive_key = self.handshake.frame_keys()
            self.sealer = frames.FrameSealer(send_key)
            self.decoder.authenticate(receive_key)
        self.decoder.max_frame_size = self.owner.max_frame_size
        self.owner._on_authenticated(self)
        self._write_all(replies)
        if self.peer is not None:
            self.owner._flush(self.peer)
            if not self.tls and self.transport is not None and self.peer.connection is self:
                with self.peer.lock:  # after our last handshake frame: data may now go straight out
                    self.direct_fd = self.transport.get_extra_info("socket").fileno()
        self.authenticated.set_result(None)

    def _refuse(self, exc: handshake.HandshakeError, by_peer: bool = False) -> None:
        """End a failed handshake: tell the peer why (unless it refused us) and close."""
        reason = str(exc)
        failure: Exception = exc
        if reason == _DUPLICATE:
            _log.debug(
                "member %s: duplicate connection with %s closed", self.owner.member_name, self.describe()
            )
            failure = _DuplicateConnection(reason)
        elif by_peer:
            suppressed = self.owner._log_limiter.admit("refused by the peer")
            if suppressed is not None:
                _log.warning(
                    "member %s: %s refused the connection: %s%s",
                    self.owner.member_name,
                    self.describe(),
                    reason,
                    _suppressed_note(suppressed),
                )
        else:
            self.owner._count_refusal(self, reason)
        if not by_peer:
            self.write(frames.encode_frame(MessageType.AUTH_REFUSED, reason.encode()[:200]))
        if not self.authenticated.done():
            self.authenticated.set_exception(failure)
            self.authenticated.exception()
        self.close()

    def _on_handshake_timeout(self) -> None:
        if not self.handshake.is_done:
            timeout = self.owner.handshake_timeout_s
            exc = self.handshake.refused(f"no complete handshake within {timeout} s")
            self._refuse(exc)

    def _on_protocol_error(self, exc: frames.ProtocolError) -> None:
        if self.is_closing:
            return
        if self.handshake.is_done:
            self.owner._count_protocol_error(self, exc)
            self.close()
        else:
            self._refuse(self.handshake.refused(f"protocol error during the handshake: {exc}"))


class Transport:
    """The network endpoint of one member (see the module docstring).

    ``secret``: the cluster secret (bytes, or text encoded as UTF-8). ``max_frame_size``:
    largest payload accepted from a trusted peer. ``server_ssl``/``client_ssl``: TLS
    contexts for accepted and dialed connections (plain TCP when None).
    """

    def __init__(
        self,
        member_name: str,
        secret: bytes | str,
        on_message: OnMessage,
        on_peer_lost: OnPeerLost,
        *,
        max_frame_size: int = frames.DEFAULT_MAX_FRAME_SIZE,
        handshake_timeout_s: float = DEFAULT_HANDSHAKE_TIMEOUT_S,
        server_ssl: ssl.SSLContext | None = None,
        client_ssl: ssl.SSLContext | None = None,
    ) -> None:
        secret_bytes = secret.encode() if isinstance(secret, str) else bytes(secret)
        if not secret_bytes:
            raise ValueError("the cluster secret must not be empty")
        if not member_name:
            raise ValueError("the member name must not be empty")
        self.member_name = member_name
        self.max_frame_size = max_frame_size
        self.handshake_timeout_s = handshake_timeout_s
        self._secret = secret_bytes
        self._on_message = on_message
        self._on_peer_lost = on_peer_lost
        self._server_ssl = server_ssl
        self._client_ssl = client_ssl
        self._nonces = handshake.NonceRegistry()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._address: tuple[str, int] | None = None
        self._closing = False
        self._peers: dict[str, _Peer] = {}
        self._counters: dict[str, PeerCounters] = {}
        self._connections: set[_Connection] = set()
        self._dialing: dict[str, asyncio.Task[None]] = {}
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}
        self._refused_handshakes = 0
        self._rejected_frames = 0
        self._log_limiter = _LogLimiter()

    # ------------------------------------------------------------------ public API, any thread

    @property
    def address(self) -> tuple[str, int] | None:
        """The bound ``(host, port)`` once started."""
        return self._address

    @property
    def refused_handshakes(self) -> int:
        """Connections refused because the peer failed the handshake (wrong secret, bad messages, timeout)."""
        return self._refused_handshakes

    @property
    def rejected_frames(self) -> int:
        """Trusted connections closed because a frame failed its authentication tag."""
        return self._rejected_frames

    @property
    def open_connections(self) -> int:
        """TCP connections currently open, trusted or still in the handshake."""
        return len(self._connections)

    def start(self, host: str = "127.0.0.1", port: int = 0) -> tuple[str, int]:
        """Start the loop thread and listen on ``host:port`` (0: any free port); return the bound address."""
        if self._loop is not None:
            raise RuntimeError(f"transport of member {self.member_name!r} was already started")
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(
            target=self._run_loop, name=f"jetlet-network-{self.member_name}", daemon=True
        )
        self._thread.start()
        try:
            self._address = self._call(self._serve(host, port), timeout_s=None)
        except BaseException:
            self.close()
            raise
        _log.info("member %s listening on %s:%d", self.member_name, *self._address)
        return self._address

    def connect(self, peer_name: str, host: str, port: int, timeout_s: float = 10.0) -> None:
        """Dial ``peer_name`` at ``host:port`` and wait until it is authenticated (no-op if it already is).

        Raises :class:`OSError` when it cannot be reached, :class:`~jetlet._network.handshake.HandshakeError`
        when the handshake fails, :class:`TimeoutError` after ``timeout_s``.
        """
        self._call(self._connect(peer_name, host, port, timeout_s), timeout_s=None)

    def connect_soon(
        self, peer_name: str, host: str, port: int, timeout_s: float = 10.0
    ) -> concurrent.futures.Future[None]:
        """Like :meth:`connect`, without waiting: the future completes when the peer is authenticated."""
        return asyncio.run_coroutine_threadsafe(
            self._connect(peer_name, host, port, timeout_s), self._require_loop()
        )

    def send(self, peer_name: str, msg_type: MessageType, payload: bytes) -> None:
        """Queue one frame for ``peer_name``; never blocks. Raises :class:`PeerUnavailableError`."""
        peer = self._peers.get(peer_name)
        if peer is None:
            raise PeerUnavailableError(
                f"member {self.member_name!r} has no connection to member {peer_name!r}"
            )
        frame = frames.encode_frame(msg_type, payload)
        with peer.lock:
            connection = peer.connection
            if (
                msg_type is MessageType.DATA
                and not peer.flush_scheduled
                and not peer.outbox
                and not peer.unsent
                and connection is not None
                and connection.direct_fd is not None
                and connection.sealer is not None
                and not connection.paused
                and connection.transport is not None
                and connection.transport.get_write_buffer_size() == 0
            ):
                self._write_direct(peer, connection.direct_fd, connection.sealer, frame)
                return
            peer.outbox.append(frame)
            if not peer.flush_scheduled:
                peer.flush_scheduled = True
                self._require_loop().call_soon_threadsafe(self._flush, peer)

    def _write_direct(self, peer: _Peer, fd: int, sealer: frames.FrameSealer, frame: bytes) -> None:
        """Write ``frame`` sealed to the peer's socket from this thread (under ``peer.lock``); what the
        socket does not take now goes to ``peer.unsent`` and a flush writes it (see the module doc)."""
        data = frame + sealer.seal(frame)
        try:
            written = os.write(fd, data)
        except OSError:  # the socket's buffer is full (BlockingIOError), or the connection failed:
            written = 0  # the loop writes it, or finds the connection lost and reports that
        peer.counters.frames_out += 1
        peer.counters.frames_out_direct += 1
        peer.counters.bytes_out += len(data)
        if written < len(data):
            peer.unsent, peer.unsent_on = data[written:], peer.connection
            peer.flush_scheduled = True
            self._require_loop().call_soon_threadsafe(self._flush, peer)

    def peers(self) -> list[str]:
        """Names of the authenticated peers, sorted."""
        return sorted(self._peers)

    def is_connected(self, peer_name: str) -> bool:
        """True while there is an authenticated connection to ``peer_name``."""
        return peer_name in self._peers

    def connection_endpoints(self, peer_name: str) -> tuple[tuple[str, int], tuple[str, int]] | None:
        """``(local, remote)`` socket addresses of the connection to ``peer_name``, or None."""
        peer = self._peers.get(peer_name)
        connection = peer.connection if peer is not None else None
        if connection is None or connection.transport is None:
            return None
        local = connection.transport.get_extra_info("sockname")
        remote = connection.transport.get_extra_info("peername")
        return (local[0], local[1]), (remote[0], remote[1])

    def counters(self) -> dict[str, PeerCounters]:
        """A copy of the traffic counters of every peer ever trusted."""
        return {name: dataclasses.replace(counters) for name, counters in self._counters.items()}

    def close(self) -> None:
        """Close the server and every connection, stop the loop and join its thread. Idempotent."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or self._closing:
            return
        if threading.current_thread() is thread:
            raise RuntimeError("Transport.close() cannot be called on its own loop thread")
        self._closing = True
        try:
            if thread.is_alive():
                asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(_CLOSE_TIMEOUT_S * 2)
        finally:
            if thread.is_alive():
                loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()
            _log.info("member %s: network transport closed", self.member_name)

    # ------------------------------------------------------------------ loop thread

    def _require_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError(f"transport of member {self.member_name!r} is not started")
        return self._loop

    def _call(self, coroutine: Coroutine[Any, Any, _T], timeout_s: float | None) -> _T:
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError("a blocking Transport call cannot be made on its own loop thread")
        return asyncio.run_coroutine_threadsafe(coroutine, self._require_loop()).result(timeout_s)

    def _run_loop(self) -> None:
        loop = self._require_loop()
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())

    async def _serve(self, host: str, port: int) -> tuple[str, int]:
        loop = self._require_loop()
        self._server = await loop.create_server(
            lambda: _Connection(self, Role.ACCEPTOR), host, port, ssl=self._server_ssl
        )
        bound = self._server.sockets[0].getsockname()
        return bound[0], bound[1]

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._dialing.values()):
            task.cancel()
        for connection in list(self._connections):
            connection.close()
        pending = [c.closed for c in self._connections]
        if pending:
            _done, late = await asyncio.wait(pending, timeout=_CLOSE_TIMEOUT_S)
            for connection in list(self._connections):
                if connection.transport is not None:
                    connection.transport.abort()
            if late:
                await asyncio.wait(late, timeout=_CLOSE_TIMEOUT_S)
        if self._server is not None:
            await self._server.wait_closed()
        if self._dialing:
            await asyncio.wait(list(self._dialing.values()), timeout=_CLOSE_TIMEOUT_S)
        self._require_loop().stop()

    async def _connect(self, peer_name: str, host: str, port: int, timeout_s: float) -> None:
        if peer_name == self.member_name:
            raise ValueError(f"member {peer_name!r} cannot connect to itself")
        if self._closing:
            raise PeerUnavailableError(f"transport of member {self.member_name!r} is closed")
        if peer_name in self._peers:
            return
        waiter: asyncio.Future[None] = self._require_loop().create_future()
        self._waiters.setdefault(peer_name, []).append(waiter)
        try:
            async with asyncio.timeout(timeout_s):
                dial = self._dialing.get(peer_name)
                if dial is None:
                    dial = asyncio.ensure_future(self._dial(peer_name, host, port))
                    self._dialing[peer_name] = dial
                    dial.add_done_callback(lambda task: self._forget_dial(peer_name, task))
                await asyncio.shield(dial)
                if peer_name not in self._peers:
                    await waiter
        finally:
            waiters = self._waiters.get(peer_name, [])
            if waiter in waiters:
                waiters.remove(waiter)
            waiter.cancel()

    def _forget_dial(self, peer_name: str, task: asyncio.Task[None]) -> None:
        if self._dialing.get(peer_name) is task:
            del self._dialing[peer_name]
        if not task.cancelled():
            task.exception()

    async def _dial(self, peer_name: str, host: str, port: int) -> None:
        # The peer's own dial may have been trusted, or be in its handshake, since _connect looked:
        # a second connection would lose the frames written on the one closed (module doc).
        inbound = self._accepting_from(peer_name)
        if inbound is not None:
            await asyncio.wait([inbound.authenticated])  # bounded by its handshake timeout
        if peer_name in self._peers:
            return
        loop = self._require_loop()
        async with asyncio.timeout(self.handshake_timeout_s):
            _transport, connection = await loop.create_connection(
                lambda: _Connection(self, Role.INITIATOR, expected_peer=peer_name),
                host,
                port,
                ssl=self._client_ssl,
                server_hostname=host if self._client_ssl is not None else None,
            )
            try:
                await connection.authenticated
            except _DuplicateConnection:
                return
            except BaseException:
                connection.close()
                raise

    def _accepting_from(self, peer_name: str) -> _Connection | None:
        """A connection ``peer_name`` dialed to us that is still in its handshake (its HELLO read)."""
        for connection in self._connections:
            if (
                connection.role is Role.ACCEPTOR
                and connection.handshake.peer_name == peer_name
                and not connection.authenticated.done()
                and not connection.is_closing
            ):
                return connection
        return None

    def _is_duplicate(self, peer_name: str | None) -> bool:
        """Whether an acceptor should refuse a HELLO from ``peer_name`` (see "One connection per pair")."""
        if peer_name is None or self.member_name > peer_name:
            return False
        peer = self._peers.get(peer_name)
        own_dial = peer is not None and peer.connection is not None and peer.connection.role is Role.INITIATOR
        return own_dial or peer_name in self._dialing

    def _preferred(self, old: _Connection, new: _Connection) -> _Connection:
        """Of two trusted connections to one peer, the one both ends keep."""
        if old.role is new.role or old.is_closing:
            return new
        peer_name = new.handshake.peer_name or ""
        dialed_by_smaller = Role.INITIATOR if self.member_name < peer_name else Role.ACCEPTOR
        return new if new.role is dialed_by_smaller else old

    def _on_authenticated(self, connection: _Connection) -> None:
        """Register a connection that has just been trusted (the caller then flushes the peer's queue)."""
        name = connection.handshake.peer_name
        assert name is not None
        if self._closing:
            connection.close()
            return
        peer = self._peers.get(name)
        if peer is None:
            peer = _Peer(name, self._counters.setdefault(name, PeerCounters()))
            self._peers[name] = peer
        old = peer.connection
        keep = connection if old is None else self._preferred(old, connection)
        with peer.lock:  # from here no direct write goes to the connection being let go
            for candidate in (old, connection):
                if candidate is not None and candidate is not keep:
                    candidate.direct_fd = None
            peer.connection = keep
        for candidate in (old, connection):
            if candidate is not None and candidate is not keep:
                candidate.close()
        connection.peer = peer
        _log.info("member %s: connected to member %s at %s", self.member_name, name, keep.remote)
        for waiter in self._waiters.pop(name, []):
            if not waiter.done():
                waiter.set_result(None)
        if old is not None and keep is connection and old.role is connection.role:
            # the peer re-dialed: it lost its end of ``old``, and what was written on it may be gone
            self._report_lost(name, "its new connection replaced one it had lost")

    def _count_refusal(self, connection: _Connection, reason: str) -> None:
        self._refused_handshakes += 1
        suppressed = self._log_limiter.admit("refused handshake")
        if suppressed is not None:
            _log.warning(
                "member %s refused the connection with %s: %s%s",
                self.member_name,
                connection.describe(),
                reason,
                _suppressed_note(suppressed),
            )

    def _count_protocol_error(self, connection: _Connection, exc: frames.ProtocolError) -> None:
        rejected = isinstance(exc, frames.AuthenticationError)
        if rejected:
            self._rejected_frames += 1
        suppressed = self._log_limiter.admit("rejected frame" if rejected else "protocol error")
        if suppressed is not None:
            _log.error(
                "member %s: closing the connection to %s: %s%s",
                self.member_name,
                connection.describe(),
                exc,
                _suppressed_note(suppressed),
            )

    def _deliver(self, connection: _Connection, frame: frames.Frame) -> None:
        peer = connection.peer
        if peer is None:
            return
        if frame.msg_type in _HANDSHAKE_TYPES:
            connection._on_protocol_error(
                frames.ProtocolError(f"unexpected {frame.msg_type.name} after the handshake")
            )
            return
        peer.counters.frames_in += 1
        peer.counters.bytes_in += frames.HEADER_SIZE + len(frame.payload) + connection.decoder.tag_size
        try:
            self._on_message(peer.name, frame.msg_type, frame.payload)
        except Exception:
            _log.exception(
                "member %s: on_message failed for a %s frame from %s",
                self.member_name,
                frame.msg_type.name,
                peer.name,
            )

    def _flush(self, peer: _Peer) -> None:
        with peer.lock:
            peer.flush_scheduled = False
            connection = peer.connection
            if connection is None or connection.paused or connection.is_closing:
                return
            if peer.unsent_on is not connection:  # the rest of a frame on a connection let go since
                peer.unsent, peer.unsent_on = b"", None
            if not peer.outbox and not peer.unsent:
                return
            outbox = peer.outbox
            batch = [outbox.popleft() for _ in range(len(outbox))]
            sealer = connection.sealer
            if sealer is None:
                data = b"".join(batch)
            else:
                seal = sealer.seal
                data = b"".join([part for frame in batch for part in (frame, seal(frame))])
            connection.write(peer.unsent + data if peer.unsent else data)
            peer.unsent, peer.unsent_on = b"", None
            peer.counters.frames_out += len(batch)
            peer.counters.bytes_out += len(data)

    def _on_connection_lost(self, connection: _Connection) -> None:
        self._connections.discard(connection)
        peer = connection.peer
        if peer is None or peer.connection is not connection:
            return
        peer.connection = None
        with peer.lock:
            peer.outbox.clear()
            peer.unsent, peer.unsent_on = b"", None
        del self._peers[peer.name]
        if self._closing:
            return
        self._report_lost(peer.name, "the connection closed")

    def _report_lost(self, peer_name: str, why: str) -> None:
        _log.warning("member %s: lost the connection to member %s: %s", self.member_name, peer_name, why)
        try:
            self._on_peer_lost(peer_name)
        except Exception:
            _log.exception("member %s: on_peer_lost failed for %s", self.member_name, peer_name)
