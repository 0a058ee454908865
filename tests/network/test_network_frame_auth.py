"""Authenticated frames after the handshake (sans-IO), through an in-memory connection pair.

What an attacker in the middle can do to the byte stream (inject, replay,
reorder, drop, alter) is refused before anything is decoded."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any

import pytest

from jetlet._network import frames, handshake, serialization
from jetlet._network.frames import AuthenticationError, FrameDecoder, FrameSealer, MessageType, encode_frame
from jetlet._network.handshake import Handshake, Role

SECRET = b"the-cluster-secret"
UNPICKLED: list[str] = []


def _mark_unpickled() -> str:
    UNPICKLED.append("unpickled")
    return "x"


class Booby:
    def __reduce__(self) -> tuple[Any, ...]:
        return (_mark_unpickled, ())


class End:
    """One end of an in-memory connection: a handshake, then sealed frames out and checked frames in."""

    def __init__(self, role: Role, name: str, secret: bytes = SECRET, peer: str | None = None) -> None:
        self.shake = Handshake(role, name, secret, expected_peer=peer)
        self.decoder = FrameDecoder(handshake.MAX_HANDSHAKE_PAYLOAD)
        self.sealer: FrameSealer | None = None
        self.received: list[frames.Frame] = []

    def frame(self, msg_type: MessageType, payload: bytes) -> bytes:
        """The bytes of one frame as this end sends it (sealed once the handshake is done)."""
        encoded = encode_frame(msg_type, payload)
        return encoded + self.sealer.seal(encoded) if self.sealer is not None else encoded

    def take(self, data: bytes) -> bytes:
        """Receive bytes as the transport does (one frame at a time); return the bytes to answer with."""
        self.decoder.receive(data)
        out = b""
        while (frame := self.decoder.next_frame()) is not None:
            if not self.shake.is_done:
                out += b"".join(
                    self.frame(t, p) for t, p in self.shake.receive(frame.msg_type, frame.payload)
                )
                if self.shake.is_done:
                    self._trust()
            else:
                self.received.append(frame)
                serialization.loads(frame.payload)  # what the member does with a trusted frame
        return out

    def _trust(self) -> None:
        send_key, receive_key = self.shake.frame_keys()
        self.sealer = FrameSealer(send_key)
        self.decoder.authenticate(receive_key)
        self.decoder.max_frame_size = frames.DEFAULT_MAX_FRAME_SIZE


def _connect(acceptor_secret: bytes = SECRET) -> tuple[End, End]:
    """An initiator "alpha" and an acceptor "beta" after their handshake (pumped until both are quiet)."""
    alpha, beta = End(Role.INITIATOR, "alpha", peer="beta"), End(Role.ACCEPTOR, "beta", acceptor_secret)
    beta.shake.start()
    to_beta = b"".join(alpha.frame(t, p) for t, p in alpha.shake.start())
    while to_beta:
        to_alpha = beta.take(to_beta)
        to_beta = alpha.take(to_alpha) if to_alpha else b""
    return alpha, beta


def _data(value: object) -> bytes:
    return serialization.dumps(value)


def test_given_a_handshake_when_done_then_frames_flow_both_ways_sealed_and_checked() -> None:
    alpha, beta = _connect()
    beta.take(alpha.frame(MessageType.DATA, _data("a1")) + alpha.frame(MessageType.CONTROL, _data("a2")))
    alpha.take(beta.frame(MessageType.FLOW_ACK, _data("b1")))
    assert [serialization.loads(f.payload) for f in beta.received] == ["a1", "a2"]
    assert [serialization.loads(f.payload) for f in alpha.received] == ["b1"]
    assert beta.decoder.authenticated_frames == 2 and alpha.decoder.authenticated_frames == 1


def test_given_the_first_frames_in_the_same_read_as_auth_ok_then_they_are_checked_as_sealed() -> None:
    # given an initiator that has sent AUTH and waits for AUTH_OK
    alpha = End(Role.INITIATOR, "alpha", peer="beta")
    beta = End(Role.ACCEPTOR, "beta")
    beta.shake.start()
    challenge = beta.take(b"".join(alpha.frame(t, p) for t, p in alpha.shake.start()))
    auth_ok = beta.take(alpha.take(challenge))
    # when AUTH_OK and the acceptor's first sealed frames arrive in one read
    alpha.take(
        auth_ok + beta.frame(MessageType.CONTROL, _data("first")) + beta.frame(MessageType.DATA, b"\xc0")
    )
    # then both were checked against the new key and delivered
    assert [f.msg_type for f in alpha.received] == [MessageType.CONTROL, MessageType.DATA]
    assert alpha.decoder.authenticated_frames == 2


def _forged_control() -> bytes:
    """A CONTROL frame whose payload unpickles a booby trap, with a random tag in place of a real one."""
    payload = serialization.dumps(Booby())
    return encode_frame(MessageType.CONTROL, payload) + secrets.token_bytes(frames.TAG_SIZE)


def test_given_the_booby_trap_when_a_trusted_frame_carries_it_then_decoding_springs_it() -> None:
    # (so the tests below would see an unpickled frame)
    UNPICKLED.clear()
    alpha, beta = _connect()
    beta.take(alpha.frame(MessageType.CONTROL, serialization.dumps(Booby())))
    assert UNPICKLED == ["unpickled"]


@pytest.mark.parametrize(
    "attack",
    ["append", "append without tag", "replay", "reorder", "drop", "flip payload", "flip header", "reflect"],
)
def test_given_an_attacker_in_the_middle_then_the_altered_stream_fails_and_nothing_is_unpickled(
    attack: str,
) -> None:
    UNPICKLED.clear()
    alpha, beta = _connect()
    first = alpha.frame(MessageType.CONTROL, _data(["ok", 1]))
    second = alpha.frame(MessageType.CONTROL, serialization.dumps(Booby()))
    streams = {
        "append": first + _forged_control(),
        "append without tag": first + encode_frame(MessageType.CONTROL, serialization.dumps(Booby())) + first,
        "replay": first + first,
        "reorder": second + first,
        "drop": second,
        "flip payload": first[:-20] + bytes([first[-20] ^ 1]) + first[-19:],
        "flip header": first[:5] + bytes([MessageType.DATA]) + first[6:],
        "reflect": beta.frame(MessageType.CONTROL, serialization.dumps(Booby())),
    }
    with pytest.raises(AuthenticationError, match="failed authentication"):
        beta.take(streams[attack])
    assert UNPICKLED == []
    assert all(serialization.loads(f.payload) == ["ok", 1] for f in beta.received)
    # and the decoder stays broken: not even an authentic frame gets through after that
    with pytest.raises(frames.ProtocolError, match="broken"):
        beta.take(alpha.frame(MessageType.CONTROL, _data("later")))


def test_given_two_connections_then_their_keys_differ_and_a_frame_of_one_fails_on_the_other() -> None:
    alpha1, beta1 = _connect()
    alpha2, beta2 = _connect()
    keys1, keys2 = alpha1.shake.frame_keys(), alpha2.shake.frame_keys()
    assert len({*keys1, *keys2}) == 4
    assert keys1 == beta1.shake.frame_keys()[::-1]
    with pytest.raises(AuthenticationError):
        beta2.take(alpha1.frame(MessageType.DATA, _data(1)))


def test_given_a_handshake_not_done_then_there_are_no_frame_keys() -> None:
    alpha = End(Role.INITIATOR, "alpha", peer="beta")
    alpha.shake.start()
    with pytest.raises(handshake.HandshakeError, match="derive frame keys"):
        alpha.shake.frame_keys()


def test_given_the_wrong_secret_then_the_handshake_fails_before_any_key() -> None:
    with pytest.raises(handshake.HandshakeError, match="wrong proof"):
        _connect(acceptor_secret=b"another-secret")


def test_given_a_sealed_frame_split_at_every_byte_then_it_is_checked_once_whole() -> None:
    alpha, beta = _connect()
    stream = alpha.frame(MessageType.DATA, _data(list(range(50)))) + alpha.frame(MessageType.DATA, _data("z"))
    for byte in stream:
        beta.take(bytes([byte]))
    assert [serialization.loads(f.payload) for f in beta.received] == [list(range(50)), "z"]


def test_given_a_sealer_then_the_tag_covers_the_sequence_number() -> None:
    key = secrets.token_bytes(32)
    frame = encode_frame(MessageType.HEARTBEAT, b"beat")
    sealer = FrameSealer(key)
    first, second = sealer.seal(frame), sealer.seal(frame)
    assert first != second and len(first) == len(second) == frames.TAG_SIZE
    assert sealer.sequence == 2
    with pytest.raises(ValueError, match="16 bytes"):
        FrameSealer(b"short")


@pytest.mark.parametrize("size", [700, 2041, 2047, 2048, 5_000, 100_003])
def test_given_a_key_then_the_tag_is_hmac_sha256_of_the_sequence_and_the_frame_cut_to_16_bytes(
    size: int,
) -> None:
    # (payloads around and over the 2,048 bytes from which hashlib hashes without the GIL)
    frame = encode_frame(MessageType.DATA, secrets.token_bytes(size))
    for key in (secrets.token_bytes(32), secrets.token_bytes(100)):
        sealer = FrameSealer(key)
        sealer.seal(frame)
        expected = hmac.new(key, (1).to_bytes(8, "big") + frame, hashlib.sha256).digest()[:16]
        assert sealer.seal(frame) == expected
        # and the decoder, which hashes the header and the payload apart, accepts exactly that tag
        decoder = FrameDecoder()
        decoder.authenticate(key)
        decoder.receive(frame + FrameSealer(key).seal(frame))
        received = decoder.next_frame()
        assert received is not None and len(received.payload) == size


def test_given_printable_then_control_characters_are_escaped_for_the_log() -> None:
    assert handshake.printable("b3\nFORGED member joined\r") == "b3\\nFORGED member joined\\r"
    assert handshake.printable("x" * 500) == "x" * 200
