"""Membership messages authenticated by the cluster secret, not by the client token.

Members exchange membership messages (join, member list, heartbeat) as
``POST /membership`` on each other's REST port. The REST token lets a
client in, and a client is not a member: one holding the token could keep a
fake member listed with made-up heartbeats. So every membership message also
carries a signature that only a holder of the cluster secret (the one the
data port's handshake proves) can make.

Theory of operation
-------------------
The sender puts ``t=<unix ms>,mac=<hex>`` in the :data:`HEADER` header, where
``mac`` is HMAC-SHA256 under the cluster secret of ``b"<t>." + body``: the
exact bytes it sends. The receiver recomputes it over the bytes it received
and compares in constant time, and refuses a message whose time is more than
:data:`WINDOW_MS` from its own clock, so a recorded message cannot be played
back later (members' clocks must agree to within that window, as they must for
the event feed's times). :func:`verify` answers a reason to refuse, or None;
the reason names the problem and never the secret.

A refused message is answered ``403`` with the reason and the size of the
refusing member's cluster. A member that asked to join and hears that its
messages are not signed with the cluster's secret takes it as the cluster's
refusal of a wrong secret (:func:`wrong_secret_refusal`), as it would a
``refused`` message after a failed data-port handshake: it stops, saying
why. The refusing side logs one line per sender address and
:data:`LOG_INTERVAL_S` (:class:`RefusalLog`), not one per retry.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from collections.abc import Mapping
from typing import Any

from jetlet._cluster import admission
from jetlet._network import handshake

HEADER = "X-Jetlet-Membership-Signature"
"""The request header that carries a membership message's signature."""
WINDOW_MS = 60_000
"""How far a message's time may be from the receiver's clock (either way)."""
NOT_SIGNED = "the membership message is not signed with this cluster's secret"
LOG_INTERVAL_S = 60.0
"""A sender whose messages are refused is logged at most once this often."""

_log = logging.getLogger("jetlet._cluster.rest")


def _mac(secret: bytes, stamp: int, body: bytes) -> str:
    return hmac.new(secret, b"%d." % stamp + body, hashlib.sha256).hexdigest()


def sign(secret: bytes, body: bytes, now_ms: int) -> str:
    """The :data:`HEADER` value for sending ``body`` at ``now_ms``."""
    return f"t={now_ms},mac={_mac(secret, now_ms, body)}"


def verify(secret: bytes, body: bytes, header: str, now_ms: int) -> str | None:
    """Why a message of ``body`` with signature ``header`` is refused, or None when it is genuine."""
    if not header:
        return f"a membership message needs the {HEADER} header (members sign it with the cluster secret)"
    fields = dict(part.partition("=")[::2] for part in header.split(","))
    stamp, mac = fields.get("t", ""), fields.get("mac", "")
    if not stamp.isdigit() or len(mac) != 64:
        return f"the {HEADER} header is malformed: expected t=<unix ms>,mac=<64 hex digits>"
    skew_s = abs(now_ms - int(stamp)) / 1000
    if skew_s > WINDOW_MS / 1000:
        return f"the membership message's time is {skew_s:.0f} s from this member's clock"
    if not hmac.compare_digest(mac, _mac(secret, int(stamp), body)):
        return NOT_SIGNED
    return None


def wrong_secret_refusal(answer: Mapping[str, Any], local_uuid: str) -> dict[str, Any] | None:
    """The ``refused`` message that a ``403`` ``answer`` to this member's own join amounts to, or None.

    Only a refusal for a wrong signature is one (a clock too far off is not); whether it makes
    the member stop is then :func:`~jetlet._cluster.admission.refusal_applies`'s to say.
    """
    if answer.get("error") != NOT_SIGNED:
        return None
    return {
        "kind": "refused",
        "uuid": local_uuid,
        "reason": admission.WRONG_SECRET,
        "cluster_size": answer.get("cluster_size"),
    }


class RefusalLog:
    """Logs refused membership messages: one line per sender address and :data:`LOG_INTERVAL_S`."""

    def __init__(self) -> None:
        self._last: dict[str, float] = {}

    def note(self, address: str, message: Mapping[str, Any], reason: str) -> None:
        now = time.monotonic()
        if now - self._last.get(address, -LOG_INTERVAL_S) < LOG_INTERVAL_S:
            return
        if len(self._last) > 10_000:
            self._last.clear()
        self._last[address] = now
        member = message.get("member")
        name = member.get("name") if isinstance(member, Mapping) else message.get("name")
        who = f"member {handshake.printable(str(name))!r}" if name else "a sender"
        _log.warning("membership message of %s from %s refused: %s", who, address, reason)
