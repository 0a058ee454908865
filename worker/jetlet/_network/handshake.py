"""The handshake that admits a peer: mutual challenge/response over the cluster secret (sans-IO).

Both members hold the same secret; neither ever sends it. The member that
dials is the *initiator*, the one that accepts is the *acceptor*::

    initiator                                       acceptor
    HELLO      {member, nonce: Ni}          ->
                                            <-      CHALLENGE  {member, nonce: Na}
    AUTH       {proof: P(initiator)}        ->      (verifies, peer is now trusted)
                                            <-      AUTH_OK    {proof: P(acceptor)}
    (verifies, peer is now trusted)

``P(role) = HMAC-SHA256(secret, msgpack([label, role, Ni, Na, initiator, acceptor]))``.
Each proof covers both fresh random nonces and both member names, and the
role, so a proof recorded from one handshake is worthless in any other (a
replayed ``AUTH`` fails against the acceptor's new nonce) and an acceptor's
proof cannot be reflected as an initiator's. The acceptor proves itself only
after the initiator has, so an outsider cannot use a member as an oracle.
An acceptor may share a :class:`NonceRegistry` between its handshakes: an
initiator nonce seen before is refused outright.

Frame keys. Once done, :meth:`Handshake.frame_keys` gives the two keys that
authenticate every later frame of this connection (see
:mod:`jetlet._network.frames`), one per direction, derived HKDF-style
(RFC 5869 with HMAC-SHA256): ``PRK = HMAC(Ni | Na, secret)``, then
``key(direction) = HMAC(PRK, msgpack([label, direction, initiator,
acceptor]) | 0x01)``. Both nonces are fresh, so the keys are new for every
connection; without the secret nobody can compute them, so a relay that
forwards the handshake byte for byte still cannot add, drop or change a frame.

Member names must be printable (no control characters), and a peer's refusal
reason is escaped before it reaches an error message: nothing a peer sends can
forge a line in the log.

The state machine is one table, ``(role, state, message type) -> step``;
any message not in the table for the current state (out of order, or a
non-handshake frame before the peer is trusted) fails the handshake. Every
failure raises :class:`HandshakeError` and leaves the handshake in
``FAILED`` for good. Payloads are parsed with plain msgpack and an
``ext_hook`` that rejects every extension type, then checked field by
field: nothing a peer sends before ``AUTH_OK`` is ever unpickled.

:class:`Handshake` does no I/O: :meth:`Handshake.start` and
:meth:`Handshake.receive` return the ``(message type, payload)`` pairs to
send, and the caller moves the bytes.
"""

from __future__ import annotations

import collections
import enum
import hashlib
import hmac
import secrets
from collections.abc import Callable
from typing import Any

import msgpack

from jetlet._network import frames
from jetlet._network.frames import MessageType

NONCE_SIZE = 32
"""Bytes of every nonce."""

MAX_HANDSHAKE_PAYLOAD = 1024
"""Largest handshake payload, in bytes; the transport uses it as the frame limit before trust."""

_PROOF_LABEL = "jetlet-handshake-v1"
_KEY_LABEL = "jetlet-frame-keys-v1"

Outgoing = list[tuple[MessageType, bytes]]
"""Messages to send, in order."""


class HandshakeError(frames.ProtocolError):
    """The peer is refused: it failed to authenticate, or broke the handshake protocol."""


class Role(enum.Enum):
    """Which end of the connection this handshake is."""

    INITIATOR = "initiator"
    ACCEPTOR = "acceptor"


class State(enum.Enum):
    """Where a handshake stands."""

    IDLE = "idle"
    AWAIT_HELLO = "await hello"
    AWAIT_CHALLENGE = "await challenge"
    AWAIT_AUTH = "await auth"
    AWAIT_AUTH_OK = "await auth_ok"
    DONE = "done"
    FAILED = "failed"


class NonceRegistry:
    """Initiator nonces an acceptor has seen (the most recent ``capacity`` of them)."""

    def __init__(self, capacity: int = 65536) -> None:
        self._capacity = capacity
        self._seen: collections.OrderedDict[bytes, None] = collections.OrderedDict()

    def register(self, nonce: bytes) -> bool:
        """Remember ``nonce``; False when it was seen before (a replay)."""
        if nonce in self._seen:
            return False
        self._seen[nonce] = None
        if len(self._seen) > self._capacity:
            self._seen.popitem(last=False)
        return True


def _refuse_extension(code: int, data: bytes) -> Any:
    raise ValueError(f"extension type {code} is not allowed in a handshake")


