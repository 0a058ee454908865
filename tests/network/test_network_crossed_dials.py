"""Two members that dial each other at once lose no frame: the later dial waits for the earlier one.

The window this guards: member ``a`` has read ``b``'s HELLO (``b`` is dialing
it) and only then dials ``b`` itself. Both connections used to get
authenticated; each member then kept the one ``a`` dialed (the smaller name's)
and closed the other, and the frames already written on the closed one — a
control request or its reply — were lost, so the caller waited for its
timeout (a partition-table install stalled a fresh cluster's first job for
30 s). Here ``b``'s side of its dial is a raw socket held between HELLO and
AUTH, so the window is open for certain when ``a`` dials.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from jetlet._network import frames, handshake, serialization
from jetlet._network.frames import MessageType
from jetlet._network.transport import Transport
from jetlet.testing import wait_until

SECRET = "test-cluster-secret"
DEADLINE_S = 10.0


class _Reader:
    """Frames from a raw socket, one at a time (the decoder switches to tags after the handshake)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.decoder = frames.FrameDecoder(handshake.MAX_HANDSHAKE_PAYLOAD)

    def next_frame(self, what: str) -> frames.Frame:
        while (frame := self.decoder.next_frame()) is None:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise AssertionError(f"member a closed b's connection before {what}")
            self.decoder.receive(chunk)
        return frame


@pytest.fixture
def transports() -> Iterator[tuple[Transport, Transport]]:
    made = [Transport(name, SECRET, lambda *_: None, lambda _: None) for name in ("a", "b")]
    for transport in made:
        transport.start("127.0.0.1", 0)
    yield made[0], made[1]
    for transport in made:
        transport.close()


def test_given_the_peer_mid_handshake_with_us_when_we_dial_it_then_its_connection_is_used_and_no_frame_lost(
    transports: tuple[Transport, Transport],
) -> None:
    # given b's dial to a, stopped after a has read its HELLO (a answered CHALLENGE)
    a, b = transports
    assert a.address is not None and b.address is not None
    b_side = handshake.Handshake(handshake.Role.INITIATOR, "b", SECRET.encode(), expected_peer="a")
    with socket.create_connection(a.address, timeout=DEADLINE_S) as sock:
        reader = _Reader(sock)
        sock.sendall(b"".join(frames.encode_frame(*m) for m in b_side.start()))
        challenge = reader.next_frame("CHALLENGE")
        assert challenge.msg_type is MessageType.CHALLENGE
        # when a dials b meanwhile, and then b's handshake goes on
        dialed = a.connect_soon("b", *b.address)
        # (b's AUTH must come after a started its connect, or a would find b trusted and not dial)
        wait_until(lambda: "b" in a._dialing or a.is_connected("b"), "a is connecting to b", DEADLINE_S)
        auth = b_side.receive(challenge.msg_type, challenge.payload)
        sock.sendall(b"".join(frames.encode_frame(*m) for m in auth))
        auth_ok = reader.next_frame("AUTH_OK")
        b_side.receive(auth_ok.msg_type, auth_ok.payload)
        reader.decoder.authenticate(b_side.frame_keys()[1])
        dialed.result(DEADLINE_S)
        # then a took b's connection, made none of its own, and a frame it sends now reaches b
        assert a.connection_endpoints("b") == (sock.getpeername(), sock.getsockname()), (
            "a dialed b while b's dial was in its handshake, and kept its own connection"
        )
        assert b.open_connections == 0
        a.send("b", MessageType.CONTROL, serialization.dumps({"op": "after the crossing"}))
        frame = reader.next_frame("the frame sent after the crossing")
        assert (frame.msg_type, serialization.loads(frame.payload)) == (
            MessageType.CONTROL,
            {"op": "after the crossing"},
        )
