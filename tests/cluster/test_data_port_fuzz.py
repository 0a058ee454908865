"""Fuzzing a real member's data port: nothing crashes, nothing is unpickled, no line is forged in its log.

A seeded run throws at one member process: random bytes, frames with bad
headers, handshake messages that are malformed, out of order, truncated, or
carry pickles; and, after a real handshake with the right secret, frames
without a valid tag. Every pickle sent would create a marker directory if
anything unpickled it. Then the member must still serve REST, admit a real
member, and its log must hold no traceback and no line an input forged.
"""

from __future__ import annotations

import os
import pathlib
import pickle
import random
import socket
import struct
from collections.abc import Iterator
from typing import Any

import msgpack
import pytest
from member_processes import MemberProcess, MemberProcesses

from jetlet._network import frames, handshake, serialization
from jetlet._network.frames import MessageType
from jetlet.client import Client
from jetlet.testing import wait_until

SECRET = "fuzz-cluster-secret"
SEED = 15
CASES = 240
DEADLINE_S = 60.0


class Trap:
    """Unpickling it creates ``path`` (a directory): proof that something unpickled it."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.makedirs, (str(self.path),))


def _header(length: int, version: int = frames.PROTOCOL_VERSION, msg_type: int = MessageType.DATA) -> bytes:
    return struct.pack(">IBB", length, version, msg_type)


def _hello(name: Any = "fuzzer", nonce: Any = None) -> bytes:
    body = {"member": name, "nonce": os.urandom(handshake.NONCE_SIZE) if nonce is None else nonce}
    return frames.encode_frame(MessageType.HELLO, msgpack.packb(body))


def _inputs(rng: random.Random, trap: bytes) -> Iterator[tuple[str, bytes]]:
    """(kind, bytes to send) for one unauthenticated connection each."""
    pickle_ext = msgpack.packb(msgpack.ExtType(serialization.ExtCode.PICKLE, trap))
    makers = {
        "random bytes": lambda: rng.randbytes(rng.randint(1, 4096)),
        "bad version": lambda: _header(4, version=rng.choice([0, 2, 255])) + b"abcd",
        "unknown type": lambda: _header(4, msg_type=rng.choice([0, 10, 200])) + b"abcd",
        "huge length": lambda: _header(rng.choice([2**20, 2**31, 2**32 - 1]), msg_type=MessageType.HELLO),
        "data before hello": lambda: frames.encode_frame(MessageType.DATA, serialization.dumps(Trap)),
        "pickle in hello": lambda: frames.encode_frame(MessageType.HELLO, pickle_ext),
        "pickle as a field": lambda: frames.encode_frame(
            MessageType.HELLO, msgpack.packb({"member": "x", "nonce": msgpack.ExtType(6, trap)})
        ),
        "raw pickle in hello": lambda: frames.encode_frame(MessageType.HELLO, trap),
        "bad nonce": lambda: _hello(nonce=rng.randbytes(rng.choice([0, 1, 31, 33]))),
        "bad name": lambda: _hello(name=rng.choice(["", "x" * 300, 7, None, b"bytes"])),
        "forging name": lambda: _hello(name="fuzz\nFORGED-LINE member joined"),
        "refusal with newline": lambda: frames.encode_frame(MessageType.AUTH_REFUSED, b"no\nFORGED-LINE"),
        "truncated hello": lambda: _hello()[: rng.randint(1, len(_hello()) - 1)],
        "auth before challenge": lambda: (
            _hello() + frames.encode_frame(MessageType.AUTH, b"\x81\xa5proof\xc4\x00")
        ),
        "hello then garbage": lambda: _hello() + rng.randbytes(rng.randint(1, 64)),
        "two hellos": lambda: _hello() + _hello(),
    }
    kinds = sorted(makers)
    for i in range(CASES):
        kind = kinds[i % len(kinds)] if i < len(kinds) else rng.choice(kinds)
        yield kind, makers[kind]()


INCOMPLETE = frozenset({"truncated hello", "hello then garbage", "random bytes"})
"""Kinds that may leave the member waiting for more (until its handshake timeout): not waited on."""


def _send(address: tuple[str, int], data: bytes, wait_for_close: bool) -> None:
    """Send ``data`` on a new connection; with ``wait_for_close``, wait until the member closes it."""
    with socket.create_connection(address, timeout=DEADLINE_S) as sock:
        try:
            sock.sendall(data)
            if wait_for_close:
                while sock.recv(65536):
                    pass
        except (ConnectionResetError, BrokenPipeError):
            pass


def _trusted_socket(member: MemberProcess) -> tuple[socket.socket, frames.FrameSealer]:
    sock = socket.create_connection(member.data_address, timeout=DEADLINE_S)
    shake = handshake.Handshake(
        handshake.Role.INITIATOR, "fuzzer", SECRET.encode(), expected_peer=member.name
    )
    decoder = frames.FrameDecoder()
    outgoing = shake.start()
    while not shake.is_done:
        sock.sendall(b"".join(frames.encode_frame(t, p) for t, p in outgoing))
        outgoing = []
        for frame in decoder.feed(sock.recv(65536)):
            outgoing += shake.receive(frame.msg_type, frame.payload)
    return sock, frames.FrameSealer(shake.frame_keys()[0])


@pytest.fixture
def processes(tmp_path: pathlib.Path) -> Iterator[MemberProcesses]:
    started = MemberProcesses(tmp_path)
    yield started
    started.stop_all()


def test_given_seeded_malformed_input_on_the_data_port_then_nothing_crashes_or_unpickles(
    processes: MemberProcesses, tmp_path: pathlib.Path
) -> None:
    member = processes.start("a", SECRET)
    marker = tmp_path / "unpickled"
    trap = pickle.dumps(Trap(marker))
    rng = random.Random(SEED)
    kinds = set()
    # when every unauthenticated input arrives on its own connection
    for index, (kind, data) in enumerate(_inputs(rng, trap)):
        kinds.add(kind)
        _send(member.data_address, data, wait_for_close=index % 4 == 0 and kind not in INCOMPLETE)
    # and a peer that holds the secret sends frames with bad tags, each carrying a pickle
    for case in range(8):
        sock, sealer = _trusted_socket(member)
        with sock:
            forged = frames.encode_frame(MessageType.CONTROL, serialization.dumps(Trap(marker)))
            tag = rng.randbytes(frames.TAG_SIZE) if case % 2 else sealer.seal(forged)[::-1]
            sock.sendall(forged + tag)
            while sock.recv(65536):
                pass
    # then the member still serves, admits a real member, unpickled nothing, and logged no forged line
    client = Client(member.rest_address, processes.token)
    assert client.request("GET", "/health") is not None
    processes.start("b", SECRET, "--members", member.rest_address)
    wait_until(
        lambda: {m["name"] for m in client.request("GET", "/cluster")["members"]} == {"a", "b"},
        "b joined a",
        DEADLINE_S,
    )
    assert not marker.exists()
    assert member.process.poll() is None
    log = member.log()
    assert "Traceback" not in log
    assert not any(line.startswith("FORGED-LINE") for line in log.splitlines())
    assert len(kinds) == 16 and "refused the connection" in log