def _parse(msg_type: MessageType, payload: bytes, fields: dict[str, type]) -> dict[str, Any]:
    """Decode a handshake payload: a msgpack map with exactly ``fields`` (name -> type)."""
    if len(payload) > MAX_HANDSHAKE_PAYLOAD:
        raise HandshakeError(f"malformed {msg_type.name}: {len(payload)} bytes is too long")
    try:
        message = msgpack.unpackb(payload, raw=False, ext_hook=_refuse_extension, strict_map_key=True)
    except Exception as exc:
        raise HandshakeError(f"malformed {msg_type.name}: {type(exc).__name__}: {exc}") from exc
    if not isinstance(message, dict) or set(message) != set(fields):
        raise HandshakeError(f"malformed {msg_type.name}: expected a map with fields {sorted(fields)}")
    for name, kind in fields.items():
        if type(message[name]) is not kind:
            raise HandshakeError(f"malformed {msg_type.name}: field {name!r} must be {kind.__name__}")
    return message


def _check_nonce(msg_type: MessageType, nonce: bytes) -> None:
    if len(nonce) != NONCE_SIZE:
        raise HandshakeError(f"malformed {msg_type.name}: the nonce must be {NONCE_SIZE} bytes")


def _check_name(msg_type: MessageType, name: str) -> None:
    if not name or len(name) > 255:
        raise HandshakeError(f"malformed {msg_type.name}: the member name must be 1 to 255 characters")
    if not name.isprintable():
        raise HandshakeError(
            f"malformed {msg_type.name}: the member name {printable(name)} has control characters"
        )


