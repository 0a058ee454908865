"""The data port against a man in the middle, over real TCP on 127.0.0.1.

A :class:`Relay` sits between two transports, forwards every byte both ways,
records them, and can append bytes of its own toward the acceptor. Without TLS
a frame it appends after the handshake fails authentication: refused, logged,
counted, never unpickled. With TLS what it sees is TLS records only.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import msgpack
import pytest
import trustme

from jetlet._cluster import tls
from jetlet._network import frames, handshake, serialization
from jetlet._network.frames import MessageType
from jetlet._network.transport import Transport
from jetlet.testing import wait_until

SECRET = "relay-test-cluster-secret"
DEADLINE_S = 30.0
UNPICKLED: list[str] = []
MARKER = b"PLAINTEXT-MARKER-7f3a9c"


def _mark_unpickled() -> str:
    UNPICKLED.append("unpickled")
    return "x"


class Booby:
    def __reduce__(self) -> tuple[Any, ...]:
        return (_mark_unpickled, ())


class Relay:
    """A byte-for-byte TCP relay on 127.0.0.1 to ``target``, on an asyncio loop in its own thread."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.to_target = bytearray()
        """Every byte the dialer sent (as forwarded to the target)."""
        self.to_dialer = bytearray()
        """Every byte the target answered."""
        self._upstream: list[asyncio.StreamWriter] = []
        self._writers: list[asyncio.StreamWriter] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="test-relay", daemon=True)
        self._thread.start()
        self._server = self._run(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.address: tuple[str, int] = self._server.sockets[0].getsockname()[:2]

    def _run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(DEADLINE_S)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self._upstream.append(up_writer)
        self._writers += [writer, up_writer]
        await asyncio.gather(
            self._pump(reader, up_writer, self.to_target), self._pump(up_reader, writer, self.to_dialer)
        )

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, record: bytearray) -> None:
        try:
            while data := await reader.read(65536):
                record += data
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    def inject(self, data: bytes) -> None:
        """Append ``data`` to the stream toward the target, after everything forwarded so far."""

        async def write() -> None:
            self._upstream[0].write(data)
            await self._upstream[0].drain()

        self._run(write())

    def close(self) -> None:
        async def shutdown() -> None:
            self._server.close()
            for writer in self._writers:
                writer.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self._run(shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(DEADLINE_S)
        self._loop.close()


class Member:
    """A transport that decodes what it receives as a member does (pickles allowed from a trusted peer)."""

    def __init__(self, name: str, **options: Any) -> None:
        self.received: list[Any] = []
        self.changed = threading.Condition()
        self.lost: list[str] = []
        self.transport = Transport(name, SECRET, self._on_message, self._on_peer_lost, **options)
        self.address = self.transport.start("127.0.0.1", 0)

    def _on_message(self, peer: str, msg_type: MessageType, payload: bytes) -> None:
        value = serialization.loads(payload)
        with self.changed:
            self.received.append(value)
            self.changed.notify_all()

    def _on_peer_lost(self, peer: str) -> None:
        with self.changed:
            self.lost.append(peer)
            self.changed.notify_all()


@pytest.fixture
def make() -> Iterator[Callable[..., Any]]:
    made: list[Any] = []

    def factory(kind: type, *args: Any, **options: Any) -> Any:
        made.append(kind(*args, **options))
        return made[-1]

    yield factory
    for thing in reversed(made):
        thing.transport.close() if isinstance(thing, Member) else thing.close()


def test_given_a_relay_that_appends_a_control_frame_after_the_handshake_then_refused_logged_and_not_unpickled(
    make: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    UNPICKLED.clear()
    # given a and b connected through a relay, trusted, exchanging frames
    a, b = make(Member, "a"), make(Member, "b")
    relay = make(Relay, b.address)
    a.transport.connect("b", *relay.address)
    a.transport.send("b", MessageType.CONTROL, serialization.dumps({"op": "legit"}))
    wait_until(lambda: b.received == [{"op": "legit"}], "b got the legit frame", DEADLINE_S, b.changed)
    # when the relay appends a CONTROL frame carrying a pickle, and a goes on sending
    forged = frames.encode_frame(MessageType.CONTROL, serialization.dumps(Booby()))
    with caplog.at_level(logging.WARNING, logger="jetlet._network.transport"):
        relay.inject(forged)
        a.transport.send("b", MessageType.CONTROL, serialization.dumps({"op": "after"}))
        # then b closes the connection, nothing is unpickled, and the refusal is counted and logged once
        wait_until(
            lambda: b.lost == ["a"] or UNPICKLED, "b dropped the tampered connection", DEADLINE_S, b.changed
        )
    assert UNPICKLED == [] and b.received == [{"op": "legit"}]
    assert b.transport.rejected_frames == 1
    lines = [r.getMessage() for r in caplog.records if "failed authentication" in r.getMessage()]
    assert len(lines) == 1 and "claims to be member 'a'" in lines[0]


def test_given_a_relay_that_replays_a_recorded_frame_then_refused_and_not_delivered_twice(
    make: Callable[..., Any],
) -> None:
    a, b = make(Member, "a"), make(Member, "b")
    relay = make(Relay, b.address)
    a.transport.connect("b", *relay.address)
    a.transport.send("b", MessageType.CONTROL, serialization.dumps("once"))
    wait_until(lambda: b.received == ["once"], "b got the frame", DEADLINE_S, b.changed)
    last_frame = bytes(relay.to_target[-(frames.HEADER_SIZE + len(serialization.dumps("once")) + 16) :])
    relay.inject(last_frame)
    wait_until(
        lambda: b.lost == ["a"] or len(b.received) > 1, "b dropped the connection", DEADLINE_S, b.changed
    )
    assert b.received == ["once"] and b.transport.rejected_frames == 1


@pytest.fixture(scope="module")
def tls_contexts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    paths = {"ca": folder / "ca.pem", "cert": folder / "member.pem", "key": folder / "member.key"}
    ca.cert_pem.write_to_path(str(paths["ca"]))
    cert.private_key_pem.write_to_path(str(paths["key"]))
    for blob in cert.cert_chain_pems:
        blob.write_to_path(str(paths["cert"]), append=True)
    return {name: str(path) for name, path in paths.items()}


def _tls_options(files: dict[str, str]) -> dict[str, Any]:
    return {
        "server_ssl": tls.mutual_server_context(files["cert"], files["key"], files["ca"]),
        "client_ssl": tls.client_context(files["ca"], files["cert"], files["key"]),
    }


def _parses_as_frames(capture: bytes) -> bool:
    try:
        return bool(frames.FrameDecoder().feed(capture))
    except frames.ProtocolError:
        return False


def test_given_tls_then_a_capture_of_the_data_port_shows_no_plaintext_frame(
    make: Callable[..., Any], tls_contexts: dict[str, str]
) -> None:
    # given two members with TLS on the data port, connected through a recording relay
    a, b = (
        make(Member, "alpha", **_tls_options(tls_contexts)),
        make(Member, "beta", **_tls_options(tls_contexts)),
    )
    relay = make(Relay, b.address)
    a.transport.connect("beta", *relay.address)
    wait_until(lambda: b.transport.peers() == ["alpha"], "beta trusts alpha", DEADLINE_S)
    # when frames with a recognisable payload cross both ways
    a.transport.send("beta", MessageType.DATA, serialization.dumps([MARKER] * 3))
    b.transport.send("alpha", MessageType.CONTROL, serialization.dumps({"marker": MARKER}))
    wait_until(lambda: b.received, "beta got the frame", DEADLINE_S, b.changed)
    wait_until(lambda: a.received, "alpha got the frame", DEADLINE_S, a.changed)
    # then the capture holds TLS records only: no marker, no member name, no frame header
    for capture in (bytes(relay.to_target), bytes(relay.to_dialer)):
        assert capture[:1] == b"\x16"  # a TLS handshake record
        assert MARKER not in capture and b"alpha" not in capture and b"beta" not in capture
        assert not _parses_as_frames(capture)
    assert b.received == [[MARKER] * 3] and a.received == [{"marker": MARKER}]


def test_given_tls_then_a_plain_tcp_peer_that_holds_the_secret_is_refused(
    make: Callable[..., Any], tls_contexts: dict[str, str]
) -> None:
    b = make(Member, "beta", **_tls_options(tls_contexts))
    shake = handshake.Handshake(handshake.Role.INITIATOR, "plain", SECRET.encode(), expected_peer="beta")
    with socket.create_connection(b.address, timeout=DEADLINE_S) as sock:
        sock.sendall(b"".join(frames.encode_frame(t, p) for t, p in shake.start()))
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert not _parses_as_frames(answer) and b.transport.peers() == []


def test_given_many_bad_peers_then_each_is_counted_and_the_log_gets_one_line(
    make: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    b = make(Member, "b")
    with caplog.at_level(logging.WARNING, logger="jetlet._network.transport"):
        for _ in range(20):
            with socket.create_connection(b.address, timeout=DEADLINE_S) as sock:
                sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                while sock.recv(65536):
                    pass
        wait_until(lambda: b.transport.refused_handshakes == 20, "all 20 refusals counted", DEADLINE_S)
    refusals = [r for r in caplog.records if "refused the connection" in r.getMessage()]
    assert len(refusals) == 1


@pytest.mark.parametrize(
    "first_frames",
    [
        frames.encode_frame(MessageType.AUTH_REFUSED, b"go away\nFORGED-LINE member x joined\r"),
        frames.encode_frame(
            MessageType.HELLO,
            msgpack.packb({"member": "x\nFORGED-LINE", "nonce": bytes(handshake.NONCE_SIZE)}),
        ),
    ],
    ids=["a refusal reason", "a member name"],
)
def test_given_peer_text_with_line_breaks_then_the_log_line_escapes_them(
    make: Callable[..., Any], caplog: pytest.LogCaptureFixture, first_frames: bytes
) -> None:
    b = make(Member, "b")
    with caplog.at_level(logging.WARNING, logger="jetlet._network.transport"):
        with socket.create_connection(b.address, timeout=DEADLINE_S) as sock:
            sock.sendall(first_frames)
            while sock.recv(65536):
                pass

        def logged() -> list[str]:
            return [
                r.getMessage() for r in list(caplog.records) if "refused the connection" in r.getMessage()
            ]

        wait_until(logged, "the refusal is logged", DEADLINE_S)
    lines = logged()
    assert len(lines) == 1 and "FORGED-LINE" in lines[0]
    assert "\n" not in lines[0] and "\r" not in lines[0]
