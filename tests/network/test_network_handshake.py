"""The handshake state machine: who gets in, who is refused, and that nothing is unpickled before trust."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import msgpack
import pytest

from jetlet._network import serialization
from jetlet._network.frames import MessageType as M
from jetlet._network.handshake import (
    NONCE_SIZE,
    Handshake,
    HandshakeError,
    NonceRegistry,
    Outgoing,
    Role,
    State,
)

SECRET = b"cluster-secret"
UNPICKLED: list[str] = []


def _mark_unpickled() -> str:
    UNPICKLED.append("unpickled")
    return "x" * NONCE_SIZE


class Booby:
    def __reduce__(self) -> tuple[Any, ...]:
        return (_mark_unpickled, ())


PICKLE_EXT = msgpack.ExtType(serialization.ExtCode.PICKLE, pickle.dumps(Booby()))


def _nonces(*values: bytes) -> Callable[[int], bytes]:
    queue = list(values)
    return lambda size: queue.pop(0)


def _pair(
    initiator_secret: bytes = SECRET, acceptor_secret: bytes = SECRET, registry: NonceRegistry | None = None
) -> tuple[Handshake, Handshake]:
    initiator = Handshake(Role.INITIATOR, "alpha", initiator_secret, expected_peer="beta")
    acceptor = Handshake(Role.ACCEPTOR, "beta", acceptor_secret, nonces=registry)
    return initiator, acceptor


def _run(initiator: Handshake, acceptor: Handshake) -> list[tuple[M, bytes]]:
    """Pump messages between the two until neither has anything to say; return the transcript."""
    transcript: list[tuple[M, bytes]] = []
    acceptor.start()
    pending: Outgoing = initiator.start()
    to_acceptor = True
    while pending:
        transcript += pending
        target = acceptor if to_acceptor else initiator
        replies: Outgoing = []
        for msg_type, payload in pending:
            replies += target.receive(msg_type, payload)
        pending, to_acceptor = replies, not to_acceptor
    return transcript


def test_given_both_sides_with_the_right_secret_when_they_shake_hands_then_both_trust_each_other() -> None:
    initiator, acceptor = _pair()
    transcript = _run(initiator, acceptor)
    assert [msg_type for msg_type, _ in transcript] == [M.HELLO, M.CHALLENGE, M.AUTH, M.AUTH_OK]
    assert (initiator.state, acceptor.state) == (State.DONE, State.DONE)
    assert (initiator.peer_name, acceptor.peer_name) == ("beta", "alpha")
    assert all(SECRET not in payload for _, payload in transcript)


@pytest.mark.parametrize("initiator_secret", [b"wrong", SECRET[:-1], SECRET + b"x"])
def test_given_an_initiator_with_a_wrong_secret_when_shaking_hands_then_the_acceptor_refuses_it(
    initiator_secret: bytes,
) -> None:
    initiator, acceptor = _pair(initiator_secret=initiator_secret)
    with pytest.raises(HandshakeError, match="wrong proof"):
        _run(initiator, acceptor)
    assert acceptor.state is State.FAILED and not acceptor.is_done
    assert acceptor.failure is not None and "'alpha' gave a wrong proof" in acceptor.failure


@pytest.mark.parametrize("acceptor_secret", [b"wrong", SECRET + b"x"])
def test_given_an_acceptor_with_a_wrong_secret_when_shaking_hands_then_it_refuses_the_initiator(
    acceptor_secret: bytes,
) -> None:
    initiator, acceptor = _pair(acceptor_secret=acceptor_secret)
    with pytest.raises(HandshakeError, match="wrong proof"):
        _run(initiator, acceptor)
    assert acceptor.state is State.FAILED and initiator.state is State.AWAIT_AUTH_OK


def test_given_an_impostor_acceptor_when_it_answers_auth_with_a_forged_proof_then_the_initiator_refuses() -> (
    None
):
    initiator, impostor = _pair(acceptor_secret=b"guess")
    impostor.start()
    challenge = impostor.receive(*initiator.start()[0])
    initiator.receive(*challenge[0])
    with pytest.raises(HandshakeError, match="'beta' gave a wrong proof"):
        initiator.receive(M.AUTH_OK, msgpack.packb({"proof": b"f" * 32}))
    assert initiator.state is State.FAILED


def test_given_a_recorded_handshake_when_replayed_to_a_fresh_acceptor_then_the_proof_fails() -> None:
    initiator, acceptor = _pair()
    transcript = _run(initiator, acceptor)
    replay = Handshake(Role.ACCEPTOR, "beta", SECRET)
    replay.start()
    replay.receive(*transcript[0])
    with pytest.raises(HandshakeError, match="wrong proof"):
        replay.receive(*transcript[2])


def test_given_a_shared_registry_when_a_hello_nonce_is_replayed_then_refused_at_hello() -> None:
    registry = NonceRegistry()
    initiator, acceptor = _pair(registry=registry)
    transcript = _run(initiator, acceptor)
    replay = Handshake(Role.ACCEPTOR, "beta", SECRET, nonces=registry)
    replay.start()
    with pytest.raises(HandshakeError, match="replayed nonce"):
        replay.receive(*transcript[0])


def test_given_a_challenge_that_echoes_the_initiators_nonce_then_refused() -> None:
    nonce = b"n" * NONCE_SIZE
    initiator = Handshake(Role.INITIATOR, "alpha", SECRET, nonce_factory=_nonces(nonce))
    initiator.start()
    with pytest.raises(HandshakeError, match="replayed nonce"):
        initiator.receive(M.CHALLENGE, msgpack.packb({"member": "beta", "nonce": nonce}))


def test_given_a_registry_when_full_then_it_forgets_the_oldest_nonce() -> None:
    registry = NonceRegistry(capacity=2)
    assert [registry.register(n) for n in (b"a", b"b", b"a", b"c", b"a")] == [True, True, False, True, True]


def _hello(**fields: Any) -> bytes:
    message = {"member": "alpha", "nonce": b"h" * NONCE_SIZE}
    message.update(fields)
    return bytes(msgpack.packb(message))


MALFORMED_HELLOS = {
    "not msgpack": b"\xc1\xc1",
    "not a map": msgpack.packb(["alpha", b"h" * NONCE_SIZE]),
    "missing nonce": msgpack.packb({"member": "alpha"}),
    "extra field": _hello(extra=1),
    "name not text": _hello(member=b"alpha"),
    "nonce not bytes": _hello(nonce="h" * NONCE_SIZE),
    "short nonce": _hello(nonce=b"short"),
    "empty name": _hello(member=""),
    "huge": _hello(member="x" * 5000),
    "own name": _hello(member="beta"),
    "pickle as nonce": _hello(nonce=PICKLE_EXT),
    "pickle as name": _hello(member=PICKLE_EXT),
    "pickle as message": msgpack.packb(PICKLE_EXT),
    "pickle as key": msgpack.packb({"member": "alpha", "nonce": b"h" * NONCE_SIZE, PICKLE_EXT: 1}),
}


@pytest.mark.parametrize("payload", MALFORMED_HELLOS.values(), ids=MALFORMED_HELLOS.keys())
def test_given_a_malformed_hello_when_received_then_refused_and_nothing_unpickled(payload: bytes) -> None:
    UNPICKLED.clear()
    acceptor = Handshake(Role.ACCEPTOR, "beta", SECRET)
    acceptor.start()
    with pytest.raises(HandshakeError, match=r"malformed HELLO|own name"):
        acceptor.receive(M.HELLO, payload)
    assert acceptor.state is State.FAILED
    assert UNPICKLED == []


PICKLED_DATA = serialization.dumps([Booby()])

# (role, messages received in order, index of the one refused, error text)
OUT_OF_ORDER: list[tuple[Role, list[tuple[M, bytes]], str]] = [
    (Role.ACCEPTOR, [(M.AUTH, msgpack.packb({"proof": b"p" * 32}))], "unexpected AUTH"),
    (Role.ACCEPTOR, [(M.DATA, PICKLED_DATA)], "unexpected DATA"),
    (Role.ACCEPTOR, [(M.CONTROL, PICKLED_DATA)], "unexpected CONTROL"),
    (Role.ACCEPTOR, [(M.HELLO, _hello()), (M.HELLO, _hello())], "unexpected HELLO"),
    (Role.ACCEPTOR, [(M.HELLO, _hello()), (M.DATA, PICKLED_DATA)], "unexpected DATA"),
    (Role.ACCEPTOR, [(M.CHALLENGE, _hello())], "unexpected CHALLENGE"),
    (Role.INITIATOR, [(M.AUTH_OK, msgpack.packb({"proof": b"p" * 32}))], "unexpected AUTH_OK"),
    (Role.INITIATOR, [(M.HELLO, _hello())], "unexpected HELLO"),
    (Role.INITIATOR, [(M.DATA, PICKLED_DATA)], "unexpected DATA"),
    (
        Role.INITIATOR,
        [(M.CHALLENGE, _hello(member="beta")), (M.CHALLENGE, _hello(member="beta"))],
        "unexpected",
    ),
    (Role.INITIATOR, [(M.AUTH_REFUSED, b"go away")], "refused the handshake: go away"),
]


@pytest.mark.parametrize(("role", "messages", "error"), OUT_OF_ORDER)
def test_given_messages_out_of_order_when_received_then_refused_and_nothing_unpickled(
    role: Role, messages: list[tuple[M, bytes]], error: str
) -> None:
    UNPICKLED.clear()
    handshake = Handshake(role, "beta" if role is Role.ACCEPTOR else "alpha", SECRET)
    handshake.start()
    *accepted, refused = messages
    for message in accepted:
        handshake.receive(*message)
    with pytest.raises(HandshakeError, match=error):
        handshake.receive(*refused)
    assert handshake.state is State.FAILED
    with pytest.raises(HandshakeError, match="already failed"):
        handshake.receive(*messages[0])
    assert UNPICKLED == []


def test_given_an_unexpected_member_answers_when_dialing_then_refused() -> None:
    initiator = Handshake(Role.INITIATOR, "alpha", SECRET, expected_peer="beta")
    initiator.start()
    with pytest.raises(HandshakeError, match="dialed member 'beta' but 'gamma' answered"):
        initiator.receive(M.CHALLENGE, _hello(member="gamma"))


def test_given_a_done_handshake_when_started_again_then_refused() -> None:
    initiator, acceptor = _pair()
    _run(initiator, acceptor)
    with pytest.raises(HandshakeError, match="cannot start"):
        initiator.start()


def test_given_an_empty_secret_then_construction_fails() -> None:
    with pytest.raises(ValueError, match="secret"):
        Handshake(Role.ACCEPTOR, "beta", b"")