def printable(text: str, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters, every non-printable character escaped (for logs).

    >>> print(printable("ok\\nFORGED line"))
    ok\\nFORGED line
    """
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[:limit])


_HELLO_FIELDS: dict[str, type] = {"member": str, "nonce": bytes}
_CHALLENGE_FIELDS: dict[str, type] = {"member": str, "nonce": bytes}
_PROOF_FIELDS: dict[str, type] = {"proof": bytes}


class Handshake:
    """One end of one handshake (see the module docstring).

    ``expected_peer`` (initiator only): the member we meant to dial; another
    name in ``CHALLENGE`` is refused. ``nonces``: the acceptor's registry of
    seen initiator nonces. ``nonce_factory``: fresh nonces (tests pass fixed ones).
    """

    def __init__(
        self,
        role: Role,
        member_name: str,
        secret: bytes,
        *,
        expected_peer: str | None = None,
        nonces: NonceRegistry | None = None,
        nonce_factory: Callable[[int], bytes] = secrets.token_bytes,
    ) -> None:
        if not secret:
            raise ValueError("the cluster secret must not be empty")
        self.role = role
        self.member_name = member_name
        self.state = State.IDLE
        self.peer_name: str | None = None
        """The peer's claimed name once known; trusted only when :attr:`is_done`."""
        self.failure: str | None = None
        """Why the handshake failed, once it has."""
        self._secret = secret
        self._expected_peer = expected_peer
        self._nonces = nonces
        self._nonce = nonce_factory(NONCE_SIZE)
        self._peer_nonce = b""

    @property
    def is_done(self) -> bool:
        """True once the peer has proved it holds the secret."""
        return self.state is State.DONE

    def start(self) -> Outgoing:
        """Begin: the initiator sends HELLO, the acceptor waits for one."""
        self._expect(State.IDLE, "start")
        if self.role is Role.ACCEPTOR:
            self.state = State.AWAIT_HELLO
            return []
        self.state = State.AWAIT_CHALLENGE
        return [(MessageType.HELLO, msgpack.packb({"member": self.member_name, "nonce": self._nonce}))]

    def receive(self, msg_type: MessageType, payload: bytes) -> Outgoing:
        """Process one message from the peer; return what to send. Raises :class:`HandshakeError`."""
        step = _TRANSITIONS.get((self.role, self.state, msg_type))
        try:
            if step is None:
                raise HandshakeError(self._unexpected(msg_type, payload))
            return step(self, payload)
        except HandshakeError as exc:
            self.state = State.FAILED
            self.failure = str(exc)
            raise

    def refused(self, reason: str) -> HandshakeError:
        """Fail the handshake for a reason decided outside it (e.g. a duplicate connection)."""
        self.state = State.FAILED
        self.failure = reason
        return HandshakeError(reason)

    def _unexpected(self, msg_type: MessageType, payload: bytes) -> str:
        if self.state is State.FAILED:
            return f"the handshake already failed ({self.failure}); {msg_type.name} ignored"
        if msg_type is MessageType.AUTH_REFUSED:
            reason = printable(payload[:200].decode("utf-8", "replace"))
            return f"the peer refused the handshake: {reason}"
        return f"unexpected {msg_type.name} in handshake state {self.state.value!r} ({self.role.value})"

    def frame_keys(self) -> tuple[bytes, bytes]:
        """``(send key, receive key)``: they authenticate this connection's frames after the handshake."""
        self._expect(State.DONE, "derive frame keys")
        ni: bytes
        na: bytes
        initiator: str | None
        acceptor: str | None
        if self.role is Role.INITIATOR:
            ni, na, initiator, acceptor = self._nonce, self._peer_nonce, self.member_name, self.peer_name
        else:
            ni, na, initiator, acceptor = self._peer_nonce, self._nonce, self.peer_name, self.member_name
        prk = hmac.new(ni + na, self._secret, hashlib.sha256).digest()

        def key(direction: str) -> bytes:
            info = msgpack.packb([_KEY_LABEL, direction, initiator, acceptor]) + b"\x01"
            return hmac.new(prk, info, hashlib.sha256).digest()

        outbound, inbound = key("initiator->acceptor"), key("acceptor->initiator")
        return (outbound, inbound) if self.role is Role.INITIATOR else (inbound, outbound)

    def _expect(self, state: State, action: str) -> None:
        if self.state is not state:
            raise HandshakeError(f"cannot {action} in handshake state {self.state.value!r}")

    def _proof(self, role: Role) -> bytes:
        ni: bytes
        na: bytes
        initiator: str | None
        acceptor: str | None
        if self.role is Role.INITIATOR:
            ni, na, initiator, acceptor = self._nonce, self._peer_nonce, self.member_name, self.peer_name
        else:
            ni, na, initiator, acceptor = self._peer_nonce, self._nonce, self.peer_name, self.member_name
        message = msgpack.packb([_PROOF_LABEL, role.value, ni, na, initiator, acceptor])
        return hmac.new(self._secret, message, hashlib.sha256).digest()

    def _verify(self, msg_type: MessageType, payload: bytes, role: Role) -> None:
        proof = _parse(msg_type, payload, _PROOF_FIELDS)["proof"]
        if not hmac.compare_digest(proof, self._proof(role)):
            raise HandshakeError(
                f"authentication failed: member {self.peer_name!r} gave a wrong proof "
                "(it does not hold this cluster's secret)"
            )

    def _on_hello(self, payload: bytes) -> Outgoing:
        hello = _parse(MessageType.HELLO, payload, _HELLO_FIELDS)
        _check_name(MessageType.HELLO, hello["member"])
        _check_nonce(MessageType.HELLO, hello["nonce"])
        self.peer_name = hello["member"]
        if self.peer_name == self.member_name:
            raise HandshakeError(f"a peer claims this member's own name {self.member_name!r}")
        replayed = self._nonces is not None and not self._nonces.register(hello["nonce"])
        if replayed or hello["nonce"] == self._nonce:
            raise HandshakeError(f"replayed nonce in HELLO from {self.peer_name!r}")
        self._peer_nonce = hello["nonce"]
        self.state = State.AWAIT_AUTH
        return [(MessageType.CHALLENGE, msgpack.packb({"member": self.member_name, "nonce": self._nonce}))]

    def _on_challenge(self, payload: bytes) -> Outgoing:
        challenge = _parse(MessageType.CHALLENGE, payload, _CHALLENGE_FIELDS)
        _check_name(MessageType.CHALLENGE, challenge["member"])
        _check_nonce(MessageType.CHALLENGE, challenge["nonce"])
        if self._expected_peer is not None and challenge["member"] != self._expected_peer:
            dialed, answered = self._expected_peer, challenge["member"]
            raise HandshakeError(f"dialed member {dialed!r} but {answered!r} answered")
        if challenge["nonce"] == self._nonce:
            raise HandshakeError("replayed nonce in CHALLENGE: the peer echoed this member's nonce")
        self.peer_name = challenge["member"]
        self._peer_nonce = challenge["nonce"]
        self.state = State.AWAIT_AUTH_OK
        return [(MessageType.AUTH, msgpack.packb({"proof": self._proof(Role.INITIATOR)}))]

    def _on_auth(self, payload: bytes) -> Outgoing:
        self._verify(MessageType.AUTH, payload, Role.INITIATOR)
        self.state = State.DONE
        return [(MessageType.AUTH_OK, msgpack.packb({"proof": self._proof(Role.ACCEPTOR)}))]

    def _on_auth_ok(self, payload: bytes) -> Outgoing:
        self._verify(MessageType.AUTH_OK, payload, Role.ACCEPTOR)
        self.state = State.DONE
        return []


_Step = Callable[[Handshake, bytes], Outgoing]

_TRANSITIONS: dict[tuple[Role, State, MessageType], _Step] = {
    (Role.ACCEPTOR, State.AWAIT_HELLO, MessageType.HELLO): Handshake._on_hello,
    (Role.INITIATOR, State.AWAIT_CHALLENGE, MessageType.CHALLENGE): Handshake._on_challenge,
    (Role.ACCEPTOR, State.AWAIT_AUTH, MessageType.AUTH): Handshake._on_auth,
    (Role.INITIATOR, State.AWAIT_AUTH_OK, MessageType.AUTH_OK): Handshake._on_auth_ok,
}
"""The whole protocol: every (role, state, message) not listed here fails the handshake."""
