"""Admission of a joining member: only once its data port has passed the secret handshake (sans-IO).

Theory of operation
-------------------
A member asks to join with a ``join`` message over the REST API, which
proves only that it holds the client token. The coordinator must not put it
in the member list on that alone: a member with the wrong cluster secret
would then own partitions that nobody can reach (every grid read failing)
and every member would dial it forever. So the member that would admit a
joiner first dials the joiner's data port itself; :class:`Admission` keeps,
per joiner incarnation (its uuid), where that stands and tells the member
what to do with each ``join`` it receives (:meth:`Admission.on_join`):

* ``ADMIT``: the transport holds an authenticated connection to the joiner;
  hand the ``join`` to the membership;
* ``DIAL``: dial the joiner's data port now and report the outcome with
  :meth:`Admission.on_dialed`;
* ``WAIT``: a dial is under way, or the last one failed and the retry delay
  (doubling from ``first_delay_s`` to ``max_delay_s``) has not passed: drop
  this ``join`` (the joiner repeats it every heartbeat).

:meth:`Admission.on_dialed` returns a :class:`DialOutcome`: admit, or not;
the refusal to send back to the joiner when the handshake itself failed (a
wrong proof is reported as "wrong cluster secret"; an unreachable port is
only retried); and a log line only when the joiner's state changed (first
failure, another reason, finally admitted), so a member retrying for hours
writes one line, not one per heartbeat.

The joiner's side: a member that is still alone and is refused by a member
of a cluster of two or more exits (see ``jetlet.member``); two lone members
with different secrets cannot tell which is wrong, so neither exits, and
neither admits the other.
"""

from __future__ import annotations

import dataclasses
import enum
import time
from collections.abc import Callable, Mapping
from typing import Any

from jetlet._cluster import membership
from jetlet._network import handshake

WRONG_SECRET = "wrong cluster secret"
"""The refusal reason for a joiner whose handshake proof (or ours, in its eyes) was wrong."""


MAX_JOINERS = 1024
"""Joiner incarnations remembered at most (the oldest are forgotten first)."""


class Verdict(enum.Enum):
    """What to do with one ``join``."""

    ADMIT = "admit"
    DIAL = "dial"
    WAIT = "wait"


@dataclasses.dataclass(frozen=True)
class DialOutcome:
    """The result of dialing a joiner: whether to admit it, what to refuse it with, what to log."""

    admit: bool
    refusal: str | None = None
    """The reason to send the joiner (None: no refusal, e.g. it was only unreachable)."""
    log: str | None = None
    """A line to log (None: nothing changed since the last line about this joiner)."""


@dataclasses.dataclass
class _Joiner:
    dialing: bool = True
    failures: int = 0
    retry_at: float = 0.0
    reason: str = ""


def refusal_reason(error: BaseException) -> str | None:
    """The reason to give a joiner whose dial failed with ``error``; None: it is only unreachable (yet)."""
    if not isinstance(error, handshake.HandshakeError):
        return None
    text = str(error)
    if "wrong proof" in text or "authentication failed" in text:
        return WRONG_SECRET
    return handshake.printable(text)


class Admission:
    """The admission state of every joiner (see the module docstring)."""

    def __init__(
        self,
        first_delay_s: float = 0.5,
        max_delay_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.first_delay_s = first_delay_s
        self.max_delay_s = max_delay_s
        self._clock = clock
        self._joiners: dict[str, _Joiner] = {}

    def on_join(self, joiner: membership.MemberInfo, connected: bool) -> Verdict:
        """What to do with a ``join`` from ``joiner``; ``connected``: the transport already trusts it."""
        state = self._joiners.get(joiner.uuid)
        if connected:
            self._joiners.pop(joiner.uuid, None)
            return Verdict.ADMIT
        if state is None:
            if len(self._joiners) >= MAX_JOINERS:  # the oldest first: a dict keeps insertion order
                del self._joiners[next(iter(self._joiners))]
            self._joiners[joiner.uuid] = _Joiner()
            return Verdict.DIAL
        if state.dialing or self._clock() < state.retry_at:
            return Verdict.WAIT
        state.dialing = True
        return Verdict.DIAL

    def on_dialed(self, joiner: membership.MemberInfo, error: BaseException | None) -> DialOutcome:
        """Record the outcome of dialing ``joiner`` (``error`` None: its handshake succeeded)."""
        state = self._joiners.setdefault(joiner.uuid, _Joiner())
        who = f"member {handshake.printable(joiner.name)} ({handshake.printable(joiner.data_address)})"
        if error is None:
            self._joiners.pop(joiner.uuid, None)
            line = f"{who} passed the data-port handshake after {state.failures} failed attempt(s)"
            return DialOutcome(admit=True, log=line if state.failures else None)
        state.dialing = False
        state.failures += 1
        delay = min(self.max_delay_s, self.first_delay_s * 2 ** (state.failures - 1))
        state.retry_at = self._clock() + delay
        refusal = refusal_reason(error)
        reason = refusal or handshake.printable(f"{type(error).__name__}: {error}")
        changed = reason != state.reason
        state.reason = reason
        backoff = f"retrying, backing off to {self.max_delay_s:g} s"
        line = f"{who} asked to join but is not admitted: {reason} ({backoff})"
        return DialOutcome(admit=False, refusal=refusal, log=line if changed else None)

    def forget(self, joiner_uuid: str) -> None:
        """Drop what is known about one joiner incarnation."""
        self._joiners.pop(joiner_uuid, None)


def refusal_message(joiner: membership.MemberInfo, reason: str, cluster_size: int) -> dict[str, Any]:
    """The membership message that tells ``joiner`` why it is not admitted (sent to its REST port)."""
    return {"kind": "refused", "uuid": joiner.uuid, "reason": reason, "cluster_size": cluster_size}


def refusal_applies(message: Mapping[str, Any], local_uuid: str, alone: bool) -> str | None:
    """The reason for this member to stop, when a ``refused`` message applies to it; else None.

    It applies to this incarnation only (``uuid``), while it is alone (a member of a
    cluster is not told to leave by a join it did not make), and only when the refusing
    member is in a cluster of two or more: two lone members cannot tell whose secret is wrong.

    >>> refusal_applies({"uuid": "u1", "reason": WRONG_SECRET, "cluster_size": 3}, "u1", alone=True)
    'wrong cluster secret (refused by a cluster of 3 members)'
    >>> refusal_applies({"uuid": "u1", "reason": WRONG_SECRET, "cluster_size": 1}, "u1", alone=True) is None
    True
    """
    size = message.get("cluster_size")
    if message.get("uuid") != local_uuid or not alone or not isinstance(size, int) or size < 2:
        return None
    return f"{handshake.printable(str(message.get('reason')))} (refused by a cluster of {size} members)"
