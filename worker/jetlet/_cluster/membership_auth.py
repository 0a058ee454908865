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
"""

from __future__ import annotations

import hashlib
import hmac

HEADER = "X-Jetlet-Membership-Signature"
"""The request header that carries a membership message's signature."""
WINDOW_MS = 60_000
"""How far a message's time may be from the receiver's clock (either way)."""


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
        return "the membership message is not signed with this cluster's secret"
    return None
